"""Flax msgpack checkpoints: ``flax.serialization.to_bytes`` / ``msgpack_serialize`` files
(``flax_model.msgpack`` of transformers' Flax models, a linen variables dict, a whole
``TrainState``), read by a small bounded msgpack walker: no ``msgpack``, no NumPy, no array bytes.

Layout (``flax/serialization.py``): the state dict as nested msgpack maps (string keys; lists and
named tuples become maps keyed ``"0"``, ``"1"``... or by field); each array leaf is an ext of
type 1 (``_MsgpackExtType.ndarray``) whose payload is itself msgpack: the 3-array
``(shape, dtype name, C-order bytes)`` of ``_ndarray_to_bytes``; a NumPy scalar is ext type 3
(``npscalar``: the same payload, shape ``()``); a Python complex ext type 2 (``(real, imag)``).
An array above ``MAX_CHUNK_SIZE`` (1 GiB) is written as the map
``{"__msgpack_chunked_array__": True, "shape": {"0": d0, ...}, "chunks": {"0": ext, ...}}`` of
flat chunks (``_chunk``), which ``msgpack_restore`` concatenates and reshapes.

Each array's bytes are a plain range of the file (a chunked one: several ranges, read as one
stream), so values need no more code. Names are the map keys joined by ``.`` (the names orbax
gives the same tree, and HF's Flax-to-PyTorch conversion). Roles: when the top level holds a
``params`` map (a linen variables dict, a ``TrainState``) ``params`` is parameters (listed without
the ``params.`` prefix), ``batch_stats`` buffers, ``opt_state`` optimizer state (optax's ``mu``,
``nu``, ``count``...), the rest (``step``, other collections) other; without one every array is a
parameter. Python scalars (a ``TrainState``'s ``step``) are kept in the metadata.

Hostile input: every length is checked against the bytes left before anything is read or
allocated, nesting depth and counts are bounded, and every fault is one :class:`FormatError`.
"""

from __future__ import annotations

import math
import struct

from .errors import FormatError
from .model import ByteRange, Checkpoint, Finding, Role, Stream, TensorEntry
from .registry import Adapter
from .source import RangeFile, Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from contextlib import ExitStack
    from typing import Any, BinaryIO

    from .model import ValueLocation
    from .security.examination import FileResult

NAME = "flax-msgpack"
EXT_NDARRAY, EXT_COMPLEX, EXT_NPSCALAR = 1, 2, 3  # flax.serialization._MsgpackExtType
CHUNKED = "__msgpack_chunked_array__"
MAX_DEPTH = 128  # flax state dicts are a few levels deep
MAX_DIMS = 64
MAX_ITEMS = 1 << 22  # map entries / array items walked in one file (memory: ~100 B each)
MAX_KEY = 1 << 16  # bytes of one map key or string read
MAX_SCALARS = 256  # Python scalar leaves kept in the metadata
BUF = 1 << 13  # bytes read at a time: keys and headers are small, array bytes are skipped
ARRAY_HEAD = 1 << 10  # an ndarray payload's (shape, dtype, bin header) prefix
# numpy dtype names flax writes (arr.dtype.name) -> item size in bytes (ml_dtypes' sub-byte
# types are stored one element per byte by NumPy, hence 1).
ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e4m3fnuz": 1,
    "float8_e4m3b11fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "float8_e3m4": 1, "float8_e4m3": 1, "float4_e2m1fn": 1, "float6_e2m3fn": 1,
    "float6_e3m2fn": 1, "int2": 1, "uint2": 1, "int4": 1, "uint4": 1,
}
_FIXED = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
          0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
_LEN = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC7: 1, 0xC8: 2, 0xC9: 4,
        0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}
_FIXEXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}


class _Ext:
    """An ext value: its type code and where its payload lies."""

    __slots__ = ("code", "offset", "size")

    def __init__(self, code: int, offset: int, size: int) -> None:
        self.code, self.offset, self.size = code, offset, size


class _Bin:
    """A bin (or an over-long str) value, located and not read."""

    __slots__ = ("offset", "size")

    def __init__(self, offset: int, size: int) -> None:
        self.offset, self.size = offset, size


