"""GGUF (llama.cpp) v2 and v3: the header, every metadata key/value and the tensor infos; no
tensor bytes, and the ``gguf`` package is never imported.

Layout (ggml ``docs/gguf.md``, ``ggml/src/gguf.cpp``, gguf-py ``gguf_reader.py``)::

    magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count          (v1: u32 counts, refused)
    kv_count x  (string key | u32 value type | value)
    tensor_count x  (string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset)
    padding to ``general.alignment`` (u32, a power of two; default 32) | data section

A string is ``u64 length | UTF-8 bytes``; an array is ``u32 item type | u64 count | items`` (items
may be arrays: gguf-py reads and writes nested arrays, llama.cpp's C loader refuses them). A file
whose version reads as 0 in its low 16 bits is big-endian (gguf-py's test, ``byte_order 'S'``).

Shapes are listed in NumPy order: GGUF stores ``ne`` with ``ne[0]`` the fastest-varying
dimension, so the listed shape is ``reversed(ne)``, the shape of ``GGUFReader``'s ``tensor.data``
for float types (``ReaderTensor.shape`` is ``ne`` itself). A block-quantized tensor lists its
logical shape in elements (not the byte shape ``GGUFReader`` gives its ``data``) and the
ggml type name as its dtype (``q8_0``, ``q4_K``, ``iq2_xxs``, ``mxfp4``: see
:data:`inspector.adapters.dtypes.BLOCKS`); float and integer types take the canonical names
(``F16`` is ``float16``). Each tensor's ``offset`` is absolute (data section start + its offset),
so values are plain byte ranges.

The key/values are the checkpoint's hyperparameters, under their own keys
(``general.architecture``, ``llama.block_count``, ...). An array longer than :data:`LONG_ARRAY`
items (a vocabulary, its scores and merges) is summarised as ``{"array": item type, "length": n,
"head": first items}``; every item is still read and bounds-checked.

Hostile input: every count and length is checked against the bytes left in the file before
anything is allocated, nesting is bounded, and every fault is one :class:`FormatError`.
"""

from __future__ import annotations

import math
import re
import struct

from .dtypes import BLOCKS
from .errors import FormatError
from .model import Checkpoint, Finding, Role, TensorEntry
from .registry import Adapter
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

    from .security.examination import FileResult

NAME = "gguf"
MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY = "general.alignment"
LONG_ARRAY = 256  # arrays longer than this are summarised in the hyperparameters
HEAD_ITEMS = 8
MAX_DEPTH = 16  # nested arrays (gguf-py writes them; llama.cpp refuses any)
GGML_MAX_DIMS = 4  # llama.cpp refuses more dimensions (gguf.cpp)
FIRST_READ = 1 << 20  # the header is read in growing slices from here

# ggml type number -> (gguf-py GGMLQuantizationType name, dtype listed). Source: gguf-py 0.19.0
# gguf/constants.py GGMLQuantizationType; block sizes in dtypes.BLOCKS (GGML_QUANT_SIZES).
GGML_TYPES: dict[int, tuple[str, str]] = {
    0: ("F32", "float32"),
    1: ("F16", "float16"),
    2: ("Q4_0", "q4_0"),
    3: ("Q4_1", "q4_1"),
    6: ("Q5_0", "q5_0"),
    7: ("Q5_1", "q5_1"),
    8: ("Q8_0", "q8_0"),
    9: ("Q8_1", "q8_1"),
    10: ("Q2_K", "q2_K"),
    11: ("Q3_K", "q3_K"),
    12: ("Q4_K", "q4_K"),
    13: ("Q5_K", "q5_K"),
    14: ("Q6_K", "q6_K"),
    15: ("Q8_K", "q8_K"),
    16: ("IQ2_XXS", "iq2_xxs"),
    17: ("IQ2_XS", "iq2_xs"),
    18: ("IQ3_XXS", "iq3_xxs"),
    19: ("IQ1_S", "iq1_s"),
    20: ("IQ4_NL", "iq4_nl"),
    21: ("IQ3_S", "iq3_s"),
    22: ("IQ2_S", "iq2_s"),
    23: ("IQ4_XS", "iq4_xs"),
    24: ("I8", "int8"),
    25: ("I16", "int16"),
    26: ("I32", "int32"),
    27: ("I64", "int64"),
    28: ("F64", "float64"),
    29: ("IQ1_M", "iq1_m"),
    30: ("BF16", "bfloat16"),
    34: ("TQ1_0", "tq1_0"),
    35: ("TQ2_0", "tq2_0"),
    39: ("MXFP4", "mxfp4"),
    40: ("NVFP4", "nvfp4"),
    41: ("Q1_0", "q1_0"),
}
# Type numbers ggml has retired (ggml.h: "support has been removed"), named in the error.
REMOVED_TYPES = {4: "Q4_2", 5: "Q4_3", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
                 36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8"}
_ITEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "int16": 2,
               "int32": 4, "int64": 8}

