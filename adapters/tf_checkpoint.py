"""TensorFlow checkpoints: the tensor bundle (``PREFIX.index`` + ``PREFIX.data-NNNNN-of-MMMMM``).

Written by ``tf.train.Checkpoint`` (object-based names ending
``/.ATTRIBUTES/VARIABLE_VALUE``, optimizer slots under ``/.OPTIMIZER_SLOT/``), by TF1's
``tf.compat.v1.train.Saver`` (``dense/kernel``, ``dense/kernel/Adam``) and by OpenNMT-tf.
Read as its writer defines it
(tensorflow/core/util/tensor_bundle/tensor_bundle.{h,cc}, tensor_bundle.proto,
tensorflow/core/lib/io/{table,block,format}.cc):

* the ``.index`` file is a LevelDB-format table: a footer of 48 bytes (metaindex and index block
  handles as varints, padding, the magic ``0xdb4775248b80fb57``), an index block whose values are
  the handles of the data blocks, and data blocks of prefix-compressed key/value entries with a
  restart array, each block followed by a compression byte and a CRC;
* the value of the empty key is a ``BundleHeaderProto`` (number of shards, endianness); every
  other key is a tensor name whose value is a ``BundleEntryProto`` (dtype, shape, shard, offset,
  size; ``slices`` for a partitioned variable, whose parts are stored under encoded keys);
* tensor bytes are ``size`` bytes at ``offset`` of data shard ``shard_id``: a plain byte range,
  so values need no more code.

Metadata only: the index is read, the data shards are never opened to list.
"""

from __future__ import annotations

import functools
import re
import struct

from .errors import FormatError
from .model import Checkpoint, Role, TensorEntry
from .protobuf import fields, signed, varint
from .registry import Adapter
from .source import Source

NAME = "tf-checkpoint"
TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_BYTES = 48
MAX_INDEX_BYTES = 1 << 30  # an index of a million tensors is ~100 MB
MAX_DIMS = 64
# tensorflow/core/framework/types.proto DataType -> the project's dtype spelling
DTYPES = {
    1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string",
    8: "complex64", 9: "int64", 10: "bool", 11: "qint8", 12: "quint8", 13: "qint32",
    14: "bfloat16", 15: "qint16", 16: "quint16", 17: "uint16", 18: "complex128", 19: "float16",
    20: "resource", 21: "variant", 22: "uint32", 23: "uint64", 24: "float8_e5m2",
    25: "float8_e4m3fn", 29: "int4", 30: "uint4",
}
ITEM_BYTES = {
    "float32": 4, "float64": 8, "int32": 4, "uint8": 1, "int16": 2, "int8": 1, "complex64": 8,
    "int64": 8, "bool": 1, "qint8": 1, "quint8": 1, "qint32": 4, "bfloat16": 2, "qint16": 2,
    "quint16": 2, "uint16": 2, "complex128": 16, "float16": 2, "uint32": 4, "uint64": 8,
    "float8_e5m2": 1, "float8_e4m3fn": 1,
}
# Roles by name, first match wins (TF2 object-based names and TF1 Saver names).
ROLE_RULES = (
    (re.compile(r"(^|/)\.OPTIMIZER_SLOT/"), Role.OPTIMIZER),  # tf.train.Checkpoint slots
    (re.compile(r"^optimizer/"), Role.OPTIMIZER),  # the optimizer's own iter, lr, ...
    (re.compile(r"^(save_counter|_CHECKPOINTABLE_OBJECT_GRAPH)(/|$)"), Role.OTHER),
    # TF1 slot variables (tf.compat.v1.train optimizers name them after the variable)
    (re.compile(r"/(Adam|Adam_\d+|Momentum|RMSProp|RMSProp_\d+|Adagrad|AdagradDA|Adadelta"
                r"|Adadelta_\d+|Ftrl|Ftrl_\d+|LazyAdam|LazyAdam_\d+|ProximalAdagrad)$"),
     Role.OPTIMIZER),
    (re.compile(r"^(beta1_power|beta2_power)(_\d+)?$"), Role.OPTIMIZER),
    (re.compile(r"(^|/)global_step$"), Role.OTHER),
    # batch-norm statistics: updated by the forward pass, never by the optimizer
    (re.compile(r"(^|/)(moving_mean|moving_variance)(/|$)"), Role.BUFFER),
)
TF2_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
SAVED_MODEL = "saved_model.pb"  # a SavedModel keeps its variables as a bundle: variables/
STATE_FILE = "checkpoint"  # tf.train.CheckpointManager / Saver's state: model_checkpoint_path