class _Map(dict):
    """A decoded map (keys in stored order)."""


class _Reader:
    """Sequential msgpack reads over ``[start, end)`` of a file through a small buffer; bin and
    ext payloads are skipped, never read, unless asked for."""

    def __init__(self, f: BinaryIO, start: int, end: int, where: str, buf: int = BUF) -> None:
        self.f, self.pos, self.end, self.where, self.bufsize = f, start, end, where, buf
        self.buf, self.base = b"", start
        self.items = 0

    def fail(self, what: str, at: int | None = None) -> FormatError:
        return FormatError(what, self.where, f"offset {self.pos if at is None else at}")

    def take(self, n: int, what: str) -> bytes:
        if n > self.end - self.pos:
            raise self.fail(f"{what} needs {n:,} bytes, the data ends after "
                            f"{self.end - self.pos:,}")
        i = self.pos - self.base
        if i < 0 or i + n > len(self.buf):
            self.f.seek(self.pos)
            self.buf = self.f.read(min(self.end - self.pos, max(n, self.bufsize)))
            self.base, i = self.pos, 0
            if len(self.buf) < n:
                raise self.fail(f"the file ended early while reading {what}")
        self.pos += n
        return self.buf[i:i + n]

    def skip(self, n: int, what: str) -> int:
        """Skip ``n`` bytes (checked against the end); their offset."""
        if n > self.end - self.pos:
            raise self.fail(f"{what} of {n:,} bytes runs past the end of the data "
                            f"({self.end - self.pos:,} bytes left)")
        at = self.pos
        self.pos += n
        return at

    def length(self, marker: int) -> int:
        return int.from_bytes(self.take(_LEN[marker], "a length"), "big")

    def count(self, n: int, per: int, what: str) -> None:
        if n * per > self.end - self.pos:
            raise self.fail(f"{what} of {n:,} items cannot fit in the "
                            f"{self.end - self.pos:,} bytes left")
        self.items += n
        if self.items > MAX_ITEMS:
            raise self.fail(f"more than {MAX_ITEMS:,} msgpack items: refused")

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail(f"maps or arrays nested deeper than {MAX_DEPTH} levels")
        at = self.pos
        m = self.take(1, "a value")[0]
        if m <= 0x7F:
            return m
        if m >= 0xE0:
            return m - 0x100
        if 0x80 <= m <= 0x8F or m in (0xDE, 0xDF):
            return self.map(m & 0x0F if m <= 0x8F else self.length(m), depth)
        if 0x90 <= m <= 0x9F or m in (0xDC, 0xDD):
            n = m & 0x0F if m <= 0x9F else self.length(m)
            self.count(n, 1, "an array")
            return [self.value(depth + 1) for _ in range(n)]
        if 0xA0 <= m <= 0xBF or m in (0xD9, 0xDA, 0xDB):
            return self.string(m & 0x1F if m <= 0xBF else self.length(m))
        if m == 0xC0:
            return None
        if m in (0xC2, 0xC3):
            return m == 0xC3
        fmt = _FIXED.get(m)
        if fmt is not None:
            return struct.unpack(fmt, self.take(struct.calcsize(fmt), "a number"))[0]
        if m in (0xC4, 0xC5, 0xC6):
            n = self.length(m)
            return _Bin(self.skip(n, "a bin"), n)
        if m in (0xC7, 0xC8, 0xC9):
            n = self.length(m)
            code = self.take(1, "an ext type")[0]
            return _Ext(code, self.skip(n, "an ext"), n)
        n = _FIXEXT.get(m)
        if n is not None:
            code = self.take(1, "an ext type")[0]
            return _Ext(code, self.skip(n, "an ext"), n)
        raise self.fail(f"byte {m:#04x} is not a msgpack type (0xc1 is never used)", at)

    def string(self, n: int) -> str | _Bin:
        if n > MAX_KEY:
            return _Bin(self.skip(n, "a string"), n)
        raw = self.take(n, "a string")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"a string is not UTF-8 ({raw[:40]!r})", self.pos - n) from None

    def map(self, n: int, depth: int) -> _Map:
        self.count(n, 2, "a map")
        out = _Map()
        for _ in range(n):
            at = self.pos
            key = self.value(depth + 1)
            if type(key) is bool or not isinstance(key, (str, int)):
                raise self.fail(f"a map key of type {type(key).__name__.lstrip('_')}: flax "
                                "writes string keys", at)
            key = str(key)
            if key in out:
                raise self.fail(f"duplicate map key {key!r}", at)
            out[key] = self.value(depth + 1)
        return out


