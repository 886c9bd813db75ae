"""The data model every adapter produces: one shape for every format.

A :class:`Checkpoint` is an ordered list of :class:`TensorEntry` records plus format metadata and
the hyperparameters found inside or beside the file. Records are frozen; they carry their byte
offsets so a later reader can fetch values lazily, but nothing here reads tensor data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Role(str, Enum):
    """What a stored tensor is to its model."""

    PARAMETER = "parameter"
    BUFFER = "buffer"
    OPTIMIZER = "optimizer"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True, init=False)  # __init__ below: a listing makes one per tensor
class TensorEntry:
    """One stored tensor, described by metadata only.

    ``storage`` identifies the memory the tensor views (e.g. a torch storage key, a safetensors
    byte range); two entries with the same :attr:`identity` are the same tensor stored under two
    names (tied weights) and are counted once. ``offset`` is the absolute byte offset of the first
    element in ``file`` where the format says so; ``extra`` holds format-specific facts
    (sparse storage type, strides, quantization scheme, ...).
    """

    stored_name: str
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: Role = Role.PARAMETER
    nbytes: int | None = None
    storage: str | None = None
    offset: int | None = None
    file: str | None = None
    stored_numel: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def numel(self) -> int:
        """Logical element count: the product of the shape (1 for a 0-d tensor), the number a
        framework's own parameter count uses, also for sparse arrays."""
        return math.prod(self.shape)

    @property
    def counted_stored(self) -> int:
        """Elements actually stored (fewer than ``numel`` for sparse arrays)."""
        return self.numel if self.stored_numel is None else self.stored_numel

    @property
    def identity(self) -> tuple | None:
        """Key shared by entries that are the very same tensor, None if unknown."""
        if self.storage is None:
            return None
        return (self.file, self.storage, self.offset, self.shape, self.extra.get("stride"))


_NO_EXTRA: Any = object()


def _entry_init(
    self: TensorEntry,
    stored_name: str,
    name: str,
    shape: tuple[int, ...],
    dtype: str,
    role: Role = Role.PARAMETER,
    nbytes: int | None = None,
    storage: str | None = None,
    offset: int | None = None,
    file: str | None = None,
    stored_numel: int | None = None,
    extra: Mapping[str, Any] = _NO_EXTRA,
    _set: tuple = tuple(TensorEntry.__dict__[f].__set__ for f in TensorEntry.__dataclass_fields__),
) -> None:
    # What dataclass would generate, but through the slot descriptors: the generated frozen
    # __init__ goes through object.__setattr__ per field, ~60% slower for 50,000 tensors.
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 = _set
    s0(self, stored_name)
    s1(self, name)
    s2(self, shape)
    s3(self, dtype)
    s4(self, role)
    s5(self, nbytes)
    s6(self, storage)
    s7(self, offset)
    s8(self, file)
    s9(self, stored_numel)
    s10(self, {} if extra is _NO_EXTRA else extra)


TensorEntry.__init__ = _entry_init  # type: ignore[method-assign]


@dataclass(frozen=True, slots=True)
class Finding:
    """Something noteworthy the adapter saw (a foreign pickle global, an odd header field)."""

    severity: str  # "info" | "warning" | "danger"
    message: str
    where: str | None = None
    subject: str | None = None  # what it is about, e.g. the pickle global "os.system"


@dataclass(slots=True)
class Checkpoint:
    """A whole checkpoint: possibly several files (shards, a model directory)."""

    paths: tuple[str, ...]
    format: str
    tensors: list[TensorEntry]
    metadata: dict[str, Any] = field(default_factory=dict)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.paths[0]

    def shared_with(self) -> dict[str, tuple[str, ...]]:
        """stored_name -> the other stored names that are the same tensor (only tied ones)."""
        if not _may_share(self.tensors):
            return {}
        groups: dict[tuple, list[str]] = {}
        for t in self.tensors:
            if t.identity is not None:
                groups.setdefault(t.identity, []).append(t.stored_name)
        out: dict[str, tuple[str, ...]] = {}
        for names in groups.values():
            if len(names) > 1:
                for n in names:
                    out[n] = tuple(x for x in names if x != n)
        return out

    def unique(self, tensors: Iterable[TensorEntry] | None = None) -> list[TensorEntry]:
        """The entries with aliases removed (first name of each tied group kept)."""
        entries = self.tensors if tensors is None else list(tensors)
        if not _may_share(entries):
            return list(entries)
        seen: set[tuple] = set()
        out = []
        for t in entries:
            key = t.identity
            if key is not None:
                if key in seen:
                    continue
                seen.add(key)
            out.append(t)
        return out

    def totals(self) -> dict[str, int]:
        """Element counts by role plus ``all``; a tied tensor counts once."""
        out = {r.value: 0 for r in Role}
        for t in self.unique():
            out[t.role.value] += t.numel
        out["all"] = sum(out[r.value] for r in Role)
        return out

    def bytes_by_dtype(self, unique: Iterable[TensorEntry] | None = None) -> dict[str, int]:
        """Stored bytes per dtype over ``unique`` (default: every tensor, tied ones once);
        unknown sizes are left out."""
        out: dict[str, int] = {}
        for t in self.unique() if unique is None else unique:
            if t.nbytes is not None:
                out[t.dtype] = out.get(t.dtype, 0) + t.nbytes
        return dict(sorted(out.items()))


def _may_share(tensors: list[TensorEntry]) -> bool:
    """Whether two entries could be the same tensor: only if two share a (file, storage), the
    first fields of :attr:`TensorEntry.identity`. One cheap pass instead of an identity tuple per
    tensor, which costs ~0.1 s on 50,000 tensors."""
    keys = [(t.file, t.storage) for t in tensors if t.storage is not None]
    return len(set(keys)) != len(keys)
