"""The placeholders of the restricted unpickler (:mod:`.restricted_pickle`): an inert stand-in
type per global a pickle names, that records how a loader would use the global (called,
constructed, built, modified) instead of doing it, and the :class:`GlobalRef` verdict made from
those records. Shared by both readers of a pickle (the unpickler and :mod:`.pickle_walk`) and by
the stand-ins written for them (:mod:`.pure_builtins`, the torch and NumPy rebuilders).

A placeholder of a nested loader (``torch.storage._load_from_bytes``) asks ``examine_nested``
(given when its type is made: the unpickler's :func:`.restricted_pickle.examine_nested`) what
the bytes it would load hold; without one, they count as dangerous (never examined, never safe).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import verdicts
from .lists import CALLS_ARGUMENT, NESTED_LOADERS

# (level, summary) of the bytes a nested loader would load (see nested.examine)
NestedExaminer = Callable[[Any], tuple[str, str]]


def not_examined(blob: Any) -> tuple[str, str]:
    """The examiner of a load that was given none: bytes not looked at are dangerous."""
    return verdicts.DANGEROUS, "its bytes were not examined"


class PickleError(Exception):
    """The pickle is malformed or asks for something refused; ``str()`` is one line.

    ``globals`` holds the globals read before the error (a broken pickle can still be a
    dangerous one: it runs up to the point of breaking under a real loader)."""

    globals: dict[str, GlobalRef] | None = None


@dataclass(frozen=True, slots=True)
class GlobalRef:
    """One global a pickle named: its dotted name as written (``__builtin__.set`` in protocol
    2), the Python 3 name it stands for (``builtins.set``, used for the verdict), whether it is
    on the allowlist of inert callables (``allowed``, i.e. verdict ``safe``), the finding
    severity (None when safe, "warning" when foreign, "danger" when dangerous) and the
    :class:`~inspector.adapters.security.verdicts.Verdict` (level, how a loader would use it,
    why)."""

    name: str
    resolved: str
    allowed: bool
    severity: str | None
    verdict: verdicts.Verdict | None = None

_SEVERITY = {verdicts.SAFE: None, verdicts.FOREIGN: "warning", verdicts.DANGEROUS: "danger"}


def judge(
    written: str,
    module: str,
    qualname: str,
    uses: set[str] | frozenset[str],
    how: str = "",
    nested: set[str] | None = None,
    ran: tuple[str, ...] = (),
    changes: str = "",
    builds: str = "",
) -> GlobalRef:
    """The :class:`GlobalRef` of one global from its names and the uses a load recorded
    (``nested``: for a nested loader, "level\tsummary" of each blob it would load; ``ran``,
    ``changes``, ``builds``: see :func:`verdicts.verdict`).

    ``module``/``qualname`` are the Python 3 names ``_compat_pickle`` maps a protocol 0-2
    spelling to (``__builtin__.long`` is ``builtins.int``): a Python 3 loader resolves exactly
    those, so the verdict is theirs."""
    v = verdicts.verdict(module, qualname, uses, how, ran, changes, builds)
    called = verdicts.CALLED in uses or verdicts.MEMBER in uses
    if nested and f"{module}.{qualname}" in NESTED_LOADERS and called:
        results = [r.split("\t", 1) for r in sorted(nested)]
        level = verdicts.worst({lv for lv, _ in results})
        if level != verdicts.DANGEROUS:  # every blob examined and none dangerous
            level = verdicts.FOREIGN
        top = max((lv for lv, _ in results), key=verdicts.RANK.__getitem__)
        text = next(t for lv, t in results if lv == top)
        why = f"the nested bytes were examined: {text}"
        if level == verdicts.DANGEROUS:
            why = f"{v.why}; the nested bytes: {text}"
        v = verdicts.Verdict(level, "called on torch.save bytes held in the file", why)
    return GlobalRef(
        written, f"{module}.{qualname}", v.level == verdicts.SAFE, _SEVERITY[v.level], v
    )


class _SetState:
    """``__setstate__`` of the placeholders. A BUILD looks it up on its target: on an instance
    it records the state (:meth:`Placeholder._setstate`); on the class object itself (BUILD on
    a global, which changes the class for every later use) it records the change."""

    def __get__(self, obj: Any, cls: type | None = None) -> Callable[[Any], None]:
        if obj is None:
            return functools.partial(_build_on_class, cls)
        return functools.partial(Placeholder._setstate, obj)


class Placeholder:
    """An inert stand-in for a global (subclassed once per dotted name) or for its instances.

    ``global_name`` is the dotted name; instances record what the pickle did to them. The
    per-load types also record how a loader would use their global in ``uses`` (a dict shared
    by one load: name -> {"called", "constructed", ...}, and "how:", "ran:", "changes:",
    "builds:" + name -> texts): ``__new__`` runs for every instantiation (NEWOBJ,
    copyreg.__newobj__, _reconstructor), ``__init__`` only when the type is called (REDUCE, and
    INST/OBJ because ``__getinitargs__`` exists, as for a function global). ``origin`` is the
    global whose verdict carries what is done (the called global, for the type of its results).
    """

    __slots__ = ("args", "kwargs", "state", "items", "listitems")
    global_name = "?"
    origin = "?"
    uses: dict[str, set[str]] | None = None
    examine_nested = staticmethod(not_examined)  # make_type gives the load's examiner
    __getinitargs__ = None  # INST/OBJ call the global (as a loader would a function) -> __init__

    def __new__(cls, *args: Any, **kwargs: Any) -> Placeholder:
        obj = object.__new__(cls)
        obj.args = args
        obj.kwargs = kwargs
        obj.state = None
        obj.items = None
        obj.listitems = None
        if cls.uses is not None:
            note(cls, verdicts.CONSTRUCTED)
            if _class_shaped(args):
                note(cls, verdicts.BUILDS_CLASS, builds="given (name, bases, namespace)")
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # REDUCE calls cls(*args)
        cls = type(self)
        if cls.uses is None:
            return
        if _one_value(cls, args, kwargs):
            note(cls, verdicts.MEMBER)
        else:
            mark_called(cls)
        if cls.global_name in NESTED_LOADERS:
            level, summary = cls.examine_nested(args[0] if args else None)
            cls.uses.setdefault("nested:" + cls.global_name, set()).add(f"{level}\t{summary}")
        calls_arguments(cls.global_name, args)

    __setstate__ = _SetState()  # BUILD

    def _setstate(self, state: Any) -> None:
        self.state = state
        note(self, "", ran="__setstate__")
        check_state(self, state)

    def __setitem__(self, key: Any, value: Any) -> None:  # SETITEM(S)
        note(self, "", ran="__setitem__")
        if self.items is None:
            self.items = []
        self.items.append((key, value))

    def append(self, value: Any) -> None:  # APPEND
        note(self, "", ran="append")
        if self.listitems is None:
            self.listitems = []
        self.listitems.append(value)

    def extend(self, values: Any) -> None:  # APPENDS
        note(self, "", ran="extend")
        for v in values:
            self.append(v)

    def __call__(self, *args: Any, **kwargs: Any) -> Placeholder:  # REDUCE on an instance
        cls = type(self)
        called = cls.uses is not None and verdicts.CALLED in cls.uses.get(cls.origin, ())
        mark_called(cls, "and its result called" if called else "an instance called")
        return result_type(cls)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<placeholder {type(self).global_name}>"

_PLANTED = ("__setstate__", "append", "extend")


def ran_key(method: str) -> tuple[int, str]:
    name = method.split(" ", 1)[0]
    return (_RAN_ORDER.index(name) if name in _RAN_ORDER else len(_RAN_ORDER), method)

# The order methods are named in a verdict (the first is the one quoted).
_RAN_ORDER = ("__setitem__", "append", "extend", "__setstate__")


def _origin(obj: Any) -> type[Placeholder] | None:
    if is_placeholder_type(obj):
        return obj
    if isinstance(obj, Placeholder):
        return type(obj)
    return None


def note(
    obj: Any, use: str, how: str = "", ran: str = "", changes: str = "", builds: str = ""
) -> None:
    """Record, on the global behind ``obj`` (a placeholder type or instance; anything else is
    left alone), a use and what it involved (see :class:`Placeholder`)."""
    cls = _origin(obj)
    if cls is None or cls.uses is None:
        return
    record(cls.uses, cls.origin, use, how, ran, changes, builds)


def record(
    uses: dict[str, set[str]], name: str, use: str, how: str = "", ran: str = "",
    changes: str = "", builds: str = "",
) -> None:
    """Add a use (and its texts) of the global ``name`` to one load's ``uses``."""
    if use:
        uses.setdefault(name, set()).add(use)
    for key, text in (("how:", how), ("ran:", ran), ("changes:", changes), ("builds:", builds)):
        if text:
            uses.setdefault(key + name, set()).add(text)