# GGUF value type -> (name, struct code); STRING (8) and ARRAY (9) are read by hand.
VALUE_TYPES: dict[int, tuple[str, str]] = {
    0: ("uint8", "B"), 1: ("int8", "b"), 2: ("uint16", "H"), 3: ("int16", "h"),
    4: ("uint32", "I"), 5: ("int32", "i"), 6: ("float32", "f"), 7: ("bool", "?"),
    10: ("uint64", "Q"), 11: ("int64", "q"), 12: ("float64", "d"),
}
STRING, ARRAY = 8, 9
TYPE_NAMES = {**{k: v[0] for k, v in VALUE_TYPES.items()}, STRING: "string", ARRAY: "array"}


def sniff(head: bytes, source: Source) -> str | None:
    """'file' for anything starting with the GGUF magic (a bad version gets the GGUF error)."""
    return "file" if head.startswith(MAGIC) else None


class _Cursor:
    """Sequential reads over the header: a buffer filled from the file in growing slices, so a
    header is read in a few calls whatever its size; every length is checked against the file."""

    __slots__ = ("f", "buf", "base", "pos", "size", "where")

    def __init__(self, f: BinaryIO, size: int, where: str) -> None:
        self.f, self.size, self.where = f, size, where
        self.buf = f.read(min(size, FIRST_READ))
        self.base = 0  # file offset of buf[0]
        self.pos = 0  # offset in buf

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def left(self) -> int:
        return self.size - self.offset

    def need(self, n: int, what: str) -> None:
        """Make ``n`` bytes available at the cursor, or raise naming ``what``."""
        if self.pos + n <= len(self.buf):
            return
        if n > self.left():
            raise FormatError(f"{what} needs {n} bytes at offset {self.offset}, but the file "
                              f"ends after {self.left()}", self.where)
        keep = self.buf[self.pos:]
        grow = min(self.left() - len(keep), max(n - len(keep), 2 * len(self.buf), FIRST_READ))
        self.f.seek(self.base + len(self.buf))
        more = self.f.read(grow)
        if len(more) != grow:
            raise FormatError(f"the file ended early while reading {what}", self.where)
        self.base += self.pos
        self.buf = keep + more
        self.pos = 0

    def unpack(self, fmt: struct.Struct, what: str) -> tuple:
        self.need(fmt.size, what)
        out = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return out

    def raw(self, n: int, what: str) -> bytes:
        self.need(n, what)
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out


