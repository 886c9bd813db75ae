"""CTranslate2 models: ``model.bin`` (its own binary layout) and the directory around it.

Layout, as CTranslate2's writer (``python/ctranslate2/specs/model_spec.py``
``ModelSpec._serialize``) writes it and its reader (``src/models/model.cc`` ``Model::load``)
reads it; every integer little-endian::

    u32 binary_version                                  (1..6; 6 since CTranslate2 3.0)
    v>=2: string spec_name | u32 spec_revision          (v1: neither; revision 1)
    u32 num_variables
    num_variables x ( string name | u8 rank | rank x u32 dim
                      | v>=4: u8 type_id | u32 num_bytes        (DataType: float32, int8, int16,
                      | v<4:  u8 item_size | u32 num_elements    int32, float16, bfloat16;
                      | the bytes )                              v<4: 4/2/1 = float32/int16/int8)
    v>=3: u32 num_aliases | num_aliases x ( string alias | string variable_name )

A string is ``u16 length (with the terminating NUL) | bytes | NUL``. Version 5 changed only the
rounding of quantization (``round_before_cast``), 6 moved the tokens and other options to
``config.json`` beside ``model.bin``; the layout of the file is the same from 4 on.

What the variables are (CTranslate2's own rules):

- a scalar (rank 0) is a model attribute (``num_heads`` int16, ``pre_norm`` as int8, ...), and so
  is an int8 vector at the root (a string attribute, ``unk_token`` in models before version 6):
  role ``other``, their values read (a few bytes each) into the hyperparameters;
- ``X_scale`` (and AWQ's ``X_zero``) beside an integer ``X`` is its quantization scale: role
  ``buffer`` (``Quantize`` made it, not training); ``Dequantize`` gives ``X / X_scale``, per row
  for int8 (one scale per output row, ``model_spec._quantize``), one scale for int16;
- ``*/position_encodings/encodings`` is the position table the converters copy from the source
  model (OpenNMT-py's and fairseq's sinusoidal table, a buffer there): role ``buffer``;
  ``model.bin`` does not say whether a source learned it;
- every other variable is a ``parameter``. An alias (``_alias_variables``: a duplicate, e.g. tied
  embeddings) is listed under its own name as the same tensor as its target (counted once).

Values: plain dtypes are byte ranges; an int8 or int16 variable with a scale is read dequantized
(``value / scale``) as CTranslate2's ``Dequantize`` does. Listing reads only the headers: the
variables' bytes are skipped by seeking (attribute scalars excepted). Every count and size is
checked against the file before anything is allocated.
"""

from __future__ import annotations

import math
import struct

from .directory import file_in, read_json_object
from .errors import FormatError
from .model import Blocks, ByteRange, Checkpoint, Finding, Role, TensorEntry
from .registry import Adapter
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from contextlib import ExitStack
    from typing import Any, BinaryIO

    from .model import ValueLocation
    from .security.examination import FileResult

NAME = "ctranslate2"
MODEL_FILE = "model.bin"
CONFIG_FILE = "config.json"
CURRENT_BINARY_VERSION = 6  # include/ctranslate2/models/model.h current_binary_version
# include/ctranslate2/types.h DataType, in order (model_spec._dtype_to_type_id)
DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")
ITEM_SIZE = {"float32": 4, "int8": 1, "int16": 2, "int32": 4, "float16": 2, "bfloat16": 2}
LEGACY_ITEM_SIZE = {4: "float32", 2: "int16", 1: "int8"}  # get_dtype_from_item_size (v<4)
SNIFF_MAX_VERSION = 64  # versions above the current one are claimed (and refused by name)
MAX_ATTRIBUTE_BYTES = 4096  # a string attribute longer than this is not read into the listing
VOCABULARIES = ("shared_vocabulary", "source_vocabulary", "target_vocabulary", "vocabulary")
MAX_VOCABULARY_BYTES = 64 << 20
POSITION_TABLE = "position_encodings/encodings"
_MIN_VARIABLE = 2 + 1 + 1 + 1 + 4  # empty-named string, rank, type, size