def sniff(head: bytes, source: Source) -> str | None:
    if source.is_dir():
        names = source.list()
        if SAVED_MODEL in names and "variables" in names:
            inner = source.child("variables")
            if inner.is_dir() and "variables.index" in inner.list():
                return "saved-model"
        indexes = [n for n in names if n.endswith(".index")]
        return "directory" if any(_is_table(source.child(n)) for n in indexes[:8]) else None
    return "index" if _is_table(source) else None


def _is_table(source: Source) -> bool:
    """Whether the file ends with the LevelDB table magic."""
    size = source.size
    return size >= FOOTER_BYTES and struct.unpack("<Q", source.read(size - 8, 8))[0] == TABLE_MAGIC


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    index, inside = source, ""
    if variant == "saved-model":
        index, inside = source.child("variables/variables.index"), "variables/"
    elif variant == "directory" or source.is_dir():
        found = _index_in(source, quiet=False)
        assert found is not None
        index = source.child(found)
    entries = _table(index)
    header = entries.pop(b"", None)
    if header is None:
        raise FormatError("no bundle header (the empty key): not a TensorFlow checkpoint index",
                          index.where)
    shards, big, version = _header(header, index.where)
    # data shards beside the index (the registry resolves ``file`` in a directory or beside it)
    prefix = index.name[: -len(".index")] if index.name.endswith(".index") else index.name
    tensors = []
    sliced: list[str] = []
    where, prefix = index.where, inside + prefix
    for key, value in entries.items():
        if key[:1] == b"\0":
            continue  # a slice of a partitioned variable, under its encoded key
        stored = key.decode("utf-8", "backslashreplace")
        entry = _entry(stored, value, where, shards, prefix)
        if entry.extra.get("partitioned"):
            sliced.append(stored)
        tensors.append(entry)
    metadata = {"num_shards": shards, "bundle_version": version, "index": index.where}
    findings = []
    if variant == "saved-model":
        metadata["saved_model"] = True
        findings = _graph_findings(source)  # the ops its functions run, as scan judges them
    if big:
        metadata["byteorder"] = "big"
    if sliced:
        metadata["partitioned"] = sliced
    return Checkpoint(paths=(source.where,), format=NAME, tensors=tensors, metadata=metadata,
                      findings=findings)


def _graph_findings(source: Source) -> list:
    """The SavedModel graph's examination (``saved_model.pb`` beside ``variables/``) as
    findings: a file or Python op is a ``danger`` the one policy refuses."""
    from .security.examination import FileResult, as_findings
    from .security.tf_graph import MAX_BYTES, examine_saved_model

    graph = source.child(SAVED_MODEL)
    if graph.size > MAX_BYTES:
        raise FormatError(f"{graph.size:,} bytes (limit {MAX_BYTES:,}): not examined",
                          graph.where)
    res = FileResult(graph.where)
    examine_saved_model(graph.read(0, graph.size), res)
    return as_findings(res)


def _index_in(source: Source, quiet: bool) -> str | None:
    """The ``.index`` file of a checkpoint directory: the one its ``checkpoint`` state file
    names (``model_checkpoint_path``), else the only one there."""
    names = source.list()
    indexes = [n for n in names if n.endswith(".index")]
    if STATE_FILE in names:
        try:
            text = source.child(STATE_FILE).read_text(1 << 20)
        except FormatError:
            text = ""
        m = re.search(r'^model_checkpoint_path:\s*"([^"]+)"', text, re.M)
        if m and f"{m.group(1)}.index" in names:
            return f"{m.group(1)}.index"
    if len(indexes) == 1:
        return indexes[0]
    if quiet:
        return None
    raise FormatError(f"{len(indexes)} checkpoint indexes here and no 'checkpoint' state file "
                      f"naming one: {', '.join(indexes[:5])}", source.where)


# --- the LevelDB table ----------------------------------------------------------------------


def _table(source: Source) -> dict[bytes, bytes]:
    """Every key/value of the table, in key order."""
    size = source.size
    if size < FOOTER_BYTES:
        raise FormatError(f"{size} bytes: shorter than a table footer", source.where)
    if size > MAX_INDEX_BYTES:
        raise FormatError(f"index of {size:,} bytes (limit {MAX_INDEX_BYTES:,})", source.where)
    data = source.read(0, size)
    footer = data[size - FOOTER_BYTES:]
    (magic,) = struct.unpack("<Q", footer[40:])
    if magic != TABLE_MAGIC:
        raise FormatError(f"table magic {magic:#x}, expected {TABLE_MAGIC:#x}", source.where)
    pos = 0
    _meta_off, pos = varint(footer, pos, 40, source.where)
    _meta_size, pos = varint(footer, pos, 40, source.where)
    index_off, pos = varint(footer, pos, 40, source.where)
    index_size, pos = varint(footer, pos, 40, source.where)
    out: dict[bytes, bytes] = {}
    for _key, handle in _block(data, index_off, index_size, size - FOOTER_BYTES, source.where):
        off, p = varint(handle, 0, len(handle), source.where)
        n, _ = varint(handle, p, len(handle), source.where)
        for key, value in _block(data, off, n, index_off, source.where):
            out[key] = value
    return out


