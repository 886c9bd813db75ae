"""The structure of an ONNX model, walked on the protobuf wire (:mod:`.protobuf`): the field
numbers and data types of onnx.proto, and :class:`ModelWalk`, ``ModelProto -> GraphProto ->
TensorProto`` (graphs inside node attributes, functions and training info too, nesting bounded
as protobuf's parser bounds it), which keeps each initializer's facts (:class:`TensorFacts`:
dims, type, where its data fields are) and never reads the data. The adapter is
:mod:`.onnx`; value reads are :mod:`.onnx_values`.
"""

from __future__ import annotations

from .protobuf import MAX_STRING, Wire, signed

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

_SIGN, _TWO64 = 1 << 63, 1 << 64

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
FIXED_FIELDS = {4: "float_data", 10: "double_data"}

FIXED_DTYPES = {4: ("float32", "complex64"), 10: ("float64", "complex128")}

VARINT_FIELDS = {5: "int32_data", 7: "int64_data", 11: "uint64_data"}

DATA_FIELDS = {4, 5, 6, 7, 10, 11}

# dtype -> array typecode (unsigned: two's complement is taken by masking) for varint fields.
VARINT_CODES = {"bool": "B", "uint8": "B", "int8": "B", "uint16": "H", "int16": "H",
                 "int32": "I", "uint32": "I", "int64": "Q", "uint64": "Q", "float16": "H",
                 "bfloat16": "H", "float8_e4m3fn": "B", "float8_e4m3fnuz": "B",
                 "float8_e5m2": "B", "float8_e5m2fnuz": "B", "float8_e8m0fnu": "B"}

# protobuf's parser stops at 100 nested messages (io::CodedInputStream's default recursion
# limit); a graph inside a node attribute is three messages deeper than its parent graph.
MAX_MESSAGE_DEPTH = 100

MAX_SPANS = 1 << 16  # unpacked typed data elements kept per tensor (packed runs: one each)

MAX_RANK = 1024  # numpy stops at 64 dimensions; more than this is a corrupt tensor

MODEL_WIRE = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}

GRAPH_WIRE = {1: 2, 2: 2, 5: 2, 10: 2, 11: 2, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2}


def fast_node(buf: bytes, i: int, lim: int) -> tuple[int, int, int, int, list] | None:
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


def fast_tensor(buf: bytes, i: int, lim: int, base: int) -> TensorFacts | None:
    """A TensorProto in ``buf[i:lim]`` holding only dims (unpacked), data_type, name and
    raw_data (every initializer an exporter writes inline), with short varints; None for
    anything else: the generic walk decides."""
    t = TensorFacts()
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


class TensorFacts:
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


class ModelWalk:
    """One pass over a model: its initializers (graph, sparse, subgraphs), the model's and the
    main graph's facts, node and op counts."""

    def __init__(self, wire: Wire) -> None:
        self.w = wire
        self.tensors: list[tuple[TensorFacts, str, TensorFacts | None, list[int] | None]] = []
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
                model["ir_version"] = signed(a)
            elif number in (2, 3, 4) and wire == 2:
                key = ("producer_name", "producer_version", "domain")[number - 2]
                model[key] = w.text(a, n, key)
            elif number == 5 and wire == 0:
                model["model_version"] = signed(a)
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
                version = signed(b)
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
            fast = fast_node(w.buf, start - w.base, end - w.base)
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

    def tensor_proto(self, start: int, end: int, depth: int) -> TensorFacts:
        if depth > MAX_MESSAGE_DEPTH:
            raise self.w.fault(f"messages nested more than {MAX_MESSAGE_DEPTH} deep "
                               "(protobuf's own limit)", start)
        w = self.w
        if w.holds(start, end):
            t = fast_tensor(w.buf, start - w.base, end - w.base, w.base)
            if t is not None:
                return t
        t = TensorFacts()
        dims = t.dims
        for number, wire, a, n in w.fields(start, end, "TensorProto"):
            if number == 1:
                if wire == 0:
                    dims.append(a if a < _SIGN else a - _TWO64)
                elif wire == 2:
                    dims.extend(signed(v) for v in w.packed_varints(a, n, "dims", MAX_RANK))
                if len(dims) > MAX_RANK:
                    raise w.fault(f"a tensor with over {MAX_RANK} dimensions (corrupt?)", a)
            elif number == 2 and wire == 0:
                t.data_type = signed(a) & 0xFFFFFFFF
            elif number == 8 and wire == 2:
                t.name = w.text(a, n, "tensor name")
            elif number == 9 and wire == 2:
                t.raw = (a, n)
            elif number in DATA_FIELDS:
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
                    dims.append(signed(a))
                elif wire == 2:
                    dims.extend(signed(v) for v in self.w.packed_varints(a, n, "dims", MAX_RANK))
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
                        dim = signed(c)
                    elif g == 2 and gt == 2:
                        dim = w.text(c, k, "dim_param")
                dims.append(dim)
                if len(dims) > MAX_RANK:
                    raise w.fault(f"a shape with over {MAX_RANK} dimensions (corrupt?)", b)
        return dims
