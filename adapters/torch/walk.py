"""From the unpickled object to entries: the walk through dicts, lists and pickled modules,
canonical names, roles, and the :class:`~inspector.adapters.model.Checkpoint`."""

from __future__ import annotations

import math
from typing import Any

from ..errors import FormatError
from ..model import Checkpoint, Finding, Role, TensorEntry
from ..roles import stored_role
from ..security.findings import pickle_findings
from ..security.restricted_pickle import (
    GlobalRef,
    Placeholder,
    is_placeholder_type,
    render,
)
from ..source import Source
from .constants import (
    MAX_DEPTH,
    MAX_VISITS_PER_BYTE,
    MODEL_KEYS,
    MODEL_PART_KEYS,
    OPTIMIZER_KEYS,
    WRAPPER_PREFIXES,
)
from .optimizer_state import align as align_optimizer_state
from .optimizer_state import is_optimizer
from .rebuild import ITEMSIZE, VALUE_BITS, StorageRef, TensorRecord

# ---------------------------------------------------------------------------------------------
# turning the unpickled object into entries


class ObjectWalk:
    """Depth-first collection of (stored name, record, exact role or None) from the object."""

    def __init__(self, budget: int, where: str) -> None:
        self.found: list[tuple[str, Any, Role | None]] = []
        self.active: set[int] = set()
        self.budget = budget
        self.where = where

    def walk(self, obj: Any, prefix: str, depth: int = 0) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise FormatError(
                "the pickle's shared containers expand to too many entries", self.where
            )
        t = type(obj)
        if t is TensorRecord or t is StorageRef:
            self.found.append(
                (prefix, obj, Role.PARAMETER if t is TensorRecord and obj.parameter else None)
            )
            return
        if depth > MAX_DEPTH:
            raise FormatError(
                f"containers nest deeper than {MAX_DEPTH} levels at {prefix!r}", self.where
            )
        if isinstance(obj, dict):
            items: Any = obj.items()
        elif t is list or t is tuple:
            items = enumerate(obj)
        elif isinstance(obj, Placeholder):
            self._placeholder(obj, prefix, depth)
            return
        else:
            return
        oid = id(obj)
        if oid in self.active:
            return  # a cycle: this container is already being walked above us
        self.active.add(oid)
        found = self.found
        dot = prefix + "." if prefix else ""
        for k, v in items:
            tv = type(v)
            if tv is TensorRecord:
                self.budget -= 1
                found.append(
                    (
                        dot + (k if type(k) is str else key_text(k)),
                        v,
                        Role.PARAMETER if v.parameter else None,
                    )
                )
            elif tv in _LEAVES:
                continue
            else:
                self.walk(v, dot + (k if type(k) is str else key_text(k)), depth + 1)
        self.active.discard(oid)

    def _placeholder(self, obj: Placeholder, prefix: str, depth: int) -> None:
        state = obj.state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
            slots = state[1] if isinstance(state[1], dict) else {}
            state = {**state[0], **slots}
        oid = id(obj)
        if oid in self.active:
            return
        self.active.add(oid)
        dot = prefix + "." if prefix else ""
        if isinstance(state, dict) and isinstance(state.get("_parameters"), dict):
            self._module(state, dot, depth)
        else:
            if isinstance(state, dict):
                for k, v in state.items():
                    self.walk(v, dot + key_text(k), depth + 1)
            elif state is not None:
                self.walk(state, dot + "__state__", depth + 1)
            for i, a in enumerate(obj.args):
                self.walk(a, dot + str(i), depth + 1)
            for k, v in obj.kwargs.items():
                self.walk(v, dot + key_text(k), depth + 1)
            for k, v in obj.items or ():
                self.walk(v, dot + key_text(k), depth + 1)
            for i, v in enumerate(obj.listitems or ()):
                self.walk(v, dot + str(i), depth + 1)
        self.active.discard(oid)

    def _module(self, state: dict, dot: str, depth: int) -> None:
        """An nn.Module's __dict__: parameters, buffers, submodules, then tensor attributes."""
        non_persistent = state.get("_non_persistent_buffers_set")
        non_persistent = non_persistent if isinstance(non_persistent, (set, frozenset)) else set()
        for name, v in state["_parameters"].items():
            if type(v) is TensorRecord:
                self.found.append((dot + key_text(name), v, Role.PARAMETER))
        buffers = state.get("_buffers")
        for name, v in buffers.items() if isinstance(buffers, dict) else ():
            if type(v) is TensorRecord:
                if name in non_persistent:
                    v = v.copy()
                    v.add_extra(persistent=False)
                self.found.append((dot + key_text(name), v, Role.BUFFER))
        modules = state.get("_modules")
        for name, m in modules.items() if isinstance(modules, dict) else ():
            self.walk(m, dot + key_text(name), depth + 1)
        for k, v in state.items():
            if (
                isinstance(k, str)
                and not k.startswith("_")
                and not isinstance(v, (str, int, float, bool))
            ):
                start = len(self.found)
                self.walk(v, dot + k, depth + 1)
                for i in range(start, len(self.found)):  # plain tensor attributes: not state
                    n, rec, _ = self.found[i]
                    self.found[i] = (n, rec, Role.OTHER)


