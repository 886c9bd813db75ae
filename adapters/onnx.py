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
from types import MappingProxyType

from .dtypes import BITS
from .dtypes import nbytes as dtype_nbytes
from .errors import FormatError, InspectorError
from .model import Checkpoint, Finding, Role, TensorEntry
from .onnx_graph import (  # the tables, importable from here as before
    DTYPES,
    FIELDS,
    GRAPH_WIRE,
    MAX_RANK,
    MAX_SPANS,
    MODEL_WIRE,
    ModelWalk,
)
from .onnx_values import ValueSpans, locate, product, safe_location, value_reader
from .protobuf import Wire
from .registry import Adapter
from .source import Source, check_relative

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    from .security.examination import FileResult

__all__ = ["ADAPTER", "DTYPES", "FIELDS", "MAX_RANK", "MAX_SPANS", "examine", "open_checkpoint",
           "sniff"]

NAME = "onnx"


SNIFF_STEPS = 64  # top-level fields the sniff walks before it has seen the graph
_RAW_DATA = MappingProxyType({"data": "raw_data"})  # the extra of most entries, shared


# -- records ------------------------------------------------------------------------------------


def _entries(walk: ModelWalk, source: Source, findings: list[Finding],
             values: ValueSpans) -> tuple[list[TensorEntry], list[str]]:
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
            size = (product(dims) * BITS[dtype] + 7) // 8
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
        entry_nbytes = dtype_nbytes(dtype, product(t.dims))
        offset = file = None
        stored_numel = None
        if sparse_dims is not None:
            stored_numel = product(t.dims)
            extra["layout"] = "sparse"
            extra["values"] = {"shape": list(t.dims), "dtype": dtype}
            if indices is not None:
                idt = DTYPES.get(indices.data_type, f"onnx_type_{indices.data_type}")
                extra["indices"] = {"shape": list(indices.dims), "dtype": idt}
                inb = dtype_nbytes(idt, product(indices.dims))
                entry_nbytes = None if entry_nbytes is None or inb is None else entry_nbytes + inb
            for part in (t, indices):
                if part is not None and part.location == 1:
                    safe_location(part, where)
            values.why[name] = "sparse initializer"
        else:
            offset, file, why = locate(t, dtype, entry_nbytes, name, source, files, extra,
                                        values, findings, path)
            if why:
                values.why[name] = why
        out.append(TensorEntry(t.name, name, shape, dtype, parameter, nbytes=entry_nbytes,
                               offset=offset, file=file, stored_numel=stored_numel,
                               extra=extra or None))
    return out, list(files)


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
            walk = ModelWalk(Wire(view, source.size, source.where, "ONNX"))
            walk.model_proto()
        if "ir_version" not in walk.model:
            raise FormatError("no ir_version: not an ONNX ModelProto", source.where)
        findings: list[Finding] = []
        values = ValueSpans()
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
    ckpt.reader = value_reader(ckpt, source, values)
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
            walk = ModelWalk(Wire(view, source.size, source.where, "ONNX"))
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
            if MODEL_WIRE.get(number, wire if number > 26 else -1) != wire or wire not in (0, 2):
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
                return "model" if GRAPH_WIRE.get(first >> 3) == first & 7 else None
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
