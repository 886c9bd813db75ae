"""ONNX models: the initializers of a ``ModelProto``, read from the protobuf wire format.

No ``onnx``, ``onnxruntime`` or ``protobuf``: a bounded wire-format reader (varints,
length-delimited fields, fixed32/64) walks ``ModelProto -> GraphProto -> TensorProto`` and
keeps only the structure. ``raw_data`` and the typed data fields are skipped by their length,
never read: a listing reads windows of the file around the message headers (small ones grow
while the structure is dense; a skipped blob resets them), so its cost grows with the number
of initializers and nodes, not with the bytes. Graphs inside node attributes (``If``, ``Loop``,
``Scan``), in model-local functions and in training info are walked too, with the nesting depth
bounded as protobuf's own parser bounds it.

Values (``stats``, ``diff --values``): ``raw_data`` (little-endian, as ONNX defines it) and a
single packed ``float_data``/``double_data`` run are plain byte ranges of the model file; tensors
in external data files are byte ranges of the file ``external_data.location`` names, which must
stay inside the model's directory (an absolute path or ``..`` is refused, as onnx refuses it);
the varint fields (``int32_data``, ``int64_data``, ``uint64_data``) are decoded as they are read.
"""

from __future__ import annotations

import gc
import io
import sys
from array import array
from types import MappingProxyType

from .dtypes import BITS
from .dtypes import nbytes as dtype_nbytes
from .errors import FormatError, InspectorError
from .model import ByteRange, Checkpoint, Finding, Role, Stream, TensorEntry
from .registry import Adapter, byte_ranges
from .source import Source, check_relative

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from contextlib import ExitStack
    from typing import Any

    from .security.examination import FileResult

NAME = "onnx"

# Field numbers, from onnx/onnx.proto (onnx/onnx, onnx/onnx.in.proto at f7546912, and the
# onnx.proto of onnx 1.23.2): message -> {field name: number}. The walk below uses them as
# literals (each with its name beside it); tests/test_onnx.py checks this table against the
# descriptors of onnx's own generated classes (fixtures/onnx/onnx_proto.json).
FIELDS: dict[str, dict[str, int]] = {
    "ModelProto": {"ir_version": 1, "producer_name": 2, "producer_version": 3, "domain": 4,
                   "model_version": 5, "doc_string": 6, "graph": 7, "opset_import": 8,
                   "metadata_props": 14, "training_info": 20, "functions": 25,
                   "configuration": 26},
    "GraphProto": {"node": 1, "name": 2, "initializer": 5, "doc_string": 10, "input": 11,
                   "output": 12, "value_info": 13, "quantization_annotation": 14,
                   "sparse_initializer": 15, "metadata_props": 16},
    "NodeProto": {"input": 1, "output": 2, "name": 3, "op_type": 4, "attribute": 5,
                  "doc_string": 6, "domain": 7, "overload": 8, "metadata_props": 9,
                  "device_configurations": 10},
    "AttributeProto": {"name": 1, "f": 2, "i": 3, "s": 4, "t": 5, "g": 6, "floats": 7,
                       "ints": 8, "strings": 9, "tensors": 10, "graphs": 11, "doc_string": 13,
                       "tp": 14, "type_protos": 15, "type": 20, "ref_attr_name": 21,
                       "sparse_tensor": 22, "sparse_tensors": 23},
    "TensorProto": {"dims": 1, "data_type": 2, "segment": 3, "float_data": 4, "int32_data": 5,
                    "string_data": 6, "int64_data": 7, "name": 8, "raw_data": 9,
                    "double_data": 10, "uint64_data": 11, "doc_string": 12,
                    "external_data": 13, "data_location": 14, "metadata_props": 16},
    "SparseTensorProto": {"values": 1, "indices": 2, "dims": 3},
    "FunctionProto": {"name": 1, "input": 4, "output": 5, "attribute": 6, "node": 7,
                      "doc_string": 8, "opset_import": 9, "domain": 10,
                      "attribute_proto": 11, "value_info": 12, "overload": 13,
                      "metadata_props": 14},
    "TrainingInfoProto": {"initialization": 1, "algorithm": 2},
    "ValueInfoProto": {"name": 1, "type": 2, "doc_string": 3},
    "TypeProto": {"tensor_type": 1, "sequence_type": 4, "map_type": 5, "opaque_type": 7,
                  "sparse_tensor_type": 8, "optional_type": 9, "denotation": 6},
    "TypeProto.Tensor": {"elem_type": 1, "shape": 2},
    "TensorShapeProto": {"dim": 1},
    "TensorShapeProto.Dimension": {"dim_value": 1, "dim_param": 2, "denotation": 3},
    "OperatorSetIdProto": {"domain": 1, "version": 2},
    "StringStringEntryProto": {"key": 1, "value": 2},
}

# TensorProto.DataType -> canonical dtype (onnx.proto, same source). STRING has no fixed size:
# listed, never decoded. INT4/UINT4/FLOAT4E2M1 pack two elements per byte, INT2/UINT2 four,
# the first in the least significant bits: the bit widths of dtypes.BITS count them so.
DTYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8_e4m3fn",
    18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4", 22: "int4",
    23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2",
    27: "float6_e2m3fn", 28: "float6_e3m2fn",  # packed 4 in 3 bytes: ceil(6 n / 8) bytes
}

# Which typed field holds a data type's elements when raw_data is not used (onnx.proto's
# comments on each field): a single packed run of fixed-width elements is a plain byte range.
_FIXED_FIELDS = {4: "float_data", 10: "double_data"}
_FIXED_DTYPES = {4: ("float32", "complex64"), 10: ("float64", "complex128")}
_VARINT_FIELDS = {5: "int32_data", 7: "int64_data", 11: "uint64_data"}
_DATA_FIELDS = {4, 5, 6, 7, 10, 11}
# dtype -> array typecode (unsigned: two's complement is taken by masking) for varint fields.
_VARINT_CODES = {"bool": "B", "uint8": "B", "int8": "B", "uint16": "H", "int16": "H",
                 "int32": "I", "uint32": "I", "int64": "Q", "uint64": "Q", "float16": "H",
                 "bfloat16": "H", "float8_e4m3fn": "B", "float8_e4m3fnuz": "B",
                 "float8_e5m2": "B", "float8_e5m2fnuz": "B", "float8_e8m0fnu": "B"}

