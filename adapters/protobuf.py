"""The protobuf wire format, read without protobuf: varints, fields of a message in memory
(:func:`fields`), and :class:`Wire`, windowed reads of a large file of nested messages where every
length read from the file is checked against the end of its message before use (ONNX models are
read through it; TensorFlow's bundle headers and index entries through :func:`fields`).
Nothing here knows a message type: the callers name the fields.
"""

from __future__ import annotations

import struct

from .errors import FormatError

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

MAX_STRING = 1 << 20  # a name, key or value longer than this is refused, not allocated
MIN_WINDOW = 1 << 10  # bytes read after a skip
SMALL_MESSAGE = 4 << 10  # a message this small is read whole (raw data of tiny tensors too)
SCAN_MESSAGE = 64 << 10  # a message up to this size in the window is scanned into one list
MAX_WINDOW = 1 << 20  # read-ahead cap while the structure is dense
MASK64 = (1 << 64) - 1


class Wire:
    """Windowed reads of one protobuf file: ``buf`` holds the file's bytes from ``base``.
    Every length read from the file is checked against the end of its message before use."""

    __slots__ = ("view", "size", "where", "kind", "buf", "base", "step")

    def __init__(self, view: Any, size: int, where: str, kind: str = "protobuf") -> None:
        self.view = view
        self.kind = kind  # the format's name in error messages
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
                key, i = wire_varint(buf, i, lim, self, base + at, end, what)
            wire = key & 7
            if key < 8:
                raise self.fault(f"{what}: field number 0 (corrupt protobuf)", base + at)
            if wire == 2:
                n = buf[i] if i < lim else 0x80
                if n < 0x80:
                    i += 1
                else:
                    n, i = wire_varint(buf, i, lim, self, base + at, end, what)
                if n > lim - i:
                    raise self.fault(
                        f"{what}: field {key >> 3} of {n} bytes runs past the end of its "
                        f"message ({lim - i} bytes left{eof_note(end, self.size)})", base + at)
                append((key >> 3, 2, base + i, n))
                i += n
            elif wire == 0:
                value = buf[i] if i < lim else 0x80
                if value < 0x80:
                    i += 1
                else:
                    value, i = wire_varint(buf, i, lim, self, base + at, end, what)
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
                key, i = wire_varint(buf, i, lim, self, pos, end, what)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise self.fault(f"{what}: field number 0 (corrupt protobuf)", pos)
            if wire == 2:
                n = buf[i] if i < lim else 0x80
                if n < 0x80:
                    i += 1
                else:
                    n, i = wire_varint(buf, i, lim, self, pos, end, what)
                at = base + i
                if n > end - at:
                    raise self.fault(
                        f"{what}: field {number} of {n} bytes runs past the end of its message "
                        f"({end - at} bytes left{eof_note(end, self.size)})", pos)
                pos = at + n
                yield number, 2, at, n
            elif wire == 0:
                value, i = wire_varint(buf, i, lim, self, pos, end, what)
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
        types the format never uses (groups, 6, 7)."""
        wire = key & 7
        if wire != 1 and wire != 5:
            raise self.fault(f"{what}: field {key >> 3} has wire type {wire}, which "
                             f"{self.kind} messages do not use (corrupt protobuf)", pos)
        if (8 if wire == 1 else 4) > end - at:
            raise self.fault(f"{what}: fixed-width field {key >> 3} runs past the end of its "
                             f"message{eof_note(end, self.size)}", pos)

    def packed_varints(self, at: int, n: int, what: str, most: int) -> list[int]:
        """The varints of a packed field of at most ``most`` values (a short one: dims)."""
        if n > most * 10:
            raise self.fault(f"{what}: a packed field of {n} bytes (corrupt?)", at)
        buf = self.bytes(at, n)
        out, i = [], 0
        while i < n:
            value, i = wire_varint(buf, i, n, self, at, at + n, what)
            out.append(value)
        return out


def eof_note(end: int, size: int) -> str:
    return "; the file is truncated" if end >= size else ""


def wire_varint(buf: bytes, i: int, lim: int, wire: Wire, pos: int, end: int,
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
                             f"{eof_note(end, wire.size)}", pos)
        b = buf[j]
        value |= (b & 0x7F) << shift
        j += 1
        if b < 0x80:
            return value & MASK64, j
        shift += 7
        if shift >= 70:
            raise wire.fault(f"{what}: a varint longer than 10 bytes (corrupt protobuf)", pos)


def signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v



def varint(buf: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    """A base-128 varint (at most 10 bytes) from ``buf[pos:end]``: (value, next position)."""
    value = shift = 0
    for i in range(pos, min(end, pos + 10)):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    raise FormatError(f"bad varint at {pos}", where)


def fields(buf: bytes, where: str):
    """(field number, wire type, value) of a protobuf message: ints for varint/fixed, bytes for
    length-delimited fields."""
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = varint(buf, pos, end, where)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = varint(buf, pos, end, where)
        elif wire == 1:
            if pos + 8 > end:
                raise FormatError("truncated fixed64 field", where)
            (value,) = struct.unpack("<Q", buf[pos : pos + 8])
            pos += 8
        elif wire == 2:
            n, pos = varint(buf, pos, end, where)
            if pos + n > end:
                raise FormatError(f"field {number} of {n} bytes runs past its message", where)
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            if pos + 4 > end:
                raise FormatError("truncated fixed32 field", where)
            (value,) = struct.unpack("<I", buf[pos : pos + 4])
            pos += 4
        else:
            raise FormatError(f"field {number}: unsupported wire type {wire}", where)
        yield number, wire, value