def mark_called(obj: Any, how: str = "") -> None:
    """Record that a loader would call ``obj`` (a placeholder type, or an instance: its class's
    ``__call__``); anything else (an allowed callable, a plain value) is left alone."""
    note(obj, verdicts.CALLED, how)


def _build_on_class(cls: type[Placeholder], state: Any) -> None:
    keys = sorted({str(k) for d in _state_dicts(state) for k in d})
    what = f"sets {', '.join(keys[:6])}" if keys else "runs"
    note(cls, verdicts.MODIFIED, changes=f"a BUILD on the class itself {what} (every later "
         "use of the class sees it)")


def _state_dicts(state: Any) -> list[dict]:
    """The dicts a BUILD state applies: ``{...}`` or ``(dict-or-None, slotstate)``."""
    parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
    return [d for d in parts if isinstance(d, dict)]


def check_state(obj: Any, state: Any) -> None:
    """What a BUILD state does beyond data: one of Python's special names set on the object (a
    loader, ``copy`` and the next pickling look some up on the instance), and a planted
    ``__setstate__``/``append``/``extend`` that the next BUILD/APPEND(S) calls."""
    for d in _state_dicts(state):
        for key in d:
            if isinstance(key, str) and key in verdicts.SPECIAL_NAMES:
                note(obj, verdicts.MODIFIED, changes=f"its BUILD state sets {key}")
        for key in _PLANTED:
            if key in d:
                mark_called(d[key], f"through a planted {key}")


