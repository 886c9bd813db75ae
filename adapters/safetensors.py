"""safetensors: the 8-byte header length, the JSON header, nothing else.

Format (huggingface/safetensors: README "Format", ``safetensors/src/tensor.rs``):
``u64 little-endian N`` | ``N bytes of UTF-8 JSON`` (may be right-padded with spaces) | byte buffer.
The JSON maps tensor names to ``{"dtype", "shape", "data_offsets": [begin, end]}`` with offsets
relative to the start of the byte buffer, plus an optional ``"__metadata__"`` str->str map.
Validation follows the reference reader: header size cap, no duplicate keys, known dtype,
``end - begin == numel * itemsize``, offsets inside the file, the buffer entirely indexed with
no holes and no overlaps.

A sharded checkpoint is a ``*.safetensors.index.json`` (``{"metadata": {...}, "weight_map":
{tensor: shard_file}}``) or a directory holding exactly one; it opens as one checkpoint whose
entries carry their shard file, checked against every shard's header.
"""

from __future__ import annotations

import json
import math
import os
import struct
from itertools import chain, repeat
from operator import add, itemgetter, le, mul, sub

from .dtypes import BITS
from .errors import FormatError
from .model import Checkpoint, Finding, TensorEntry
from .registry import Adapter
from .roles import stored_role, stored_roles
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

NAME = "safetensors"
# The reference reader refuses headers above 100 MB (safetensors/src/tensor.rs MAX_HEADER_SIZE).
MAX_HEADER_SIZE = 100_000_000
# A shard index lists one line per tensor: 64 MiB holds millions of names.
MAX_INDEX_BYTES = 64 << 20
INDEX_SUFFIX = ".safetensors.index.json"
# A shard index as transformers names it (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME, with
# any prefix: ``model.safetensors.index.json``, ``pytorch_model.bin.index.json``): the one
# rule by which a file is read as an index. Another JSON file that mentions a weight_map (a
# copy of one in a test's truth, a note) is none.
SHARD_INDEX_SUFFIXES = (INDEX_SUFFIX, ".bin.index.json")
METADATA_KEY = "__metadata__"

# safetensors dtype tag -> canonical dtype.
DTYPES: dict[str, str] = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "U32": "uint32",
    "I32": "int32",
    "U64": "uint64",
    "I64": "int64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
    "F6_E2M3": "float6_e2m3fn",
    "F6_E3M2": "float6_e3m2fn",
    "F4": "float4_e2m1fn",
}


def sniff(head: bytes, source: Source) -> str | None:
    """'file' for a single safetensors file, 'index' for a shard index or a directory with one."""
    if source.is_dir():
        return "index" if _find_index(source) is not None else None
    # The JSON object starts right after the 8-byte length. The length itself is not trusted
    # here, so that a corrupt one gets the safetensors error rather than "unknown format".
    if len(head) >= 10 and head[8:9] == b"{" and head[9:10] in b'"} \t\r\n':
        return "file"
    stripped = head.lstrip()
    if stripped.startswith(b"{") and b'"weight_map"' in head and source.name.endswith(INDEX_SUFFIX):
        return "index"  # a *.bin.index.json lists torch shards: the hf_dir adapter's
    return None


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    if variant == "index":
        index = source if source.is_file() else _find_index(source)
        assert index is not None  # sniff found it
        return _open_index(index)
    if variant == "file":
        header, data_start, size = read_header(source)
        tensors = _entries(source, header, data_start, size, shard=None)
        return Checkpoint(
            paths=(source.where,),
            format=NAME,
            tensors=tensors,
            metadata={"__metadata__": header.get(METADATA_KEY) or {}, "header_bytes": data_start},
        )
    raise FormatError(f"unsupported safetensors variant {variant!r}", source.where)


