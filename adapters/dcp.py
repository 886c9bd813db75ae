"""torch Distributed Checkpoints (``torch.distributed.checkpoint.save``): a directory is one
checkpoint, read without torch and without running anything from its files.

Layout (``torch/distributed/checkpoint/filesystem.py``, torch 2.13):

* ``.metadata`` (or, saved with ``use_collectives=False``, one ``__<rank>.metadata`` per rank,
  each describing that rank's chunks): ``pickle.dump`` of a ``metadata.Metadata`` dataclass.
  ``state_dict_metadata`` maps each flattened name (fqn) to a ``TensorStorageMetadata``
  (``properties``: a ``TensorProperties`` whose pickled state is the tuple ``(dtype, layout,
  requires_grad, memory format, pin_memory)``; ``size``: the global ``torch.Size``; ``chunks``:
  ``ChunkStorageMetadata(offsets, sizes)`` per saved piece) or a ``BytesStorageMetadata`` (any
  other object). ``storage_data`` maps a ``MetadataIndex(fqn, offset)`` (the chunk's offsets;
  None for bytes) to ``filesystem._StorageInfo(relative_path, offset, length[,
  transform_descriptors])``. ``planner_data`` maps each fqn to its path in the nested state dict.
* ``__<rank>_<n>.distcp``: the items back to back, bytes items first. A tensor chunk is a whole
  ``torch.save`` of that chunk (``_write_item``: a torch zip of ``length`` bytes at ``offset``),
  which torch reads back with ``torch.load(weights_only=True)``; a bytes item is ``torch.save``
  of the object, which the default load planner reads with ``torch.load(weights_only=False)``:
  its pickle runs, so it is examined here like any pickle.

The ``.metadata`` pickle is read by the restricted unpickler: torch's dataclasses come back as
inert placeholders whose BUILD state is read as data; ``torch.Size``, dtypes and layouts through
the torch stand-ins. Listing reads ``.metadata`` and the (small) bytes items only. Values: a tensor
of one chunk is a byte range in its ``.distcp`` (the storage record of the chunk's torch zip); a
tensor of several chunks is streamed in C order, run by run, from the chunks that hold it.

A ``.distcp`` file opened alone lists the chunks it holds (each with its place in the global
tensor); ``.metadata`` opened alone is the whole checkpoint.

Variants of the same checkpoint:

* ``SerializationFormat.SAFETENSORS`` (``HuggingFaceStorageWriter(save_distributed=True)``,
  ``torch/distributed/checkpoint/hf_storage.py``): no ``.metadata``; one
  ``shard-<rank>-model-<i>-of-<n>.safetensors`` per rank and file index, each tensor's chunk
  offsets in the file's ``__metadata__["DCP_SHARDING_INFO"]`` (JSON, ``saved_offsets``); the
  global size is, per dimension, the largest offset + size, as ``HuggingFaceStorageReader.
  read_metadata`` computes it. Chunks are plain byte ranges of the safetensors files.
* Accelerate's ``save_state`` under FSDP with ``SHARDED_STATE_DICT``
  (``accelerate/utils/fsdp_utils.py``): ``pytorch_model_fsdp_<i>/`` (``{"model": state
  dict}``) and ``optimizer_<i>/`` (``{"optimizer": state}``) are DCP directories beside
  ``random_states_<rank>.pkl`` (``torch.load``-ed by ``load_state``) and other pickles: the
  directory is one checkpoint, the model and its optimizer state; the pickles beside them are
  examined (their findings are the checkpoint's) and named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import chain, repeat
from math import prod
from operator import add, attrgetter, itemgetter, le

from .dtypes import BITS
from .errors import FormatError, InspectorError, UnsafeContentError
from .model import (
    ByteRange,
    Checkpoint,
    Finding,
    Role,
    Stream,
    TensorEntry,
    ValueLocation,
    c_strides,
)
from .registry import Adapter
from .roles import stored_role
from .source import Source, check_relative
from .source_interface import RunReader, Window

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    from .security.examination import FileResult
    from .security.restricted_pickle import GlobalRef

NAME = "dcp"
METADATA = ".metadata"
_RANK_METADATA = re.compile(r"__(\d+)\.metadata\Z")
_MODULE = "torch.distributed.checkpoint.metadata"
_MARKER = _MODULE.encode()
_STORAGE_INFO = "torch.distributed.checkpoint.filesystem._StorageInfo"
_CHUNK_TYPE = f"{_MODULE}.ChunkStorageMetadata"
# Names a pickle plants in a BUILD state for a loader to call (restricted_pickle._PLANTED).
_PLANTED = (b"__setstate__", b"append", b"extend")
# The plain dataclasses of .metadata (TensorProperties has its own __setstate__: a placeholder).
_PLAIN = ("Metadata", "TensorStorageMetadata", "ChunkStorageMetadata", "BytesStorageMetadata",
          "MetadataIndex", "StorageMeta")
_INDEX_TYPE = f"{_MODULE}.MetadataIndex"
# A .metadata pickle larger than this is refused (100,000 chunks take ~10 MB).
MAX_METADATA_BYTES = 1 << 30
# Bytes items read for their values and pickles at listing time: count and size each.
MAX_BYTES_ITEMS = 10_000
MAX_BYTES_ITEM = 64 << 20
# Bytes items named in the listing's metadata.
MAX_LISTED_BYTES_ITEMS = 1000
# Rank metadata files read for one checkpoint.
MAX_RANK_FILES = 65_536
# HuggingFaceStorageWriter (torch/distributed/checkpoint/_hf_utils.py)
SHARDING_INFO = "DCP_SHARDING_INFO"
SAVED_OFFSETS = "saved_offsets"
MAX_SAFETENSORS_FILES = 65_536
_SNIFFED_SHARDS = 16
# Accelerate (accelerate/utils/constants.py FSDP_MODEL_NAME, OPTIMIZER_NAME, RNG_STATE_NAME)
_ACC_MODEL = re.compile(r"pytorch_model_fsdp_(\d+)\Z")
_ACC_OPTIM = re.compile(r"optimizer_(\d+)\Z")
_ACC_PICKLE = re.compile(r"(?:random_states_\d+|custom_checkpoint_\d+)\.pkl\Z|"
                         r"(?:scheduler|sampler|scaler|dl_state_dict)(?:_\d+)?\.bin\Z")


# ---------------------------------------------------------------------------------------------
# sniffing


def _is_metadata_head(head: bytes) -> bool:
    """A pickle whose first global is ``torch.distributed.checkpoint.metadata.Metadata``."""
    return head[:1] == b"\x80" and _MARKER in head[:256] and b"Metadata" in head[:256]


def _metadata_files(directory: Source) -> list[str]:
    """The metadata files of a DCP directory: ``.metadata``, else every ``__<rank>.metadata``
    (in rank order); [] when there is none."""
    try:
        names = directory.list()
    except (InspectorError, OSError):
        return []
    if METADATA in names:
        return [METADATA]
    ranks = sorted((int(m.group(1)), n) for n in names if (m := _RANK_METADATA.match(n)))
    return [n for _, n in ranks]


def _safetensors_files(directory: Source) -> list[str]:
    """The ``.safetensors`` files of a directory written by ``HuggingFaceStorageWriter`` with
    ``save_distributed`` (the first one's header names ``DCP_SHARDING_INFO``), else []."""
    try:
        names = [n for n in directory.list() if n.endswith(".safetensors")]
    except (InspectorError, OSError):
        return []
    for name in names[:_SNIFFED_SHARDS]:  # any of them: the first may be the damaged one
        head = _head_of(directory, name, 4096)
        if head[8:9] == b"{" and SHARDING_INFO.encode() in head:
            return names
    return []


def _accelerate_dirs(directory: Source) -> tuple[list[str], list[str]]:
    """(``pytorch_model_fsdp_<i>`` DCP directories, ``optimizer_<i>`` ones) of an Accelerate
    checkpoint directory, in index order."""
    try:
        names = directory.list()
    except (InspectorError, OSError):
        return [], []

    def dcp_dirs(pattern: re.Pattern[str]) -> list[str]:
        found = sorted((int(m.group(1)), n) for n in names if (m := pattern.match(n)))
        out = []
        for _, n in found:
            try:
                sub = directory.child(n)
                meta = _metadata_files(sub) if sub.is_dir() else []
            except (InspectorError, OSError, RuntimeError):
                meta = []
            if meta and _is_metadata_head(_head_of(sub, meta[0])):
                out.append(n)
        return out

    models = dcp_dirs(_ACC_MODEL)
    return (models, dcp_dirs(_ACC_OPTIM)) if models else ([], [])


def _head_of(directory: Source, name: str, n: int = 256) -> bytes:
    try:
        child = directory.child(name)
        return child.head(n) if child.is_file() else b""
    except (InspectorError, OSError, RuntimeError):
        return b""


def sniff(head: bytes, source: Source) -> str | None:
    """'dir' (a DCP directory), 'metadata' (its ``.metadata`` file) or 'shard' (a ``.distcp``
    file beside one); decided by the metadata pickle's first global, never by names alone."""
    if source.is_dir():
        found = _metadata_files(source)
        if found:
            return "dir" if _is_metadata_head(_head_of(source, found[0])) else None
        if _safetensors_files(source):
            return "safetensors"
        return "accelerate" if _accelerate_dirs(source)[0] else None
    if _is_metadata_head(head):
        return "metadata"
    if head[:4] == b"PK\x03\x04" and source.suffix == ".distcp":
        try:
            parent = source.parent_dir()
        except (InspectorError, OSError):
            return None
        found = _metadata_files(parent)
        if found and _is_metadata_head(_head_of(parent, found[0])):
            return "shard"
    return None


# ---------------------------------------------------------------------------------------------
# the metadata pickle


class Chunk:
    """One saved piece of a tensor: its place in the global tensor and its bytes."""

    __slots__ = ("offsets", "sizes", "file", "offset", "length", "transforms", "raw")

    def __init__(self, offsets: tuple[int, ...], sizes: tuple[int, ...],
                 row: tuple[str, int, int, tuple[str, ...]] | None = None) -> None:
        self.offsets = offsets
        self.sizes = sizes
        self.file: str | None
        self.transforms: tuple[str, ...]
        if row is None:
            self.file, self.offset, self.length, self.transforms = None, 0, 0, ()
        else:  # its storage_data entry: (relative path, offset, length, transforms)
            self.file, self.offset, self.length, self.transforms = row
        self.raw = False  # the elements themselves at offset (safetensors), not a torch.save blob

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n


class Item:
    """One entry of ``state_dict_metadata``: a tensor (``dtype``, ``shape``, ``chunks``) or a
    bytes item (``dtype`` None, one chunk without offsets)."""

    __slots__ = ("fqn", "dtype", "shape", "_chunks", "columns", "path")

    def __init__(self, fqn: str, dtype: str | None, shape: tuple[int, ...]) -> None:
        self.fqn = fqn
        self.dtype = dtype
        self.shape = shape
        self._chunks: list[Chunk] = []
        # Until ``chunks`` is first asked for, the chunks as columns (offsets, sizes, storage
        # rows): a listing of many chunks needs their counts, sizes and files, not objects.
        self.columns: tuple[list[Any], list[Any], list[Any]] | None = None
        self.path: tuple[str, ...] = (fqn,)

    @property
    def chunks(self) -> list[Chunk]:
        if self.columns is not None:
            self._chunks = list(map(Chunk, *self.columns))
            self.columns = None
        return self._chunks

    @chunks.setter
    def chunks(self, value: list[Chunk]) -> None:
        self._chunks = value
        self.columns = None

    def chunk_sizes(self) -> list[tuple[int, ...]]:
        return self.columns[1] if self.columns is not None else list(map(_SIZES, self._chunks))

    def chunk_count(self) -> int:
        return len(self.columns[0]) if self.columns is not None else len(self._chunks)


class Metadata:
    """What the metadata pickle(s) hold, as plain records."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.version: str | None = None
        self.save_id: str | None = None
        self.files: list[str] = []
        self.ends: dict[str, tuple[int, str]] | None = None  # file -> (end, fqn): _files_and_ends
        self.globals: list[tuple[str, dict[str, GlobalRef]]] = []  # (where, globals)


def _state(obj: Any, cls: str, what: str) -> dict[str, Any]:
    """The fields of a stand-in for ``_MODULE.cls`` (or ``cls`` when dotted): its ``__dict__``
    as BUILD filled it (a placeholder's recorded state, for a global read as one)."""
    want = cls if "." in cls else f"{_MODULE}.{cls}"
    name = getattr(type(obj), "global_name", None)  # stand-ins and placeholders have one
    if name != want:
        raise FormatError(f"{what} is {name or type(obj).__name__}, not {want}")
    state = getattr(obj, "state", None) if hasattr(type(obj), "args") else obj.__dict__
    if type(state) is dict:
        return state
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
        return state[0]  # (__dict__, slots)
    if state is None:
        return {}
    raise FormatError(f"{what}: {want} carries a {type(state).__name__}, not its fields")


_INT = {int}
_OFFSET, _LENGTH, _SIZES = attrgetter("offset"), attrgetter("length"), attrgetter("sizes")


def _sizes_ok(value: Any) -> bool:
    """A tuple of non-negative ints (checked in C: the set of element types, the minimum)."""
    return isinstance(value, tuple) and (not value or ({*map(type, value)} == _INT
                                                       and min(value) >= 0))


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not _sizes_ok(value):
        raise FormatError(f"{what} is {_short(value)}, not a tuple of sizes")
    return tuple(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _standins() -> dict[str, Any]:
    """Fresh classes for one load (a BUILD aimed at a class dies with the load): the plain
    dataclasses of the metadata, whose NEWOBJ + BUILD the C unpickler performs without calling
    Python (no ``__new__``/``__setstate__``: BUILD fills ``__dict__``), and ``torch.Size`` as a
    tuple subclass (its elements are checked where they are used)."""
    out: dict[str, Any] = {
        f"{_MODULE}.{n}": type(n, (), {"global_name": f"{_MODULE}.{n}", "__module__": __name__})
        for n in _PLAIN}
    out[_STORAGE_INFO] = type("_StorageInfo", (), {"global_name": _STORAGE_INFO,
                                                   "__module__": __name__})
    out["torch.Size"] = type("Size", (tuple,), {"__slots__": (), "__module__": __name__})
    return out


def _dtype(props: Any, fqn: str) -> str:
    from .security.restricted_pickle import Placeholder
    from .torch.rebuild import TorchDType

    if not isinstance(props, Placeholder):
        raise FormatError(f"{fqn!r}: properties is {type(props).__name__}")
    state = props.state
    # torch >= 2.0 pickles (dtype, layout, requires_grad, memory format, pin_memory); older
    # writers the dataclass's __dict__.
    dtype = state[0] if isinstance(state, tuple) and state else (
        state.get("dtype") if isinstance(state, dict) else None)
    if isinstance(state, dict) and "dtype" not in state:
        dtype = "float32"  # the dataclass default: torch.get_default_dtype()
    if not isinstance(dtype, TorchDType):
        raise FormatError(f"{fqn!r}: dtype is {_short(dtype)}, not a torch dtype")
    return str(dtype)


def _read_pickle(source: Source, runs_ok: bool = True,
                 ) -> tuple[Any, dict[str, GlobalRef], list[Any] | None]:
    """(the unpickled object, its globals, the runs of records read as data (``dcp_runs``)
    whose markers the object holds, or None when it holds none)."""
    from .security.restricted_pickle import PickleError, unpickle
    from .torch.rebuild import Builder

    size = source.size
    if size > MAX_METADATA_BYTES:
        raise FormatError(f"{size:,} bytes, over the {MAX_METADATA_BYTES:,}-byte limit",
                          source.where)
    data = source.read(0, size)
    allowed = Builder().allowed()
    if not any(name in data for name in _PLANTED):
        # Stand-ins fill their __dict__ in C; a state planting __setstate__/append/extend (which
        # a loader would call on the next BUILD/APPEND) is only recorded by placeholders.
        allowed.update(_standins())
        if runs_ok:
            from .dcp_runs import split
            from .memory_cap import address_space_capped
            from .security.restricted_pickle import MEMORY_FLOOR, MEMORY_PER_BYTE

            with address_space_capped(max(MEMORY_FLOOR, MEMORY_PER_BYTE * size)):
                cut = split(data)
            if cut is not None:
                try:
                    obj, globals_ = unpickle(cut[0], allowed, _run_loader(cut[1]))
                    return obj, globals_, cut[1]
                except PickleError:  # read the pickle as written, for its own error
                    return _read_pickle(source, runs_ok=False)
    try:
        return (*unpickle(data, allowed), None)
    except PickleError as e:
        raise _refusal(e.globals or {}, f"not a readable DCP metadata pickle ({e})",
                       source.where) from None


def _run_loader(runs: list[Any]) -> Any:
    """The persistent ids of the cut pickle: only the markers ``dcp_runs.split`` wrote (the
    pickle as written has none, or it is not cut)."""
    from .security.restricted_pickle import PickleError

    def load(pid: Any) -> Any:
        if type(pid) is not int or not 0 <= pid < len(runs):
            raise PickleError(f"persistent id {_short(pid)}")
        return runs[pid]

    return load


def _refusal(globals_: dict[str, GlobalRef], why: str, where: str) -> InspectorError:
    """The error for a metadata pickle that cannot be read: naming any dangerous global first
    (a real loader would have run it before failing)."""
    bad = sorted(g.name for g in globals_.values() if g.severity == "danger")
    if bad:
        return UnsafeContentError(
            f"refused: the pickle references {', '.join(bad[:3])}; {why}; nothing was run",
            where)
    return FormatError(why, where)


def read_metadata(directory: Source, names: list[str]) -> Metadata:
    """The items of every metadata file ``names`` in ``directory`` (per-rank files merged:
    each rank's chunks, the same chunk saved by two ranks once)."""
    md = Metadata()
    if len(names) > MAX_RANK_FILES:
        raise FormatError(f"{len(names):,} rank metadata files (limit {MAX_RANK_FILES:,})",
                          directory.where)
    from .dcp_runs import Fallback

    for name in names:
        source = directory.child(name)
        obj, globals_, runs = _read_pickle(source)
        try:
            parsed = _parse(obj, runs)
        except (FormatError, Fallback) as e:
            if runs is None:
                raise _refusal(globals_, e.message, source.where) from None  # type: ignore[union-attr]
            # not as the runs expect: the pickle as written, for its own result or error
            obj, globals_, _ = _read_pickle(source, runs_ok=False)
            try:
                parsed = _parse(obj, None)
            except FormatError as e2:
                raise _refusal(globals_, e2.message, source.where) from None
        md.globals.append((name, globals_))
        try:
            _merge(md, parsed)
        except FormatError as e:
            raise _refusal(globals_, e.message, source.where) from None
    _files_and_ends(md)
    return md


def _files_and_ends(md: Metadata) -> None:
    """``md.files`` (every file a chunk is in) and ``md.ends`` (where each file's last chunk
    ends, and whose it is), in one pass over the chunks."""
    ends: dict[str, tuple[int, str]] = {}
    get = ends.get
    for it in md.items.values():
        fqn = it.fqn
        if it.columns is not None:
            for name, off, length, _ in it.columns[2]:  # every row found (_storage)
                end = off + length
                if end > get(name, _NO_END)[0]:
                    ends[name] = (end, fqn)
            continue
        for c in it.chunks:
            name = c.file
            if name is None:
                continue
            end = c.offset + c.length
            if end > get(name, _NO_END)[0]:
                ends[name] = (end, fqn)
    md.ends = ends
    md.files = sorted(ends)


_NO_END = (-1, "")


_Parsed = tuple  # (items, version or None, save_id or None)


def _parse(obj: Any, runs: list[Any] | None) -> _Parsed:
    """The items of one metadata pickle; with ``runs``, every run's marker found where its
    records stand (a chunks list, storage_data) and used once, else ``dcp_runs.Fallback``."""
    top = _state(obj, "Metadata", "the pickled object")
    sdm = top.get("state_dict_metadata")
    if not isinstance(sdm, dict):
        raise FormatError(f"state_dict_metadata is {type(sdm).__name__}, not a dict")
    version = top.get("version")
    new: dict[str, Item] = {}
    pending: dict[str, tuple[list[Any], list[Any]]] = {}
    for fqn, value in sdm.items():
        if not isinstance(fqn, str):
            raise FormatError(f"state_dict_metadata key {_short(fqn)} is not a name")
        new[fqn] = _item(fqn, value, pending, runs is not None)
    _storage(top.get("storage_data"), new, pending, runs is not None)
    planner = top.get("planner_data")
    if isinstance(planner, dict):
        for fqn, path in planner.items():
            it = new.get(fqn) if isinstance(fqn, str) else None
            if it is not None and isinstance(path, tuple) and path:
                it.path = tuple(str(p) for p in path)
    meta = top.get("storage_meta")
    save_id = None
    if meta is not None:
        save_id = _state(meta, "StorageMeta", "storage_meta").get("save_id")
    if runs is not None:
        from .dcp_runs import Fallback, used

        if not used(runs):
            raise Fallback
    return new, version, save_id


def _merge(md: Metadata, parsed: _Parsed) -> None:
    new, version, save_id = parsed
    md.version = version if isinstance(version, str) else md.version
    md.save_id = save_id if isinstance(save_id, str) else md.save_id
    for fqn, it in new.items():
        old = md.items.get(fqn)
        if old is None:
            md.items[fqn] = it
            continue
        if (old.dtype, old.shape) != (it.dtype, it.shape):
            raise FormatError(
                f"{fqn!r} is {old.dtype} {list(old.shape)} in one rank's metadata and "
                f"{it.dtype} {list(it.shape)} in another's")
        seen = {(c.offsets, c.sizes) for c in old.chunks}
        old.chunks.extend(c for c in it.chunks if (c.offsets, c.sizes) not in seen)


def _item(fqn: str, value: Any, pending: dict[str, tuple[list[Any], list[Any]]],
          runs: bool) -> Item:
    """The item; its chunks' (offsets, sizes) into ``pending`` (made into chunks with their
    storage rows by :func:`_storage`)."""
    if getattr(type(value), "global_name", None) == f"{_MODULE}.BytesStorageMetadata":
        it = Item(fqn, None, ())
        pending[fqn] = ([()], [()])
        return it
    st = _state(value, "TensorStorageMetadata", repr(fqn))
    shape = _ints(st.get("size"), f"{fqn!r}: size")
    it = Item(fqn, _dtype(st.get("properties"), fqn), shape)
    chunks = st.get("chunks")
    if not isinstance(chunks, list):
        raise FormatError(f"{fqn!r}: chunks is {type(chunks).__name__}, not a list")
    found = _bulk_chunks(chunks, shape)
    if found is None:
        if runs:
            from .dcp_runs import Fallback

            raise Fallback
        checked = _checked_chunks(fqn, chunks, shape)
        found = [c.offsets for c in checked], [c.sizes for c in checked]
    pending[fqn] = found
    return it


def _distinct_ok(values: list[Any], ndim: int) -> list[Any] | None:
    """The distinct values when every one is a tuple of ``ndim`` non-negative ints, checked a
    set at a time (in C); else None."""
    if not all(issubclass(t, tuple) for t in {*map(type, values)}):
        return None
    try:
        values = list(set(values))  # most chunks repeat their sizes and many their offsets
    except TypeError:  # an unhashable element: not an int
        return None
    if {*map(len, values)} != {ndim}:
        return None
    if ndim == 0 or ({*map(type, chain.from_iterable(values))} == _INT
                     and min(map(min, values)) >= 0):
        return values
    return None


def _bulk_chunks(chunks: list[Any], shape: tuple[int, ...],
                 ) -> tuple[list[Any], list[Any]] | None:
    """The chunks' (offsets, sizes) when every one is well formed, checked in bulk; None to
    take the checked path (which names the first bad chunk)."""
    if not chunks:
        return [], []
    columns = _chunk_columns(chunks)
    if columns is None:
        return None
    offsets, sizes = columns
    ndim = len(shape)
    offs, szs = _distinct_ok(offsets, ndim), _distinct_ok(sizes, ndim)
    if offs is None or szs is None:
        return None
    for k in range(ndim):
        pick = itemgetter(k)
        if max(map(pick, offs)) + max(map(pick, szs)) > shape[k] and max(
                map(add, map(pick, offsets), map(pick, sizes))) > shape[k]:
            return None
    return offsets, sizes


def _chunk_columns(chunks: list[Any]) -> tuple[list[Any], list[Any]] | None:
    """(offsets, sizes) of ChunkStorageMetadata stand-ins and runs of them (``dcp_runs``, each
    marked used), in order; None when another object is among them."""
    from .dcp_runs import ChunkRun

    types = {*map(type, chunks)}
    if ChunkRun not in types:
        if len(types) != 1 or getattr(types.pop(), "global_name", None) != _CHUNK_TYPE:
            return None
        try:
            states = [c.__dict__ for c in chunks]
            return [d["offsets"] for d in states], [d["sizes"] for d in states]
        except (AttributeError, KeyError, TypeError):
            return None
    offsets: list[Any] = []
    sizes: list[Any] = []
    for c in chunks:
        if type(c) is ChunkRun:
            if c.used:
                return None
            c.used = True
            offsets += c.offsets
            sizes += c.sizes
            continue
        if getattr(type(c), "global_name", None) != _CHUNK_TYPE:
            return None
        d = getattr(c, "__dict__", None)
        if d is None or "offsets" not in d or "sizes" not in d:
            return None
        offsets.append(d["offsets"])
        sizes.append(d["sizes"])
    return offsets, sizes


def _checked_chunks(fqn: str, chunks: list[Any], shape: tuple[int, ...]) -> list[Chunk]:
    ndim = len(shape)
    out = []
    for i, c in enumerate(chunks):
        cs = _state(c, "ChunkStorageMetadata", f"{fqn!r} chunk {i}")
        offsets = _ints(cs.get("offsets"), f"{fqn!r} chunk {i} offsets")
        sizes = _ints(cs.get("sizes"), f"{fqn!r} chunk {i} sizes")
        if len(offsets) != ndim or len(sizes) != ndim or not all(
            map(le, map(add, offsets, sizes), shape)
        ):
            raise FormatError(
                f"{fqn!r} chunk {i} (offsets {list(offsets)}, sizes {list(sizes)}) does not "
                f"fit in its tensor of shape {list(shape)}")
        out.append(Chunk(offsets, sizes))
    return out


def _storage(data: Any, items: dict[str, Item],
             pending: dict[str, tuple[list[Any], list[Any]]], runs: bool) -> None:
    """Each item's chunks, with their file and byte range from ``storage_data``: the rows
    indexed by their key (fqn, offsets), each chunk looks its own up (a key no item names is
    nothing of the state dict; a key given twice, the last row, as a dict would keep it)."""
    if not isinstance(data, dict):
        raise FormatError(f"storage_data is {type(data).__name__}, not a dict of file ranges")
    columns = _bulk_storage(data)
    if columns is None:
        if runs:
            from .dcp_runs import Fallback

            raise Fallback
        columns = tuple(map(list, zip(*[_storage_row(key, info) for key, info in data.items()],
                                      strict=True))) or ([], [], [], [], [], [])
    fqns, offsets, paths, starts, lengths, transforms = columns
    shown = [() if not t else tuple(str(x) for x in t) if isinstance(t, (list, tuple))
             else (str(t),) for t in transforms] if any(transforms) else repeat(())
    try:
        index = dict(zip(zip(fqns, offsets, strict=True),
                         zip(paths, starts, lengths, shown, strict=False), strict=True))
    except TypeError:  # an unhashable offset
        raise FormatError("storage_data holds a key whose offset is not a tuple") from None
    get = index.get
    checked: set[str] = set()
    missing: list[tuple[str, Any]] = []
    for it in items.values():
        fqn = it.fqn
        offs, sizes = pending[fqn]
        if it.dtype is not None:
            # repeated chunks share their row
            rows = list(map(get, zip(repeat(fqn), offs, strict=False)))
        else:
            rows = [get((fqn, None))] * len(offs)
        for path in dict.fromkeys(map(_FIRST, filter(None, rows))):
            if path not in checked:
                check_relative(path, f"storage_data of {fqn!r}")
                checked.add(path)
        if None in rows:
            missing.extend((fqn, o) for o, r in zip(offs, rows, strict=True) if r is None)
        it.columns = (offs, sizes, rows)
    if missing:
        fqn, offsets_ = missing[0]
        raise FormatError(
            f"{len(missing):,} chunk(s) have no storage_data entry, e.g. {fqn!r} at "
            f"{list(offsets_)}")


_Row = tuple  # (fqn, offsets, relative path, offset, length, transforms)
_FIRST = itemgetter(0)


def _bulk_storage(data: dict[Any, Any]) -> tuple[list[Any], ...] | None:
    """``storage_data`` as columns (fqns, offsets, paths, starts, lengths, transforms) when
    every entry is well formed, checked in bulk; None to take the checked path (which names
    the first bad entry)."""
    from .dcp_runs import StorageRun

    keys = list(data)
    if not keys:
        return [], [], [], [], [], []
    kt = {*map(type, keys)}
    if StorageRun in kt:
        found = _storage_columns(data)
        if found is None:
            return None
        fqns, offsets, paths, starts, lengths, transforms = found
    else:
        infos = list(data.values())
        it = {*map(type, infos)}
        if (len(kt) != 1 or getattr(kt.pop(), "global_name", None) != _INDEX_TYPE
                or len(it) != 1 or getattr(it.pop(), "global_name", None) != _STORAGE_INFO):
            return None
        try:
            kd = [k.__dict__ for k in keys]
            idd = [i.__dict__ for i in infos]
            fqns = [d["fqn"] for d in kd]
            offsets = [d.get("offset") for d in kd]
            paths = [d["relative_path"] for d in idd]
            starts = [d["offset"] for d in idd]
            lengths = [d["length"] for d in idd]
            transforms = [d.get("transform_descriptors") for d in idd]
        except (AttributeError, KeyError, TypeError):
            return None
    if ({*map(type, fqns)} != {str} or {*map(type, paths)} != {str}
            or {*map(type, starts)} != _INT or {*map(type, lengths)} != _INT
            or min(starts) < 0 or min(lengths) < 0
            or not all(t is type(None) or issubclass(t, tuple) for t in {*map(type, offsets)})):
        return None
    return fqns, offsets, paths, starts, lengths, transforms


def _storage_columns(data: dict[Any, Any]) -> tuple[list[Any], ...] | None:
    """The columns of a ``storage_data`` holding runs of entries (``dcp_runs``, each marked
    used) among MetadataIndex -> _StorageInfo stand-ins, in order; None when anything else is
    in it."""
    from .dcp_runs import StorageRun

    fqns: list[Any] = []
    offsets: list[Any] = []
    paths: list[Any] = []
    starts: list[Any] = []
    lengths: list[Any] = []
    transforms: list[Any] = []
    for k, v in data.items():
        if type(k) is StorageRun:
            if k.used or v is not k.value:
                return None
            k.used = True
            fqns += k.fqns
            offsets += k.offsets
            paths += k.paths
            starts += k.starts
            lengths += k.lengths
            transforms += [None] * len(k.fqns)
            continue
        if (getattr(type(k), "global_name", None) != _INDEX_TYPE
                or getattr(type(v), "global_name", None) != _STORAGE_INFO):
            return None
        kd, vd = getattr(k, "__dict__", None), getattr(v, "__dict__", None)
        if kd is None or vd is None or "fqn" not in kd or not {
                "relative_path", "offset", "length"} <= vd.keys():
            return None
        fqns.append(kd["fqn"])
        offsets.append(kd.get("offset"))
        paths.append(vd["relative_path"])
        starts.append(vd["offset"])
        lengths.append(vd["length"])
        transforms.append(vd.get("transform_descriptors"))
    return fqns, offsets, paths, starts, lengths, transforms


def _storage_row(key: Any, info: Any) -> _Row:
    k = _state(key, "MetadataIndex", "a storage_data key")
    fqn, offset = k.get("fqn"), k.get("offset")
    s = _state(info, _STORAGE_INFO, f"storage_data of {fqn!r}")
    path, off, length = s.get("relative_path"), s.get("offset"), s.get("length")
    if type(path) is not str or type(off) is not int or type(length) is not int or (
        off < 0 or length < 0
    ):
        raise FormatError(
            f"storage_data of {fqn!r} is ({_short(path)}, {_short(off)}, {_short(length)}), "
            "not (relative path, offset, length)")
    if offset is not None and not isinstance(offset, tuple):
        raise FormatError(f"storage_data key of {fqn!r}: offset {_short(offset)} is not a tuple")
    return fqn, offset, path, off, length, s.get("transform_descriptors")


# ---------------------------------------------------------------------------------------------
# a byte range of a file as a file of its own (the torch.save blobs inside a .distcp)


def _blob(directory: Source, chunk: Chunk, fqn: str, files: dict[str, Source]) -> Window:
    """The chunk's ``torch.save`` blob, checked to lie inside its file."""
    src = files.get(chunk.file) or files.setdefault(chunk.file, directory.child(chunk.file))
    if not src.is_file():
        raise FormatError(f"{fqn!r} is stored in {chunk.file}, which is missing", directory.where)
    end = chunk.offset + chunk.length
    if end > src.size:
        raise FormatError(
            f"{fqn!r}: its bytes {chunk.offset}..{end} run past the end of {chunk.file} "
            f"({src.size:,} bytes)", directory.where)
    return Window(src, chunk.offset, chunk.length, f"{chunk.offset}+{chunk.length}")


# ---------------------------------------------------------------------------------------------
# names and roles


def _names(md: Metadata) -> dict[str, tuple[str, Role]]:
    """fqn -> (canonical name, role), by the rules of a ``torch.save`` training dict: under a
    model key (``{"model": state_dict, ...}``) the names inside it; under an optimizer key
    optimizer state; beside a model ``other``; a bare state dict as stored."""
    from .torch.constants import MODEL_KEYS, OPTIMIZER_KEYS, WRAPPER_PREFIXES

    tops = {it.path[0] for it in md.items.values() if len(it.path) > 1}
    model_key = next((k for k in MODEL_KEYS if k in tops), None)
    training = model_key is not None or any(k in OPTIMIZER_KEYS for k in tops)
    out: dict[str, tuple[str, Role]] = {}
    model: list[str] = []
    for fqn, it in md.items.items():
        if it.dtype is None:
            continue
        top = it.path[0]
        if training and top == model_key and len(it.path) > 1:
            model.append(fqn)
            out[fqn] = (".".join(it.path[1:]), Role.PARAMETER)
        elif training and top in OPTIMIZER_KEYS:
            out[fqn] = (fqn, Role.OPTIMIZER)
        elif training:
            out[fqn] = (fqn, Role.OTHER)
        else:
            model.append(fqn)
            out[fqn] = (fqn, Role.PARAMETER)
    names = [out[f][0] for f in model]
    for prefix in WRAPPER_PREFIXES:
        if names and all(n.startswith(prefix) for n in names):
            names = [n[len(prefix):] for n in names]
    for fqn, name in zip(model, names, strict=True):
        item = md.items[fqn]
        out[fqn] = (name, stored_role(name, len(item.shape), item.dtype or ""))
    return out


# ---------------------------------------------------------------------------------------------
# opening


def _sharding_info(meta: Any, name: str, where: str) -> dict[str, Any]:
    text = meta.get(SHARDING_INFO) if isinstance(meta, dict) else None
    if not isinstance(text, str):
        raise FormatError(f"{name} has no {SHARDING_INFO} in its __metadata__: not a file of "
                          "this distributed checkpoint", where)
    try:
        info = json.loads(text)
    except ValueError as e:
        raise FormatError(f"{name}: {SHARDING_INFO} is not JSON ({e})", where) from None
    if not isinstance(info, dict):
        raise FormatError(f"{name}: {SHARDING_INFO} is not a JSON object", where)
    return info


def read_safetensors_shards(directory: Source, names: list[str]) -> tuple[Metadata, list[Any]]:
    """The items of ``HuggingFaceStorageWriter`` shards: each file's tensors placed by its
    ``saved_offsets``; global sizes as ``HuggingFaceStorageReader.read_metadata`` computes
    them. Also the shards' checkpoints (their findings)."""
    from .registry import load

    if len(names) > MAX_SAFETENSORS_FILES:
        raise FormatError(f"{len(names):,} safetensors files (limit "
                          f"{MAX_SAFETENSORS_FILES:,})", directory.where)
    md = Metadata()
    shards = []
    for name in names:
        ck = load(directory.child(name), format="safetensors")
        shards.append(ck)
        meta = ck.metadata.get("__metadata__")
        info = _sharding_info(meta, name, directory.where)
        version = meta.get("DCP_VERSION") if isinstance(meta, dict) else None
        md.version = version if isinstance(version, str) else md.version
        for t in ck.tensors:
            place = info.get(t.stored_name)
            offsets = place.get(SAVED_OFFSETS) if isinstance(place, dict) else None
            if not (isinstance(offsets, list) and _sizes_ok(tuple(offsets))
                    and len(offsets) == len(t.shape)):
                raise FormatError(f"{name}: {t.stored_name!r} has no valid {SAVED_OFFSETS} "
                                  f"({_short(offsets)}) for its shape {list(t.shape)}",
                                  directory.where)
            it = md.items.get(t.stored_name)
            if it is None:
                it = md.items[t.stored_name] = Item(t.stored_name, t.dtype, ())
            elif it.dtype != t.dtype:
                raise FormatError(f"{t.stored_name!r} is {it.dtype} in one shard and {t.dtype} "
                                  f"in {name}", directory.where)
            chunk = Chunk(tuple(offsets), tuple(t.shape))
            if any((c.offsets, c.sizes) == (chunk.offsets, chunk.sizes) for c in it.chunks):
                continue  # a replicated chunk saved by two ranks
            if t.offset is None or t.nbytes is None:
                raise FormatError(f"{name}: {t.stored_name!r} has no byte range",
                                  directory.where)
            chunk.file, chunk.offset, chunk.length, chunk.raw = name, t.offset, t.nbytes, True
            it.chunks.append(chunk)
    for it in md.items.values():
        ndim = len(it.chunks[0].sizes)
        if any(len(c.sizes) != ndim for c in it.chunks):
            raise FormatError(f"{it.fqn!r}: chunks of different ranks", directory.where)
        it.shape = tuple(max(c.offsets[d] + c.sizes[d] for c in it.chunks) for d in range(ndim))
    _files_and_ends(md)
    return md, shards


def _open_safetensors(directory: Source) -> Checkpoint:
    names = _safetensors_files(directory)
    md, shards = read_safetensors_shards(directory, names)
    files: dict[str, Source] = {}
    findings = [f for ck in shards for f in ck.findings]
    metadata: dict[str, Any] = {
        "dcp_version": md.version,
        "storage": "safetensors (HuggingFaceStorageWriter)",
        "metadata_files": [],
        "files": md.files,
        "chunks": sum(len(it.chunks) for it in md.items.values()),
        "bytes_items": 0,
        "pickle_globals": [],
    }
    paths = (directory.where, *(directory.child(f).where for f in names))
    return Checkpoint(paths=paths, format=NAME, tensors=_entries(md, None), metadata=metadata,
                      findings=findings, source=directory,
                      reader=_reader(directory, md, files, None))


def _open_accelerate(directory: Source) -> Checkpoint:
    """Accelerate's FSDP checkpoint directory: its model and optimizer DCP directories as one
    checkpoint; the pickles beside them examined."""
    from .registry import load

    models, optims = _accelerate_dirs(directory)
    parts = [*models, *optims]
    tensors: list[TensorEntry] = []
    readers: dict[str, Any] = {}
    findings: list[Finding] = []
    rows: list[dict[str, Any]] = []
    hyper: dict[str, Any] = {}
    paths = [directory.where]
    several = len(models) > 1
    for part in parts:
        ck = open_checkpoint(directory.child(part), "dir")
        paths.extend(ck.paths[1:])
        findings.extend(ck.findings)
        known = {r["name"] for r in rows}
        rows.extend(r for r in ck.metadata.get("pickle_globals", ()) if r["name"] not in known)
        hyper.update({f"{part}/{k}": v for k, v in ck.hyperparameters.items()})
        for t in ck.tensors:
            stored = f"{part}/{t.stored_name}" if several else t.stored_name
            name = f"{part}/{t.name}" if several else t.name
            if stored in readers:
                raise FormatError(f"{stored!r} is in two of {', '.join(parts)}",
                                  directory.where)
            readers[stored] = (ck, t)
            tensors.append(TensorEntry(stored, name, t.shape, t.dtype, t.role, nbytes=t.nbytes,
                                       file=f"{part}/{t.file}" if t.file else None,
                                       extra=dict(t.extra, dcp_dir=part)))
    try:
        others = [n for n in directory.list() if _ACC_PICKLE.match(n)]
    except (InspectorError, OSError):
        others = []
    for name in others:
        ck = load(directory.child(name))  # refused here when it holds what a loader would run
        paths.append(ck.path)
        findings.extend(ck.findings)
        known = {r["name"] for r in rows}
        rows.extend(r for r in ck.metadata.get("pickle_globals", ()) if r["name"] not in known)
    if others:
        findings.append(Finding("info", f"training state beside the model, not listed: "
                                f"{', '.join(others[:8])}" + (" ..." if len(others) > 8 else ""),
                                directory.where))

    def locate(entry: TensorEntry) -> ValueLocation:
        found = readers.get(entry.stored_name)
        if found is None:
            raise FormatError(f"{entry.stored_name!r} is not a tensor of this checkpoint",
                              directory.where)
        ck, inner = found
        return ck.reader(inner)

    metadata = {"layout": "accelerate-fsdp", "dcp_dirs": parts, "other_files": others,
                "pickle_globals": rows}
    return Checkpoint(paths=tuple(paths), format=NAME, tensors=tensors, metadata=metadata,
                      hyperparameters=hyper, findings=findings, source=directory,
                      reader=locate)


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    if variant == "safetensors":
        return _open_safetensors(source)
    if variant == "accelerate":
        return _open_accelerate(source)
    if variant == "dir":
        directory, names = source, _metadata_files(source)
    elif variant in ("metadata", "shard"):
        directory = source.parent_dir()
        names = [source.name] if variant == "metadata" else _metadata_files(directory)
    else:
        raise FormatError(f"unsupported {NAME} variant {variant!r}", source.where)
    from .security.restricted_pickle import gc_paused

    with gc_paused():
        md = read_metadata(directory, names)
    only = source.name if variant == "shard" else None
    files: dict[str, Source] = {}
    _check_files(directory, md, files)
    findings: list[Finding] = []
    rows: list[dict[str, Any]] = []
    hyper: dict[str, Any] = {}
    for where, globals_ in md.globals:
        _add_globals(rows, findings, globals_, where)
    bytes_items = [it for it in md.items.values() if it.dtype is None]
    _examine_bytes(directory, bytes_items, files, rows, findings, hyper, only)
    tensors = _entries(md, only)
    metadata: dict[str, Any] = {
        "dcp_version": md.version,
        "metadata_files": names,
        "files": md.files if only is None else [only],
        "chunks": sum(it.chunk_count() for it in md.items.values() if it.dtype is not None),
        "bytes_items": len(bytes_items),
        "pickle_globals": rows,
    }
    if md.save_id:
        metadata["save_id"] = md.save_id
    if bytes_items:
        metadata["bytes"] = [
            {"name": it.fqn, "file": it.chunks[0].file, "offset": it.chunks[0].offset,
             "length": it.chunks[0].length} for it in bytes_items[:MAX_LISTED_BYTES_ITEMS]]
    if only is not None:
        metadata["part_of"] = directory.where
        findings.append(Finding(
            "info", f"one file of the distributed checkpoint {directory.where}: its chunks are "
            "listed with their place in the global tensors; open the directory for the whole",
            source.name))
    paths = (source.where, *(directory.child(n).where for n in names)) if only else (
        source.where, *(directory.child(n).where for n in names),
        *(directory.child(f).where for f in md.files))
    return Checkpoint(paths=paths, format=NAME, tensors=tensors, metadata=metadata,
                      hyperparameters=hyper, findings=findings, source=directory,
                      reader=_reader(directory, md, files, only))


def _check_files(directory: Source, md: Metadata, files: dict[str, Source]) -> None:
    """Every chunk inside a file of the directory: a missing file or a range past its end is
    one clear error, at listing time (a stat per file)."""
    if md.ends is None:
        _files_and_ends(md)
    for name, (end, fqn) in md.ends.items():
        try:
            src = files.setdefault(name, directory.child(name))
            ok = src.is_file()
        except (InspectorError, OSError, RuntimeError) as e:
            raise FormatError(f"{fqn!r} is stored in {name!r}: {e}", directory.where) from None
        if not ok:
            raise FormatError(f"{fqn!r} is stored in {name}, which is missing", directory.where)
        if end > src.size:
            raise FormatError(
                f"{fqn!r}: its bytes end at {end:,}, past the end of {name} ({src.size:,} "
                "bytes): truncated or not this checkpoint's file", directory.where)


def _add_globals(rows: list[dict[str, Any]], findings: list[Finding],
                 globals_: dict[str, GlobalRef], where: str) -> None:
    from .security.findings import pickle_findings

    r, f = pickle_findings(globals_, where)
    known = {x["name"] for x in rows}
    rows.extend(x for x in r if x["name"] not in known)
    findings.extend(f)


def _examine_bytes(directory: Source, items: list[Item], files: dict[str, Source],
                   rows: list[dict[str, Any]], findings: list[Finding], hyper: dict[str, Any],
                   only: str | None) -> None:
    """Each bytes item's ``torch.save`` pickle through the restricted reader: its globals (the
    default load planner runs it with ``weights_only=False``) and its value as a hyperparameter."""
    from .security.restricted_pickle import render
    from .torch.zip_archive import read_zip

    todo = [it for it in items if only is None or it.chunks[0].file == only]
    for n, it in enumerate(todo):
        c = it.chunks[0]
        label = f"{c.file}@{c.offset} ({it.fqn})"
        if n >= MAX_BYTES_ITEMS or c.length > MAX_BYTES_ITEM or c.transforms:
            why = (f"stored through {', '.join(c.transforms)}" if c.transforms else
                   f"{c.length:,} bytes" if c.length > MAX_BYTES_ITEM else
                   f"beyond the first {MAX_BYTES_ITEMS:,} bytes items")
            findings.append(Finding(
                "warning", f"bytes item {it.fqn!r} not examined ({why}): torch.load runs its "
                "pickle with weights_only=False", label, it.fqn))
            continue
        try:
            z = read_zip(_blob(directory, c, it.fqn, files))
        except InspectorError as e:
            raise FormatError(f"bytes item {it.fqn!r} ({label}) is not a torch.save blob: "
                              f"{e.message}", directory.where) from None
        _add_globals(rows, findings, z.globals, label)
        hyper[it.fqn] = render(z.obj)


def _entries(md: Metadata, only: str | None) -> list[TensorEntry]:
    names = _names(md)
    out = []
    for fqn, it in md.items.items():
        if it.dtype is None:
            continue
        name, role = names[fqn]
        bits = BITS.get(it.dtype)
        if only is None:
            numel = 1
            for d in it.shape:
                numel *= d
            count = it.chunk_count()
            one = it.chunks[0] if count == 1 else None
            extra: dict[str, Any] = {"chunks": count}
            covered = sum(map(prod, it.chunk_sizes()))
            if covered != numel:
                extra["chunk_elements"] = covered
            out.append(TensorEntry(
                fqn, name, it.shape, it.dtype, role,
                nbytes=numel * bits // 8 if bits else None,
                file=one.file if one is not None else None, extra=extra))
            continue
        for c in it.chunks:
            if c.file != only:
                continue
            tag = fqn if len(it.chunks) == 1 else f"{fqn}[{','.join(map(str, c.offsets))}]"
            out.append(TensorEntry(
                tag, name if len(it.chunks) == 1 else tag, tuple(c.sizes), it.dtype, role,
                nbytes=c.numel * bits // 8 if bits else None, file=only,
                extra={"global_shape": it.shape, "chunk_offsets": tuple(c.offsets)}))
    return out


# ---------------------------------------------------------------------------------------------
# values


def _reader(directory: Source, md: Metadata, files: dict[str, Source], only: str | None) -> Any:
    located: dict[tuple[str, int], tuple[Source, int, tuple[int, ...] | None]] = {}

    def chunk_bytes(it: Item, c: Chunk) -> tuple[Source, int, tuple[int, ...] | None]:
        """(file, absolute offset of the chunk's first element, stride or None if C order)."""
        key = (c.file or "", c.offset)
        found = located.get(key)
        if found is None:
            found = located[key] = _locate(directory, it, c, files)
        return found

    def locate(entry: TensorEntry) -> ValueLocation:
        fqn = entry.stored_name
        it = md.items.get(fqn)
        chunks = it.chunks if it is not None else []
        if only is not None and it is None:
            fqn, _, rest = fqn.rpartition("[")
            it = md.items.get(fqn)
            offsets = tuple(int(x) for x in rest.rstrip("]").split(",") if x)
            chunks = [c for c in (it.chunks if it else []) if c.offsets == offsets]
        if it is None or it.dtype is None or not chunks:
            raise FormatError(f"{entry.stored_name!r} is not a tensor of this checkpoint",
                              directory.where)
        if only is not None:
            chunks = [c for c in chunks if c.file == only]
        if len(chunks) == 1 and chunks[0].sizes == entry.shape:
            src, offset, stride = chunk_bytes(it, chunks[0])
            return ByteRange(src, offset, False, stride)
        covered, numel = sum(map(prod, map(_SIZES, chunks))), prod(it.shape)
        if covered != numel:  # said before reading: a gap or overlap shows in the counts
            raise FormatError(f"{fqn!r}: its chunks hold {covered:,} elements of its "
                              f"{numel:,}: they overlap or leave a gap", directory.where)
        placed = []
        for c in chunks:
            src, offset, stride = chunk_bytes(it, c)
            if stride is not None:
                raise FormatError(f"{fqn!r}: a chunk stored as a strided view (stride "
                                  f"{list(stride)}) is not supported across chunks")
            placed.append((c, src, offset))
        itemsize = BITS[it.dtype] // 8
        return Stream(lambda stack: _Runs(it, placed, itemsize, stack, directory.where))

    return locate


def _locate(directory: Source, it: Item, c: Chunk,
            files: dict[str, Source]) -> tuple[Source, int, tuple[int, ...] | None]:
    from .torch.rebuild import TensorRecord
    from .torch.zip_archive import read_zip

    if c.transforms:
        raise FormatError(f"{it.fqn!r}: chunk stored through {', '.join(c.transforms)} "
                          "(a stream transform): not supported")
    blob = _blob(directory, c, it.fqn, files)
    if c.raw:
        return blob_base(blob), c.offset, None
    try:
        z = read_zip(blob)
    except FormatError as e:
        raise FormatError(f"the chunk at {c.file}@{c.offset} is not a torch.save blob: "
                          f"{e.message}", directory.where) from None
    rec = z.obj
    if type(rec) is not TensorRecord or rec.storage is None:
        raise FormatError(f"{it.fqn!r}: the chunk at {c.file}@{c.offset} holds "
                          f"{type(rec).__name__}, not a tensor", directory.where)
    if rec.shape != c.sizes or rec.dtype != it.dtype:
        raise FormatError(
            f"{it.fqn!r}: the chunk at {c.file}@{c.offset} is {rec.dtype} {list(rec.shape)}, "
            f"the metadata says {it.dtype} {list(c.sizes)}", directory.where)
    storage = rec.storage.root
    if storage.offset is None or storage.compressed:
        raise FormatError(f"{it.fqn!r}: the chunk's storage record is compressed")
    itemsize = BITS[it.dtype] // 8
    offset = c.offset + storage.offset + (rec.storage_offset + storage_view(rec)) * itemsize
    stride = rec.stride
    c_order = c_strides(rec.shape)
    if stride is not None and any(d > 1 and s != w for d, s, w in
                                  zip(rec.shape, stride, c_order, strict=True)):
        return blob_base(blob), offset, stride
    return blob_base(blob), offset, None


def storage_view(rec: Any) -> int:
    """Elements a legacy storage view starts into its root (0 for torch zips)."""
    return rec.storage.view_offset if rec.storage.base is not None else 0


def blob_base(blob: Window) -> Source:
    return blob._base


def runs(shape: tuple[int, ...], chunks: list[tuple[tuple[int, ...], tuple[int, ...]]],
         ) -> Iterator[tuple[int, int, int]]:
    """The global tensor in C order as runs ``(chunk index, first element in the chunk,
    elements)``, each contiguous in its (C-ordered) chunk. Below the first dimension from which
    every chunk spans the whole of the later dimensions, each index is visited; there the
    chunks must tile the dimension: a gap or an overlap is a FormatError."""
    n = len(shape)
    if n == 0:
        if len(chunks) != 1:
            raise FormatError(f"a 0-d tensor in {len(chunks)} chunks")
        yield 0, 0, 1
        return
    split = 0  # first dim after which every chunk is whole
    for d in range(n - 1, -1, -1):
        if any(sz[d] != shape[d] or off[d] != 0 for off, sz in chunks):
            split = d
            break
    inner = 1
    for d in shape[split + 1:]:
        inner *= d
    strides = [c_strides(sz) for _, sz in chunks]

    def walk(dim: int, active: list[int], prefix: list[int]) -> Iterator[tuple[int, int, int]]:
        bounds = sorted({0, shape[dim], *(chunks[i][0][dim] for i in active),
                         *(chunks[i][0][dim] + chunks[i][1][dim] for i in active)})
        for a, b in zip(bounds, bounds[1:], strict=False):
            here = [i for i in active if chunks[i][0][dim] <= a < chunks[i][0][dim]
                    + chunks[i][1][dim]]
            if not here:
                raise FormatError(f"no chunk holds indices {a}..{b - 1} of dimension {dim}")
            if dim == split:
                if len(here) > 1:
                    raise FormatError(f"chunks overlap at indices {a}..{b - 1} of dimension "
                                      f"{dim}")
                i = here[0]
                off = chunks[i][0]
                first = sum((p - o) * s for p, o, s in zip(prefix, off, strides[i], strict=False))
                first += (a - off[dim]) * strides[i][dim]
                yield i, first, (b - a) * inner
                continue
            for p in range(a, b):
                prefix.append(p)
                yield from walk(dim + 1, here, prefix)
                prefix.pop()

    yield from walk(0, list(range(len(chunks))), [])


class _Runs(RunReader):
    """A tensor's bytes in C order, read run by run from its chunks' files."""

    def __init__(self, it: Item, placed: list[tuple[Chunk, Source, int]], itemsize: int,
                 stack: ExitStack, where: str) -> None:
        super().__init__(where, "a chunk's file")
        self._placed = placed
        self._itemsize = itemsize
        self._stack = stack
        self._files: dict[int, Any] = {}
        self._runs = runs(it.shape, [(c.offsets, c.sizes) for c, _, _ in placed])

    def next_run(self) -> tuple[Any, int] | None:
        try:
            i, first, count = next(self._runs)
        except StopIteration:
            return None
        except FormatError as e:
            raise FormatError(e.message, self._where) from None
        _, src, offset = self._placed[i]
        f = self._files.get(id(src))
        if f is None:
            f = self._files[id(src)] = self._stack.enter_context(src.open())
        f.seek(offset + first * self._itemsize)
        return f, count * self._itemsize


# ---------------------------------------------------------------------------------------------
# security examination (inspector scan)


def examine(source: Source, variant: str, result: FileResult) -> None:
    """``.metadata``: its pickle; a ``.distcp``: every ``torch.save`` blob the metadata places in
    it (tensor chunks, which torch loads with ``weights_only=True``, and bytes items, which it
    loads with ``weights_only=False``)."""
    from .security.examination import ERROR, examine_pickles
    from .torch.examine import examine_zip

    if variant != "shard":
        with source.open() as f:
            examine_pickles(result, f, source.size)
        result.kind = f"{NAME}-metadata"
        return
    directory = source.parent_dir()
    try:
        md = read_metadata(directory, _metadata_files(directory))
    except InspectorError as e:
        result.add(ERROR, f"its metadata cannot be read: {e}")
        return
    blobs = sorted({(c.offset, c.length) for it in md.items.values() for c in it.chunks
                    if c.file == source.name})
    for offset, length in blobs:
        if offset + length > source.size:
            result.add(ERROR, f"a blob at {offset}+{length} runs past the end of the file")
            continue
        window = Window(source, offset, length, f"{offset}+{length}")
        before = len(result.items)
        examine_zip(window, result)  # torch's own zip walk, as torch.load reads each blob
        for item in result.items[before:]:
            item.where = f"@{offset}:{item.where}" if item.where else f"@{offset}"
    result.kind = f"{NAME}-shard"
    seen: set[str] = set()  # each blob names torch's rebuild globals again: each once
    result.globals[:] = [g for g in result.globals
                         if not (g.get("name") in seen or seen.add(g.get("name")))]


ADAPTER = Adapter(
    name=NAME,
    description="torch Distributed Checkpoint (a directory with .metadata and *.distcp files)",
    extensions=("<directory>", ".metadata", ".distcp"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,
)