_LEAVES = frozenset({str, int, float, bool, type(None), bytes, complex})
_RECORD_TYPES = frozenset({TensorRecord, StorageRef})


def key_text(k: Any) -> str:
    if type(k) is str:
        return k
    if is_placeholder_type(k):  # a class used as a key (older Lightning's callbacks)
        return k.global_name
    if isinstance(k, Placeholder):
        return type(k).global_name + "()"
    if isinstance(k, int) and k.bit_length() > 256:  # str() refuses > 4300 digits
        return f"<int of {k.bit_length()} bits>"
    return str(k)


def build_checkpoint(
    source: Source,
    fmt: str,
    obj: Any,
    globals_: dict[str, GlobalRef],
    meta: dict[str, Any],
    member: str,
    pickle_bytes: int,
) -> Checkpoint:
    where = source.where
    budget = max(100_000, MAX_VISITS_PER_BYTE * pickle_bytes)
    tensors, hyper, container = _classify(obj, budget, where)
    tensors = align_optimizer_state(obj, tensors)
    meta["container"] = container
    meta["pickle_globals"], findings = pickle_findings(globals_, member)
    if meta.get("byteorder") == "big":
        findings.append(Finding("info", "big-endian tensor data (metadata read as usual)", member))
    return Checkpoint(
        paths=(where,),
        format=fmt,
        tensors=tensors,
        metadata=meta,
        hyperparameters=hyper,
        findings=findings,
    )


# (stored, model name or None when not part of the model, record, role or None for auto)
Row = tuple[str, "str | None", Any, "Role | None"]


def _classify(obj: Any, budget: int, where: str) -> tuple[list[TensorEntry], dict[str, Any], str]:
    """Entries with canonical names and roles, the hyperparameters, and the container kind.

    A training dict (a ``MODEL_KEYS`` container or an ``OPTIMIZER_KEYS`` entry at the top) puts
    the model container's tensors under their names inside it, a ``MODEL_PART_KEYS`` container
    beside it under its own name (OpenNMT-py's ``generator.weight``), the optimizer's as
    optimizer state and every other tensor as ``other``; its tensor-free values are
    hyperparameters. A bare ``optimizer.state_dict()`` is optimizer state throughout. Any other
    object is walked whole with names as stored.
    """
    hyper: dict[str, Any] = {}
    if (
        _is_state_dict(obj)
        and set(map(type, obj)) == {str}
        and set(map(type, obj.values())) <= _RECORD_TYPES
    ):
        # The common case, a flat state dict {name: tensor}: no walk needed. (A value that is
        # not a tensor record, e.g. a placeholder for an unknown rebuild global, takes the walk.)
        stored_names = list(obj)
        entries = [
            tensor_entry(stored, name, rec, _model_role(name, rec), where)
            for stored, name, rec in zip(
                stored_names, _strip_wrappers(stored_names), obj.values(), strict=True
            )
        ]
        return entries, hyper, "state_dict"
    rows: list[Row] = []
    w = ObjectWalk(budget, where)
    if type(obj) is TensorRecord or type(obj) is StorageRef:
        w.walk(obj, "tensor")
        container = "tensor"
    elif is_optimizer(obj):
        w.walk(obj, "")
        rows.extend((s, None, r, Role.OPTIMIZER) for s, r, _ in w.found)
        w.found.clear()
        container = "optimizer"
    elif isinstance(obj, dict) and not _is_state_dict(obj):
        container = _dict_rows(obj, w, rows, hyper)
    else:
        w.walk(obj, "")
        container = (
            "module"
            if isinstance(obj, Placeholder)
            else "state_dict"
            if isinstance(obj, dict)
            else type(obj).__name__
        )
    rows.extend((s, s, r, role) for s, r, role in w.found)
    return _named_entries(rows, where), hyper, container


