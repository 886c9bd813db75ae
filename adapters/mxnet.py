"""MXNet NDArray files (``mx.nd.save``, Gluon ``save_parameters``/``export``, Sockeye 1/2 params),
read without MXNet: headers are parsed with ``struct`` and the data is skipped with ``seek``.

Specification: the MXNet sources, summed up with line references in
``shared/formats/mxnet-ndarray.md``:

- apache/mxnet 1.9.1 ``src/ndarray/ndarray.cc``: magic constants (1595-1603), ``NDArray::Save``
  (1605-1679), ``LegacyTShapeLoad`` (1681-1695), ``NDArray::Load`` (1728-1836), the list container
  ``kMXAPINDArrayListMagic`` and its ``Save``/``Load`` (1838-1866);
  ``src/c_api/c_api.cc`` ``MXNDArraySave`` (1875-1896);
  ``include/mxnet/tuple.h`` ``Tuple::Save`` (730-741: int32 ndim + int64 dims);
  ``3rdparty/mshadow/mshadow/base.h`` ``TypeFlag`` (358-372);
- apache/mxnet 0.11.0 ``ndarray.cc`` 665-691 (V1) and 0.10.0 616-639 (pre-magic layout).

Container: ``u64 0x112 | u64 reserved | u64 N | N records | u64 K | K x (u64 len, bytes)`` with
K = 0 for an unnamed list. Records: V3 ``0xF993FACA`` (numpy shape semantics), V2 ``0xF993FAC9``
(storage type: default, row_sparse, csr), V1 ``0xF993FAC8`` (int64 dims), else legacy v0 where the
first word is ``ndim`` and dims are uint32. This reader follows ``Save``, not legacy ``Load``:
MXNet 1.9.1 writes a legacy-mode 0-d array with its context, type and data, which its own
``mx.nd.load`` then misreads; here such a record is read as the 0-d array it is.
"""

from __future__ import annotations

import math
import os
import struct
from contextlib import nullcontext

from .errors import FormatError
from .model import Checkpoint, Role, TensorEntry
from .registry import Adapter
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

NAME = "mxnet"
LIST_MAGIC = 0x112  # kMXAPINDArrayListMagic
V1_MAGIC = 0xF993FAC8  # NDARRAY_V1_MAGIC
V2_MAGIC = 0xF993FAC9  # NDARRAY_V2_MAGIC
V3_MAGIC = 0xF993FACA  # NDARRAY_V3_MAGIC

# mshadow TypeFlag -> (canonical dtype, itemsize)
TYPE_FLAGS: dict[int, tuple[str, int]] = {
    0: ("float32", 4),  # kFloat32
    1: ("float64", 8),  # kFloat64
    2: ("float16", 2),  # kFloat16
    3: ("uint8", 1),  # kUint8
    4: ("int32", 4),  # kInt32
    5: ("int8", 1),  # kInt8
    6: ("int64", 8),  # kInt64
    7: ("bool", 1),  # kBool
    8: ("int16", 2),  # kInt16
    9: ("uint16", 2),  # kUint16
    10: ("uint32", 4),  # kUint32
    11: ("uint64", 8),  # kUint64
    12: ("bfloat16", 2),  # kBfloat16
}
# NDArrayStorageType and the names of each storage type's aux arrays, in aux order.
STYPES: dict[int, tuple[str, tuple[str, ...]]] = {
    0: ("default", ()),  # kDefaultStorage
    1: ("row_sparse", ("indices",)),  # kRowSparseStorage: rowsparse::kIdx
    2: ("csr", ("indptr", "indices")),  # kCSRStorage: csr::kIndPtr, csr::kIdx
}
DEV_TYPES = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}  # Context::DeviceType
# Not a limit of the format; a bound so that a corrupt ndim cannot make us loop for long.
MAX_NDIM = 64
PREFIX_ROLES = {"arg:": Role.PARAMETER, "aux:": Role.BUFFER}


def sniff(head: bytes, source: Source) -> str | None:
    if len(head) >= 16 and struct.unpack_from("<QQ", head) == (LIST_MAGIC, 0):
        return "list"
    return None