# protobuf's parser stops at 100 nested messages (io::CodedInputStream's default recursion
# limit); a graph inside a node attribute is three messages deeper than its parent graph.
MAX_MESSAGE_DEPTH = 100
MAX_STRING = 1 << 20  # a name, key or value longer than this is refused, not allocated
MIN_WINDOW = 1 << 10  # bytes read after a skip
SMALL_MESSAGE = 4 << 10  # a message this small is read whole (raw data of tiny tensors too)
SCAN_MESSAGE = 64 << 10  # a message up to this size in the window is scanned into one list
MAX_WINDOW = 1 << 20  # read-ahead cap while the structure is dense
MAX_SPANS = 1 << 16  # unpacked typed data elements kept per tensor (packed runs: one each)
MAX_RANK = 1024  # numpy stops at 64 dimensions; more than this is a corrupt tensor
SNIFF_STEPS = 64  # top-level fields the sniff walks before it has seen the graph
_MASK64 = (1 << 64) - 1
_SIGN, _TWO64 = 1 << 63, 1 << 64
_RAW_DATA = MappingProxyType({"data": "raw_data"})  # the extra of most entries, shared

_MODEL_WIRE = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}
_GRAPH_WIRE = {1: 2, 2: 2, 5: 2, 10: 2, 11: 2, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2}


class _Wire:
    """Windowed reads of one protobuf file: ``buf`` holds the file's bytes from ``base``.
    Every length read from the file is checked against the end of its message before use."""

    __slots__ = ("view", "size", "where", "buf", "base", "step")

    def __init__(self, view: Any, size: int, where: str) -> None:
        self.view = view
        self.size = size
        self.where = where
        self.buf = b""
        self.base = 0
        self.step = MIN_WINDOW

    def fill(self, pos: int, need: int) -> None:
        """Make ``buf`` hold at least ``need`` bytes from ``pos`` (fewer at the end of file)."""
        if self.base <= pos <= self.base + len(self.buf):
            self.step = min(self.step * 4, MAX_WINDOW)  # dense structure: read further ahead
        else:
            self.step = MIN_WINDOW  # after a skip
        n = min(self.size - pos, max(need, self.step))
        self.buf = self.view[pos:pos + n]
        self.base = pos

    def bytes(self, pos: int, n: int) -> bytes:
        i = pos - self.base
        if i < 0 or i + n > len(self.buf):
            if n > MAX_WINDOW:
                return self.view[pos:pos + n]
            self.fill(pos, n)
            i = 0
        return self.buf[i:i + n]

    def text(self, pos: int, n: int, what: str) -> str:
        i = pos - self.base
        if 0 <= i and i + n <= len(self.buf):  # most names: inside the window
            return self.buf[i:i + n].decode("utf-8", "replace")
        if n > MAX_STRING:
            raise FormatError(f"{what} of {n} bytes is over the {MAX_STRING}-byte limit",
                              self.where, f"offset {pos}")
        return self.bytes(pos, n).decode("utf-8", "replace")

    def fault(self, message: str, pos: int) -> FormatError:
        return FormatError(message, self.where, f"offset {pos}")

    def fields(self, start: int, end: int, what: str) -> Iterable[tuple[int, int, int, int]]:
        """The fields of the message at ``[start, end)``: ``(number, wire type, a, b)`` with
        ``a`` the value of a varint, else the absolute offset of the value; ``b`` its length
        (8, 4, or the length-delimited field's). The caller reads, descends or skips. A message
        inside the window (or small enough to read whole) is scanned at once into a list;
        a longer one is walked field by field, its long fields skipped unread."""
        if end - start <= SCAN_MESSAGE and self.holds(start, end):
            return self._scan(self.buf, start - self.base, end - self.base, self.base, what)
        return self._walk(start, end, what)

    def holds(self, start: int, end: int) -> bool:
        """Whether the window holds ``[start, end)``, after reading it if it is small."""
        base = self.base
        if base <= start and end <= base + len(self.buf):
            return True
        if end - start <= SMALL_MESSAGE:
            self.fill(start, end - start)
            return True
        return False

    def _scan(self, buf: bytes, i: int, lim: int, base: int,
              what: str) -> list[tuple[int, int, int, int]]:
        """The fields of a message held in ``buf[i:lim]``: one tight loop, single-byte tags,
        values and lengths inline."""
        out = []
        append = out.append
        end = base + lim
        while i < lim:
            at = i
            key = buf[i]
            if key < 0x80:
                i += 1
            else:
                key, i = _varint(buf, i, lim, self, base + at, end, what)
            wire = key & 7
            if key < 8:
                raise self.fault(f"{what}: field number 0 (corrupt protobuf)", base + at)
            if wire == 2:
                n = buf[i] if i < lim else 0x80
                if n < 0x80:
                    i += 1
                else:
                    n, i = _varint(buf, i, lim, self, base + at, end, what)
                if n > lim - i:
                    raise self.fault(
                        f"{what}: field {key >> 3} of {n} bytes runs past the end of its "
                        f"message ({lim - i} bytes left{_eof(end, self.size)})", base + at)
                append((key >> 3, 2, base + i, n))
                i += n
            elif wire == 0:
                value = buf[i] if i < lim else 0x80
                if value < 0x80:
                    i += 1
                else:
                    value, i = _varint(buf, i, lim, self, base + at, end, what)
                append((key >> 3, 0, value, 0))
            else:
                pos = base + i
                self._fixed(key, pos, end, what, base + at)
                n = 8 if wire == 1 else 4
                i += n
                append((key >> 3, wire, pos, n))
        return out

    def _walk(self, start: int, end: int, what: str) -> Iterator[tuple[int, int, int, int]]:
        """The fields of a long message, read through the window as they come."""
        pos = start
        while pos < end:
            buf, base = self.buf, self.base  # a caller may have moved the window
            i = pos - base
            avail = len(buf) - i
            if i < 0 or (avail < 22 and avail < end - pos):
                self.fill(pos, 22)
                buf, base, i = self.buf, self.base, 0
                avail = len(buf)
            lim = i + (end - pos if end - pos < avail else avail)
            key = buf[i]
            if key < 0x80:
                i += 1
            else:
                key, i = _varint(buf, i, lim, self, pos, end, what)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise self.fault(f"{what}: field number 0 (corrupt protobuf)", pos)
            if wire == 2:
                n = buf[i] if i < lim else 0x80
                if n < 0x80:
                    i += 1
                else:
                    n, i = _varint(buf, i, lim, self, pos, end, what)
                at = base + i
                if n > end - at:
                    raise self.fault(
                        f"{what}: field {number} of {n} bytes runs past the end of its message "
                        f"({end - at} bytes left{_eof(end, self.size)})", pos)
                pos = at + n
                yield number, 2, at, n
            elif wire == 0:
                value, i = _varint(buf, i, lim, self, pos, end, what)
                pos = base + i
                yield number, 0, value, 0
            else:
                at = base + i
                self._fixed(key, at, end, what, pos)
                n = 8 if wire == 1 else 4
                pos = at + n
                yield number, wire, at, n

    def _fixed(self, key: int, at: int, end: int, what: str, pos: int) -> None:
        """Check a fixed-width field (wire type 1 or 5) fits its message; refuse the wire
        types ONNX never uses (groups, 6, 7)."""
        wire = key & 7
        if wire != 1 and wire != 5:
            raise self.fault(f"{what}: field {key >> 3} has wire type {wire}, which ONNX "
                             "messages do not use (corrupt protobuf)", pos)
        if (8 if wire == 1 else 4) > end - at:
            raise self.fault(f"{what}: fixed-width field {key >> 3} runs past the end of its "
                             f"message{_eof(end, self.size)}", pos)

    def packed_varints(self, at: int, n: int, what: str) -> list[int]:
        """The varints of a packed field (a short one: dims)."""
        if n > MAX_RANK * 10:
            raise self.fault(f"{what}: a packed field of {n} bytes (corrupt?)", at)
        buf = self.bytes(at, n)
        out, i = [], 0
        while i < n:
            value, i = _varint(buf, i, n, self, at, at + n, what)
            out.append(value)
        return out