class _Array:
    """One array leaf: shape, dtype and its byte ranges (one, or a chunked array's chunks)."""

    __slots__ = ("shape", "dtype", "ranges", "scalar")

    def __init__(self, shape: tuple[int, ...], dtype: str, ranges: list[tuple[int, int]],
                 scalar: bool = False) -> None:
        self.shape, self.dtype, self.ranges, self.scalar = shape, dtype, ranges, scalar


def _ndarray(f: BinaryIO, ext: _Ext, where: str, path: str) -> _Array:
    """The ``(shape, dtype name, bytes)`` payload of an ndarray / npscalar ext."""
    rd = _Reader(f, ext.offset, ext.offset + ext.size, where, ARRAY_HEAD)
    what = f"array {path!r}"
    try:
        m = rd.take(1, what)[0]
        if m != 0x93:
            raise rd.fail(f"{what}: its payload is not flax's 3-array (shape, dtype, bytes)")
        shape = rd.value(MAX_DEPTH - 1)
        if not isinstance(shape, list) or len(shape) > MAX_DIMS or any(
                type(d) is not int or d < 0 for d in shape):
            raise rd.fail(f"{what}: shape {shape!r:.80} is not a list of at most {MAX_DIMS} "
                          "non-negative ints")
        dtype = rd.value(MAX_DEPTH - 1)
        if isinstance(dtype, _Bin) and dtype.size <= 64:  # the loader reads it raw: bytes too
            dtype = _read(f, dtype)
        if not isinstance(dtype, str) or dtype not in ITEMSIZE:
            raise rd.fail(f"{what}: dtype {dtype!r:.60} is not a dtype flax's loader reads "
                          f"(known: {', '.join(sorted(ITEMSIZE))})")
        data = rd.value(MAX_DEPTH - 1)
        if not isinstance(data, _Bin):
            raise rd.fail(f"{what}: its data is a {type(data).__name__.lstrip('_')}, not bytes")
    except FormatError as e:
        raise e from None
    numel = math.prod(shape)
    if numel * ITEMSIZE[dtype] != data.size:
        raise FormatError(f"{what}: shape {tuple(shape)} of {dtype} needs "
                          f"{numel * ITEMSIZE[dtype]:,} bytes, the payload holds {data.size:,}",
                          where, f"offset {data.offset}")
    return _Array(tuple(shape), dtype, [(data.offset, data.size)], ext.code == EXT_NPSCALAR)


def _read(f: BinaryIO, b: _Bin) -> str:
    f.seek(b.offset)
    raw = f.read(b.size)
    return raw.decode("utf-8", "replace")