def _plausible(head: bytes) -> bool:
    """The first bytes parse as a model.bin header with a first variable record."""
    if len(head) < 12:
        return False
    (version,) = struct.unpack_from("<I", head)
    if not 1 <= version <= SNIFF_MAX_VERSION:
        return False
    if version > CURRENT_BINARY_VERSION:  # a newer CTranslate2: claimed if its header reads
        version = CURRENT_BINARY_VERSION   # as today's, then refused by name
    pos = 4
    if version >= 2:
        name, pos = _head_string(head, pos)
        if name is None or not name.isidentifier():
            return False
        pos += 4  # revision
    if pos + 4 > len(head):
        return False
    (count,) = struct.unpack_from("<I", head, pos)
    pos += 4
    if count == 0:
        return pos + (4 if version >= 3 else 0) == len(head)
    name, pos = _head_string(head, pos)
    if not name or not name.isprintable():
        return False
    if pos + 1 > len(head):
        return pos == len(head)  # the head ended inside the record: a long name
    rank = head[pos]
    if pos + 1 + 4 * rank + 1 > len(head):
        return True
    type_id = head[pos + 1 + 4 * rank]
    return type_id < len(DTYPES) if version >= 4 else type_id in LEGACY_ITEM_SIZE


def _head_string(head: bytes, pos: int) -> tuple[str | None, int]:
    if pos + 2 > len(head):
        return None, pos
    (n,) = struct.unpack_from("<H", head, pos)
    end = pos + 2 + n
    if n == 0 or end > len(head) or head[end - 1] != 0:
        return None, end
    try:
        return head[pos + 2:end - 1].decode("utf-8"), end
    except UnicodeDecodeError:
        return None, end


def sniff(head: bytes, source: Source) -> str | None:
    """'dir' for a directory whose model.bin parses; 'file' for such a model.bin."""
    if not head:
        if not source.is_dir():
            return None
        model = file_in(source, MODEL_FILE)
        return "dir" if model is not None and _plausible(model.head(4096)) else None
    return "file" if _plausible(head) else None


class _Reader:
    """Sequential reads of a model.bin; every length checked against the bytes left."""

    def __init__(self, f: BinaryIO, size: int, where: str) -> None:
        self.f, self.size, self.where, self.pos = f, size, where, 0

    def left(self) -> int:
        return self.size - self.pos

    def raw(self, n: int, what: str) -> bytes:
        if n > self.left():
            raise FormatError(f"{what} needs {n} bytes at offset {self.pos}, but the file ends "
                              f"after {self.left()}", self.where)
        data = self.f.read(n)
        if len(data) != n:
            raise FormatError(f"the file ended early while reading {what}", self.where)
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n > self.left():
            raise FormatError(f"{what}: its {n} bytes at offset {self.pos} run past the end of "
                              f"the file ({self.left()} bytes left)", self.where)
        self.pos += n
        self.f.seek(self.pos)

    def u8(self, what: str) -> int:
        return self.raw(1, what)[0]

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.raw(4, what))[0]

    def string(self, what: str) -> str:
        (n,) = struct.unpack("<H", self.raw(2, what))
        if n == 0:  # model.cc: "Invalid string length"
            raise FormatError(f"{what}: invalid string length 0", self.where,
                              f"offset {self.pos - 2}")
        raw = self.raw(n, what)
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{what} is not UTF-8 ({raw[:40]!r})", self.where,
                              f"offset {self.pos - n}") from None


