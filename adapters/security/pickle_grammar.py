"""The pickle opcode grammar as CPython's loaders parse it: what ``pickle.load`` would take.

:func:`pickletools.genops` decodes text arguments more narrowly than the unpicklers do (it reads
``INT`` and ``LONG`` in base 10 where both unpicklers use base 0, decodes ``STRING``, ``GLOBAL``
and ``PERSID`` as ASCII after escape decoding, ...), so a sniff built on it calls some pickles
"not a pickle". :func:`genops` here yields the same ``(opcode, argument, position)`` triples,
with each text argument accepted when either loader accepts it, from CPython 3.11:

* ``INT``: ``Lib/pickle.py`` ``int(line, 0)`` (``00``/``01`` are False/True); ``_pickle.c``
  ``strtol(s, &end, 0)`` (octal ``010``, leading blanks, stops at a NUL), falling back to
  ``PyLong_FromString(s, NULL, 0)``;
* ``LONG``: one trailing ``L`` dropped, then base 0 in both;
* ``GET``/``PUT``: base 10 (``int()``: blanks, sign, underscores);
* ``FLOAT``: ``float()``, or ``PyOS_string_to_double`` up to a newline or NUL;
* ``STRING``: quoted alike at both ends, escape-decoded; any bytes (``torch.load`` decodes as
  UTF-8, ``encoding='bytes'``/``'latin1'`` keep anything);
* ``UNICODE``: raw-unicode-escape; ``PERSID``: ASCII, no escapes; ``GLOBAL``/``INST``: UTF-8.

Lines end at ``\\n`` only (a ``\\r`` before it is part of the argument, as for the loaders).
Binary arguments are read by :mod:`pickletools`' own readers, which match the loaders.
The result is a superset of what the loaders accept: it must never reject a loader's pickle.
"""

from __future__ import annotations

import codecs
import io
import pickletools
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

_C_SPACE = b" \t\n\v\f\r"
_CODE2OP = {op.code.encode("latin-1"): op for op in pickletools.opcodes}
_INT64 = 1 << 63
_HEX = b"0123456789abcdefABCDEF"


class GrammarError(ValueError):
    """Not (or no longer) a pickle; ``cut``: the data ended inside an opcode."""

    def __init__(self, message: str, cut: bool = False) -> None:
        super().__init__(message)
        self.cut = cut


def _line(f: Any) -> bytes:
    data = f.readline()
    if not data.endswith(b"\n"):
        raise GrammarError("no newline found when trying to read a text argument", cut=True)
    return data


def _c_string(line: bytes) -> bytes:
    """What C sees of a line: up to the first NUL."""
    return line.split(b"\0", 1)[0]


def _strtol0(line: bytes) -> int | None:
    """``strtol(s, &end, 0)`` with ``*end`` in ``\\n``/NUL required, or None (also on
    overflow, where ``_pickle.c`` falls back to ``PyLong_FromString``)."""
    i, n = 0, len(line)
    while i < n and line[i] in _C_SPACE:
        i += 1
    sign = 1
    if i < n and line[i] in b"+-":
        sign = -1 if line[i] == 0x2D else 1
        i += 1
    base, digits = 10, b"0123456789"
    if line[i:i + 1] == b"0":
        if line[i + 1:i + 2] in (b"x", b"X") and i + 2 < n and line[i + 2] in _HEX:
            base, digits, i = 16, _HEX, i + 2
        else:
            base, digits = 8, b"01234567"
    start = i
    while i < n and line[i] in digits:
        i += 1
    if i == start:
        value, end = 0, 0  # no conversion: end is the start of the string
    else:
        value, end = sign * int(line[start:i], base), i
    if end < n and line[end] not in b"\n\0":
        return None
    return value if -_INT64 <= value < _INT64 else None


def _int0(text: bytes) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def _int10(text: bytes) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def read_int(f: Any) -> int | bool:
    line = _line(f)
    if line in (b"00\n", b"01\n"):
        return line == b"01\n"
    for value in (_int0(line), _strtol0(line) if len(line) >= 2 else None,
                  _int0(_c_string(line))):
        if value is not None:
            return value
    raise GrammarError(f"invalid INT argument {line[:40]!r}")


def read_long(f: Any) -> int:
    line = _line(f)[:-1]
    if line.endswith(b"L"):
        line = line[:-1]
    for value in (_int0(line), _int0(_c_string(line))):
        if value is not None:
            return value
    raise GrammarError(f"invalid LONG argument {line[:40]!r}")


def read_index(f: Any) -> int:
    line = _line(f)[:-1]
    for value in (_int10(line), _int10(_c_string(line))):
        if value is not None:
            return value
    raise GrammarError(f"invalid memo index {line[:40]!r}")