def _unchunk(f: BinaryIO, m: _Map, where: str, path: str) -> _Array:
    """flax's chunked array map (``_chunk``): flat chunks of one dtype, concatenated and
    reshaped by ``_unchunk``."""
    shape_map, chunks = m.get("shape"), m.get("chunks")
    what = f"chunked array {path!r}"
    if not isinstance(shape_map, _Map) or not isinstance(chunks, _Map):
        raise FormatError(f"{what}: 'shape' and 'chunks' must be maps", where)
    try:
        shape = tuple(shape_map[str(i)] for i in range(len(shape_map)))
        parts = [chunks[str(i)] for i in range(len(chunks))]
    except KeyError as e:
        raise FormatError(f"{what}: key {e} missing (keys must be '0', '1', ...)", where) \
            from None
    if len(shape) > MAX_DIMS or any(type(d) is not int or d < 0 for d in shape):
        raise FormatError(f"{what}: shape {shape!r:.80} is not a list of non-negative ints",
                          where)
    dtype, ranges, total = None, [], 0
    for i, part in enumerate(parts):
        if not isinstance(part, _Ext) or part.code != EXT_NDARRAY:
            raise FormatError(f"{what}: chunk {i} is not an array", where)
        a = _ndarray(f, part, where, f"{path}/chunks/{i}")
        if len(a.shape) != 1 or dtype not in (None, a.dtype):
            raise FormatError(f"{what}: chunk {i} is {a.dtype}{list(a.shape)}, not a flat "
                              f"chunk of {dtype or 'one dtype'}", where)
        dtype = a.dtype
        ranges += a.ranges
        total += a.shape[0]
    if dtype is None:
        raise FormatError(f"{what}: no chunks (np.concatenate fails on none)", where)
    if total != math.prod(shape):
        raise FormatError(f"{what}: its chunks hold {total:,} elements, shape {shape} needs "
                          f"{math.prod(shape):,}", where)
    return _Array(shape, dtype, ranges)


def read_tree(source: Source) -> tuple[list[tuple[tuple[str, ...], Any]], list[Finding]]:
    """(path, leaf) of every leaf in stored order: an :class:`_Array` or a Python scalar."""
    where = source.where
    leaves: list[tuple[tuple[str, ...], Any]] = []
    findings: list[Finding] = []
    with source.open() as f:
        rd = _Reader(f, 0, source.size, where)
        top = rd.value(0)
        if rd.pos != source.size:
            raise FormatError(f"{source.size - rd.pos:,} bytes after the msgpack value "
                              "(msgpack_restore refuses extra data)", where, f"offset {rd.pos}")
        if not isinstance(top, _Map):
            raise FormatError(f"the top level is a {_kind(top)}, not a map: not a flax state "
                              "dict", where)
        stack: list[tuple[tuple[str, ...], Any]] = [((), top)]
        while stack:  # depth-first, in stored order
            path, node = stack.pop()
            label = ".".join(path)
            if isinstance(node, _Map):
                if CHUNKED in node:
                    leaves.append((path, _unchunk(f, node, where, label)))
                    continue
                stack.extend(((*path, k), v) for k, v in reversed(node.items()))
            elif isinstance(node, _Ext):
                if node.code in (EXT_NDARRAY, EXT_NPSCALAR):
                    leaves.append((path, _ndarray(f, node, where, label)))
                elif node.code == EXT_COMPLEX:
                    leaves.append((path, "complex"))
                else:
                    findings.append(Finding("warning", f"{label!r}: msgpack ext type "
                                            f"{node.code} is not flax's (msgpack_restore keeps "
                                            "it as an ExtType)", label))
            elif isinstance(node, (list, _Bin)):
                leaves.append((path, f"<{_kind(node)}>"))
            else:
                leaves.append((path, node))
    return leaves, findings


def _kind(v: Any) -> str:
    return {_Map: "map", list: "array", _Bin: "bin", _Ext: "ext", type(None): "nil"}.get(
        type(v), type(v).__name__)


COLLECTION_ROLES = {"params": Role.PARAMETER, "batch_stats": Role.BUFFER,
                    "opt_state": Role.OPTIMIZER}


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    leaves, findings = read_tree(source)
    collections = any(p[:1] == ("params",) and len(p) > 1 for p, _ in leaves)
    tensors: list[TensorEntry] = []
    scalars: dict[str, Any] = {}
    seen: set[str] = set()
    for path, leaf in leaves:
        stored = ".".join(path)
        if not isinstance(leaf, _Array):
            if len(scalars) < MAX_SCALARS:
                scalars[stored] = leaf
            continue
        role, name = Role.PARAMETER, stored
        if collections:
            role = COLLECTION_ROLES.get(path[0], Role.OTHER)
            if path[0] == "params":
                name = ".".join(path[1:])
        if stored in seen:
            raise FormatError(f"two paths are both named {stored!r} (a key holding '.')",
                              source.where)
        seen.add(stored)
        extra: dict[str, Any] = {}
        offset = leaf.ranges[0][0] if len(leaf.ranges) == 1 else None
        if offset is None:
            extra["chunks"] = leaf.ranges
        if leaf.scalar:
            extra["npscalar"] = True
        tensors.append(TensorEntry(stored, name, leaf.shape, leaf.dtype, role,
                                   nbytes=sum(n for _, n in leaf.ranges), offset=offset,
                                   extra=extra or None))
    if not tensors and not scalars:
        findings.append(Finding("info", "no arrays in the state dict", None))
    meta: dict[str, Any] = {"collections": collections}
    if scalars:
        meta["scalars"] = scalars
    return Checkpoint(paths=(source.where,), format=NAME, tensors=tensors, metadata=meta,
                      findings=findings, reader=_reader(source))