def read_model(source: Source) -> dict[str, Any]:
    """The header facts of a model.bin: version, spec, revision, the variables (name, shape,
    dtype, offset, num_bytes, attribute value) and the aliases, with findings."""
    where = source.where
    with source.open() as f:
        rd = _Reader(f, source.size, where)
        version = rd.u32("the binary version")
        if version == 0 or version > CURRENT_BINARY_VERSION:
            raise FormatError(f"binary version {version} is not one CTranslate2 writes (1 to "
                              f"{CURRENT_BINARY_VERSION} are known)", where, "offset 0")
        spec, revision = "", 1
        if version >= 2:
            spec = rd.string("the spec name")
            revision = rd.u32("the spec revision")
        count = rd.u32("the variable count")
        if count * _MIN_VARIABLE > rd.left():
            raise FormatError(f"variable count {count} cannot fit in the {rd.left()} bytes "
                              "left", where, f"offset {rd.pos - 4}")
        variables: list[dict[str, Any]] = []
        findings: list[Finding] = []
        seen: set[str] = set()
        for i in range(count):
            var = _variable(rd, i, version)
            if var["name"] in seen:  # Model::register_variable: emplace keeps the first
                findings.append(Finding("warning", f"variable {var['name']!r} is stored twice; "
                                        "CTranslate2 keeps the first", var["name"]))
                continue
            seen.add(var["name"])
            variables.append(var)
        aliases: list[tuple[str, str]] = []
        if version >= 3:
            n = rd.u32("the alias count")
            if n * 6 > rd.left():
                raise FormatError(f"alias count {n} cannot fit in the {rd.left()} bytes left",
                                  where, f"offset {rd.pos - 4}")
            for i in range(n):
                aliases.append((rd.string(f"alias {i}"), rd.string(f"alias {i}'s variable")))
        if rd.left():
            findings.append(Finding("warning", f"{rd.left()} bytes after the last record "
                                    "(CTranslate2 ignores them)", f"offset {rd.pos}"))
    return {"binary_version": version, "spec": spec, "revision": revision,
            "variables": variables, "aliases": aliases, "findings": findings}


def _variable(rd: _Reader, i: int, version: int) -> dict[str, Any]:
    name = rd.string(f"variable {i}'s name")
    rank = rd.u8(f"variable {name!r}'s rank")
    shape = struct.unpack(f"<{rank}I", rd.raw(4 * rank, f"variable {name!r}'s shape"))
    numel = math.prod(shape)
    code = rd.u8(f"variable {name!r}'s type")
    size_field = rd.u32(f"variable {name!r}'s size")
    if version >= 4:
        if code >= len(DTYPES):
            raise FormatError(f"variable {name!r}: unknown type id {code} (known: 0-"
                              f"{len(DTYPES) - 1}, {', '.join(DTYPES)})", rd.where,
                              f"offset {rd.pos - 5}")
        dtype, num_bytes = DTYPES[code], size_field
    else:
        dtype = LEGACY_ITEM_SIZE.get(code)
        if dtype is None:  # get_dtype_from_item_size
            raise FormatError(f"variable {name!r}: unknown data type of width {code}",
                              rd.where, f"offset {rd.pos - 5}")
        num_bytes = size_field * code
    if num_bytes != numel * ITEM_SIZE[dtype]:  # model.cc: "has an invalid payload size"
        raise FormatError(f"variable {name!r}: {num_bytes} bytes for shape {list(shape)} of "
                          f"{dtype} ({numel * ITEM_SIZE[dtype]} expected)", rd.where,
                          f"offset {rd.pos - 4}")
    offset = rd.pos
    value: Any = None
    if _is_attribute(name, shape, dtype) and num_bytes <= MAX_ATTRIBUTE_BYTES:
        value = _attribute_value(rd.raw(num_bytes, f"attribute {name!r}"), shape, dtype)
    else:
        rd.skip(num_bytes, f"variable {name!r}")
    return {"name": name, "shape": shape, "dtype": dtype, "offset": offset,
            "num_bytes": num_bytes, "value": value}


def _is_attribute(name: str, shape: tuple[int, ...], dtype: str) -> bool:
    """A scalar, or an int8 vector at the root (a string attribute: ``unk_token``)."""
    return not shape or (len(shape) == 1 and dtype == "int8" and "/" not in name)


_SCALAR = {"float32": "<f", "int8": "<b", "int16": "<h", "int32": "<i", "float16": "<e"}


def _attribute_value(raw: bytes, shape: tuple[int, ...], dtype: str) -> Any:
    if shape:
        return raw.decode("utf-8", "replace")
    if dtype == "bfloat16":
        return struct.unpack("<f", b"\0\0" + raw)[0]
    return struct.unpack(_SCALAR[dtype], raw)[0]


def _role(name: str, shape: tuple[int, ...], dtype: str, dtypes: dict[str, str]) -> Role:
    base, _, suffix = name.rpartition("_")
    if suffix in ("scale", "zero") and dtypes.get(base, "float").startswith("int"):
        return Role.BUFFER  # int16's one scale is a scalar: a scale before an attribute
    if _is_attribute(name, shape, dtype):
        return Role.OTHER
    if name.endswith(POSITION_TABLE):
        return Role.BUFFER
    return Role.PARAMETER