def _dict_rows(obj: dict, w: ObjectWalk, rows: list[Row], hyper: dict[str, Any]) -> str:
    """The rows of a dict's values, each value walked on its own and placed by its key (see
    :func:`_classify`); tensor-free values go to ``hyper``. Its container kind."""
    model_key = next((k for k in MODEL_KEYS if k in obj and _is_container(obj[k])), None)
    training = model_key is not None or any(k in obj for k in OPTIMIZER_KEYS)
    for k, v in obj.items():
        start = len(w.found)
        w.walk(v, key_text(k))
        got = w.found[start:]
        del w.found[start:]
        if not got:
            if isinstance(k, str):
                hyper[k] = render(v)
            continue
        place = _placement(k, v, model_key, training)
        if place == "model":
            cut = len(key_text(k)) + 1
            rows.extend((s, s[cut:], r, role) for s, r, role in got)
        elif place == "part":
            rows.extend((s, s, r, role) for s, r, role in got)
        elif place == "optimizer":
            rows.extend((s, None, r, Role.OPTIMIZER) for s, r, _ in got)
        else:
            rows.extend((s, None, r, Role.OTHER) for s, r, _ in got)
    return "training" if training else "dict"


def _placement(k: Any, v: Any, model_key: Any, training: bool) -> str:
    """Where the tensors under the top-level key ``k`` go: ``model`` (the model container:
    named inside it), ``part`` (a model part beside it, or a model-like part of a dict without
    one, e.g. {"generator": state dict, "discriminator": state dict}: named as stored),
    ``optimizer``, else ``other`` (loose tensors and mixed containers beside or without a
    model: not the model)."""
    if k == model_key:
        return "model"
    if model_key is not None and k in MODEL_PART_KEYS and _is_container(v):
        return "part"
    if k in OPTIMIZER_KEYS:
        return "optimizer"
    if not training and (_is_state_dict(v) or isinstance(v, Placeholder)):
        return "part"
    return "other"


def _named_entries(rows: list[Row], where: str) -> list[TensorEntry]:
    """The rows as entries: model tensors under their canonical names (wrapper prefixes
    stripped across the model) with their roles, the others as stored."""
    names = iter(_strip_wrappers([n for _, n, _, _ in rows if n is not None]))
    entries = []
    add = entries.append
    for stored, model_name, rec, role in rows:
        if model_name is None:
            add(tensor_entry(stored, stored, rec, role or Role.OTHER, where))
        else:
            name = next(names)
            add(tensor_entry(stored, name, rec, _model_role(name, rec, role), where))
    return entries


def _is_state_dict(d: Any) -> bool:
    """``Module.state_dict()``: an OrderedDict carrying ``_metadata``, or a dict of tensors only."""
    if not isinstance(d, dict):
        return False
    if isinstance(getattr(d, "_metadata", None), dict):
        return True
    return bool(d) and set(map(type, d.values())) <= _RECORD_TYPES


def _is_container(v: Any) -> bool:
    return isinstance(v, (dict, list, tuple, Placeholder))


def _strip_wrappers(names: list[str]) -> list[str]:
    changed = True
    while changed and names:
        changed = False
        for prefix in WRAPPER_PREFIXES:
            if all(n.startswith(prefix) for n in names):
                names = [n[len(prefix) :] for n in names]
                changed = True
    return names


def _model_role(name: str, rec: Any, exact: Role | None = None) -> Role:
    """A model tensor's role: ``exact`` when the pickle says (a module's ``_parameters`` /
    ``_buffers``), parameter for an ``nn.Parameter``, else what :func:`~..roles.stored_role`
    infers from the name and dtype (the producers' buffer names, integer tensors)."""
    if exact is not None:
        return exact
    if type(rec) is not TensorRecord or rec.parameter:
        return Role.PARAMETER
    return stored_role(name, len(rec.shape), rec.dtype)