def _eof(end: int, size: int) -> str:
    return "; the file is truncated" if end >= size else ""


def _varint(buf: bytes, i: int, lim: int, wire: _Wire, pos: int, end: int,
            what: str) -> tuple[int, int]:
    """The varint at ``buf[i]`` (before ``lim``: the end of its message or of the window,
    which holds at least the 22 bytes a tag and a length can take) and the index after it."""
    b = buf[i] if i < lim else 0x80
    if b < 0x80:
        return b, i + 1
    value, shift, j = 0, 0, i
    while True:
        if j >= lim:
            raise wire.fault(f"{what}: a varint runs past the end of its message"
                             f"{_eof(end, wire.size)}", pos)
        b = buf[j]
        value |= (b & 0x7F) << shift
        j += 1
        if b < 0x80:
            return value & _MASK64, j
        shift += 7
        if shift >= 70:
            raise wire.fault(f"{what}: a varint longer than 10 bytes (corrupt protobuf)", pos)


def _fast_node(buf: bytes, i: int, lim: int) -> tuple[int, int, int, int, list] | None:
    """A NodeProto in ``buf[i:lim]`` whose fields are all length-delimited with one-byte tags
    and lengths below 2**14 (every node an exporter writes): (op_type index, length, name
    index, length, attribute spans); None for anything else: the generic walk decides."""
    op_i = op_n = name_i = name_n = -1
    attrs = []
    while i < lim:
        key = buf[i]
        if key >= 0x80 or key & 7 != 2 or i + 1 >= lim:
            return None
        n = buf[i + 1]
        i += 2
        if n >= 0x80:
            if i >= lim or buf[i] >= 0x80:
                return None
            n = (n & 0x7F) | buf[i] << 7
            i += 1
        if n > lim - i:
            return None
        if key == 0x22:  # op_type (4)
            op_i, op_n = i, n
        elif key == 0x1A:  # name (3)
            name_i, name_n = i, n
        elif key == 0x2A:  # attribute (5)
            attrs.append((i, n))
        i += n
    if op_i < 0:
        return None
    return op_i, op_n, name_i, name_n, attrs


def _fast_tensor(buf: bytes, i: int, lim: int, base: int) -> _Tensor | None:
    """A TensorProto in ``buf[i:lim]`` holding only dims (unpacked), data_type, name and
    raw_data (every initializer an exporter writes inline), with short varints; None for
    anything else: the generic walk decides."""
    t = _Tensor()
    dims = t.dims
    while i < lim:
        key = buf[i]
        i += 1
        if key == 0x08 or key == 0x10:  # dims (1), data_type (2): varints
            v, shift = 0, 0
            while True:
                if i >= lim or shift > 56:
                    return None
                b = buf[i]
                i += 1
                v |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
            if v >= 1 << 31:  # a negative or huge dimension or type: the generic walk's
                return None
            if key == 0x08:
                if len(dims) == MAX_RANK:
                    return None
                dims.append(v)
            else:
                t.data_type = v
            continue
        if key != 0x42 and key != 0x4A:  # name (8), raw_data (9)
            return None
        n, shift = 0, 0
        while True:
            if i >= lim or shift > 56:
                return None
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        if n > lim - i:
            return None
        if key == 0x42:
            if n > MAX_STRING:
                return None
            t.name = buf[i:i + n].decode("utf-8", "replace")
        else:
            t.raw = (base + i, n)
        i += n
    return t


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


# -- the walk -----------------------------------------------------------------------------------


class _Tensor:
    """What a TensorProto says about itself (its data fields as spans, never read)."""

    __slots__ = ("name", "dims", "data_type", "raw", "typed", "external", "location", "segment",
                 "spans")

    def __init__(self) -> None:
        self.name = ""
        self.dims: list[int] = []
        self.data_type = 0
        self.raw: tuple[int, int] | None = None
        # (field, wire, a, b) of the typed data fields; external_data's (key, value) pairs:
        # a list once the generic walk finds one (most tensors have neither)
        self.typed: list[tuple[int, int, int, int]] | tuple[()] = ()
        self.external: list[tuple[str, str]] | tuple[()] = ()
        self.location = 0
        self.segment = False
        self.spans = 0  # typed data fields seen (kept: the first MAX_SPANS)