class _Reader:
    """The header parser of one file (``order``: ``<`` or ``>``)."""

    def __init__(self, cur: _Cursor, order: str) -> None:
        self.cur = cur
        self.order = order
        self.u32 = struct.Struct(order + "I")
        self.u64 = struct.Struct(order + "Q")
        self.scalars = {t: struct.Struct(order + c) for t, (_, c) in VALUE_TYPES.items()}

    def string(self, what: str, strict: bool = False) -> str:
        cur = self.cur
        (n,) = cur.unpack(self.u64, what)
        if n > cur.left():
            raise FormatError(f"{what}: string length {n} runs past the end of the file "
                              f"({cur.left()} bytes left at offset {cur.offset - 8})", cur.where)
        raw = cur.raw(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            if strict:
                raise FormatError(f"{what} is not UTF-8 ({raw[:40]!r})", cur.where) from None
            return raw.decode("utf-8", "replace")

    def value(self, vtype: int, key: str, depth: int = 0) -> Any:
        scalar = self.scalars.get(vtype)
        if scalar is not None:
            return self.cur.unpack(scalar, f"value of {key!r}")[0]
        if vtype == STRING:
            return self.string(f"value of {key!r}")
        if vtype == ARRAY:
            return self.array(key, depth)
        raise FormatError(f"key {key!r} has unknown value type {vtype} (known: 0-12)",
                          self.cur.where, f"offset {self.cur.offset - 4}")

    def array(self, key: str, depth: int) -> Any:
        cur = self.cur
        if depth >= MAX_DEPTH:
            raise FormatError(f"key {key!r}: arrays nested deeper than {MAX_DEPTH}", cur.where)
        itype, n = cur.unpack(struct.Struct(self.order + "IQ"), f"array header of {key!r}")
        scalar = self.scalars.get(itype)
        least = scalar.size if scalar is not None else (8 if itype == STRING else 12)
        if itype not in TYPE_NAMES:
            raise FormatError(f"key {key!r}: array of unknown value type {itype}", cur.where,
                              f"offset {cur.offset - 12}")
        if n * least > cur.left():
            raise FormatError(f"key {key!r}: array of {n} {TYPE_NAMES[itype]} items needs at "
                              f"least {n * least} bytes, the file has {cur.left()} left",
                              cur.where, f"offset {cur.offset - 8}")
        if scalar is not None:
            raw = cur.raw(n * scalar.size, f"array {key!r}")
            items = list(struct.unpack(f"{self.order}{n}{scalar.format[-1]}", raw))
        elif itype == STRING and n > LONG_ARRAY:
            items = self._strings_head(n, key)
        else:
            items = [self.value(itype, key, depth + 1) for _ in range(n)]
        if n > LONG_ARRAY:
            return {"array": TYPE_NAMES[itype], "length": n, "head": items[:HEAD_ITEMS]}
        return items

    def _strings_head(self, n: int, key: str) -> list[str]:
        """A long string array: the first items decoded, the rest walked (bounds-checked; the
        cursor is asked for more bytes only when an item crosses its buffer's end)."""
        cur = self.cur
        head = [self.string(f"array {key!r}") for _ in range(min(n, HEAD_ITEMS))]
        unpack = self.u64.unpack_from
        buf, pos = cur.buf, cur.pos
        for _ in range(n - len(head)):
            if pos + 8 > len(buf):
                cur.pos = pos
                cur.need(8, f"array {key!r}")
                buf, pos = cur.buf, cur.pos
            (length,) = unpack(buf, pos)
            pos += 8 + length
            if pos > len(buf):
                cur.pos = pos - length
                if length > cur.left():
                    raise FormatError(f"array {key!r}: string length {length} runs past the "
                                      "end of the file", cur.where, f"offset {cur.offset - 8}")
                cur.need(length, f"array {key!r}")
                buf, pos = cur.buf, cur.pos + length
        cur.pos = pos
        return head


def read_header(source: Source) -> tuple[dict[str, Any], list[TensorEntry], dict[str, Any],
                                         list[Finding]]:
    """(key/values, tensors, format facts, findings) of a GGUF file."""
    where = source.where
    size = source.size
    with source.open() as f:
        cur = _Cursor(f, size, where)
        magic = cur.raw(4, "the magic")
        if magic != MAGIC:
            raise FormatError(f"not a GGUF file (magic {magic!r}, expected b'GGUF')", where)
        (version,) = cur.unpack(struct.Struct("<I"), "the version")
        order = "<"
        if version & 0xFFFF == 0:  # written on a machine of the other byte order
            order = ">"
            version = int.from_bytes(version.to_bytes(4, "little"), "big")
        if version == 1:
            raise FormatError("GGUF version 1 is not supported (llama.cpp and gguf-py read v2 "
                              "and v3 only)", where, "offset 4")
        if version not in VERSIONS:
            raise FormatError(f"GGUF version {version} is not supported (2 and 3 are)", where,
                              "offset 4")
        rd = _Reader(cur, order)
        n_tensors, n_kv = cur.unpack(struct.Struct(order + "QQ"), "the counts")
        if n_kv * 13 > cur.left():  # key length, one key byte, value type, one value byte
            raise FormatError(f"kv count {n_kv} cannot fit in the {cur.left()} bytes left",
                              where, "offset 16")
        if n_tensors * 24 > cur.left():  # name length, n_dims, type, offset
            raise FormatError(f"tensor count {n_tensors} cannot fit in the {cur.left()} bytes "
                              "left", where, "offset 8")
        kv, types = _read_kv(rd, n_kv)
        alignment = _alignment(kv, types, where)
        infos = _read_infos(rd, n_tensors)
        info_end = cur.offset
    data_start = -(-info_end // alignment) * alignment
    tensors, findings = _entries(infos, data_start, alignment, size, where)
    if any(t == ARRAY for t in types.values()) and _nested(kv):
        findings.append(Finding("warning", "nested arrays in the metadata: gguf-py reads them, "
                                "llama.cpp's loader refuses the file", "metadata"))
    meta = {"gguf_version": version, "alignment": alignment, "data_offset": data_start,
            "tensor_count": n_tensors, "kv_count": n_kv,
            "kv_types": {k: TYPE_NAMES[t] for k, t in types.items()}}
    if order == ">":
        meta["byteorder"] = "big"
    arch = kv.get("general.architecture")
    if isinstance(arch, str):
        meta["architecture"] = arch
    return kv, tensors, meta, findings


def _read_kv(rd: _Reader, n: int) -> tuple[dict[str, Any], dict[str, int]]:
    cur = rd.cur
    kv: dict[str, Any] = {}
    types: dict[str, int] = {}
    for i in range(n):
        key = rd.string(f"key {i}", strict=True)
        if key in kv:
            raise FormatError(f"duplicate key {key!r}", cur.where, f"offset {cur.offset}")
        (vtype,) = cur.unpack(rd.u32, f"value type of {key!r}")
        kv[key] = rd.value(vtype, key)
        types[key] = vtype
    return kv, types


def _alignment(kv: dict[str, Any], types: dict[str, int], where: str) -> int:
    if ALIGNMENT_KEY not in kv:
        return DEFAULT_ALIGNMENT
    value = kv[ALIGNMENT_KEY]
    if types[ALIGNMENT_KEY] != 4:
        got = TYPE_NAMES[types[ALIGNMENT_KEY]]
        raise FormatError(f"{ALIGNMENT_KEY} must be a uint32, not {got}", where)
    if value == 0 or value & (value - 1):
        raise FormatError(f"{ALIGNMENT_KEY} {value} is not a power of two", where)
    return value


def _read_infos(rd: _Reader, n: int) -> list[tuple[str, tuple[int, ...], int, int, int]]:
    """(name, ne, ggml type, offset, where in the file) per tensor info. The hot loop of a
    listing: it works on the cursor's buffer directly and asks the cursor for more only when a
    field would cross the buffer's end (which also checks it against the file)."""
    cur = rd.cur
    out = []
    u32 = rd.u32.unpack_from
    u64 = rd.u64.unpack_from
    order = rd.order
    # n_dims -> one unpack of the dims, the ggml type and the offset
    infos = {k: struct.Struct(f"{order}{k}QIQ").unpack_from for k in range(5)}
    buf, pos = cur.buf, cur.pos
    blen = len(buf)
    for i in range(n):
        at = cur.base + pos
        if pos + 8 > blen:
            cur.pos = pos
            cur.need(8, f"tensor {i}'s name")
            buf, pos = cur.buf, cur.pos
            blen = len(buf)
        (length,) = u64(buf, pos)
        if pos + 12 + length > blen:
            cur.pos = pos
            if length > cur.left():
                raise FormatError(f"tensor {i}'s name: string length {length} runs past the end "
                                  "of the file", cur.where, f"offset {at}")
            cur.need(12 + length, f"tensor {i}'s name")
            buf, pos = cur.buf, cur.pos
            blen = len(buf)
        raw = buf[pos + 8:pos + 8 + length]
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"tensor {i}'s name is not UTF-8 ({raw[:40]!r})", cur.where,
                              f"offset {at}") from None
        pos += 8 + length
        (n_dims,) = u32(buf, pos)
        pos += 4
        need = 8 * n_dims + 12
        if pos + need > blen:
            cur.pos = pos
            if need > cur.left():
                raise FormatError(f"tensor {name!r}: n_dims {n_dims} runs past the end of the "
                                  "file", cur.where, f"offset {cur.offset - 4}")
            cur.need(need, f"tensor {name!r}'s dims")
            buf, pos = cur.buf, cur.pos
            blen = len(buf)
        unpack = infos.get(n_dims)
        if unpack is None:
            unpack = struct.Struct(f"{order}{n_dims}QIQ").unpack_from
        got = unpack(buf, pos)
        pos += need
        out.append((name, got[:-2], got[-2], got[-1], at))
    cur.pos = pos
    return out


# ggml type number -> (type name, dtype, elements per block, bytes per block)
_TYPE_INFO = {k: (t, d, *(BLOCKS.get(d) or (1, _ITEM_BYTES[d])))
              for k, (t, d) in GGML_TYPES.items()}
_INT64 = 1 << 63


def _entries(infos: list, data_start: int, alignment: int, size: int,
             where: str) -> tuple[list[TensorEntry], list[Finding]]:
    tensors: list[TensorEntry] = []
    findings: list[Finding] = []
    seen: set[str] = set()
    expect = 0  # where llama.cpp expects the next tensor: packed in order, each padded
    unexpected: list[str] = []
    parameter = Role.PARAMETER
    entry = TensorEntry
    prod = math.prod
    for name, ne, gtype, offset, at in infos:
        info = _TYPE_INFO.get(gtype)
        if info is None:
            removed = REMOVED_TYPES.get(gtype)
            why = (f"ggml type {gtype} ({removed}) was removed from ggml and GGUF"
                   if removed else f"unknown ggml type {gtype}")
            raise FormatError(f"tensor {name!r}: {why}", where, f"offset {at}")
        tname, dtype, block, type_size = info
        numel = prod(ne)
        if numel >= _INT64 or not numel and ne and max(ne) >= _INT64:
            raise FormatError(f"tensor {name!r}: dims {list(ne)} exceed int64", where,
                              f"offset {at}")
        if block != 1 and (ne[0] if ne else 1) % block:  # ggml's missing dimensions are 1
            raise FormatError(f"tensor {name!r}: {ne[0] if ne else 1} elements per row of "
                              f"{tname} is not a multiple of its block size {block}", where,
                              f"offset {at}")
        nbytes = numel * type_size // block
        start = data_start + offset
        if start + nbytes > size:
            raise FormatError(f"tensor {name!r}: its {nbytes} bytes at offset {start} run past "
                              f"the end of the file ({size} bytes)", where)
        if offset != expect:
            unexpected.append(name)
        expect = offset + nbytes + (-(offset + nbytes) % alignment)
        if len(ne) > GGML_MAX_DIMS:
            findings.append(Finding("warning", f"tensor {name!r} has {len(ne)} dimensions: "
                                    f"llama.cpp's loader refuses more than {GGML_MAX_DIMS}", name))
        seen.add(name)
        tensors.append(entry(name, name, ne[::-1], dtype, parameter, nbytes=nbytes,
                             offset=start))
    if len(seen) != len(tensors):
        names: set[str] = set()
        for name, _, _, _, at in infos:
            if name in names:
                raise FormatError(f"duplicate tensor name {name!r}", where, f"offset {at}")
            names.add(name)
    if unexpected:
        findings.append(Finding(
            "warning", f"{len(unexpected)} tensor(s) not where llama.cpp's loader expects them "
            f"(in order, each padded to {alignment} bytes), e.g. {unexpected[0]!r}: llama.cpp "
            "refuses the file; gguf-py reads it", "tensor offsets"))
    return tensors, findings


def _nested(kv: dict[str, Any]) -> bool:
    for v in kv.values():
        if type(v) is list and any(type(x) is list or type(x) is dict for x in v):
            return True
        if type(v) is dict and v.get("array") == "array":
            return True
    return False


# llama.cpp's gguf-split / gguf-py's split writer: "<stem>-00001-of-00003.gguf" (llama_split_path)
SPLIT_NAME = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    """One GGUF file; the first split of a set (``split.no`` 0 of ``split.count``, named as
    llama.cpp names splits) opens with its other splits, as llama.cpp loads them: each entry
    of a later split carries its file name."""
    kv, tensors, meta, findings = read_header(source)
    findings += _template_findings(kv)
    paths = [source.where]
    count = kv.get("split.count")
    m = SPLIT_NAME.match(source.name)
    if isinstance(count, int) and count > 1 and kv.get("split.no") == 0 and m \
            and int(m["count"]) == count and int(m["no"]) == 1:
        shards = _splits(source, m["stem"], count, tensors, findings)
        paths += [s.where for s in shards]
        meta["shards"] = [source.name] + [s.name for s in shards]
        total = kv.get("split.tensors.count")
        if isinstance(total, int) and total != len(tensors):
            findings.append(Finding("warning", f"split.tensors.count says {total} tensors, the "
                                    f"{count} splits hold {len(tensors)}", "split.tensors.count"))
    return Checkpoint(paths=tuple(paths), format=NAME, tensors=tensors, metadata=meta,
                      hyperparameters=kv, findings=findings)


def _splits(source: Source, stem: str, count: int, tensors: list[TensorEntry],
            findings: list[Finding]) -> list[Source]:
    """Splits 2..count beside the first: their tensors appended (with their file) to
    ``tensors``; a missing or mismatched split is an error naming it."""
    where = source.where
    seen = {t.name for t in tensors}
    shards = []
    for i in range(2, count + 1):
        name = f"{stem}-{i:05d}-of-{count:05d}.gguf"
        shard = source.sibling(name)
        if not shard.is_file():
            raise FormatError(f"split {i} of {count} ({name}) is missing", where)
        skv, more, _, found = read_header(shard)
        if skv.get("split.no") != i - 1 or skv.get("split.count") != count:
            raise FormatError(f"{name} says split.no {skv.get('split.no')!r} of "
                              f"{skv.get('split.count')!r}, expected {i - 1} of {count}", where)
        for t in more:
            if t.name in seen:
                raise FormatError(f"tensor {t.name!r} is in two splits (again in {name})", where)
            seen.add(t.name)
            tensors.append(t.replace(file=name))
        findings += found
        shards.append(shard)
    return shards


CHAT_TEMPLATE = "tokenizer.chat_template"


def examine(source: Source, variant: str, result: FileResult) -> None:
    """``inspector scan``: the header walk of a listing (a bad file is an error). Neither
    llama.cpp's loader nor gguf-py runs anything from a GGUF file; a Jinja chat template
    (``tokenizer.chat_template[.name]``) is rendered by chat front-ends, llama-cpp-python
    before 0.2.72 outside Jinja's sandbox (CVE-2024-34359): examined for what leaves the
    sandbox (:mod:`.security.chat_template`)."""
    result.kind = NAME
    kv, _, _, _ = read_header(source)
    for level, text, key in _template_items(kv):
        result.add(level, text, key)


def _template_items(kv: dict[str, Any]) -> list[tuple[str, str, str]]:
    from .security.chat_template import examine_template

    out = []
    for key, value in kv.items():
        if (key == CHAT_TEMPLATE or key.startswith(CHAT_TEMPLATE + ".")) and isinstance(
                value, str):
            out += [(lv, text, key) for lv, text in examine_template(value)]
    return out


def _template_findings(kv: dict[str, Any]) -> list[Finding]:
    """A chat template that leaves the sandbox as a ``danger`` finding (every verb refuses)."""
    items = _template_items(kv)
    if not items:
        return []
    from .security.side_code import as_findings

    return as_findings(list(items))


ADAPTER = Adapter(
    name=NAME,
    description="GGUF v2/v3 (llama.cpp): metadata key/values and tensor infos",
    extensions=(".gguf",),
    sniff=sniff,
    open=open_checkpoint,
    default_variant="file",
    examine=examine,
    magic=(b"GGUF",),
)
