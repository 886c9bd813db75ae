"""Where an ONNX initializer's values are, for value passes (``stats``, ``diff --values``):
``raw_data`` and a single packed ``float_data``/``double_data`` run are byte ranges of the model
file; external data is a byte range of the file ``external_data.location`` names, which must stay
inside the model's directory (an absolute path or ``..`` is refused, as onnx refuses it); the
varint fields (``int32_data``, ``int64_data``, ``uint64_data``) are decoded as they are read.
"""

from __future__ import annotations

import io
import sys
from array import array

from .errors import FormatError, InspectorError
from .model import ByteRange, Checkpoint, Finding, Stream, TensorEntry
from .onnx_graph import (
    FIXED_DTYPES,
    FIXED_FIELDS,
    MAX_SPANS,
    VARINT_CODES,
    VARINT_FIELDS,
    TensorFacts,
)
from .protobuf import MASK64, MAX_WINDOW
from .registry import byte_ranges
from .source import Source, check_relative

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from contextlib import ExitStack
    from typing import Any


class ValueSpans:
    """How each entry's values are read where they are not a plain byte range."""

    def __init__(self) -> None:
        self.varints: dict[str, tuple[int, list[tuple[int, int, int, int]]]] = {}
        self.why: dict[str, str] = {}


def product(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def locate(t: TensorFacts, dtype: str, size: int | None, name: str, source: Source,
            files: dict[str, int | None], extra: dict[str, Any], values: ValueSpans,
            findings: list[Finding], path: str) -> tuple[int | None, str | None, str]:
    """(offset, external file, why values are unavailable) of one dense initializer."""
    if t.segment:
        extra["segment"] = True
        return None, None, "a segment of a larger tensor (TensorProto.segment)"
    if t.spans > MAX_SPANS:
        extra["data"] = "unpacked"
        return None, None, f"{t.spans} unpacked data fields (over {MAX_SPANS})"
    if t.location == 1:
        return external(t, size, name, source, files, extra, findings, path)
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
    label = FIXED_FIELDS.get(number) or VARINT_FIELDS.get(number, "string_data")
    extra["data"] = label
    if len(fields) > 1:
        return None, None, "several typed data fields"
    if number in FIXED_FIELDS:
        (_, wire, at, n), *more = t.typed
        if not more and wire == 2 and n == size and dtype in FIXED_DTYPES[number]:
            return at, None, ""
        return None, None, f"{label} not stored as one packed run of {size} bytes"
    if number in VARINT_FIELDS and dtype in VARINT_CODES:
        values.varints[name] = (number, t.typed)
        return None, None, ""
    return None, None, f"{label} for {dtype}"


def external(t: TensorFacts, size: int | None, name: str, source: Source,
              files: dict[str, int | None], extra: dict[str, Any], findings: list[Finding],
              path: str) -> tuple[int | None, str | None, str]:
    where = source.where
    info = dict(t.external)
    location = info.get("location")
    if not location:
        findings.append(Finding("warning", f"initializer {t.name!r}: external data without a "
                                "location", path or None, t.name))
        return None, None, "external data without a location"
    safe_location(t, where)
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
        files[location] = external_file_size(source, location)
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


def safe_location(t: TensorFacts, where: str) -> None:
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


def external_file_size(source: Source, location: str) -> int | None:
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
        values.append((v | block[j] << shift) & MASK64)
        i = j + 1
    return values, i


def value_reader(ckpt: Checkpoint, source: Source, values: ValueSpans) -> Any:
    plain = byte_ranges(ckpt, source)

    def locate(entry: TensorEntry) -> ByteRange | Stream:
        if entry.offset is not None:
            return plain(entry)
        spec = values.varints.get(entry.name)
        if spec is not None:
            number, spans = spec
            code = VARINT_CODES[entry.dtype]

            def open_stream(stack: ExitStack) -> io.RawIOBase:
                return stack.enter_context(_Decoded(source, spans, code))

            return Stream(open_stream)
        raise FormatError(f"tensor {entry.stored_name!r}: "
                          f"{values.why.get(entry.name, 'its data is not located')}",
                          source.where)

    return locate