class _Walk:
    """One pass over a model: its initializers (graph, sparse, subgraphs), the model's and the
    main graph's facts, node and op counts."""

    def __init__(self, wire: _Wire) -> None:
        self.w = wire
        self.tensors: list[tuple[_Tensor, str, _Tensor | None, list[int] | None]] = []
        self.nodes = 0
        self.ops: dict[str, int] = {}
        self.subgraphs = 0
        self.model: dict[str, Any] = {}
        self.graph: dict[str, Any] = {}

    # ModelProto
    def model_proto(self) -> None:
        w, model = self.w, self.model
        opsets: dict[str, int] = {}
        props: dict[str, str] = {}
        functions = 0
        for number, wire, a, n in w.fields(0, w.size, "ModelProto"):
            if number == 1 and wire == 0:
                model["ir_version"] = _signed(a)
            elif number in (2, 3, 4) and wire == 2:
                key = ("producer_name", "producer_version", "domain")[number - 2]
                model[key] = w.text(a, n, key)
            elif number == 5 and wire == 0:
                model["model_version"] = _signed(a)
            elif number == 7 and wire == 2:
                self.graph_proto(a, a + n, "", 2, top=True)
            elif number == 8 and wire == 2:
                domain, version = self.opset(a, n)
                opsets[domain or "ai.onnx"] = version
            elif number == 14 and wire == 2:
                k, v = self.entry(a, n, "metadata_props")
                props[k] = v
            elif number == 20 and wire == 2:
                for f, wt, b, m in w.fields(a, a + n, "TrainingInfoProto"):
                    if f in (1, 2) and wt == 2:
                        part = ("initialization", "algorithm")[f - 1]
                        self.graph_proto(b, b + m, f"training_info.{part}/", 3)
            elif number == 25 and wire == 2:
                functions += 1
                self.function_proto(a, a + n)
        if "ir_version" in model:  # first, as onnx.proto lists it
            ordered = {"ir_version": model.pop("ir_version"), **model}
            model.clear()
            model.update(ordered)
        model["opset_import"] = opsets
        if props:
            model["metadata_props"] = props
        if functions:
            model["functions"] = functions

    def opset(self, a: int, n: int) -> tuple[str, int]:
        domain, version = "", 0
        for f, wt, b, m in self.w.fields(a, a + n, "OperatorSetIdProto"):
            if f == 1 and wt == 2:
                domain = self.w.text(b, m, "opset domain")
            elif f == 2 and wt == 0:
                version = _signed(b)
        return domain, version

    def entry(self, a: int, n: int, what: str) -> tuple[str, str]:
        key = value = ""
        for f, wt, b, m in self.w.fields(a, a + n, what):
            if f == 1 and wt == 2:
                key = self.w.text(b, m, f"{what} key")
            elif f == 2 and wt == 2:
                value = self.w.text(b, m, f"{what} value")
        return key, value

    # GraphProto
    def graph_proto(self, start: int, end: int, path: str, depth: int, top: bool = False) -> None:
        """The graph's initializers, then its sparse initializers, then those of the graphs in
        its nodes' attributes (depth first, in node order: the order onnx's loader gives)."""
        if depth > MAX_MESSAGE_DEPTH:
            raise self.w.fault(f"messages nested more than {MAX_MESSAGE_DEPTH} deep "
                               "(protobuf's own limit)", start)
        w = self.w
        inputs: list[dict[str, Any]] = []
        outputs: list[dict[str, Any]] = []
        sparse: list[tuple[int, int]] = []
        subgraphs: list[tuple[int, int, str]] = []
        name = None
        nodes = 0
        for number, wire, a, n in w.fields(start, end, "GraphProto"):
            if wire != 2:
                continue
            if number == 5:
                self.tensors.append((self.tensor_proto(a, a + n, depth + 1), path, None, None))
            elif number == 1:
                nodes += 1
                self.node_proto(a, a + n, path, subgraphs)
            elif number == 15:
                sparse.append((a, n))
            elif not top:
                continue
            elif number == 2:
                name = w.text(a, n, "graph name")
            elif number in (11, 12):
                (inputs if number == 11 else outputs).append(self.value_info(a, n, depth + 1))
        for a, n in sparse:
            self.sparse_proto(a, a + n, path, depth + 1)
        if top:
            if name is not None:
                self.graph["name"] = name
            self.graph["inputs"] = inputs
            self.graph["outputs"] = outputs
            self.graph["nodes"] = nodes
        for a, n, label in subgraphs:  # graph > node > attribute > graph
            self.graph_proto(a, a + n, label, depth + 3)

    def node_proto(self, start: int, end: int, path: str,
                   subgraphs: list[tuple[int, int, str]]) -> None:
        """Counts the node's op; adds the graphs in its attributes to ``subgraphs``."""
        w = self.w
        self.nodes += 1
        if w.holds(start, end):
            fast = _fast_node(w.buf, start - w.base, end - w.base)
            if fast is not None:
                base = w.base
                op = w.buf[fast[0]:fast[0] + fast[1]].decode("utf-8", "replace")
                ops = self.ops
                ops[op] = ops.get(op, 0) + 1
                if fast[4]:
                    label = w.text(base + fast[2], fast[3], "node name") if fast[2] >= 0 else ""
                    for a, n in fast[4]:
                        self.attribute(base + a, base + a + n, f"{path}{label or op}/",
                                       subgraphs)
                return
        op = ""
        name = None
        attrs = []
        for number, wire, a, n in w.fields(start, end, "NodeProto"):
            if wire != 2:
                continue
            if number == 4:
                op = w.text(a, n, "op_type")
            elif number == 3:
                name = (a, n)
            elif number == 5:
                attrs.append((a, n))
        ops = self.ops
        ops[op] = ops.get(op, 0) + 1
        if attrs:
            label = w.text(*name, "node name") if name else ""
            for a, n in attrs:
                self.attribute(a, a + n, f"{path}{label or op}/", subgraphs)

    def attribute(self, start: int, end: int, path: str,
                  subgraphs: list[tuple[int, int, str]]) -> None:
        w = self.w
        graphs = []
        name = ""
        for number, wire, a, n in w.fields(start, end, "AttributeProto"):
            if wire != 2:
                continue
            if number == 1:
                name = w.text(a, n, "attribute name")
            elif number in (6, 11):
                graphs.append((a, n))
        for i, (a, n) in enumerate(graphs):
            self.subgraphs += 1
            label = f"{path}{name}" + (f"[{i}]" if len(graphs) > 1 else "")
            subgraphs.append((a, n, label + "/"))

    def function_proto(self, start: int, end: int) -> None:
        w = self.w
        name = ""
        subgraphs: list[tuple[int, int, str]] = []
        for number, wire, a, n in w.fields(start, end, "FunctionProto"):
            if number == 1 and wire == 2:
                name = w.text(a, n, "function name")
            elif number == 7 and wire == 2:
                self.node_proto(a, a + n, "", subgraphs)
        for a, n, label in subgraphs:  # model > function > node > attribute > graph
            self.graph_proto(a, a + n, f"function {name}/{label}", 5)

    def tensor_proto(self, start: int, end: int, depth: int) -> _Tensor:
        if depth > MAX_MESSAGE_DEPTH:
            raise self.w.fault(f"messages nested more than {MAX_MESSAGE_DEPTH} deep "
                               "(protobuf's own limit)", start)
        w = self.w
        if w.holds(start, end):
            t = _fast_tensor(w.buf, start - w.base, end - w.base, w.base)
            if t is not None:
                return t
        t = _Tensor()
        dims = t.dims
        for number, wire, a, n in w.fields(start, end, "TensorProto"):
            if number == 1:
                if wire == 0:
                    dims.append(a if a < _SIGN else a - _TWO64)
                elif wire == 2:
                    dims.extend(_signed(v) for v in w.packed_varints(a, n, "dims"))
                if len(dims) > MAX_RANK:
                    raise w.fault(f"a tensor with over {MAX_RANK} dimensions (corrupt?)", a)
            elif number == 2 and wire == 0:
                t.data_type = _signed(a) & 0xFFFFFFFF
            elif number == 8 and wire == 2:
                t.name = w.text(a, n, "tensor name")
            elif number == 9 and wire == 2:
                t.raw = (a, n)
            elif number in _DATA_FIELDS:
                # unpacked elements are one field each: keep a bounded number of them
                t.spans += 1
                if t.spans <= MAX_SPANS:
                    if not t.typed:
                        t.typed = []
                    t.typed.append((number, wire, a, n))
            elif number == 13 and wire == 2:
                if not t.external:
                    t.external = []
                t.external.append(self.entry(a, n, "external_data"))
            elif number == 14 and wire == 0:
                t.location = a
            elif number == 3:
                t.segment = True
        return t

    def sparse_proto(self, start: int, end: int, path: str, depth: int) -> None:
        values = indices = None
        dims: list[int] = []
        for number, wire, a, n in self.w.fields(start, end, "SparseTensorProto"):
            if number == 1 and wire == 2:
                values = self.tensor_proto(a, a + n, depth + 1)
            elif number == 2 and wire == 2:
                indices = self.tensor_proto(a, a + n, depth + 1)
            elif number == 3:
                if wire == 0:
                    dims.append(_signed(a))
                elif wire == 2:
                    dims.extend(_signed(v) for v in self.w.packed_varints(a, n, "dims"))
                if len(dims) > MAX_RANK:
                    raise self.w.fault(f"a sparse tensor with over {MAX_RANK} dimensions "
                                       "(corrupt?)", a)
        if values is None:
            raise self.w.fault("a sparse initializer without its values tensor", start)
        self.tensors.append((values, path, indices, dims))

    def value_info(self, a: int, n: int, depth: int) -> dict[str, Any]:
        w = self.w
        out: dict[str, Any] = {"name": ""}
        for f, wt, b, m in w.fields(a, a + n, "ValueInfoProto"):
            if f == 1 and wt == 2:
                out["name"] = w.text(b, m, "value name")
            elif f == 2 and wt == 2:
                out.update(self.type_proto(b, m, depth + 1))
        return out

    def type_proto(self, a: int, n: int, depth: int) -> dict[str, Any]:
        """A value's type: ``dtype`` and ``shape`` (ints, symbolic names, None: unknown) of a
        tensor; the kind and element type of a sequence, map, optional, sparse tensor."""
        if depth > MAX_MESSAGE_DEPTH:
            raise self.w.fault(f"messages nested more than {MAX_MESSAGE_DEPTH} deep "
                               "(protobuf's own limit)", a)
        w = self.w
        kinds = {1: "tensor", 4: "sequence", 5: "map", 7: "opaque", 8: "sparse_tensor",
                 9: "optional"}
        for f, wt, b, m in w.fields(a, a + n, "TypeProto"):
            if wt != 2 or f not in kinds:
                continue
            if f in (1, 8):
                out: dict[str, Any] = {} if f == 1 else {"kind": "sparse_tensor"}
                for g, gt, c, k in w.fields(b, b + m, "TypeProto.Tensor"):
                    if g == 1 and gt == 0:
                        out["dtype"] = DTYPES.get(c, f"onnx type {c}")
                    elif g == 2 and gt == 2:
                        out["shape"] = self.shape(c, k)
                return out
            if f in (4, 9):
                inner = {}
                for g, gt, c, k in w.fields(b, b + m, "TypeProto"):
                    if g == 1 and gt == 2:
                        inner = self.type_proto(c, k, depth + 2)
                return {"kind": kinds[f], "element": inner}
            return {"kind": kinds[f]}
        return {}

    def shape(self, a: int, n: int) -> list[Any]:
        w = self.w
        dims: list[Any] = []
        for f, wt, b, m in w.fields(a, a + n, "TensorShapeProto"):
            if f == 1 and wt == 2:
                dim: Any = None
                for g, gt, c, k in w.fields(b, b + m, "Dimension"):
                    if g == 1 and gt == 0:
                        dim = _signed(c)
                    elif g == 2 and gt == 2:
                        dim = w.text(c, k, "dim_param")
                dims.append(dim)
                if len(dims) > MAX_RANK:
                    raise w.fault(f"a shape with over {MAX_RANK} dimensions (corrupt?)", b)
        return dims