def read_header(source: Source) -> tuple[dict[str, Any], int, int]:
    """Parse and return (header dict, absolute start of the byte buffer, file size)."""
    where = source.where
    size = source.size
    with source.open() as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise FormatError(
                f"file is {size} bytes, too short for the 8-byte header length", where
            )
        (n,) = struct.unpack("<Q", prefix)
        if n > MAX_HEADER_SIZE:
            raise FormatError(
                f"header length {n} exceeds the {MAX_HEADER_SIZE}-byte limit", where, "offset 0"
            )
        if n > size - 8:
            raise FormatError(
                f"header length {n} runs past the end of the file ({size} bytes)", where, "offset 0"
            )
        raw = f.read(n)
    if len(raw) != n:
        raise FormatError(
            f"header truncated: expected {n} bytes, got {len(raw)}", where, "offset 8"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(
            f"header is not UTF-8 ({e.reason})", where, f"offset {8 + e.start}"
        ) from None
    if not text.startswith("{"):
        raise FormatError("header does not start with '{'", where, "offset 8")
    try:
        header = json.loads(text)
        if not _surely_unique(header, raw):
            header = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as e:
        raise FormatError(f"duplicate key {e.args[0]!r} in header", where) from None
    except (ValueError, RecursionError) as e:
        raise FormatError(f"header is not valid JSON ({e})", where) from None
    if not isinstance(header, dict):
        raise FormatError("header is not a JSON object", where)
    return header, 8 + n, size


def _surely_unique(header: Any, raw: bytes) -> bool:
    """True only when no JSON object in ``raw`` (which parsed to ``header``) repeats a key.

    Every member of every object in the text has one ``:`` outside strings, so the text's
    ``:`` count is at least its number of members; a repeated key leaves fewer members in the
    parsed objects than the text has. When the colons equal the members of the top-level object
    and of its object values, there is no member anywhere else and none was lost. A colon
    inside a string only adds to the count: such a header takes the exact check instead."""
    if type(header) is not dict:
        return False
    members = len(header)
    for value in header.values():
        if type(value) is dict:
            members += len(value)
    return raw.count(b":") == members


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # called for every JSON object: the Python loop only when one repeats
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return out


def _entries(
    source: Source, header: dict[str, Any], data_start: int, size: int, shard: str | None
) -> list[TensorEntry]:
    where = source.where
    meta = header.get(METADATA_KEY)
    if meta is not None and not (
        isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())
    ):
        raise FormatError("__metadata__ must map strings to strings", where)
    buffer_len = size - data_start
    names = list(header)
    infos = list(header.values())
    if METADATA_KEY in header:
        i = names.index(METADATA_KEY)
        del names[i], infos[i]
    tensors = _plain_entries(names, infos, data_start, buffer_len, shard)
    if tensors is not None:
        return tensors
    # Something is wrong (or unusual): entry by entry, so that the first fault is named.
    tensors = []
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        if name == METADATA_KEY:
            continue
        begin, end, dtype, shape = _check_info(name, info, where)
        # safetensors stores no roles: the producers' buffer names and integer tensors are buffers
        entry = TensorEntry(name, name, shape, dtype, stored_role(name, len(shape), dtype),
                            nbytes=end - begin,
                            offset=data_start + begin, file=shard)
        bits = BITS[dtype] * entry.numel
        if bits != (end - begin) * 8 or end > buffer_len:
            _size_fault(name, entry, begin, end, bits, buffer_len, where)
        spans.append((begin, end, name))
        tensors.append(entry)
    _check_coverage(spans, buffer_len, where)
    return tensors


_DTYPE, _SHAPE, _OFFSETS = itemgetter("dtype"), itemgetter("shape"), itemgetter("data_offsets")
_FIRST, _SECOND = itemgetter(0), itemgetter(1)
_TAG_BITS = {tag: BITS[dtype] for tag, dtype in DTYPES.items()}


