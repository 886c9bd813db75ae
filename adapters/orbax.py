"""orbax-checkpoint directories (JAX / Flax): a checkpoint item, a step folder of items, or a
``CheckpointManager`` directory of step folders; metadata only, tensorstore never needed.

Layout (orbax ``_src/metadata/tree.py``, ``_src/serialization/tensorstore_utils.py``)::

    <manager dir>/<step>/_CHECKPOINT_METADATA      step facts (item handlers, timestamps)
    <step>/<item>/_METADATA                        the tree: per leaf its keys and
                                                   value_metadata (value_type, write_shape)
    <item>/_sharding                               per array (base64 of its name) its sharding
    <item>/manifest.ocdbt, d/, ocdbt.process_N/    OCDBT (the default): every array's zarr
                                                   metadata (key '<param>/.zarray') and chunks
                                                   inside a zstd-compressed B+tree database
    <item>/<param name>/.zarray | zarr.json, chunks   use_ocdbt=False: one zarr v2 / v3 array per
                                                   leaf, named by its keys joined with '.'

Names are the leaf's keys joined by ``.`` (orbax's own ``param_name``). Shapes and dtypes come
from each array's zarr metadata: a plain file (``use_ocdbt=False``) or a key of the OCDBT
database, read by :mod:`.ocdbt` (zstd through the optional ``zstandard`` package). Without
``zstandard`` the shape is ``_METADATA``'s ``write_shape`` (the global shape for a single-device
array; a sharded array's is the piece one device wrote, which orbax also splits among replicas:
said in a warning, never computed) and the dtype is ``unknown``. Values: zarr v2 arrays stored
uncompressed in one chunk are plain byte ranges; anything else says which decoder it needs.
Roles as in :mod:`.flax_msgpack` (``params``, ``opt_state``, ``batch_stats``).
"""

from __future__ import annotations

import base64
import json
import math
import re

from .directory import dir_in, file_in
from .errors import FormatError
from .flax_msgpack import COLLECTION_ROLES
from .model import ByteRange, Checkpoint, Finding, Role, TensorEntry
from .ocdbt import INSTALL_HINT, ZstdMissing, read_values
from .registry import Adapter
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    from .model import ValueLocation
    from .security.examination import FileResult

NAME = "orbax"
METADATA = "_METADATA"
STEP_METADATA = "_CHECKPOINT_METADATA"
MAX_JSON = 64 << 20
MAX_STEPS = 10_000
MAX_DIMS = 64
UNKNOWN = "unknown"
ARRAY_TYPES = ("jax.Array", "np.ndarray", "scalar")
# zarr v2 dtype strings (NumPy typestr; tensorstore writes bfloat16 and float8 by name)
ZARR2_KINDS = {"f": "float", "i": "int", "u": "uint", "c": "complex"}
ITEM = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
        "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
        "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1,
        "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e4m3b11fnuz": 1, "int4": 1,
        "uint4": 1}


def _is_item(source: Source) -> bool:
    return file_in(source, METADATA) is not None


def _steps(source: Source) -> list[int]:
    names = source.list()
    if len(names) > MAX_STEPS:
        return []
    out = []
    for n in names:
        if n.isdigit() and (d := dir_in(source, n)) is not None \
                and file_in(d, STEP_METADATA) is not None:
            out.append(int(n))
    return sorted(out)


def _items(step: Source) -> list[str]:
    return [n for n in step.list() if (d := dir_in(step, n)) is not None and _is_item(d)]


def sniff(head: bytes, source: Source) -> str | None:
    if not source.is_dir():
        return None
    if _is_item(source):
        return "item"
    if file_in(source, STEP_METADATA) is not None and _items(source):
        return "step"
    if _steps(source):
        return "manager"
    return None


