"""Builtins a pickle may call, computed by the reader on plain values.

``builtins.len([])`` or ``max(1, 2)`` in a pickle is pure: on plain values (numbers, text,
bytes, containers of them) the result is computed here, bounded, exactly as a loader would. On an
object of the file (a placeholder, or a container holding one) a loader's builtin calls that
object's class's special method (``range(x)`` -> ``type(x).__index__``, ``len`` -> ``__len__``,
``hash`` -> ``__hash__``, ...): that is recorded on the class's global (``ran``), whose verdict
then says its code would run; the result is an inert placeholder.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .placeholders import PickleError, Placeholder, is_placeholder_type, make_type, note

# builtin -> the special method it calls on an object it is given
SPECIAL = {
    "len": "__len__", "abs": "__abs__", "hash": "__hash__", "repr": "__repr__",
    "ascii": "__repr__", "format": "__format__", "str": "__str__", "int": "__int__",
    "float": "__float__", "complex": "__complex__", "bool": "__bool__", "range": "__index__",
    "ord": "__index__", "chr": "__index__", "hex": "__index__", "oct": "__index__",
    "bin": "__index__", "iter": "__iter__", "reversed": "__reversed__", "round": "__round__",
    "divmod": "__divmod__", "min": "__lt__", "max": "__gt__", "sorted": "__lt__",
    "sum": "__add__", "all": "__bool__", "any": "__bool__",
}  # fmt: skip
_PLAIN = (type(None), bool, int, float, complex, str, bytes, bytearray, range, slice)
_CONTAINERS = (tuple, list, set, frozenset, dict)
_MAX_VISIT = 100_000
_MAX_NDIGITS = 1000
_FORMAT_NUMBER = re.compile(r"\d+")


def _objects_of_file(args: tuple) -> list[Any] | None:
    """The placeholders (types or instances) inside ``args``, or None when something is
    neither plain nor a placeholder (the reader cannot say what a loader would do)."""
    found: list[Any] = []
    todo = list(args)
    seen = 0
    while todo:
        x = todo.pop()
        seen += 1
        if seen > _MAX_VISIT:
            return None
        if isinstance(x, Placeholder) or is_placeholder_type(x):
            found.append(x)
        elif isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        elif isinstance(x, _CONTAINERS):
            todo.extend(x)
        elif not isinstance(x, _PLAIN):
            return None
    return found


def _bounded(name: str, args: tuple) -> None:
    """Refuse the few plain calls whose cost the arguments choose."""
    if name == "round" and len(args) > 1 and isinstance(args[1], int) \
            and abs(args[1]) > _MAX_NDIGITS:
        raise PickleError("builtins.round with a huge ndigits is not computed")
    if name == "format" and len(args) > 1 and isinstance(args[1], str) and any(
            int(n) > 10_000 for n in _FORMAT_NUMBER.findall(args[1])):
        raise PickleError("builtins.format with a huge width is not computed")
    if name == "sum" and (len(args) != 1 or not isinstance(args[0], _CONTAINERS) or not all(
            type(v) in (int, float, complex, bool) for v in args[0])):
        raise PickleError("builtins.sum of anything but plain numbers is not computed")


class PureBuiltin:
    """``builtins.<name>`` for the reader: computed on plain values; on objects of the file,
    their class's special method is recorded as run and the result is a placeholder. Rendered
    (hyperparameters) by its ``global_name``, as a placeholder type is."""

    __slots__ = ("global_name", "fn", "method", "result")

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.global_name = f"builtins.{name}"
        self.fn = fn
        self.method = SPECIAL.get(name, "__call__")
        self.result = make_type(f"builtins.{name}()")

    def __call__(self, *args: Any) -> Any:
        found = _objects_of_file(args)
        if found is None:
            raise PickleError(f"{self.global_name} of {type(args[0]).__name__} is not modelled")
        if found:
            for obj in found:
                note(obj, "", ran=f"{self.method} (by {self.global_name})")
            return self.result()
        _bounded(self.global_name[9:], args)
        try:
            return self.fn(*args)
        except (TypeError, ValueError, OverflowError, RecursionError, MemoryError) as e:
            raise PickleError(f"{self.global_name}: {type(e).__name__}: {e}") from None

    def __repr__(self) -> str:
        return self.global_name


NAMES = (
    "len", "abs", "min", "max", "sum", "round", "divmod", "all", "any", "hash", "repr", "ascii",
    "format", "ord", "chr", "hex", "oct", "bin", "sorted", "reversed", "iter", "range", "str",
    "int",
)  # fmt: skip


def _table() -> dict[str, PureBuiltin]:
    import builtins

    return {f"builtins.{n}": PureBuiltin(n, getattr(builtins, n)) for n in NAMES}


# Shared by every load: they hold nothing of a load (what they record goes to the argument's
# class), and BUILD cannot change them (no __dict__, no __setstate__).
TABLE = _table()