def _plain_entries(names: list[str], infos: list[Any], data_start: int, buffer_len: int,
                   shard: str | None) -> list[TensorEntry] | None:
    """The entries of a header that passes every check of :func:`_check_info`, the sizes and
    :func:`_check_coverage`, made column by column (each check one C-level pass over all the
    entries: ``json.loads`` made only JSON types, so a set of types per field decides them);
    None when any check fails or there are no tensors, for the entry-by-entry path to name the
    fault."""
    if not names or set(map(type, infos)) != {dict}:
        return None
    try:
        tags = list(map(_DTYPE, infos))
        shapes = list(map(_SHAPE, infos))
        offsets = list(map(_OFFSETS, infos))
        if not set(tags) <= _TAG_BITS.keys():  # TypeError for an unhashable tag
            return None
    except (KeyError, TypeError):
        return None
    if set(map(type, shapes)) != {list} or set(map(type, offsets)) != {list}:
        return None
    dims = list(chain.from_iterable(shapes))
    if dims and (set(map(type, dims)) != {int} or min(dims) < 0):
        return None
    if set(map(len, offsets)) != {2}:
        return None
    begins, ends = list(map(_FIRST, offsets)), list(map(_SECOND, offsets))
    if ({*map(type, begins), *map(type, ends)} != {int} or min(begins) < 0
            or not all(map(le, begins, ends)) or max(ends) > buffer_len):
        return None
    shapes = list(map(tuple, shapes))
    numels = list(map(math.prod, shapes))
    nbytes = list(map(sub, ends, begins))
    if list(map(mul, map(_TAG_BITS.__getitem__, tags), numels)) != list(map(mul, nbytes,
                                                                            repeat(8))):
        return None
    # The buffer indexed whole, without holes or overlaps: each span (in order of begin,
    # then end) starts where the one before ends.
    starts, stops = begins, ends
    if starts[1:] != stops[:-1]:
        spans = sorted(zip(begins, ends, strict=True))
        starts, stops = list(map(_FIRST, spans)), list(map(_SECOND, spans))
    if starts[0] != 0 or starts[1:] != stops[:-1] or stops[-1] != buffer_len:
        return None
    dtypes = list(map(DTYPES.__getitem__, tags))
    roles = stored_roles(names, list(map(len, shapes)), dtypes)
    return TensorEntry.plain_many(names, shapes, dtypes, roles, nbytes,
                                  list(map(add, begins, repeat(data_start))), numels, shard)


def _size_fault(name: str, entry: TensorEntry, begin: int, end: int, bits: int,
                buffer_len: int, where: str) -> None:
    """Raise the FormatError for a tensor whose byte span does not fit its shape or the
    buffer."""
    if bits % 8:
        raise FormatError(
            f"tensor {name!r}: {entry.numel} elements of {entry.dtype} do not fill whole bytes",
            where,
        )
    if end - begin != bits // 8:
        raise FormatError(
            f"tensor {name!r}: data_offsets [{begin}, {end}] span {end - begin} bytes, but "
            f"shape {list(entry.shape)} of {entry.dtype} needs {bits // 8}",
            where,
        )
    raise FormatError(
        f"tensor {name!r}: data_offsets end {end} is past the byte buffer ({buffer_len} bytes)",
        where,
    )


def _check_info(name: str, info: Any, where: str) -> tuple[int, int, str, tuple[int, ...]]:
    """(begin, end, dtype, shape) of one header entry, or a FormatError naming its fault. One
    pass of cheap checks (``type(x) is int`` also excludes bool): this runs once per tensor."""
    if type(info) is not dict:
        raise FormatError(f"tensor {name!r}: entry is not an object", where)
    tag = info.get("dtype")
    if type(tag) is not str or tag not in DTYPES:
        raise FormatError(
            f"tensor {name!r}: unknown dtype {tag!r} (known: {', '.join(DTYPES)})", where
        )
    shape = info.get("shape")
    if type(shape) is not list:
        shape = None
    else:
        for d in shape:
            if type(d) is not int or d < 0:
                shape = None
                break
    if shape is None:
        raise FormatError(
            f"tensor {name!r}: shape {info.get('shape')!r} is not a list of non-negative ints",
            where,
        )
    offsets = info.get("data_offsets")
    if not (
        type(offsets) is list
        and len(offsets) == 2
        and type(offsets[0]) is int
        and type(offsets[1]) is int
        and offsets[0] >= 0
    ):
        raise FormatError(f"tensor {name!r}: data_offsets {offsets!r} is not [begin, end]", where)
    begin, end = offsets
    if end < begin:
        raise FormatError(f"tensor {name!r}: data_offsets end {end} < begin {begin}", where)
    return begin, end, DTYPES[tag], tuple(shape)


def _check_coverage(spans: list[tuple[int, int, str]], buffer_len: int, where: str) -> None:
    """The byte buffer must be indexed entirely, without holes or overlaps."""
    pos, prev = 0, None
    for begin, end, name in sorted(spans):
        if begin < pos:
            raise FormatError(
                f"tensor {name!r} overlaps tensor {prev!r} (bytes {begin}..{pos})", where
            )
        if begin > pos:
            raise FormatError(
                f"bytes {pos}..{begin} of the buffer belong to no tensor (before {name!r})", where
            )
        pos, prev = end, name
    if pos != buffer_len:
        raise FormatError(
            f"the byte buffer is {buffer_len} bytes but the tensors cover {pos}", where
        )