# -- records ------------------------------------------------------------------------------------


class _Values:
    """How each entry's values are read where they are not a plain byte range."""

    def __init__(self) -> None:
        self.varints: dict[str, tuple[int, list[tuple[int, int, int, int]]]] = {}
        self.why: dict[str, str] = {}


def _entries(walk: _Walk, source: Source, findings: list[Finding],
             values: _Values) -> tuple[list[TensorEntry], list[str]]:
    where = source.where
    out: list[TensorEntry] = []
    taken: set[str] = set()
    files: dict[str, int | None] = {}  # external file -> its size (None: missing)
    parameter = Role.PARAMETER
    for t, path, indices, sparse_dims in walk.tensors:
        dtype = DTYPES.get(t.data_type)
        raw, name, dims = t.raw, t.name, t.dims
        if raw is not None and not path and sparse_dims is None and t.location != 1 \
                and len(dims) <= MAX_RANK \
                and name not in taken and name and dtype in BITS and not t.segment \
                and (not dims or min(dims) >= 0):
            # the common case: a named tensor of a sized type in raw_data
            size = (_prod(dims) * BITS[dtype] + 7) // 8
            if raw[1] == size:
                taken.add(name)
                out.append(TensorEntry(name, name, tuple(dims), dtype, parameter, nbytes=size,
                                       offset=raw[0], extra=_RAW_DATA))
                continue
        if dtype is None:
            dtype = f"onnx_type_{t.data_type}"
            findings.append(Finding("warning", f"initializer {t.name!r}: data type "
                                    f"{t.data_type} is not one onnx.proto defines", path or None,
                                    t.name))
        dims = t.dims if sparse_dims is None else sparse_dims
        if len(dims) > MAX_RANK:
            raise FormatError(f"initializer {t.name!r}: {len(dims)} dimensions (corrupt?)", where)
        if any(d < 0 for d in dims):
            raise FormatError(f"initializer {t.name!r}: negative dimension in {dims}", where)
        name = t.name
        if name in taken or not name:
            name = f"{path}{t.name}" if path else t.name
            k = 1
            while name in taken or not name:
                name, k = f"{path}{t.name}#{k}", k + 1
        taken.add(name)
        extra: dict[str, Any] = {}
        if path:
            extra["graph"] = path.rstrip("/")
        shape = tuple(dims)
        entry_nbytes = dtype_nbytes(dtype, _prod(t.dims))
        offset = file = None
        stored_numel = None
        if sparse_dims is not None:
            stored_numel = _prod(t.dims)
            extra["layout"] = "sparse"
            extra["values"] = {"shape": list(t.dims), "dtype": dtype}
            if indices is not None:
                idt = DTYPES.get(indices.data_type, f"onnx_type_{indices.data_type}")
                extra["indices"] = {"shape": list(indices.dims), "dtype": idt}
                inb = dtype_nbytes(idt, _prod(indices.dims))
                entry_nbytes = None if entry_nbytes is None or inb is None else entry_nbytes + inb
            for part in (t, indices):
                if part is not None and part.location == 1:
                    _safe_location(part, where)
            values.why[name] = "sparse initializer"
        else:
            offset, file, why = _locate(t, dtype, entry_nbytes, name, source, files, extra,
                                        values, findings, path)
            if why:
                values.why[name] = why
        out.append(TensorEntry(t.name, name, shape, dtype, parameter, nbytes=entry_nbytes,
                               offset=offset, file=file, stored_numel=stored_numel,
                               extra=extra or None))
    return out, list(files)