def _block(data: bytes, off: int, n: int, limit: int, where: str):
    """The entries of the block at ``off`` (``n`` bytes, then a 5-byte trailer), inside
    ``[0, limit)``."""
    if off < 0 or n < 4 or off + n + 5 > limit:
        raise FormatError(f"block at {off} of {n} bytes runs past its table section ({limit})",
                          where)
    if data[off + n] != 0:
        raise FormatError(f"block at {off} is compressed (type {data[off + n]}): TensorFlow "
                          "writes bundle indexes uncompressed; not read", where)
    block = data[off : off + n]
    (restarts,) = struct.unpack("<I", block[-4:])
    end = n - 4 - 4 * restarts
    if restarts > n // 4 or end < 0:
        raise FormatError(f"block at {off}: {restarts} restart points cannot fit", where)
    pos, key = 0, b""
    while pos < end:
        # three varints; one byte each in an index's blocks (the slow path for longer ones)
        if pos + 3 <= end and block[pos] < 0x80 and block[pos + 1] < 0x80 \
                and block[pos + 2] < 0x80:
            shared, fresh, length = block[pos], block[pos + 1], block[pos + 2]
            pos += 3
        else:
            shared, pos = varint(block, pos, end, where)
            fresh, pos = varint(block, pos, end, where)
            length, pos = varint(block, pos, end, where)
        if shared > len(key) or pos + fresh + length > end:
            raise FormatError(f"block at {off}: entry at {pos} runs past the block", where)
        key = key[:shared] + block[pos : pos + fresh]
        pos += fresh
        yield key, block[pos : pos + length]
        pos += length


# --- the protobuf records ---------------------------------------------------------------------


def _header(value: bytes, where: str) -> tuple[int, bool, int | None]:
    """BundleHeaderProto: (num_shards, big-endian, producer version)."""
    shards, big, version = 1, False, None
    for number, wire, v in fields(value, where):
        if number == 1 and wire == 0:
            shards = v
        elif number == 2 and wire == 0:
            big = v == 1  # Endianness: LITTLE = 0, BIG = 1
        elif number == 3 and wire == 2:
            version = next((x for n, w, x in fields(v, where) if n == 1 and w == 0), None)
    if not 1 <= shards <= 1 << 20:
        raise FormatError(f"bundle header says {shards} shards", where)
    return shards, big, version


def _uvarint(buf: bytes, i: int, end: int) -> tuple[int, int]:
    """A varint of at most 10 bytes inside ``buf[i:end]``; (-1, end) when it is not one."""
    value = shift = 0
    for j in range(i, min(end, i + 10)):
        b = buf[j]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value & 0xFFFF_FFFF_FFFF_FFFF, j + 1
        shift += 7
    return -1, end


def _plain_entry(value: bytes) -> tuple[int, list[int], int, int, int] | None:
    """(dtype, dims, shard, offset, size) of a BundleEntryProto made of the fields a tensor
    bundle writer sets (dtype, a shape of sized dims, shard, offset, size, crc32c), each once, in
    field order, with in-range values; None for anything else, which :func:`_entry`'s checked
    walk reads (and explains). One pass, no generator: the listing's hot loop."""
    n = len(value)
    dtype = shard = offset = size = 0
    dims: list[int] = []
    i = last = 0
    while i < n:
        tag = value[i]
        number = tag >> 3
        if number <= last or tag >= 0x80:
            return None
        last = number
        i += 1
        if tag == 0x12:  # shape: TensorShapeProto, dims only
            if i < n and value[i] < 0x80:
                ln, i = value[i], i + 1
            else:
                ln, i = _uvarint(value, i, n)
            end = i + ln
            if ln < 0 or end > n:
                return None
            while i < end:
                if value[i] != 0x12 or i + 1 >= end:  # dim
                    return None
                if value[i + 1] < 0x80:
                    dl, i = value[i + 1], i + 2
                else:
                    dl, i = _uvarint(value, i + 1, end)
                dend = i + dl
                if dl < 0 or dend > end or len(dims) >= MAX_DIMS:
                    return None
                d = 0
                if i < dend:
                    if value[i] != 0x08:  # a named dim, or another field: the checked walk
                        return None
                    if dend == i + 2 and value[i + 1] < 0x80:
                        d, i = value[i + 1], dend
                    else:
                        d, i = _uvarint(value, i + 1, dend)
                        if i != dend or d < 0 or d >= 1 << 63:
                            return None
                dims.append(d)
            continue
        if tag == 0x35:  # crc32c
            i += 4
            continue
        if tag not in (0x08, 0x18, 0x20, 0x28) or i >= n:
            return None
        v = value[i]
        i += 1
        if v >= 0x80:  # inline: offsets and sizes take 2 to 5 bytes
            v &= 0x7F
            shift = 7
            while True:
                if i >= n or shift > 63:
                    return None
                b = value[i]
                i += 1
                v |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
            if v & 0xFFFF_FFFF_FFFF_FFFF >= 1 << 63:
                return None
            v &= 0xFFFF_FFFF_FFFF_FFFF
        if tag == 0x08:
            dtype = v
        elif tag == 0x18:
            shard = v
        elif tag == 0x20:
            offset = v
        else:
            size = v
    return (dtype, dims, shard, offset, size) if i == n else None