class _Reader:
    """Little-endian reads with bounds checked against the file size before anything is read.

    ``pos`` is tracked here rather than asked of the file (``tell()`` was most of the cost of a
    50,000-array file); every move goes through these methods. With ``buf`` (a local file's
    memory map) the reads unpack in place, and skipping an array's data is moving ``pos``;
    otherwise they read ``f``.
    """

    def __init__(self, f: BinaryIO, size: int, where: str, buf: Any = None) -> None:
        self.f, self.size, self.where, self.buf = f, size, where, buf
        self.pos = f.tell()

    def fail(self, message: str, at: int | None = None) -> FormatError:
        return FormatError(message, self.where, f"offset {self.pos if at is None else at}")

    def need(self, n: int, what: Label) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(
                f"truncated: {_text(what)} needs {n} bytes, {self.size - self.pos} left")

    def unpack(self, fmt: str, what: Label) -> tuple:
        s = _STRUCTS.get(fmt) or _STRUCTS.setdefault(fmt, struct.Struct(fmt))
        n = s.size
        pos = self.pos
        if pos + n > self.size:
            self.need(n, what)  # raises
        self.pos = pos + n
        if self.buf is not None:
            return s.unpack_from(self.buf, pos)
        return s.unpack(self.f.read(n))

    def read(self, n: int, what: Label) -> bytes:
        self.need(n, what)
        pos = self.pos
        self.pos += n
        if self.buf is not None:
            return self.buf[pos:pos + n]  # a map's slice: bytes
        return self.f.read(n)

    def peek(self, n: int) -> bytes:
        """The next ``n`` bytes (fewer at the end), without moving."""
        if self.buf is not None:
            return self.buf[self.pos:self.pos + n]
        raw = self.f.read(n)
        self.f.seek(self.pos)
        return raw

    def skip(self, n: int, what: Label) -> None:
        self.need(n, what)
        self.pos += n
        if self.buf is None:
            self.f.seek(n, os.SEEK_CUR)

    def back(self, n: int) -> None:
        self.pos -= n
        if self.buf is None:
            self.f.seek(self.pos)


_STRUCTS: dict[str, struct.Struct] = {}

# What a read is for, in an error message: a text, or the parts of one, joined by spaces only
# when a message is made (50,000 records would otherwise format ~400,000 texts for nothing); a
# (count, dtype) part reads "(count x dtype)".
Label = str | tuple


def _text(what: Label) -> str:
    if isinstance(what, str):
        return what
    return " ".join(f"({p[0]} x {p[1]})" if isinstance(p, tuple) else str(p) for p in what)


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    if variant != "list":
        raise FormatError(f"unsupported MXNet variant {variant!r}", source.where)
    # A local file's memory map unpacks in place; other sources are read.
    local = source.is_local and source.size > 0
    with source.open() as f, (source.view() if local else nullcontext()) as view:
        r = _Reader(f, source.size, source.where, view)
        magic, _reserved, n = r.unpack("<QQQ", "list header")
        if magic != LIST_MAGIC:
            raise r.fail(f"list magic is {magic:#x}, expected {LIST_MAGIC:#x}", 0)
        # Every record takes at least 8 bytes (magic/ndim word + one more field).
        if n > (r.size - r.pos) // 8:
            raise r.fail(f"array count {n} cannot fit in the {r.size}-byte file", 16)
        records = [_record(r, i) for i in range(n)]
        (k,) = r.unpack("<Q", "name count")
        if k not in (0, n):
            raise r.fail(f"{k} names for {n} arrays (must be 0 or {n})")
        names = [_name(r, i) for i in range(k)] if k else [str(i) for i in range(n)]
        if r.pos != r.size:
            raise r.fail(f"{r.size - r.pos} unexpected bytes after the names")
    versions = sorted({rec["version"] for rec in records})
    # In a file that uses arg:/aux: prefixes (symbolic Module, Sockeye 1), an unprefixed array is
    # not one of the model's arguments.
    prefixes = tuple(PREFIX_ROLES)
    prefixed = any(n.startswith(prefixes) for n in names)
    default_role = Role.OTHER if prefixed else Role.PARAMETER
    tensors = [_entry(name, rec, default_role) for name, rec in zip(names, records, strict=True)]
    return Checkpoint(
        paths=(source.where,),
        format=NAME,
        tensors=tensors,
        metadata={"record_versions": versions, "named": bool(k), "arrays": n},
    )


def _name(r: _Reader, i: int) -> str:
    (length,) = r.unpack("<Q", ("length of name", i))
    raw = r.read(length, ("name", i))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="backslashreplace")


def _shape(
    r: _Reader, what: tuple, dim_fmt: str = "q", ndim_fmt: str = "i"
) -> tuple[int, ...] | None:
    """A TShape: ndim then dims; None for ndim -1 (unknown shape)."""
    (ndim,) = r.unpack(_NDIM[ndim_fmt], (*what, "ndim"))
    if ndim == -1:
        return None
    if not 0 <= ndim <= MAX_NDIM:
        raise r.fail(f"{_text(what)}: ndim {ndim} is out of range", r.pos - 4)
    fmt = _DIMS.get((ndim, dim_fmt))
    if fmt is None:
        fmt = _DIMS[ndim, dim_fmt] = f"<{ndim}{dim_fmt}"
    dims = r.unpack(fmt, (*what, "dims"))
    if any(d < 0 for d in dims):
        raise r.fail(f"{_text(what)}: negative dimension in {list(dims)}", r.pos - 8 * ndim)
    return dims


_NDIM = {"i": "<i", "I": "<I"}
_DIMS: dict[tuple[int, str], str] = {}


def _plausible_context(r: _Reader) -> bool:
    """After a V2 ndim-0 shape: does a (dev_type, dev_id, type_flag) follow, as Save writes it?"""
    if r.pos + 12 > r.size:
        return False
    dev_type, dev_id, flag = struct.unpack("<iii", r.peek(12))
    return dev_type in DEV_TYPES and 0 <= dev_id < 1 << 16 and flag in TYPE_FLAGS