def is_shard_index(name: str) -> bool:
    """Whether a file of this name is a shard index (:data:`SHARD_INDEX_SUFFIXES`)."""
    return name.endswith(SHARD_INDEX_SUFFIXES)


def _find_index(directory: Source) -> Source | None:
    found = [n for n in directory.list() if n.endswith(INDEX_SUFFIX)]
    if len(found) > 1:
        raise FormatError(
            f"several shard indexes ({', '.join(found)}); open one of them", directory.where
        )
    return directory.child(found[0]) if found else None


def read_weight_map(index: Source) -> tuple[dict[str, Any], dict[str, str]]:
    """(the whole index document, its ``weight_map`` of tensor -> shard file) of a shard index
    as transformers writes it (``*.safetensors.index.json``, ``pytorch_model.bin.index.json``)."""
    try:
        doc = json.loads(index.read_text(MAX_INDEX_BYTES))
    except ValueError as e:
        raise FormatError(f"cannot read shard index ({e})", index.where) from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise FormatError("shard index has no 'weight_map' of tensor -> shard file", index.where)
    return doc, weight_map


def _open_index(index: Source) -> Checkpoint:
    where = index.where
    doc, weight_map = read_weight_map(index)
    shards: dict[str, Source] = {}
    for shard in dict.fromkeys(weight_map.values()):
        shards[shard] = shard_source(index, shard, where)
    tensors: list[TensorEntry] = []
    found_in: dict[str, str] = {}
    for shard, shard_path in shards.items():
        if not shard_path.is_file():
            raise FormatError(f"shard {shard!r} listed in the index is missing", where)
        header, data_start, size = read_header(shard_path)
        for t in _entries(shard_path, header, data_start, size, shard=shard):
            if t.name in found_in:
                raise FormatError(
                    f"tensor {t.name!r} is stored in both {found_in[t.name]!r} and {shard!r}", where
                )
            found_in[t.name] = shard
            tensors.append(t)
    for name, shard in weight_map.items():
        if name not in found_in:
            raise FormatError(f"tensor {name!r} is in the index but not in shard {shard!r}", where)
        if found_in[name] != shard:
            raise FormatError(
                f"tensor {name!r}: index says shard {shard!r}, found in {found_in[name]!r}", where
            )
    extra = [t.name for t in tensors if t.name not in weight_map]
    if extra:
        raise FormatError(
            f"{len(extra)} tensor(s) in the shards are missing from the index, e.g. {extra[0]!r}",
            where,
        )
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    stored = sum(t.nbytes or 0 for t in tensors)
    findings = []
    total_size = metadata.get("total_size")
    if isinstance(total_size, int) and total_size != stored:
        findings.append(
            Finding(
                "warning",
                f"index metadata total_size is {total_size} but the shards hold {stored} "
                "tensor bytes",
                "metadata.total_size",
            )
        )
    return Checkpoint(
        paths=(index.where, *(p.where for p in shards.values())),
        format=NAME + "-sharded",
        tensors=tensors,
        metadata={"index_metadata": metadata, "shards": list(shards), "tensor_bytes": stored},
        findings=findings,
    )


def shard_source(index: Source, shard: str, where: str) -> Source:
    """A shard named by the index, inside the index's directory; anything that escapes it (an
    absolute name, ``..``, a symlink pointing out) is refused."""
    if not shard or os.path.isabs(shard) or "\\" in shard:
        raise FormatError(f"shard name {shard!r} must be a relative file name", where)
    try:
        return index.sibling(shard)
    except FormatError:
        raise FormatError(
            f"shard name {shard!r} points outside the index's directory", where
        ) from None


def examine(source: Source, variant: str, res: object) -> None:
    """``scan``: nothing in a safetensors file runs; its header is checked by the same walk the
    listing uses (length against the file size and the cap, JSON, dtypes, offsets inside the
    buffer, no holes or overlaps): a violation is an error."""
    res.kind = "safetensors"  # type: ignore[attr-defined]
    if variant != "file":  # a shard index: JSON text naming files, each scanned on its own
        res.kind = "safetensors-index"  # type: ignore[attr-defined]
        return
    open_checkpoint(source, variant)


ADAPTER = Adapter(
    name=NAME,
    description="safetensors file (JSON header only), or a sharded *.safetensors.index.json",
    extensions=(".safetensors", ".safetensors.index.json"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,  # type: ignore[arg-type]
    default_variant="file",
)