def calls_arguments(name: str, args: tuple) -> None:
    """What an allowlisted helper does with its arguments (:data:`lists.CALLS_ARGUMENT`)."""
    spec = CALLS_ARGUMENT.get(name)
    if not spec:
        return
    for at, how in spec.items():
        if at >= len(args) or args[at] is object or args[at] is None:
            continue
        arg = args[at]
        if how == "called" or (how == "called if a class" and is_placeholder_type(arg)):
            mark_called(arg, f"by {name}")
        elif how == "called if a class" and isinstance(arg, Placeholder):
            note(arg, "", ran="__hash__")  # looked up in a dict of names
        elif how == "constructed":
            construct_as_class(arg, name)
        elif how.endswith(" read") and (isinstance(arg, Placeholder) or is_placeholder_type(arg)):
            note(arg, "", ran=f"{how.split(' ', 1)[0]} (by {name})")
        elif how == "state set":  # setattr(obj, key, value) for each key of the state
            for d in _state_dicts(arg):
                if "__class__" in d:  # the object becomes an instance of that class
                    construct_as_class(d["__class__"], f"{name}, whose state sets __class__")
            check_state(None, arg)  # a planted __setstate__/append/extend
        elif how == "values called" and isinstance(arg, dict):
            for v in list(arg.values())[:1000]:
                mark_called(v, f"as a hook set by {name}")


def construct_as_class(cls: Any, by: str) -> None:
    """``cls`` is instantiated (``cls.__new__(cls)``) by ``by``: a global is constructed; an
    object the pickle made is a class the pickle built."""
    if is_placeholder_type(cls):
        note(cls, verdicts.CONSTRUCTED)
    elif isinstance(cls, Placeholder):
        note(cls, verdicts.BUILDS_CLASS, builds=f"made an object that {by} uses as a class")


def _class_shaped(args: tuple) -> bool:
    """``(name, bases, namespace)``: the arguments of a class factory (``type``, a metaclass)."""
    return (
        len(args) == 3
        and isinstance(args[0], str)
        and isinstance(args[1], tuple)
        and all(isinstance(b, type) or isinstance(b, Placeholder) for b in args[1])
        and isinstance(args[2], dict)
        and all(isinstance(k, str) for k in args[2])
    )

_PLAIN = (int, float, str, bytes, bool, type(None))


def _one_value(cls: type[Placeholder], args: tuple, kwargs: dict) -> bool:
    """``Color(1)``: the global called with one plain value, as Python pickles an Enum member
    (``__reduce_ex__`` -> ``(cls, (value,))``). Only a use recorded for the vetted set (an Enum
    there is vetted for exactly this); it makes nothing inert by itself, whatever the name looks
    like: a constructor could evaluate that value."""
    if kwargs or len(args) != 1 or cls.global_name != cls.origin:
        return False
    value = args[0]
    return isinstance(value, _PLAIN) or (
        isinstance(value, tuple) and len(value) <= 16 and all(isinstance(v, _PLAIN) for v in value)
    )


def is_placeholder_type(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, Placeholder)


def make_type(
    name: str, uses: dict[str, set[str]] | None = None, origin: str | None = None,
    examine_nested: NestedExaminer | None = None,
) -> type[Placeholder]:
    qual = name.rsplit(".", 1)[-1] or "placeholder"
    return type(
        qual,
        (Placeholder,),
        {"__slots__": (), "global_name": name, "origin": origin or name, "__module__": __name__,
         "uses": uses, "examine_nested": staticmethod(examine_nested or not_examined)},
    )


def instance_of(t: type[Placeholder]) -> Placeholder:
    """An instance made without calling ``t`` (a use of it is recorded by the caller)."""
    obj = object.__new__(t)
    obj.args, obj.kwargs, obj.state, obj.items, obj.listitems = (), {}, None, None, None
    return obj


def result_type(cls: type[Placeholder]) -> type[Placeholder]:
    """The type of what calling an instance of ``cls`` returns (one per type and load)."""
    t = cls.__dict__.get("result")
    if t is None:
        t = make_type(cls.global_name + "()", cls.uses, cls.origin, cls.examine_nested)
        type.__setattr__(cls, "result", t)
    return t