def read_float(f: Any) -> float:
    line = _line(f)[:-1]
    for text in (line, _c_string(line)):
        try:
            return float(text)
        except ValueError:
            continue
    raise GrammarError(f"invalid FLOAT argument {line[:40]!r}")


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def read_string(f: Any) -> str:
    line = _line(f)[:-1]
    if not (len(line) >= 2 and line[0] == line[-1] and line[:1] in (b"'", b'"')):
        raise GrammarError("invalid STRING argument: not quoted")
    try:
        with warnings.catch_warnings():  # invalid escapes warn and are kept, as in the loaders
            warnings.simplefilter("ignore")
            return _text(codecs.escape_decode(line[1:-1])[0])  # type: ignore[attr-defined]
    except ValueError as e:
        raise GrammarError(f"invalid STRING argument ({e})") from None


def read_unicode(f: Any) -> str:
    try:
        return str(_line(f)[:-1], "raw-unicode-escape")
    except UnicodeDecodeError as e:
        raise GrammarError(f"invalid UNICODE argument ({e})") from None


def read_persid(f: Any) -> str:
    try:
        return _line(f)[:-1].decode("ascii")
    except UnicodeDecodeError as e:
        raise GrammarError(f"invalid PERSID argument ({e})") from None


def read_global(f: Any) -> str:
    try:
        return f"{_line(f)[:-1].decode('utf-8')} {_line(f)[:-1].decode('utf-8')}"
    except UnicodeDecodeError as e:
        raise GrammarError(f"invalid GLOBAL/INST argument ({e})") from None


_READERS: dict[str, Callable[[Any], Any]] = {
    "INT": read_int, "LONG": read_long, "GET": read_index, "PUT": read_index,
    "FLOAT": read_float, "STRING": read_string, "UNICODE": read_unicode,
    "PERSID": read_persid, "GLOBAL": read_global, "INST": read_global,
}


def genops(data: Any) -> Iterator[tuple[pickletools.OpcodeInfo, Any, int | None]]:
    """``(opcode, argument, position)`` from the start of ``data`` (bytes or a readable file)
    to the STOP, as :func:`pickletools.genops` gives them but with the loaders' argument
    grammar; :class:`GrammarError` where no loader would go on."""
    f = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    tell = getattr(f, "tell", None)
    while True:
        pos = tell() if tell is not None else None
        code = f.read(1)
        op = _CODE2OP.get(code)
        if op is None:
            if not code:
                raise GrammarError("pickle exhausted before seeing STOP", cut=True)
            raise GrammarError(f"at position {pos}, opcode {code!r} unknown")
        if op.arg is None:
            arg = None
        else:
            reader = _READERS.get(op.name)
            try:
                arg = reader(f) if reader is not None else op.arg.reader(f)
            except GrammarError:
                raise
            except ValueError as e:  # pickletools' binary readers: short data or bad bytes
                cut = "remain" in str(e) or "newline" in str(e)
                raise GrammarError(str(e), cut=cut) from None
        yield op, arg, pos
        if op.name == "STOP":
            return


def walk(data: bytes) -> tuple[str, int, bool]:
    """("stop" | "bad" | "cut", opcodes walked, whether one names a global or the first starts
    a container or is PROTO)."""
    n = 0
    meaningful = False
    try:
        for op, _arg, _pos in genops(data):
            n += 1
            if op.name in GLOBAL_OPS or (n == 1 and op.name in FIRST_OPS):
                meaningful = True
            if op.name == "STOP":
                return "stop", n, meaningful
    except GrammarError as e:
        return ("cut" if e.cut else "bad"), n, meaningful
    except Exception:  # noqa: BLE001 - any other reader failure: not a pickle from here
        return "bad", n, meaningful
    return "cut", n, meaningful


def runs_before_its_end(data: bytes) -> bool:
    """Whether a loader runs something from ``data`` although it is no whole pickle (no STOP:
    cut short, or bytes that are no opcode further on): its opcodes, read from the start, name
    a global and then call or construct something. ``pickle.load`` executes each opcode as it
    reads it and fails only where the grammar does."""
    named = False
    try:
        for op, _arg, _pos in genops(data):
            if op.name == "STOP":
                return False
            if op.name == "STACK_GLOBAL" or (op.name in GLOBAL_OPS and _importable(_arg)):
                named = True
            if named and op.name in CALL_OPS:
                return True
            if op.name in GLOBAL_OPS and not named:
                return False  # text (``import x`` reads as INST "mport x"): no loader imports it
    except Exception:  # noqa: BLE001 - GrammarError or any reader failure: the loader stops here
        return False
    return False


def _importable(arg: Any) -> bool:
    """A GLOBAL/INST argument ``"module name"`` a loader could resolve: both parts present and
    without blanks (``import torch`` read as INST gives module ``"mport torch"``, which no
    ``find_class`` can import)."""
    return isinstance(arg, str) and _NAME_PAIR.fullmatch(arg) is not None


_NAME_PAIR = re.compile(r"[^\s]+ [^\s]+")
GLOBAL_OPS = frozenset({"GLOBAL", "INST", "STACK_GLOBAL"})
CALL_OPS = frozenset({"REDUCE", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "BUILD"})
FIRST_OPS = frozenset({"MARK", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "PROTO"})