def _json(source: Source, what: str) -> Any:
    try:
        return json.loads(source.read_text(MAX_JSON))
    except ValueError as e:
        raise FormatError(f"{what} is not readable JSON ({e})", source.where) from None


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    findings: list[Finding] = []
    meta: dict[str, Any] = {}
    step = source
    if variant == "manager":
        steps = _steps(source)
        if not steps:
            raise FormatError("no step folders with _CHECKPOINT_METADATA", source.where)
        meta["steps"] = steps
        meta["step"] = steps[-1]
        step = source.child(str(steps[-1]))
        if len(steps) > 1:
            findings.append(Finding("info", f"{len(steps)} steps here ({_shown(steps)}); the "
                                    f"latest, {steps[-1]}, is listed: name a step folder to "
                                    "list another", "steps"))
    if variant in ("manager", "step"):
        sm = file_in(step, STEP_METADATA)
        if sm is not None:
            facts = _json(sm, STEP_METADATA)
            if isinstance(facts, dict):
                meta["step_metadata"] = {k: facts[k] for k in ("item_handlers", "metrics",
                                                               "custom_metadata") if k in facts}
        items = _items(step)
        if not items:
            raise FormatError("no checkpoint item (a folder with _METADATA)", step.where)
        meta["items"] = items
        tensors: list[TensorEntry] = []
        for item in items:
            prefix = "" if len(items) == 1 else item + "."
            tensors += _read_item(step.child(item), prefix, findings, meta, item)
    else:
        tensors = _read_item(source, "", findings, meta, "")
    _assign_roles(tensors)
    return Checkpoint(paths=(source.where,), format=NAME, tensors=tensors, metadata=meta,
                      findings=findings, reader=_reader(source, step, meta))


def _shown(steps: list[int]) -> str:
    return ", ".join(map(str, steps[:6])) + (", ..." if len(steps) > 6 else "")


def _read_item(item: Source, prefix: str, findings: list[Finding], meta: dict[str, Any],
               label: str) -> list[TensorEntry]:
    where = item.where
    tree = _json(item.child(METADATA), METADATA)
    if not isinstance(tree, dict) or not isinstance(tree.get("tree_metadata"), dict):
        raise FormatError("_METADATA holds no 'tree_metadata' object (orbax writes one since "
                          "0.5)", where)
    ocdbt = bool(tree.get("use_ocdbt"))
    zarr3 = bool(tree.get("use_zarr3"))
    meta.setdefault("layouts", {})[label or "."] = (
        "ocdbt" if ocdbt else "zarr3" if zarr3 else "zarr2")
    shardings = _shardings(item)
    zname = "zarr.json" if zarr3 else ".zarray"
    stored: dict[str, bytes] | None = None
    if ocdbt:
        try:
            stored = read_values(item, lambda k: k.endswith("/" + zname))
        except ZstdMissing:
            stored = None
    missing: list[str] = []
    out: list[TensorEntry] = []
    scalars: dict[str, Any] = {}
    sharded: list[str] = []
    for key, leaf in tree["tree_metadata"].items():
        if not isinstance(leaf, dict):
            raise FormatError(f"_METADATA entry {key!r:.80} is not an object", where)
        keys = leaf.get("key_metadata")
        value = leaf.get("value_metadata") or {}
        if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys) \
                or not isinstance(value, dict):
            raise FormatError(f"_METADATA entry {key!r:.80}: no key_metadata list", where)
        path = [str(k.get("key")) for k in keys]
        param = ".".join(path)
        vtype = value.get("value_type")
        if vtype not in ARRAY_TYPES:
            scalars[prefix + param] = vtype
            continue
        extra: dict[str, Any] = {"value_type": vtype, "path": path}
        if ocdbt and stored is not None and f"{param}/{zname}" in stored:
            z = _json_bytes(stored[f"{param}/{zname}"], f"{param}/{zname} (in OCDBT)", where)
            shape, dtype, facts = _zarr_facts(z, param, zarr3, where)
            facts["layout"] = "ocdbt"
            facts.pop("chunk_file", None)  # a chunk is a key of the database, not a file
            facts["values"] = ("values not readable: chunks are zstd-compressed inside the OCDBT "
                               "database (needs tensorstore)")
            extra.update(facts)
        elif ocdbt:
            shape = _shape(value.get("write_shape", []), param, where)
            dtype = UNKNOWN
            sharding = shardings.get(param, {})
            kind = sharding.get("sharding_type")
            extra["layout"] = "ocdbt"
            if stored is not None:
                missing.append(param)
            if vtype != "scalar" and kind != "SingleDeviceSharding":
                extra["shape_is_write_shape"] = True
                sharded.append(param)
        else:
            shape, dtype, facts = _zarr(item, param, zarr3)
            extra.update(facts)
        item_size = ITEM.get(dtype)
        nbytes = math.prod(shape) * item_size if item_size else None
        out.append(TensorEntry(prefix + param, prefix + param, shape, dtype, Role.PARAMETER,
                               nbytes=nbytes, extra=extra))
    if ocdbt:
        head = f"{label + ': ' if label else ''}OCDBT layout: "
        if stored is None:
            text = (head + "each array's dtype and shape are inside the zstd-compressed OCDBT "
                    "database and zstandard is not installed: dtypes are listed as unknown, "
                    f"shapes are _METADATA's write_shape ({INSTALL_HINT} reads them)")
        else:
            text = (head + "dtypes and shapes read from each array's zarr metadata in the OCDBT "
                    "database; values (zstd-compressed chunks) are not read")
        findings.append(Finding("info", text, label or "layout"))
    if missing:
        findings.append(Finding(
            "warning", f"{len(missing)} array(s) have no {zname} in the OCDBT database (e.g. "
            f"{missing[0]!r}): dtype unknown, shape from _METADATA's write_shape", missing[0]))
    if sharded:
        findings.append(Finding(
            "warning", f"{len(sharded)} array(s) not on a single device (e.g. {sharded[0]!r}): "
            "the listed shape is the piece each device wrote (write_shape), not the array's; "
            f"the global shape is in the OCDBT database ({INSTALL_HINT} reads it)",
            sharded[0]))
    if scalars:
        meta.setdefault("non_array_leaves", {}).update(scalars)
    return out