def _entries(model: dict[str, Any], file: str | None) -> tuple[list[TensorEntry], dict[str, Any]]:
    dtypes = {v["name"]: v["dtype"] for v in model["variables"]}
    tensors: list[TensorEntry] = []
    by_name: dict[str, TensorEntry] = {}
    attributes: dict[str, Any] = {}
    aliased = {target for _, target in model["aliases"]}
    for v in model["variables"]:
        name, shape, dtype = v["name"], v["shape"], v["dtype"]
        role = _role(name, shape, dtype, dtypes)
        if role is Role.OTHER and v["value"] is not None:
            attributes[name] = v["value"]
        extra: dict[str, Any] = {}
        scale = name + "_scale"
        if dtype in ("int8", "int16") and role is Role.PARAMETER and scale in dtypes:
            extra["quantization_scale"] = scale
        entry = TensorEntry(name, name, shape, dtype, role, nbytes=v["num_bytes"],
                            offset=v["offset"], file=file,
                            storage=name if name in aliased else None, extra=extra)
        tensors.append(entry)
        by_name[name] = entry
    return tensors, {"attributes": attributes, "by_name": by_name}


def _add_aliases(model: dict[str, Any], tensors: list[TensorEntry], by_name: dict[str, TensorEntry],
                 findings: list[Finding]) -> dict[str, str]:
    listed: dict[str, str] = {}
    for alias, target in model["aliases"]:
        entry = by_name.get(target)
        if entry is None:  # Model::register_variable_alias ignores it
            findings.append(Finding("warning", f"alias {alias!r} names {target!r}, which is "
                                    "not a variable (CTranslate2 ignores the alias)", alias))
            continue
        if alias in by_name:  # emplace: an existing name keeps its variable
            findings.append(Finding("warning", f"alias {alias!r} is also a variable's name "
                                    "(CTranslate2 keeps the variable)", alias))
            continue
        extra = {**entry.extra, "alias_of": target}
        aliased = entry.replace(stored_name=alias, name=alias, extra=extra)
        tensors.append(aliased)
        by_name[alias] = aliased
        listed[alias] = target
    return listed


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    """A model directory (model.bin, config.json, vocabularies) or a model.bin alone."""
    if variant == "dir" or source.is_dir():
        model_source = file_in(source, MODEL_FILE)
        if model_source is None:
            raise FormatError(f"no {MODEL_FILE} in this CTranslate2 model directory",
                              source.where)
        directory, file = source, MODEL_FILE
    else:
        model_source, directory, file = source, None, None
    model = read_model(model_source)
    findings = model["findings"]
    tensors, facts = _entries(model, file)
    aliases = _add_aliases(model, tensors, facts["by_name"], findings)
    paths = [model_source.where]
    hyper: dict[str, Any] = {"spec": model["spec"], "spec_revision": model["revision"],
                             "binary_version": model["binary_version"],
                             "attributes": facts["attributes"]}
    if directory is not None:
        config = file_in(directory, CONFIG_FILE)
        if config is not None:
            hyper["config"] = read_json_object(config, CONFIG_FILE)
            paths.append(config.where)
        sizes = {}
        for stem in VOCABULARIES:
            for suffix in (".json", ".txt"):
                vocab = file_in(directory, stem + suffix)
                if vocab is not None:
                    sizes[stem] = _vocabulary_size(vocab, suffix)
                    paths.append(vocab.where)
                    break
        if sizes:
            hyper["vocabulary_sizes"] = sizes
    meta = {"binary_version": model["binary_version"], "spec": model["spec"],
            "spec_revision": model["revision"], "variable_count": len(model["variables"]),
            "aliases": aliases}
    quantized = sorted({t.dtype for t in tensors if "quantization_scale" in t.extra})
    if quantized:
        meta["quantization"] = quantized
    ckpt = Checkpoint(paths=tuple(paths), format=NAME, tensors=tensors, metadata=meta,
                      hyperparameters=hyper, findings=findings, source=source)
    ckpt.reader = _reader(ckpt, model_source, facts["by_name"])
    return ckpt