def tensor_entry(stored: str, name: str, rec: Any, role: Role, where: str) -> TensorEntry:
    st = rec.storage if type(rec) is TensorRecord else None
    if st is not None and rec.extra is None and st.base is None and rec.layout == "strided":
        # The common case, inlined: a dense view of a whole storage record.
        bits = VALUE_BITS.get(rec.dtype)
        if bits is not None and st.nbytes is not None:
            first = rec.storage_offset * bits
            if (first + rec.span * bits + 7) // 8 > st.nbytes and rec.span:
                _check_view(stored, rec, where)  # raises with the full story
            return TensorEntry(
                stored,
                name,
                rec.shape,
                rec.dtype,
                role,
                nbytes=(math.prod(rec.shape) * bits + 7) // 8,
                storage=st.key,
                offset=None if st.offset is None or first % 8 else st.offset + first // 8,
                extra={
                    "stride": rec.stride,
                    "storage_offset": rec.storage_offset,
                    "storage_numel": st.numel,
                    "requires_grad": rec.requires_grad,
                },
            )
    if type(rec) is StorageRef:
        size = ITEMSIZE[rec.dtype]
        return TensorEntry(
            stored_name=stored,
            name=name,
            shape=(rec.numel,),
            dtype=rec.dtype,
            role=role,
            nbytes=rec.numel * size,
            storage=rec.key,
            offset=None if rec.root.offset is None else rec.root.offset + rec.view_offset * size,
            extra={"kind": "storage", "storage_type": rec.type_name, "location": rec.location},
        )
    extra: dict[str, Any] = {}
    stored_numel = None
    if rec.layout != "strided" and rec.layout != "quantized" and rec.extra:
        parts = {k: v for k, v in rec.extra.items() if type(v) is TensorRecord}
        for part, prec in parts.items():
            _check_view(stored, prec, where, part)
        if "values" in parts:
            stored_numel = math.prod(parts["values"].shape)
        nbytes: int | None = sum(_view_nbytes(p) or 0 for p in parts.values()) if parts else None
    else:
        _check_view(stored, rec, where)
        nbytes = _view_nbytes(rec)
    st = rec.storage
    offset = None
    if st is not None:
        extra["stride"] = rec.stride
        extra["storage_offset"] = rec.storage_offset
        extra["storage_numel"] = st.numel
        offset = byte_offset(rec)
    extra["requires_grad"] = rec.requires_grad
    if rec.extra:
        for k, v in rec.extra.items():
            extra[k] = _summary(v) if type(v) is TensorRecord else v
    return TensorEntry(
        stored_name=stored,
        name=name,
        shape=rec.shape,
        dtype=rec.dtype,
        role=role,
        nbytes=nbytes,
        storage=None if st is None else st.key,
        offset=offset,
        stored_numel=stored_numel,
        extra=extra,
    )


def _view_nbytes(rec: TensorRecord) -> int | None:
    bits = VALUE_BITS.get(rec.dtype)
    return None if bits is None else (math.prod(rec.shape) * bits + 7) // 8


def byte_offset(rec: TensorRecord) -> int | None:
    """Absolute file offset of the first element, None if unknown or not on a byte boundary."""
    st = rec.storage
    bits = VALUE_BITS.get(rec.dtype)
    if st is None or bits is None or st.root.offset is None or (rec.storage_offset * bits) % 8:
        return None
    return st.root.offset + st.view_offset * ITEMSIZE[st.dtype] + rec.storage_offset * bits // 8


def _check_view(stored: str, rec: TensorRecord, where: str, part: str = "") -> None:
    """The view (offset, shape, stride) must lie inside the bytes the file holds for its storage."""
    st = rec.storage
    if st is None or rec.stride is None:
        return
    bits = VALUE_BITS.get(rec.dtype)
    root = st.root
    if bits is None or root.nbytes is None or 0 in rec.shape:
        return
    last = rec.storage_offset + sum((d - 1) * s for d, s in zip(rec.shape, rec.stride, strict=True))
    end = st.view_offset * ITEMSIZE[st.dtype] + ((last + 1) * bits + 7) // 8
    limit = (
        root.nbytes
        if st.base is None
        else min(root.nbytes, (st.view_offset + st.numel) * ITEMSIZE[st.dtype])
    )
    if end > limit:
        what = f"tensor {stored!r}" + (f" ({part})" if part else "")
        raise FormatError(
            f"{what}: view (offset {rec.storage_offset}, shape {list(rec.shape)}, stride "
            f"{list(rec.stride)}) of {rec.dtype} needs {end} bytes of storage {st.key!r}, which "
            f"holds {limit}",
            where,
        )


def _summary(rec: TensorRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shape": rec.shape,
        "dtype": rec.dtype,
        "stride": rec.stride,
        "storage": None if rec.storage is None else rec.storage.key,
        "storage_offset": rec.storage_offset,
    }
    offset = byte_offset(rec)
    if offset is not None:
        out["offset"] = offset
    return out