def _prod(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _locate(t: _Tensor, dtype: str, size: int | None, name: str, source: Source,
            files: dict[str, int | None], extra: dict[str, Any], values: _Values,
            findings: list[Finding], path: str) -> tuple[int | None, str | None, str]:
    """(offset, external file, why values are unavailable) of one dense initializer."""
    if t.segment:
        extra["segment"] = True
        return None, None, "a segment of a larger tensor (TensorProto.segment)"
    if t.spans > MAX_SPANS:
        extra["data"] = "unpacked"
        return None, None, f"{t.spans} unpacked data fields (over {MAX_SPANS})"
    if t.location == 1:
        return _external(t, size, name, source, files, extra, findings, path)
    if dtype == "string":
        extra["data"] = "string_data"
        return None, None, "string tensor"
    if t.raw is not None:
        at, n = t.raw
        extra["data"] = "raw_data"
        if size is not None and n != size:
            findings.append(Finding("warning", f"initializer {t.name!r}: raw_data holds {n} "
                                    f"bytes, its shape and type need {size}", path or None,
                                    t.name))
            return None, None, f"raw_data holds {n} bytes, not {size}"
        return at, None, ""
    if not t.typed:
        if size == 0:
            return None, None, ""
        extra["data"] = "none"
        findings.append(Finding("warning", f"initializer {t.name!r}: no data field",
                                path or None, t.name))
        return None, None, "no data field"
    fields = {f for f, _, _, _ in t.typed}
    number = t.typed[0][0]
    label = _FIXED_FIELDS.get(number) or _VARINT_FIELDS.get(number, "string_data")
    extra["data"] = label
    if len(fields) > 1:
        return None, None, "several typed data fields"
    if number in _FIXED_FIELDS:
        (_, wire, at, n), *more = t.typed
        if not more and wire == 2 and n == size and dtype in _FIXED_DTYPES[number]:
            return at, None, ""
        return None, None, f"{label} not stored as one packed run of {size} bytes"
    if number in _VARINT_FIELDS and dtype in _VARINT_CODES:
        values.varints[name] = (number, t.typed)
        return None, None, ""
    return None, None, f"{label} for {dtype}"


def _external(t: _Tensor, size: int | None, name: str, source: Source,
              files: dict[str, int | None], extra: dict[str, Any], findings: list[Finding],
              path: str) -> tuple[int | None, str | None, str]:
    where = source.where
    info = dict(t.external)
    location = info.get("location")
    if not location:
        findings.append(Finding("warning", f"initializer {t.name!r}: external data without a "
                                "location", path or None, t.name))
        return None, None, "external data without a location"
    _safe_location(t, where)
    numbers = {}
    for key in ("offset", "length"):
        text = info.get(key)
        if text is None:
            continue
        if not (text.isascii() and text.isdigit()) or len(text) > 20:
            raise FormatError(f"initializer {t.name!r}: external data {key} {text!r} is not "
                              "a non-negative integer", where)
        numbers[key] = int(text)
    offset = numbers.get("offset", 0)
    extra["data"] = "external"
    extra["external"] = {"location": location, **numbers}
    if location not in files:
        files[location] = _file_size(source, location)
    file_size = files[location]
    if file_size is None:
        findings.append(Finding("warning", f"initializer {t.name!r}: external data file "
                                f"{location!r} is missing", path or None, t.name))
        return None, None, f"external data file {location!r} is missing"
    length = numbers.get("length")
    if length is None and size is not None:
        length = size
    if length is not None and offset + length > file_size:
        findings.append(Finding("warning", f"initializer {t.name!r}: external data "
                                f"{offset}+{length} runs past the end of {location!r} "
                                f"({file_size} bytes)", path or None, t.name))
        return None, None, f"its bytes run past the end of {location!r}"
    if size is not None and "length" in numbers and numbers["length"] != size:
        findings.append(Finding("warning", f"initializer {t.name!r}: external data length "
                                f"{numbers['length']}, its shape and type need {size}",
                                path or None, t.name))
        return None, None, f"external length {numbers['length']}, not {size}"
    return offset, location, ""


def _safe_location(t: _Tensor, where: str) -> None:
    """Refuse an external data location that is not a plain relative path inside the model's
    directory (absolute, ``..``, backslashes): onnx refuses them too (its C++
    ``_open_external_data`` checks), and a listing must never point a reader outside."""
    location = dict(t.external).get("location")
    if location is None:
        return
    try:
        check_relative(location, where)
    except FormatError:
        raise FormatError(f"initializer {t.name!r}: external data location {location!r} is "
                          "not a relative path inside the model's directory: refused",
                          where) from None


def _file_size(source: Source, location: str) -> int | None:
    try:
        other = source.sibling(location)
    except FormatError:
        raise FormatError(f"external data location {location!r} resolves outside the model's "
                          "directory: refused", source.where) from None
    try:
        if not other.is_file():
            return None
        return other.size
    except InspectorError:
        return None


class _Decoded(io.RawIOBase):
    """The elements of varint data fields as little-endian bytes of ``code``, decoded from
    the file a bounded block at a time as they are read."""

    def __init__(self, source: Source, spans: list[tuple[int, int, int, int]], code: str) -> None:
        self.source = source
        self.spans = iter(spans)
        self.code = code
        self.mask = (1 << (8 * array(code).itemsize)) - 1
        self.pending = b""
        self.pos = self.end = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        n = -1 if n is None else n
        out = [self.pending]
        have = len(self.pending)
        while n < 0 or have < n:
            chunk = self._next()
            if chunk is None:
                break
            out.append(chunk)
            have += len(chunk)
        data = b"".join(out)
        if n < 0:
            n = len(data)
        self.pending = data[n:]
        return data[:n]

    def _next(self) -> bytes | None:
        where = self.source.where
        while self.pos >= self.end:
            span = next(self.spans, None)
            if span is None:
                return None
            _, wire, a, n = span
            if wire == 0:
                return self._pack([a])
            if wire != 2:
                raise FormatError(f"a varint data field with wire type {wire}", where,
                                  f"offset {a}")
            self.pos, self.end = a, a + n
        block = self.source.read(self.pos, min(MAX_WINDOW, self.end - self.pos))
        last = self.pos + len(block) >= self.end
        values, used = _block_varints(block, last, where, self.pos)
        self.pos += used
        return self._pack(values)

    def _pack(self, values: list[int]) -> bytes:
        mask = self.mask
        arr = array(self.code, [v & mask for v in values])
        if sys.byteorder == "big":
            arr.byteswap()
        return arr.tobytes()


def _block_varints(block: bytes, last: bool, where: str, at: int) -> tuple[list[int], int]:
    """The whole varints at the start of ``block`` (at offset ``at``) and the bytes they use; a
    varint cut at the end is left for the next block unless this is the ``last`` one."""
    values: list[int] = []
    i, n = 0, len(block)
    while i < n:
        b = block[i]
        if b < 0x80:
            values.append(b)
            i += 1
            continue
        v, shift, j = 0, 0, i
        while j < n and block[j] >= 0x80:
            v |= (block[j] & 0x7F) << shift
            shift += 7
            j += 1
            if shift >= 70:
                raise FormatError("varint longer than 10 bytes in a data field", where,
                                  f"offset {at + i}")
        if j >= n:
            if last:
                raise FormatError("a packed varint field ends inside a varint", where,
                                  f"offset {at + i}")
            break
        values.append((v | block[j] << shift) & _MASK64)
        i = j + 1
    return values, i


def _reader(ckpt: Checkpoint, source: Source, values: _Values) -> Any:
    plain = byte_ranges(ckpt, source)

    def locate(entry: TensorEntry) -> ByteRange | Stream:
        if entry.offset is not None:
            return plain(entry)
        spec = values.varints.get(entry.name)
        if spec is not None:
            number, spans = spec
            code = _VARINT_CODES[entry.dtype]

            def open_stream(stack: ExitStack) -> io.RawIOBase:
                return stack.enter_context(_Decoded(source, spans, code))

            return Stream(open_stream)
        raise FormatError(f"tensor {entry.stored_name!r}: "
                          f"{values.why.get(entry.name, 'its data is not located')}",
                          source.where)

    return locate


# -- the adapter --------------------------------------------------------------------------------


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    if variant != "model":
        raise FormatError(f"unsupported ONNX variant {variant!r}", source.where)
    # The walk makes a few small acyclic records per initializer: the cyclic GC would only
    # traverse them again and again (as in commands.show); reference counting frees them.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with source.view() as view:
            walk = _Walk(_Wire(view, source.size, source.where))
            walk.model_proto()
        if "ir_version" not in walk.model:
            raise FormatError("no ir_version: not an ONNX ModelProto", source.where)
        findings: list[Finding] = []
        values = _Values()
        tensors, files = _entries(walk, source, findings, values)
    finally:
        if was_enabled:
            gc.enable()
    graph = walk.graph
    init_names = {t.stored_name for t in tensors}
    inputs = graph.get("inputs", [])
    real_inputs = [v for v in inputs if v["name"] not in init_names]
    hyper: dict[str, Any] = {**walk.model}
    if "name" in graph:
        hyper["graph_name"] = graph["name"]
    hyper["inputs"] = real_inputs
    hyper["outputs"] = graph.get("outputs", [])
    hyper["summary"] = _summary(hyper)
    metadata: dict[str, Any] = {
        "ir_version": walk.model.get("ir_version"),
        "nodes": graph.get("nodes", 0),
        "ops": dict(sorted(walk.ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "initializers": len(tensors),
    }
    if len(inputs) != len(real_inputs):
        metadata["initializers_as_inputs"] = len(inputs) - len(real_inputs)
    if walk.nodes != metadata["nodes"]:
        metadata["all_nodes"] = walk.nodes  # with those of subgraphs and functions
    if walk.subgraphs:
        metadata["subgraphs"] = walk.subgraphs
    if walk.ops.get("Constant"):
        metadata["constant_nodes"] = walk.ops["Constant"]
    if files:
        metadata["external_data"] = files
    ckpt = Checkpoint(
        paths=(source.where, *(_where(source, f) for f in files)),
        format=NAME,
        tensors=tensors,
        metadata=metadata,
        hyperparameters=hyper,
        findings=findings,
        source=source,
    )
    ckpt.reader = _reader(ckpt, source, values)
    return ckpt


def _where(source: Source, location: str) -> str:
    try:
        return source.sibling(location).where
    except InspectorError:
        return location


def _type_text(v: dict[str, Any]) -> str:
    if "dtype" not in v:
        return v.get("kind", "?")
    dims = ", ".join("?" if d is None else str(d) for d in v.get("shape", []))
    text = f"{v['dtype']}[{dims}]" if "shape" in v else v["dtype"]
    return f"sparse {text}" if v.get("kind") == "sparse_tensor" else text


def _summary(hyper: dict[str, Any]) -> dict[str, Any]:
    """The few lines a text listing shows by default."""
    out: dict[str, Any] = {}
    producer = " ".join(x for x in (hyper.get("producer_name"), hyper.get("producer_version"))
                        if x)
    if producer:
        out["producer"] = producer
    out["ir_version"] = hyper.get("ir_version")
    out["opset_import"] = ", ".join(f"{d} {v}" for d, v in hyper.get("opset_import", {}).items())
    if "graph_name" in hyper:
        out["graph"] = hyper["graph_name"]
    for key in ("inputs", "outputs"):
        values = hyper.get(key) or []
        shown = ", ".join(f"{v['name']}: {_type_text(v)}" for v in values[:8])
        out[key] = shown + (f", ... ({len(values)})" if len(values) > 8 else "")
    if hyper.get("metadata_props"):
        out["metadata_props"] = len(hyper["metadata_props"])
    return out


def examine(source: Source, variant: str, result: FileResult) -> None:
    """``inspector scan``: loading an ONNX model runs no code from the file (onnx.load parses a
    protobuf; operators are the runtime's own). What a loader does follow is each external
    data ``location``: one that is absolute or climbs out of the model's directory (or a
    symlink that resolves outside it) would have a reader take another file as weights
    (CVE-2024-27318; onnx >= 1.16 refuses it): dangerous, naming it. Data files inside the
    directory are listed as safe items; a corrupt model is an error."""
    from .security.examination import DANGEROUS, ERROR, SAFE

    result.kind = NAME
    try:
        with source.view() as view:
            walk = _Walk(_Wire(view, source.size, source.where))
            walk.model_proto()
    except InspectorError as e:
        result.add(ERROR, e.message, e.where)
        return
    seen: set[str] = set()
    for t, path, indices, _ in walk.tensors:
        for part in (t, indices):
            if part is None or part.location != 1:
                continue
            location = dict(part.external).get("location")
            if location is None or location in seen:
                continue
            seen.add(location)
            where = f"initializer {part.name!r}" + (f" in {path.rstrip('/')}" if path else "")
            try:
                check_relative(location, source.where)
                source.sibling(location)
            except FormatError:
                result.add(DANGEROUS, f"external data location {location!r} points outside "
                           "the model's directory: a loader that follows it reads that file as "
                           "weights (onnx before 1.16: CVE-2024-27318; newer onnx refuses it)",
                           where)
                continue
            result.add(SAFE, f"external data in {location!r}", where)


def sniff(head: bytes, source: Source) -> str | None:
    """'model' for a file whose top-level protobuf fields read as an ONNX ModelProto: a first
    field ``ir_version`` (field 1, a small varint), then ModelProto's own fields with their own
    wire types (UTF-8 names), up to a ``graph`` (field 7) whose first field is a GraphProto
    field. An ONNX file has no magic number; the walk reads beyond the head only where a long
    field before the graph pushes the next tag past it."""
    if len(head) < 4 or head[0] != 0x08 or not 1 <= head[1] < 0x80:
        return None
    try:
        size = source.size
        pos = 2
        buf, base = head, 0
        for _ in range(SNIFF_STEPS):
            if pos >= size:
                return None
            if pos + 22 > base + len(buf) and base + len(buf) < size:
                buf, base = source.read(pos, 64), pos
            i = pos - base
            key, i = _sniff_varint(buf, i)
            number, wire = key >> 3, key & 7
            if _MODEL_WIRE.get(number, wire if number > 26 else -1) != wire or wire not in (0, 2):
                return None
            value, i = _sniff_varint(buf, i)
            if wire == 0:
                pos = base + i
                continue
            at = base + i
            if number == 7:
                if at >= size or value == 0:
                    return None
                first = source.read(at, 1)[0] if at >= base + len(buf) else buf[i]
                return "model" if _GRAPH_WIRE.get(first >> 3) == first & 7 else None
            if value > size - at:
                return None
            if number in (2, 3, 4) and at + value <= base + len(buf):
                buf[i:i + value].decode("utf-8")
            pos = at + value
    except (ValueError, IndexError, InspectorError, OSError):
        return None
    return None


def _sniff_varint(buf: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        b = buf[i]  # IndexError past the buffer: not claimed
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7
        if shift >= 64:
            raise ValueError("varint too long")


ADAPTER = Adapter(
    name=NAME,
    description="ONNX model (ModelProto protobuf; initializers inline or in external data)",
    extensions=(".onnx",),
    sniff=sniff,
    open=open_checkpoint,
    default_variant="model",
    examine=examine,
)
