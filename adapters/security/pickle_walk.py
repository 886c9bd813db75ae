"""The rest of a pickle after the restricted reader stopped: every opcode, every global.

CPython's unpickler (under :class:`~.restricted_pickle.RestrictedUnpickler`) stops at the first
thing it cannot model: a ``bytearray`` REDUCE it refuses, a huge ``PUT`` index, a BUILD on a class,
a NEWOBJ of an object the pickle made. A real loader may well go on past that point, so the
verdict must not stop there. :func:`walk` reads the same bytes again in the loaders' opcode
grammar (:func:`.pickle_grammar.genops`, which decodes opcodes and never runs anything) and
interprets each opcode itself, over a symbolic stack and memo (a dict: any PUT index costs one
entry), with the same placeholders and the same allowed helpers as the reader. An opcode that
fails here pushes an :class:`Unknown` and the walk goes on; what a loader would do with an
unknown value is judged conservatively (calling it, or using it as a class, is recorded against
the global it came from, or against ``<unresolved>`` when nothing is known). The walk ends at
STOP, at bytes that are not opcodes, or after :data:`MAX_OPCODES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import verdicts
from .pickle_grammar import genops
from .placeholders import (
    NestedExaminer,
    Placeholder,
    check_state,
    construct_as_class,
    instance_of,
    is_placeholder_type,
    mark_called,
    note,
    record,
    result_type,
)
from .restricted_names import RestrictedNames

MAX_OPCODES = 5_000_000
UNRESOLVED = "<unresolved>.global"  # a global whose name the walk could not know
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class whose attributes can be set


class Unknown:
    """A value the walk could not compute; ``origin`` is the placeholder (type or instance)
    it came from, when there is one."""

    __slots__ = ("origin",)

    def __init__(self, origin: Any = None) -> None:
        self.origin = origin if (is_placeholder_type(origin) or isinstance(origin, Placeholder)) \
            else None


class _Names(RestrictedNames):
    """find_class and the per-load records, without an unpickler."""

    def __init__(self, allowed: Mapping[str, Any],
                 examine_nested: NestedExaminer | None = None) -> None:
        self._setup(allowed, examine_nested)


class StopWalk(Exception):
    """Raised by an ``after_build`` hook when the bytes that follow cannot be placed."""


class Walk:
    def __init__(
        self,
        allowed: Mapping[str, Any],
        persistent_load: Callable[[Any], Any] | None,
        after_build: Callable[[Walk, Any], None] | None = None,
        examine_nested: NestedExaminer | None = None,
    ) -> None:
        self.names = _Names(allowed, examine_nested)
        self.after_build = after_build
        self.persistent_load = persistent_load
        self.stack: list[Any] = []
        self.metastack: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.positions: list[tuple[str, int]] = []
        self.complete = False

    # -- stack helpers ------------------------------------------------------------------------
    def pop(self) -> Any:
        if self.stack:
            return self.stack.pop()
        return Unknown()

    def pop_mark(self) -> list[Any]:
        items = self.stack
        self.stack = self.metastack.pop() if self.metastack else []
        return items

    def top(self) -> Any:
        return self.stack[-1] if self.stack else Unknown()

    # -- what a loader does -------------------------------------------------------------------
    def unresolved(self, how: str) -> None:
        """A use of a value nothing is known about: recorded against a pseudo-global."""
        self.names._seen.setdefault(UNRESOLVED, tuple(UNRESOLVED.rsplit(".", 1)))
        record(self.names.uses, UNRESOLVED, verdicts.CALLED, how)

    def global_(self, module: Any, name: Any, pos: int) -> Any:
        if not isinstance(module, str) or not isinstance(name, str):
            self.names._seen.setdefault(UNRESOLVED, tuple(UNRESOLVED.rsplit(".", 1)))
            return Unknown()
        self.positions.append((f"{module}.{name}", pos))
        try:
            return self.names.find_class(module, name)
        except Exception:  # noqa: BLE001 - a reader's find_class refusing: nothing is known
            return Unknown()

    def call(self, func: Any, args: Any) -> Any:
        if isinstance(func, Unknown):
            if func.origin is not None:
                mark_called(func.origin, "and its result called")
            else:
                self.unresolved("a value the reader could not follow is called")
            return Unknown(func.origin)
        if not isinstance(args, tuple):
            args = tuple(args) if isinstance(args, list) else (args,)
        try:
            return func(*args)
        except Exception:  # noqa: BLE001 - a loader would call it all the same
            if is_placeholder_type(func) or isinstance(func, Placeholder):
                mark_called(func)
            return Unknown(func)

    def new(self, cls: Any, args: Any, kwargs: Any) -> Any:
        if not isinstance(args, tuple):
            args = (args,)
        if isinstance(cls, Unknown):
            if cls.origin is not None:
                construct_as_class(cls.origin if isinstance(cls.origin, Placeholder)
                                   else instance_of(result_type(cls.origin)), "NEWOBJ")
            else:
                self.unresolved("a value the reader could not follow is used as a class")
            return Unknown(cls.origin)
        if isinstance(cls, Placeholder):
            construct_as_class(cls, "NEWOBJ")
            return instance_of(result_type(type(cls)))
        if is_placeholder_type(cls):
            try:
                return cls.__new__(cls, *args, **(kwargs if isinstance(kwargs, dict) else {}))
            except Exception:  # noqa: BLE001
                note(cls, verdicts.CONSTRUCTED)
                return Unknown(cls)
        if isinstance(cls, type):
            try:
                return cls.__new__(cls)
            except Exception:  # noqa: BLE001
                return Unknown()
        return Unknown()

    def build(self, obj: Any, state: Any) -> None:
        name = self.names.handed_out.get(id(obj))
        if is_placeholder_type(obj) or name is not None and not isinstance(obj, Placeholder):
            if name is not None and not is_placeholder_type(obj):
                if isinstance(obj, type) and not obj.__flags__ & _HEAPTYPE:
                    return  # a builtin type: a loader's BUILD fails there
                record(self.names.uses, name, verdicts.MODIFIED,
                       changes="a BUILD sets attributes on it (a global: every later use sees "
                       "it)")
            else:
                obj.__setstate__(state)  # the class-level BUILD record
            return
        if isinstance(obj, Placeholder):
            try:
                obj.__setstate__(state)
            except Exception:  # noqa: BLE001
                check_state(obj, state)
            return
        if isinstance(obj, Unknown) and obj.origin is not None:
            note(obj.origin, "", ran="__setstate__")
            check_state(obj.origin, state)

    def add_items(self, target: Any, items: list[Any], kind: str) -> None:
        for i in range(0, len(items) - 1, 2) if kind == "dict" else range(len(items)):
            try:
                if kind == "dict":
                    target[items[i]] = items[i + 1]
                elif kind == "set":
                    target.add(items[i])
                elif isinstance(target, Placeholder):
                    target.append(items[i])
                else:
                    target.append(items[i])
            except Exception:  # noqa: BLE001 - unhashable keys, a non-container target
                if isinstance(target, Unknown) and target.origin is not None:
                    note(target.origin, "", ran="__setitem__" if kind == "dict" else "append")
                return

    # -- the walk ------------------------------------------------------------------------------
    def run(self, source: Any) -> None:
        count = 0
        try:
            for op, arg, pos in genops(source):
                count += 1
                if count > MAX_OPCODES:
                    return
                if op.name == "STOP":
                    self.complete = True
                    return
                self.step(op.name, arg, pos)
        except (ValueError, EOFError, IndexError, KeyError, TypeError, OverflowError,
                MemoryError, RecursionError, UnicodeDecodeError, StopWalk):
            return  # not opcodes any more (truncated or garbage): the walk ends

    def step(self, name: str, arg: Any, pos: int) -> None:  # noqa: C901 - one opcode table
        s = self.stack
        if name in ("PROTO", "FRAME"):
            return
        if name == "MARK":
            self.metastack.append(self.stack)
            self.stack = []
        elif name == "POP":
            if s:
                s.pop()
            else:
                self.pop_mark()
        elif name == "POP_MARK":
            self.pop_mark()
        elif name == "DUP":
            s.append(self.top())
        elif name in ("NONE",):
            s.append(None)
        elif name == "NEWTRUE":
            s.append(True)
        elif name == "NEWFALSE":
            s.append(False)
        elif name in ("EMPTY_LIST",):
            s.append([])
        elif name == "EMPTY_DICT":
            s.append({})
        elif name == "EMPTY_TUPLE":
            s.append(())
        elif name == "EMPTY_SET":
            s.append(set())
        elif name in ("LIST", "TUPLE", "FROZENSET", "DICT"):
            items = self.pop_mark()
            if name == "LIST":
                self.stack.append(list(items))
            elif name == "TUPLE":
                self.stack.append(tuple(items))
            elif name == "FROZENSET":
                self.stack.append(_safe(frozenset, items))
            else:
                d: dict = {}
                self.add_items(d, items, "dict")
                self.stack.append(d)
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            items = [self.pop() for _ in range(n)][::-1]
            s.append(tuple(items))
        elif name in ("APPEND", "SETITEM"):
            value = self.pop()
            if name == "SETITEM":
                key = self.pop()
                self.add_items(self.top(), [key, value], "dict")
            else:
                self.add_items(self.top(), [value], "list")
        elif name in ("APPENDS", "SETITEMS", "ADDITEMS"):
            items = self.pop_mark()
            target = self.top()
            kind = {"APPENDS": "list", "SETITEMS": "dict", "ADDITEMS": "set"}[name]
            if kind == "list" and isinstance(target, Placeholder):
                try:
                    target.extend(items)
                except Exception:  # noqa: BLE001
                    pass
            else:
                self.add_items(target, items, kind)
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            self.memo[arg] = self.top()
        elif name == "MEMOIZE":
            self.memo[len(self.memo)] = self.top()
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            s.append(self.memo.get(arg, Unknown()))
        elif name in ("GLOBAL", "INST"):
            module, _, qual = str(arg).partition(" ")
            cls = self.global_(module, qual, pos)
            if name == "INST":
                args = tuple(self.pop_mark())
                self.stack.append(self.call(cls, args))
            else:
                s.append(cls)
        elif name == "STACK_GLOBAL":
            qual = self.pop()
            module = self.pop()
            s.append(self.global_(module, qual, pos))
        elif name == "REDUCE":
            args = self.pop()
            func = self.pop()
            s.append(self.call(func, args))
        elif name == "OBJ":
            items = self.pop_mark()
            cls = items[0] if items else Unknown()
            self.stack.append(self.call(cls, tuple(items[1:])))
        elif name == "NEWOBJ":
            args = self.pop()
            cls = self.pop()
            s.append(self.new(cls, args, {}))
        elif name == "NEWOBJ_EX":
            kwargs = self.pop()
            args = self.pop()
            cls = self.pop()
            s.append(self.new(cls, args, kwargs))
        elif name == "BUILD":
            state = self.pop()
            self.build(self.top(), state)
            if self.after_build is not None:
                self.after_build(self, self.top())  # a stream's raw data after the object
        elif name in ("PERSID", "BINPERSID"):
            pid = arg if name == "PERSID" else self.pop()
            s.append(self._persistent(pid))
        elif name in ("EXT1", "EXT2", "EXT4"):
            s.append(Unknown())  # the copyreg registry of the loading process: not known here
        elif name in ("NEXT_BUFFER",):
            s.append(Unknown())
        elif name == "READONLY_BUFFER":
            pass
        else:  # every constant: ints, floats, text, bytes
            s.append(arg)

    def _persistent(self, pid: Any) -> Any:
        if self.persistent_load is None:
            return Unknown()
        try:
            return self.persistent_load(pid)
        except Exception:  # noqa: BLE001 - a reader's persistent_load refusing an id
            return Unknown()


def _safe(make: Callable[[Any], Any], items: list[Any]) -> Any:
    try:
        return make(items)
    except Exception:  # noqa: BLE001 - unhashable items
        return Unknown()


def walk(
    source: Any,
    allowed: Mapping[str, Any],
    persistent_load: Callable[[Any], Any] | None = None,
    after_build: Callable[[Walk, Any], None] | None = None,
    examine_nested: NestedExaminer | None = None,
) -> Walk:
    """Walk one pickle (bytes, or a file positioned at it) to its STOP; the result's
    ``names.globals`` holds every global with its verdict, ``positions`` where each was named.
    ``after_build(walk, obj)`` runs after each BUILD (a stream that writes raw data there, as
    joblib does, moves the file past it). ``examine_nested``: what a nested loader's bytes hold
    (:func:`.restricted_pickle.examine_nested`; without it they count as dangerous)."""
    w = Walk(allowed, persistent_load, after_build, examine_nested)
    w.run(source)
    w.names.check_handed_out()
    return w


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two views of one pickle's globals (``GlobalRef``s): the worse verdict of each name."""
    out = dict(a)
    for name, ref in b.items():
        other = out.get(name)
        if other is None or _rank(ref) > _rank(other):
            out[name] = ref
    return out


def _rank(ref: Any) -> int:
    return verdicts.RANK[ref.verdict.level] if ref.verdict else 0