def _shape(dims: Any, param: str, where: str) -> tuple[int, ...]:
    if not isinstance(dims, list) or len(dims) > MAX_DIMS or any(
            type(d) is not int or d < 0 for d in dims):
        raise FormatError(f"{param!r}: shape {dims!r:.80} is not a list of non-negative ints",
                          where)
    return tuple(dims)


def _shardings(item: Source) -> dict[str, dict[str, Any]]:
    """param name -> its sharding record (``_sharding``: base64 of the name -> JSON text)."""
    f = file_in(item, "_sharding")
    if f is None:
        return {}
    raw = _json(f, "_sharding")
    out = {}
    if isinstance(raw, dict):
        for k, v in raw.items():
            try:
                name = base64.b64decode(k, validate=True).decode("utf-8")
                rec = json.loads(v) if isinstance(v, str) else v
            except (ValueError, TypeError):
                continue
            if isinstance(rec, dict):
                out[name] = rec
    return out


def _zarr2_dtype(text: Any) -> tuple[str, bool] | None:
    """(canonical dtype, big-endian) of a zarr v2 dtype string."""
    if not isinstance(text, str):
        return None
    if text in ITEM:
        return text, False
    m = re.fullmatch(r"([<>|])([biufc])(\d+)", text)
    if not m:
        return None
    order, kind, size = m.groups()
    if kind == "b":
        return ("bool", False) if size == "1" else None
    name = f"{ZARR2_KINDS[kind]}{int(size) * 8}"
    return (name, order == ">") if name in ITEM else None


def _zarr(item: Source, param: str, zarr3: bool) -> tuple[tuple[int, ...], str, dict]:
    """Shape, dtype and value facts of one per-array zarr directory."""
    where = item.where
    d = dir_in(item, param)
    if d is None:
        raise FormatError(f"array {param!r}: its folder is missing", where)
    name = "zarr.json" if zarr3 else ".zarray"
    f = file_in(d, name)
    if f is None:
        raise FormatError(f"array {param!r}: {name} is missing", where)
    return _zarr_facts(_json(f, f"{param}/{name}"), param, zarr3, where)