def _entry(stored: str, value: bytes, where: str, shards: int, prefix: str) -> TensorEntry:
    """A BundleEntryProto as a tensor."""
    dtype_code, dims, shard, offset, size, slices = 0, [], 0, 0, 0, 0
    unknown_rank = False
    plain = _plain_entry(value)
    if plain is not None:
        dtype_code, dims, shard, offset, size = plain
    for number, wire, v in () if plain is not None else fields(value, where):
        if number == 1 and wire == 0:
            dtype_code = v
        elif number == 2 and wire == 2:
            for n, w, x in fields(v, where):
                if n == 2 and w == 2:
                    dims.append(next((signed(s) for k, ww, s in fields(x, where)
                                      if k == 1 and ww == 0), 0))
                    if len(dims) > MAX_DIMS:
                        raise FormatError(f"tensor {stored!r}: more than {MAX_DIMS} dims",
                                          where)
                elif n == 3 and w == 0:
                    unknown_rank = bool(x)
        elif number == 3 and wire == 0:
            shard = v
        elif number == 4 and wire == 0:
            offset = signed(v)
        elif number == 5 and wire == 0:
            size = signed(v)
        elif number == 7 and wire == 2:
            slices += 1
    dtype = DTYPES.get(dtype_code, f"tf-dtype-{dtype_code}")
    if plain is None and (unknown_rank or any(d < 0 for d in dims)):  # plain: sized dims
        raise FormatError(f"tensor {stored!r}: shape of unknown size {dims}", where)
    if not 0 <= shard < shards or offset < 0 or size < 0:
        raise FormatError(f"tensor {stored!r}: shard {shard} of {shards}, offset {offset}, "
                          f"size {size}", where)
    name = stored[: -len(TF2_SUFFIX)] if stored.endswith(TF2_SUFFIX) else stored
    role = _role(name)
    extra: dict = {"shard": shard}
    if slices:
        extra["partitioned"] = slices  # the parts live under encoded keys: values not located
        return TensorEntry(stored, name, tuple(dims), dtype, role, extra=extra)
    item = ITEM_BYTES.get(dtype)
    shape = tuple(dims)
    if item is not None:
        numel = 1
        for d in shape:
            numel *= d
        if numel * item != size:
            raise FormatError(f"tensor {stored!r}: {size} bytes for {numel} {dtype} elements",
                              where)
    return TensorEntry(stored, name, shape, dtype, role, nbytes=size,
                       offset=offset if item is not None else None,
                       file=_shard_file(prefix, shard, shards), extra=extra)


def _role(name: str) -> Role:
    """The first of ROLE_RULES that matches ``name`` (quick tests first: the first two rules,
    a TF2 slot variable or the optimizer's own, both OPTIMIZER; a name no rule matches)."""
    if name.startswith(("optimizer/", ".OPTIMIZER_SLOT/")) or "/.OPTIMIZER_SLOT/" in name:
        return Role.OPTIMIZER
    if _ANY_RULE.search(name) is None:
        return Role.PARAMETER
    return next((r for rx, r in ROLE_RULES if rx.search(name)), Role.PARAMETER)


_ANY_RULE = re.compile("|".join(f"(?:{rx.pattern})" for rx, _ in ROLE_RULES))


@functools.lru_cache(maxsize=256)
def _shard_file(prefix: str, shard: int, shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{shards:05d}"


def examine(source: Source, variant: str, result: object) -> None:
    """A tensor bundle holds tensors and protobuf records: nothing a loader runs. The index is
    read in full (a malformed one is an error); the verdict is safe."""
    open_checkpoint(source, variant)
    result.kind = NAME  # type: ignore[attr-defined]


ADAPTER = Adapter(
    name=NAME,
    description="TensorFlow checkpoint (tensor bundle: PREFIX.index + PREFIX.data-*; "
    "tf.train.Checkpoint, TF1 Saver, OpenNMT-tf; a SavedModel's variables/)",
    extensions=(".index",),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,
)