def _vocabulary_size(source: Source, suffix: str) -> int:
    """Tokens in a vocabulary file: a JSON list (CTranslate2 3+) or one token a line."""
    import json

    text = source.read_text(MAX_VOCABULARY_BYTES)
    if suffix == ".json":
        try:
            tokens = json.loads(text)
        except ValueError as e:
            raise FormatError(f"{source.name} is not readable JSON ({e})", source.where) from None
        if not isinstance(tokens, list):
            raise FormatError(f"{source.name} is not a JSON list of tokens", source.where)
        return len(tokens)
    return len(text.splitlines())


class _Dequantized:
    """An int8 / int16 variable as CTranslate2's ``Dequantize`` gives it (``value / scale``):
    slices like a NumPy array (C-order blocks), reading only the rows asked for."""

    def __init__(self, f: BinaryIO, entry: TensorEntry, scale: Any) -> None:
        self.f, self.entry, self.scale = f, entry, scale
        self.shape = entry.shape
        self.row = math.prod(entry.shape[1:]) if entry.shape else 1

    def __getitem__(self, key: Any) -> Any:
        """``ds[()]`` (a scalar) or ``ds[(i, j, ..., slice(a, b))]``: a C-order block."""
        import numpy as np

        shape = self.shape
        first, n = 0, 1
        if shape:
            *prefix, last = key
            dim = len(prefix)
            for d, k in enumerate(prefix):
                first = first * shape[d] + k
            start, stop, _ = last.indices(shape[dim])
            inner = math.prod(shape[dim + 1:])
            first = (first * shape[dim] + start) * inner
            n = (stop - start) * inner
        item = ITEM_SIZE[self.entry.dtype]
        self.f.seek(self.entry.offset + first * item)
        raw = self.f.read(n * item)
        values = np.frombuffer(raw, dtype="i1" if item == 1 else "<i2").astype(np.float32)
        if self.scale.size == 1:
            return values / self.scale[0]
        return values / self.scale[(first + np.arange(n)) // self.row]


def _reader(ckpt: Checkpoint, model_source: Source, by_name: dict[str, TensorEntry]):
    file_source = model_source

    def locate(entry: TensorEntry) -> ValueLocation:
        scale_name = entry.extra.get("quantization_scale")
        if scale_name is None:
            return ByteRange(file_source, entry.offset)
        scale_entry = by_name[scale_name]

        def open_blocks(stack: ExitStack) -> Any:
            import numpy as np

            f = stack.enter_context(file_source.open())
            f.seek(scale_entry.offset)
            raw = f.read(scale_entry.nbytes)
            dtype = {"float32": "<f4", "float16": "<f2"}.get(scale_entry.dtype)
            if dtype is None or len(raw) != scale_entry.nbytes:
                raise FormatError(f"scale {scale_name!r} of {scale_entry.dtype} cannot be "
                                  "applied", file_source.where)
            scale = np.frombuffer(raw, dtype=dtype).astype(np.float32)
            rows = entry.shape[0] if entry.shape else 1
            if scale.size not in (1, rows):
                raise FormatError(f"scale {scale_name!r} has {scale.size} values for "
                                  f"{rows} rows of {entry.stored_name!r}", file_source.where)
            return _Dequantized(f, entry, scale)

        return Blocks(open_blocks)

    return locate


def examine(source: Source, variant: str, result: FileResult) -> None:
    """``inspector scan``: the header walk of a listing (a bad file is an error). CTranslate2's
    loader reads numbers, names and raw arrays from model.bin; nothing in it is run."""
    result.kind = NAME
    if variant == "dir" or source.is_dir():
        model = file_in(source, MODEL_FILE)
        if model is None:
            raise FormatError(f"no {MODEL_FILE} in this CTranslate2 model directory",
                              source.where)
        source = model
    read_model(source)


ADAPTER = Adapter(
    name=NAME,
    description="CTranslate2 model.bin (binary versions 1-6) and its model directory",
    extensions=(".bin",),
    sniff=sniff,
    open=open_checkpoint,
    default_variant="file",
    examine=examine,
)