def _json_bytes(raw: bytes, what: str, where: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{what} is not readable JSON ({e})", where) from None


def _zarr_facts(z: Any, param: str, zarr3: bool, where: str,
                ) -> tuple[tuple[int, ...], str, dict]:
    """Shape, dtype and value facts of one zarr v2 ``.zarray`` / v3 ``zarr.json`` object."""
    name = "zarr.json" if zarr3 else ".zarray"
    if not isinstance(z, dict):
        raise FormatError(f"{param}/{name} is not a JSON object", where)
    shape = _shape(z.get("shape"), param, where)
    facts: dict[str, Any] = {"layout": "zarr3" if zarr3 else "zarr2"}
    if zarr3:
        dtype = z.get("data_type")
        if not isinstance(dtype, str) or dtype not in ITEM:
            raise FormatError(f"array {param!r}: zarr data_type {dtype!r:.40} not known", where)
        facts["values"] = "zarr v3 sharded chunks (sharding_indexed): not read"
        return shape, dtype, facts
    parsed = _zarr2_dtype(z.get("dtype"))
    if parsed is None:
        raise FormatError(f"array {param!r}: zarr dtype {z.get('dtype')!r:.40} not known", where)
    dtype, big = parsed
    chunks = z.get("chunks")
    comp = z.get("compressor")
    if comp is not None:
        facts["values"] = (f"{comp.get('id') if isinstance(comp, dict) else comp}-compressed "
                           "zarr chunks: values not readable (needs tensorstore)")
    elif z.get("filters") or z.get("order", "C") != "C":
        facts["values"] = "zarr filters or Fortran order: values not read"
    elif chunks != list(shape) and not (shape == () and chunks == []):
        facts["values"] = f"{chunks} chunks of a {list(shape)} array: values not read"
    else:
        sep = z.get("dimension_separator", ".")
        facts["chunk_file"] = f"{param}/" + (sep.join("0" for _ in shape) or "0")
        facts["big_endian"] = big
    return shape, dtype, facts


def _assign_roles(tensors: list[TensorEntry]) -> None:
    """Roles and names by collection, as for a flax state dict (:mod:`.flax_msgpack`)."""
    collections = any(t.extra["path"][:1] == ["params"] and len(t.extra["path"]) > 1
                      for t in tensors)
    if not collections:
        return
    for i, t in enumerate(tensors):
        path = t.extra["path"]
        role = COLLECTION_ROLES.get(path[0], Role.OTHER)
        name = t.name
        if path[0] == "params":
            name = name[: len(name) - len(".".join(path))] + ".".join(path[1:])
        tensors[i] = t.replace(role=role, name=name)


def _reader(source: Source, step: Source, meta: dict[str, Any]):
    items = meta.get("items")

    def locate(entry: TensorEntry) -> ValueLocation:
        from .errors import FormatError as Unreadable

        chunk = entry.extra.get("chunk_file")
        if chunk is None:
            why = entry.extra.get("values") or (
                "values not readable: the OCDBT database (zstd-compressed) needs tensorstore")
            raise Unreadable(f"tensor {entry.stored_name!r}: {why}", source.where)
        base = source
        if items:
            base = step.child(items[0] if len(items) == 1 else entry.stored_name.split(".")[0])
        f = base.child(chunk)
        if f.size != entry.nbytes:
            raise Unreadable(f"tensor {entry.stored_name!r}: chunk {chunk} holds {f.size} "
                             f"bytes, {entry.nbytes} expected", source.where)
        return ByteRange(f, 0, bool(entry.extra.get("big_endian")))

    return locate


def examine(source: Source, variant: str, result: FileResult) -> None:
    """orbax's restore reads JSON metadata and tensorstore arrays: nothing it runs. The
    metadata is read as a listing reads it (a malformed one is an error)."""
    result.kind = NAME
    open_checkpoint(source, variant)


ADAPTER = Adapter(
    name=NAME,
    description="orbax-checkpoint directory (JAX/Flax: _METADATA tree; OCDBT or per-array "
    "zarr; CheckpointManager step folders)",
    extensions=("<directory>",),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,
)