class _Chain(RangeFile):
    """The byte ranges of a chunked array, read as one file."""

    def __init__(self, raw: BinaryIO, ranges: list[tuple[int, int]]) -> None:
        self._raw, self._ranges = raw, ranges
        self._total = sum(n for _, n in ranges)

    def size(self) -> int:
        return self._total

    def read_at(self, offset: int, n: int) -> bytes:
        out, base = [], 0
        for start, length in self._ranges:
            if n <= 0:
                break
            if offset < base + length:
                a = max(0, offset - base)
                k = min(length - a, n)
                self._raw.seek(start + a)
                out.append(self._raw.read(k))
                offset, n = offset + k, n - k
            base += length
        return b"".join(out)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def _reader(source: Source):
    def locate(entry: TensorEntry) -> ValueLocation:
        ranges = entry.extra.get("chunks")
        if ranges is None:
            if entry.offset is None:
                raise FormatError(f"tensor {entry.stored_name!r}: no byte offset", source.where)
            return ByteRange(source, entry.offset)

        def open_chain(stack: ExitStack) -> BinaryIO:
            return stack.enter_context(_Chain(source.open(), list(ranges)))  # type: ignore

        return Stream(open_chain)

    return locate


def sniff(head: bytes, source: Source) -> str | None:
    """'file' when the first bytes are a msgpack map whose walk reaches a flax array (an ext of
    type 1 or 3 with the 3-array payload, or a chunked-array key) within the head."""
    if not head or not (0x81 <= head[0] <= 0x8F or head[0] in (0xDE, 0xDF)) \
            or source.is_dir():
        return None
    import io

    rd = _Probe(io.BytesIO(head), 0, len(head), source.where)
    try:
        rd.value(0)
    except (_Found, FormatError):
        pass
    return "file" if rd.found else None


class _Found(Exception):
    pass


class _Probe(_Reader):
    """A reader over the head that stops at the first flax array it meets."""

    found = False

    def count(self, n: int, per: int, what: str) -> None:
        if n > MAX_ITEMS:
            raise self.fail("too many items")

    def skip(self, n: int, what: str) -> int:
        at = self.pos
        self.pos += n
        return at

    def value(self, depth: int) -> Any:
        start = self.pos
        v = super().value(depth)
        if isinstance(v, _Ext) and v.code in (EXT_NDARRAY, EXT_NPSCALAR) and \
                self.buf[v.offset - self.base:v.offset - self.base + 1] in (b"\x93", b""):
            self.found = True
            raise _Found
        if isinstance(v, str) and v == CHUNKED and start > 0:
            self.found = True
            raise _Found
        return v


def examine(source: Source, variant: str, result: FileResult) -> None:
    """``inspector scan``: the walk of a listing. flax's ``msgpack_restore`` builds only dicts,
    lists, scalars and NumPy arrays from these bytes (an unknown ext stays an inert
    ``ExtType``): nothing a loader runs. A malformed file is an error."""
    result.kind = NAME
    open_checkpoint(source, variant)


ADAPTER = Adapter(
    name=NAME,
    description="Flax msgpack (flax.serialization.to_bytes: params, variables, TrainState)",
    extensions=(".msgpack",),
    sniff=sniff,
    open=open_checkpoint,
    default_variant="file",
    examine=examine,
)
