"""Plain pickles that hold weights: ``pickle.dump`` of dicts/lists of NumPy arrays or torch
tensors (protocols 0-5) and joblib files, through the same restricted unpickler as torch files.

Nothing from the file is imported or run. The stand-ins understand:

* NumPy's array reconstruction (:mod:`inspector.adapters.numpy_pickle`);
* torch tensors pickled outside ``torch.save``: ``torch._utils._rebuild_tensor_v2`` over
  ``torch.storage._load_from_bytes(b)``, where ``b`` is a whole legacy ``torch.save`` of one
  storage (``torch/storage.py`` ``_StorageBase.__reduce__``); its persistent id gives the storage
  type and size, its data is skipped;
* joblib's ``NumpyArrayWrapper`` (``joblib/numpy_pickle.py``): the wrapper's state gives shape,
  dtype and order, and the raw array bytes that joblib writes into the stream right after it
  (after an alignment padding byte and padding) are skipped; compressed joblib files
  (``compress=``: every compressor joblib detects, :mod:`.joblib_compression`) are
  decompressed first, within a size cap.

Names are key paths through dicts, lists and objects, as for torch files. Roles: a flat dict of
torch tensors (a ``state_dict()``) gets parameter/buffer by the well-known buffer names; every
other tensor, and every NumPy array, is ``other`` (a pickle says nothing about training roles).
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Iterator
from typing import Any

from .errors import FormatError, InspectorError, UnsafeContentError
from .model import Checkpoint, Role, TensorEntry
from .numpy_pickle import DType, resolve
from .numpy_pickle import allowed as numpy_allowed
from .registry import Adapter
from .security.restricted_pickle import PickleError, unpickle
from .source import Source
from .torch.constants import MAGIC_NUMBER, MAX_PICKLE_BYTES
from .torch.rebuild import Builder, StorageRef, TensorRecord, storage_ref
from .torch.walk import build_checkpoint

NAME = "pickle"
JOBLIB_WRAPPER = "joblib.numpy_pickle.NumpyArrayWrapper"
# Opcodes a pickle of a container or object can start with (protocols 0 and 1 have no PROTO).
_FIRST_OPS = frozenset({"MARK", "EMPTY_DICT", "EMPTY_LIST", "GLOBAL", "EMPTY_TUPLE"})
_MEMO_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"})


def sniff(head: bytes, source: Source) -> str | None:
    """'pickle' for a pickle that is not torch's legacy stream; for a stream joblib would
    decompress first (:mod:`.joblib_compression`: ``compress=`` files), its compressor's name
    when it decompresses to one."""
    if source.is_dir() or not head:
        return None
    from .torch.tar_legacy import is_tar

    if is_tar(head):
        return None  # torch.load reads a tar as its pre-0.4 format: the torch adapter's
    kind = compression(head)
    if kind is not None:
        from .security.examination import SAMPLE

        try:
            inflated = decompress(kind, head, SAMPLE, partial=True)
        except (OSError, EOFError, ValueError):
            inflated = b""
        if inflated and (_is_pickle(inflated) or _loader_pickle(inflated, None, len(inflated))):
            return kind
        if kind not in ("zlib", "bz2"):
            return None  # ("x" and "BZ" begin text too: such a file may be a pickle itself)
    if _is_pickle(head):
        return "pickle"
    return "pickle" if _loader_pickle(head, source, source.size) else None


def _loader_pickle(head: bytes, source: Source | None, size: int) -> bool:
    """Whether a loader reads the bytes as a pickle that names a global or builds a container
    (any protocol, the loaders' grammar), past the head when it ends inside the walk; a
    pickle of torch's magic number is the torch adapter's."""
    from .security.examination import walks_as_pickle
    from .security.pickle_grammar import runs_before_its_end, walk

    end, n, meaningful = walk(head)
    if end != "stop" and runs_before_its_end(head):  # a loader runs it before the break
        return _first_int(head) != MAGIC_NUMBER
    if end == "bad" or (end == "stop" and not (meaningful and n > 1)):
        return False
    if end == "cut" and source is not None and size > len(head):
        if not walks_as_pickle(lambda k: source.read(0, k), size):
            return False
    elif end == "cut":
        return meaningful and n >= 32
    return _first_int(head) != MAGIC_NUMBER


def _first_int(head: bytes) -> Any:
    for name, arg in itertools.islice(_genops(head), 3):
        if name not in ("PROTO", "FRAME"):
            return arg
    return None


def compression(head: bytes) -> str | None:
    """The compressor joblib would decompress ``head`` with (:mod:`.joblib_compression`)."""
    from .joblib_compression import compression as joblib_compression

    return joblib_compression(head)


def decompress(kind: str, data: bytes, limit: int, partial: bool = False) -> bytes:
    from .joblib_compression import decompress as joblib_decompress

    return joblib_decompress(kind, data, limit, partial)


def _is_pickle(head: bytes) -> bool:
    ops: list[tuple[str, Any]] = []
    for op, arg in itertools.islice(_genops(head[:256]), 4):
        ops.append((op, arg))
        if op == "STOP":
            break
    if len(ops) < 2 and not (ops and ops[-1][0] == "STOP"):
        return False
    names = [n for n, _ in ops]
    first = names[1] if names[0] == "PROTO" else names[0]
    if names[0] == "PROTO" and ops[0][1] not in range(2, 6):
        return False
    if names[0] == "PROTO" and len(names) > 2 and names[1] == "FRAME":
        first = names[2]
    if names[0] != "PROTO" and first not in _FIRST_OPS:
        return False
    if names[0] != "PROTO" and not _MEMO_OPS.intersection(names):
        return False  # protocols 0/1 memoize the first container at once; text does not
    # torch's legacy stream starts with a pickle of its magic number: the torch adapter's.
    ints = [a for n, a in ops if isinstance(a, int) and n not in ("PROTO", "FRAME")]
    return not (ints and ints[0] == MAGIC_NUMBER)


def _genops(data: bytes) -> Iterator[tuple[str, Any]]:
    """(opcode name, argument) of the opcodes at the start of ``data`` in the loaders' grammar
    (:mod:`.security.pickle_grammar`), up to a parse error."""
    from .security.pickle_grammar import genops

    try:
        for op, arg, _pos in genops(data):
            yield op.name, arg
    except Exception:  # noqa: BLE001 - not a pickle, or the window ended mid-opcode
        return


class _Stream:
    """The unpickler's input, for stand-ins that must skip raw bytes inside it (joblib)."""

    def __init__(self, data: bytes, addressable: bool) -> None:
        self.file = io.BytesIO(data)
        self.size = len(data)
        self.addressable = addressable  # positions in the stream are offsets in the file

    def skip(self, n: int, what: str) -> None:
        pos = self.file.tell()
        if n < 0 or pos + n > self.size:
            raise PickleError(f"{what}: {n} bytes at {pos} run past the end ({self.size})")
        self.file.seek(pos + n)


def _joblib_wrapper(stream: _Stream) -> type:
    class NumpyArrayWrapper:
        """joblib's wrapper: BUILD gives its state, then the array bytes follow in the stream."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.record: Any = None

        def __setstate__(self, state: Any) -> None:
            from .numpy_pickle import array_record
            from .security.joblib_stream import planted_methods

            planted_methods(state)  # a method joblib.load calls, shadowed by the state
            if not isinstance(state, dict) or not isinstance(state.get("dtype"), DType):
                raise PickleError("joblib NumpyArrayWrapper state without a numpy dtype")
            shape = state.get("shape")
            dtype: DType = state["dtype"]
            name, itemsize = dtype.canonical()
            if name == "object":
                raise PickleError("joblib object arrays (a nested pickle) are not read")
            if state.get("numpy_array_alignment_bytes") is not None:
                pad = stream.file.read(1)
                if len(pad) != 1:
                    raise PickleError("joblib array padding byte missing")
                stream.skip(pad[0], "joblib array padding")
            shape = tuple(shape) if isinstance(shape, list) else shape
            rec = array_record(shape, dtype, state.get("order") == "F")
            n = math.prod(rec.shape)
            if stream.addressable and dtype.byteorder != ">" and n:
                rec = _located(rec, name, n, stream.file.tell(), state.get("order") == "F")
            stream.skip(n * itemsize, "joblib array data")
            self.record = rec

    return NumpyArrayWrapper


def _located(rec: Any, dtype: str, n: int, offset: int, fortran: bool) -> TensorRecord:
    """A joblib array whose raw bytes sit at ``offset`` of the (uncompressed) file: a record
    over a storage there, so its values can be read like a torch tensor's."""
    ref = StorageRef(f"joblib@{offset}", dtype, n, "cpu", "joblib")
    ref.nbytes = n * _itemsize(dtype)
    ref.offset = offset
    dims = rec.shape[::-1] if fortran else rec.shape
    strides: list[int] = []
    acc = 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= d
    stride = tuple(strides[::-1])
    if fortran:
        stride = stride[::-1]
    out = TensorRecord(ref, 0, rec.shape, stride, dtype, False, n)
    out.extra = rec.extra
    return out


def _load_from_bytes(counter: list[int]) -> Any:
    """``torch.storage._load_from_bytes``: the storage a nested legacy torch.save describes."""

    def load(data: Any) -> StorageRef:
        if not isinstance(data, (bytes, bytearray)):
            raise PickleError("torch.storage._load_from_bytes of something other than bytes")
        f = io.BytesIO(bytes(data))
        table = Builder().allowed()
        magic, _ = unpickle(f, {})
        if magic != MAGIC_NUMBER:
            raise PickleError("nested torch storage bytes do not start with torch's magic")
        unpickle(f, {})  # protocol version
        unpickle(f, {})  # sys_info
        found: list[StorageRef] = []

        def persistent(pid: Any) -> StorageRef:
            if type(pid) is not tuple or len(pid) < 5 or pid[0] != "storage":
                raise PickleError("nested torch storage with an unexpected persistent id")
            counter[0] += 1
            ref = storage_ref(pid[1], pid[2], pid[3], pid[4])
            ref.key = f"{ref.key}#{counter[0]}"  # unique per nested save
            ref.nbytes = ref.numel * _itemsize(ref.dtype)
            found.append(ref)
            return ref

        obj, _ = unpickle(f, table, persistent)
        if type(obj) is not StorageRef:
            raise PickleError("nested torch bytes do not hold a storage")
        return obj

    return load


def _itemsize(dtype: str) -> int:
    from .torch.rebuild import ITEMSIZE

    return ITEMSIZE[dtype]


def _stream_bytes(source: Source, variant: str) -> bytes:
    """The pickle stream of the file (inflated for the 'zlib' variant), within the size cap."""
    where = source.where
    if source.size > MAX_PICKLE_BYTES:
        raise FormatError(f"pickle of {source.size} bytes exceeds the {MAX_PICKLE_BYTES} limit",
                          where)
    data = source.read(0, source.size)
    if variant in COMPRESSED:
        try:
            data = decompress(variant, data, MAX_PICKLE_BYTES)
        except (OSError, EOFError, ValueError) as e:
            raise FormatError(f"{variant} stream is corrupt ({e})", where) from None
        if len(data) > MAX_PICKLE_BYTES:
            raise FormatError(f"inflates to more than {MAX_PICKLE_BYTES} bytes", where)
    return data


COMPRESSED = ("compat", "zlib", "gzip", "bz2", "lzma", "xz", "lz4")


def examine(source: Source, variant: str, res: Any) -> None:
    """``scan``: the same stream :func:`open_checkpoint` reads, every pickle in it."""
    from .security.examination import examine_pickles

    data = _stream_bytes(source, variant)
    res.kind = "compressed-pickle" if variant in COMPRESSED else "pickle"
    examine_pickles(res, io.BytesIO(data), len(data))


def broken_pickle(e: PickleError, where: str) -> InspectorError:
    """The error for a pickle the reader stopped in: a refusal naming the dangerous globals a
    loader meets before (or past) the break (a loader with another grammar may read on, as
    joblib's pure-Python unpickler does), else the reader's message."""
    from .security.verdicts import DANGEROUS

    bad = sorted({f"{g.name} (would be {g.verdict.use}: {g.verdict.why})"
                  for g in (e.globals or {}).values()
                  if g.verdict is not None and g.verdict.level == DANGEROUS})
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return UnsafeContentError(f"refused: the pickle references {'; '.join(bad[:3])}{more} "
                                  f"and breaks off ({e}); nothing was run", where)
    return FormatError(str(e), where)


def _further_pickles(f: Any, size: int, globals_: dict[str, Any]) -> int:
    """The pickles after the first one's STOP, as further ``pickle.load`` calls would read
    them: their globals join ``globals_`` (the worse verdict of a name wins). Returns their
    number."""
    from .security.examination import MAX_PICKLES, SAMPLE, could_start_pickle
    from .security.restricted_pickle import base_allowed
    from .security.verdicts import RANK

    count = 0
    while count < MAX_PICKLES and f.tell() < size:
        start = f.tell()
        if not could_start_pickle(f.read(SAMPLE)):
            break
        f.seek(start)
        try:
            _, more = unpickle(f, base_allowed())
        except PickleError as e:
            more = e.globals or {}
            size = 0  # stop after this one
        count += 1
        for k, g in more.items():
            old = globals_.get(k)
            if old is None or (g.verdict and old.verdict and
                               RANK[g.verdict.level] > RANK[old.verdict.level]):
                globals_[k] = g
    return count


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    where = source.where
    data = _stream_bytes(source, variant)
    stream = _Stream(data, addressable=variant not in COMPRESSED)
    table = Builder().allowed()
    table.update(numpy_allowed())
    table["torch.storage._load_from_bytes"] = _load_from_bytes([0])
    wrapper = _joblib_wrapper(stream)
    table[JOBLIB_WRAPPER] = wrapper
    try:
        obj, globals_ = unpickle(stream.file, table)
        obj = resolve(_unwrap_joblib(obj, wrapper))
    except PickleError as e:
        raise broken_pickle(e, where) from None
    further = _further_pickles(stream.file, stream.size, globals_)
    joblib = JOBLIB_WRAPPER in {g.resolved for g in globals_.values()}
    meta: dict[str, Any] = {
        "pickle_protocol": data[1] if data[:1] == b"\x80" and len(data) > 1 else None,
        "compressed": variant in COMPRESSED,
        "producer": "joblib" if joblib else "pickle",
    }
    if further:
        meta["further_pickles"] = further  # read for their globals only
    ckpt = build_checkpoint(source, "joblib" if joblib else NAME, obj, globals_, meta, "pickle",
                            len(data))
    flat = meta.get("container") == "state_dict"
    ckpt.tensors = [t if flat and not t.extra.get("numpy") else _other(t) for t in ckpt.tensors]
    ckpt.source = source
    ckpt.reader = _values(ckpt, source)
    return ckpt


def _values(ckpt: Checkpoint, source: Source) -> Any:
    """Values where the file lays them out as raw bytes (uncompressed joblib arrays); elsewhere
    they are pickle opcodes, not located: one clear error."""
    from .registry import byte_ranges

    located = byte_ranges(ckpt, source)

    def locate(entry: TensorEntry) -> Any:
        if entry.offset is None:
            raise FormatError(
                f"tensor {entry.stored_name!r}: values inside a pickle's opcodes are not "
                "located (metadata only)", source.where)
        return located(entry)

    return locate


def _other(t: TensorEntry) -> TensorEntry:
    if t.role is Role.OTHER:
        return t
    return t.replace(role=Role.OTHER)


def _unwrap_joblib(obj: Any, wrapper: type) -> Any:
    """Replace joblib wrappers by their records (before the NumPy pass, which walks the rest)."""
    seen: set[int] = set()

    def go(x: Any, depth: int) -> Any:
        if isinstance(x, wrapper):
            return x.record
        if depth > 200 or id(x) in seen:
            return x
        if isinstance(x, dict):
            seen.add(id(x))
            for k, v in list(x.items()):
                x[k] = go(v, depth + 1)
        elif type(x) is list:
            seen.add(id(x))
            x[:] = [go(v, depth + 1) for v in x]
        elif type(x) is tuple:
            return tuple(go(v, depth + 1) for v in x)
        return x

    return go(obj, 0)


ADAPTER = Adapter(
    name=NAME,
    description="plain pickle / joblib of NumPy arrays or torch tensors (restricted, nothing run)",
    extensions=(".pkl", ".pickle", ".joblib", ".p"),
    sniff=sniff,
    open=open_checkpoint,
    default_variant="pickle",
    examine=examine,
)


def object_array_entries(data: bytes, where: str, prefix: str = "") -> tuple[list[TensorEntry],
                                                                              list[Any]]:
    """The arrays inside a pickled NumPy object array (the data of an ``|O`` ``.npy``, which
    ``np.save`` writes with ``pickle.dump``): entries named by their path under ``prefix``, all
    role ``other``, and the findings about its globals."""
    table = Builder().allowed()
    table.update(numpy_allowed())
    table["torch.storage._load_from_bytes"] = _load_from_bytes([0])
    try:
        obj, globals_ = unpickle(data, table)
        obj = resolve(obj)
    except PickleError as e:
        raise FormatError(str(e), where) from None
    from .source import as_source

    ckpt = build_checkpoint(as_source(where.split(":", 1)[0]), NAME, obj, globals_, {}, where,
                            len(data))
    dot = prefix + "." if prefix else ""
    entries = [t.replace(stored_name=dot + t.stored_name, name=dot + t.name, role=Role.OTHER,
                         offset=None)
               for t in ckpt.tensors]
    return entries, ckpt.findings