def _record(r: _Reader, i: int) -> dict:
    start = r.pos
    (word,) = r.unpack("<I", ("array", i, "header"))
    rec: dict = {"start": start, "stype": "default", "aux": []}
    storage_shape = None
    if word in (V2_MAGIC, V3_MAGIC):
        rec["version"] = "v2" if word == V2_MAGIC else "v3"
        (stype,) = r.unpack("<i", ("array", i, "storage type"))
        if stype not in STYPES:
            raise r.fail(f"array {i}: unknown storage type {stype}", r.pos - 4)
        rec["stype"] = STYPES[stype][0]
        if stype:
            storage_shape = _shape(r, ("array", i, "storage shape"))
        shape = _shape(r, ("array", i, "shape"))
        none = shape is None or (word == V2_MAGIC and shape == () and not _plausible_context(r))
    elif word == V1_MAGIC:
        rec["version"] = "v1"
        shape = _shape(r, ("array", i, "shape"), "q", "I")
        none = shape == ()
    else:
        rec["version"] = "v0"
        r.back(4)
        shape = _shape(r, ("array", i, "shape"), "I", "I")
        none = shape == ()
    if none:
        rec.update(shape=(), dtype="none", numel=0, nbytes=0, data=None, none=True)
        return rec
    assert shape is not None
    dev_type, dev_id, flag = r.unpack("<iii", ("array", i, "context and type"))
    if flag not in TYPE_FLAGS:
        raise r.fail(f"array {i}: unknown type flag {flag}", r.pos - 4)
    dtype, itemsize = TYPE_FLAGS[flag]
    rec["shape"] = shape
    rec["dtype"] = dtype
    rec["context"] = (DEV_TYPES.get(dev_type) or str(dev_type), dev_id)
    aux_names = STYPES[{"default": 0, "row_sparse": 1, "csr": 2}[rec["stype"]]][1]
    for aux_name in aux_names:
        (aux_flag,) = r.unpack("<i", ("array", i, aux_name, "type"))
        if aux_flag not in TYPE_FLAGS:
            raise r.fail(f"array {i}: unknown {aux_name} type flag {aux_flag}", r.pos - 4)
        aux_shape = _shape(r, ("array", i, aux_name, "shape"))
        if aux_shape is None:
            raise r.fail(f"array {i}: {aux_name} shape is undefined")
        rec["aux"].append((aux_name, TYPE_FLAGS[aux_flag][0], aux_shape, TYPE_FLAGS[aux_flag][1]))
    stored = storage_shape if storage_shape is not None else shape
    numel = math.prod(stored)
    data = itemsize * numel
    rec["data"] = r.pos
    r.skip(data, ("array", i, "data", (numel, dtype)))
    nbytes = data
    for aux_name, _, aux_shape, aux_size in rec["aux"]:
        aux_bytes = aux_size * math.prod(aux_shape)
        r.skip(aux_bytes, ("array", i, aux_name, "data"))
        nbytes += aux_bytes
    rec["numel"] = numel
    rec["nbytes"] = nbytes
    rec["storage_shape"] = storage_shape
    return rec


def split_prefix(stored_name: str, default_role: Role = Role.PARAMETER) -> tuple[str, Role]:
    """``arg:w`` -> (``w``, parameter), ``aux:m`` -> (``m``, buffer), else the name unchanged."""
    for prefix, prefix_role in PREFIX_ROLES.items():
        if stored_name.startswith(prefix):
            return stored_name[len(prefix) :], prefix_role
    return stored_name, default_role


def _entry(stored_name: str, rec: dict, default_role: Role) -> TensorEntry:
    name, role = split_prefix(stored_name, default_role)
    extra: dict = {"record": rec["version"], "record_offset": rec["start"]}
    stored_numel = None
    if rec.get("none"):
        extra["none"] = True
        stored_numel = 0
    if rec["stype"] != "default":
        extra["stype"] = rec["stype"]
        extra["storage_shape"] = rec["storage_shape"]
        extra["aux"] = {n: {"dtype": d, "shape": s} for n, d, s, _ in rec["aux"]}
        stored_numel = rec["numel"]
    if rec.get("context") and rec["context"] != ("cpu", 0):
        extra["context"] = rec["context"]
    return TensorEntry(
        stored_name,
        name,
        rec["shape"],
        rec["dtype"],
        role,
        nbytes=rec["nbytes"],
        offset=rec["data"],
        stored_numel=stored_numel,
        extra=extra,
    )


def examine(source: Source, variant: str, res: object) -> None:
    """``scan``: an NDArray file holds arrays only (nothing a loader runs); its records are
    walked as the listing walks them, so a damaged file is an error."""
    res.kind = "mxnet"  # type: ignore[attr-defined]
    open_checkpoint(source, variant)


ADAPTER = Adapter(
    name=NAME,
    description="MXNet NDArray file: mx.nd.save, Gluon save_parameters/export, Sockeye 1/2 params",
    extensions=(".params", ".nd"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,  # type: ignore[arg-type]
    default_variant="list",
)
