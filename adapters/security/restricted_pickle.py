"""A pickle reader that never imports or runs anything named in the file.

:class:`RestrictedUnpickler` is CPython's C unpickler with ``find_class`` replaced: a global is
looked up in an allowlist the caller supplies (``"module.qualname" -> object``, objects the caller
implemented itself), and every other global becomes an inert :class:`Placeholder` type that only
records its dotted name. Calling such a placeholder (REDUCE), instantiating it (NEWOBJ,
NEWOBJ_EX, INST, OBJ), BUILD/``__setstate__``, SETITEM(S) and APPEND(S) on its instances just
record their arguments in a new placeholder instance. Nothing is imported, no attribute of a real
object is read, nothing from the file is executed. This is how a whole pickled ``nn.Module`` is
read: its class is a placeholder and its ``__dict__`` arrives as the recorded BUILD state.

Every global the pickle names is recorded (:class:`GlobalRef`) with how the pickle uses it
(called, constructed or only named: the placeholders record it) and the verdict
:mod:`inspector.adapters.security.verdicts` gives it.

Other ways a pickle can reach code, and how they are closed:

* EXT1/EXT2/EXT4 (the ``copyreg`` extension registry) would resolve a global without
  ``find_class`` once CPython has cached it. While the process's registry is empty (it is unless
  some code registered extensions) CPython itself refuses the opcodes; otherwise the pickle is
  scanned with :mod:`pickletools` first and any EXT opcode is refused.
* PERSID/BINPERSID go to the caller's ``persistent_load``.
* Protocol 5 out-of-band buffers are refused (no ``buffers`` argument).

Bounds: the caller caps the pickle's size; the C unpickler itself is iterative (no recursion on
deep nesting); MemoryError and RecursionError become :class:`PickleError`. CPython < 3.14 sizes its
memo by the largest PUT index, so a hostile LONG_BINPUT can ask for up to 2**32 slots; Linux
refuses such an allocation outright (MemoryError) on ordinary overcommit settings.
"""

from __future__ import annotations

import _compat_pickle
import collections
import contextlib
import copyreg
import functools
import gc
import io
import os
import pickle
import pickletools
import struct
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..memory_cap import address_space_capped
from . import verdicts
from .lists import CALLS_ARGUMENT, NESTED_LOADERS

# Text encodings `_codecs.encode` may use (protocol 2 spells bytes as encode(str, 'latin1')).
_TEXT_ENCODINGS = frozenset(
    {"latin1", "latin-1", "latin_1", "iso-8859-1", "utf-8", "utf8", "ascii"}
)
_EXT_OPCODES = frozenset({"EXT1", "EXT2", "EXT4"})
# Rendering limits for hyperparameters (a vocabulary list must not become a 50,000-item value).
_RENDER_DEPTH = 8
_RENDER_ITEMS = 200
# A config namespace keeps every option (fairseq, OpenNMT-py: 300-400 keys): dicts keep more.
_RENDER_KEYS = 2000
_RENDER_STR = 2000


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
    if nested and f"{module}.{qualname}" in NESTED_LOADERS and v.use == verdicts.CALLED:
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
        if _enum_shaped(cls, args, kwargs):
            note(cls, verdicts.MEMBER)
        else:
            mark_called(cls)
        if cls.global_name in NESTED_LOADERS:
            from .nested import examine  # bytes of a file inside the file

            level, summary = examine(args[0] if args else None)
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


def _ran_key(method: str) -> tuple[int, str]:
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


def _enum_shaped(cls: type[Placeholder], args: tuple, kwargs: dict) -> bool:
    """``Color(1)``: a class-like global (CapWords) called with one plain value, as Python
    pickles an Enum member (``__reduce_ex__`` -> ``(cls, (value,))``, protocols 0-5)."""
    if kwargs or len(args) != 1 or cls.global_name != cls.origin:
        return False
    last = cls.global_name.rsplit(".", 1)[-1]
    value = args[0]
    plain = isinstance(value, _PLAIN) or (
        isinstance(value, tuple) and len(value) <= 16 and all(isinstance(v, _PLAIN) for v in value)
    )
    return plain and last[:1].isupper()


def is_placeholder_type(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, Placeholder)


def _make_type(
    name: str, uses: dict[str, set[str]] | None = None, origin: str | None = None
) -> type[Placeholder]:
    qual = name.rsplit(".", 1)[-1] or "placeholder"
    return type(
        qual,
        (Placeholder,),
        {"__slots__": (), "global_name": name, "origin": origin or name, "__module__": __name__,
         "uses": uses},
    )


def _instance_of(t: type[Placeholder]) -> Placeholder:
    """An instance made without calling ``t`` (a use of it is recorded by the caller)."""
    obj = object.__new__(t)
    obj.args, obj.kwargs, obj.state, obj.items, obj.listitems = (), {}, None, None, None
    return obj


def result_type(cls: type[Placeholder]) -> type[Placeholder]:
    """The type of what calling an instance of ``cls`` returns (one per type and load)."""
    t = cls.__dict__.get("result")
    if t is None:
        t = _make_type(cls.global_name + "()", cls.uses, cls.origin)
        type.__setattr__(cls, "result", t)
    return t


def base_allowed() -> dict[str, Any]:
    """Harmless constructors any pickle may use, as a fresh table for one load.

    Only immutable C types are handed out as themselves (BUILD cannot change them); everything
    written in Python is a fresh closure per load, so a BUILD/setattr aimed at it (e.g. at its
    ``__defaults__``) dies with the load. Callers add their own entries (torch rebuilders).
    """

    def reconstructor(cls: Any, base: Any = None, state: Any = None) -> Any:
        # copyreg._reconstructor: the protocol 0/1 spelling of NEWOBJ, for placeholder classes.
        # A loader calls base.__new__(cls, state) and base.__init__(obj, state) unless base is
        # object: a foreign base is code that runs.
        if is_placeholder_type(cls):
            if base is not object and base is not None:
                mark_called(base, "as copyreg._reconstructor's base")
            return cls.__new__(cls)
        if isinstance(cls, Placeholder):
            construct_as_class(cls, "copyreg._reconstructor")
            return _instance_of(result_type(type(cls)))
        raise PickleError(
            f"copyreg._reconstructor on {type(cls).__name__}, not a class of the file"
        )

    def newobj(cls: Any, *args: Any, **kwargs: Any) -> Any:
        # copyreg.__newobj__(cls, *args) is cls.__new__(cls, *args); __newobj_ex__ adds kwargs
        if is_placeholder_type(cls):
            return cls.__new__(cls, *args, **kwargs)
        if isinstance(cls, Placeholder):
            construct_as_class(cls, "copyreg.__newobj__")
            return _instance_of(result_type(type(cls)))
        if cls in _PLAIN_TYPES and not args and not kwargs:
            return cls.__new__(cls)
        raise PickleError(f"copyreg.__newobj__ of {type(cls).__name__} is not modelled")

    def newobj_ex(cls: Any, args: Any = (), kwargs: Any = None) -> Any:
        if not isinstance(args, tuple) or not isinstance(kwargs or {}, dict):
            raise PickleError("copyreg.__newobj_ex__ arguments are not (tuple, dict)")
        return newobj(cls, *args, **(kwargs or {}))

    def encode(obj: Any, encoding: Any = "utf-8", errors: Any = "strict") -> bytes:
        # _codecs.encode: protocol 2 spells bytes as encode(str, 'latin1').
        if not isinstance(obj, str) or encoding not in _TEXT_ENCODINGS:
            raise PickleError(
                f"_codecs.encode of {type(obj).__name__} with {encoding!r} is not allowed"
            )
        return obj.encode(encoding)

    def bytes_like(kind: type) -> Callable[..., Any]:
        # From bytes or (str, encoding) only: bytearray(10**12) must not allocate.
        def make(*args: Any) -> Any:
            if not args:
                return kind()
            if len(args) == 1 and isinstance(args[0], (bytes, bytearray)):
                return kind(args[0])
            if len(args) in (2, 3) and isinstance(args[0], str):
                return kind(encode(*args[:2]))
            raise PickleError(f"{kind.__name__}() of {type(args[0]).__name__} is not allowed")

        return make

    def counter(*args: Any, **kwargs: Any) -> Any:
        return collections.Counter(*args, **kwargs)

    from .pure_builtins import TABLE

    return {
        **TABLE,
        "copyreg.__newobj__": newobj,
        "copyreg.__newobj_ex__": newobj_ex,
        "collections.OrderedDict": collections.OrderedDict,
        "collections.Counter": counter,
        "builtins.set": set,
        "builtins.frozenset": frozenset,
        "builtins.dict": dict,
        "builtins.list": list,
        "builtins.tuple": tuple,
        "builtins.slice": slice,
        "builtins.complex": complex,
        "builtins.float": float,
        "builtins.bool": bool,
        "builtins.object": object,
        "builtins.bytes": bytes_like(bytes),
        "builtins.bytearray": bytes_like(bytearray),
        "_codecs.encode": encode,
        "copyreg._reconstructor": reconstructor,
    }


# Real types ``copyreg.__newobj__`` may instantiate empty (the allowlisted containers).
_PLAIN_TYPES = (object, dict, list, set, frozenset, tuple, collections.OrderedDict)


def scan_globals(data: bytes) -> list[tuple[str, int]]:
    """(dotted name, byte position) of every GLOBAL/INST/STACK_GLOBAL, without loading anything.

    STACK_GLOBAL names are the two values below it on the stack, memo gets included (walked by
    :mod:`.pickle_walk`, as pickletools decodes the opcodes). Pure Python and slow (~1 us per
    opcode): for audits and tests, not for the read path, where :class:`RestrictedUnpickler`
    records the globals as it resolves them.
    """
    from .pickle_walk import walk

    return walk(data, {}).positions


class _Restricted:
    """``find_class`` resolves only ``allowed``; everything else is a placeholder type. Mixed
    into CPython's C unpickler (:class:`RestrictedUnpickler`) and its pure-Python one
    (:class:`PyRestrictedUnpickler`, for streams that interleave raw data, like joblib's)."""

    def _setup(self, allowed: Mapping[str, Any]) -> None:
        self._allowed = allowed
        self._types: dict[str, type[Placeholder]] = {}
        # written name -> (module, qualname) in Python 3 spelling, in order of appearance
        self._seen: dict[str, tuple[str, str]] = {}
        self.uses: dict[str, set[str]] = {}
        # id of an allowed object handed out -> its dotted name (a BUILD aimed at it changes it)
        self.handed_out: dict[int, str] = {}
        self._wrapped: dict[str, Callable[..., Any]] = {}
        self._defaults = {
            id(f): f.__defaults__ for f in allowed.values() if isinstance(f, types.FunctionType)
        }

    def find_class(self, module: str, name: str) -> Any:
        written = f"{module}.{name}"
        seen = self._seen.get(written)
        if seen is None:
            # Python 2 spellings (protocol < 3): __builtin__.set is builtins.set, copy_reg is
            # copyreg; the allowlist and the lists of dangerous globals use Python 3 names.
            key = (module, name)
            if key in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[key]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
            seen = self._seen[written] = (module, name)
        dotted = f"{seen[0]}.{seen[1]}"
        found = self._allowed.get(dotted)
        if found is not None:
            if dotted in NESTED_LOADERS:  # a stand-in too is judged by the bytes it loads
                return self._examining(dotted, found)
            self.handed_out[id(found)] = dotted
            if dotted in CALLS_ARGUMENT and not isinstance(found, type):
                return self._calling(dotted, found)
            return found
        t = self._types.get(dotted)
        if t is None:
            t = self._types[dotted] = _make_type(dotted, self.uses)
        return t

    def check_handed_out(self) -> None:
        """After a load: an allowed Python function handed out whose attributes a BUILD changed
        (``__dict__`` filled, ``__defaults__`` replaced) would be changed in a real loader's
        process too, for every later caller."""
        for key, dotted in self.handed_out.items():
            obj = self._allowed.get(dotted)
            if id(obj) != key:
                obj = self._wrapped.get(dotted)
            if id(obj) != key or not isinstance(obj, types.FunctionType):
                continue
            if obj.__dict__ or obj.__defaults__ != self._defaults.get(key):
                record(self.uses, dotted, verdicts.MODIFIED,
                       changes="a BUILD sets attributes on the function itself")

    def _calling(self, dotted: str, helper: Callable[..., Any]) -> Callable[..., Any]:
        """``helper`` (an implementation of an allowlisted helper that calls or constructs its
        arguments) behind the record of what it does with them (:func:`calls_arguments`), so
        the verdict does not depend on which reader implemented it. One per name and load."""
        wrapped = self._wrapped.get(dotted)
        if wrapped is None:
            def call(*args: Any, **kwargs: Any) -> Any:
                calls_arguments(dotted, args)
                return helper(*args, **kwargs)

            wrapped = self._wrapped[dotted] = call
            self.handed_out[id(call)] = dotted
        return wrapped

    def _examining(self, dotted: str, loader: Callable[..., Any]) -> Callable[..., Any]:
        """``loader`` (a reader's stand-in for a nested loader such as
        ``torch.storage._load_from_bytes``) behind the same examination of the bytes a placeholder
        gets, so the verdict does not depend on which reader implemented it."""
        uses = self.uses

        def load(*args: Any) -> Any:
            from .nested import examine

            level, summary = examine(args[0] if args else None)
            uses.setdefault("nested:" + dotted, set()).add(f"{level}\t{summary}")
            uses.setdefault(dotted, set()).add(verdicts.CALLED)
            return loader(*args)

        return load

    @property
    def globals(self) -> dict[str, GlobalRef]:
        """Every global named so far (written name -> :class:`GlobalRef` with its verdict)."""
        out = {}
        for written, (module, qualname) in self._seen.items():
            dotted = f"{module}.{qualname}"
            uses = self.uses.get(dotted, ())
            if dotted in self._allowed and not uses:
                uses = {verdicts.CALLED}  # an implemented builder: called or not, it is inert
            u = self.uses
            how = ", ".join(sorted(u.get("how:" + dotted, ())))
            nested = u.get("nested:" + dotted)
            ran = tuple(sorted(u.get("ran:" + dotted, ()), key=_ran_key))
            changes = "; ".join(sorted(u.get("changes:" + dotted, ())))
            builds = "; ".join(sorted(u.get("builds:" + dotted, ())))
            out[written] = judge(
                written, module, qualname, frozenset(uses), how, nested, ran, changes, builds
            )
        return out

    def persistent_load(self, pid: Any) -> Any:  # replaced per instance when the caller has one
        raise PickleError("the pickle uses persistent ids, which this file kind does not have")


class RestrictedUnpickler(_Restricted, pickle.Unpickler):
    """The C unpickler under :class:`_Restricted`."""

    def __init__(
        self,
        file: Any,
        allowed: Mapping[str, Any],
        persistent_load: Callable[[Any], Any] | None = None,
    ) -> None:
        if persistent_load is not None:
            # Before __init__: the C unpickler looks persistent_load up once, there.
            self.persistent_load = persistent_load  # type: ignore[method-assign]
        pickle.Unpickler.__init__(self, file, fix_imports=False, encoding="latin1")
        self._setup(allowed)


class PyRestrictedUnpickler(_Restricted, pickle._Unpickler):  # type: ignore[name-defined,misc]
    """The pure-Python unpickler under :class:`_Restricted` (its ``dispatch`` can be extended).
    Slower; bounded by the same caller-side size caps, and by Python's recursion limit."""

    def __init__(
        self,
        file: Any,
        allowed: Mapping[str, Any],
        persistent_load: Callable[[Any], Any] | None = None,
        uses: dict[str, set[str]] | None = None,
    ) -> None:
        pickle._Unpickler.__init__(  # type: ignore[attr-defined]
            self, file, fix_imports=False, encoding="latin1"
        )
        if persistent_load is not None:
            self.persistent_load = persistent_load  # type: ignore[method-assign]
        self._setup(allowed)
        if uses is not None:
            self.uses = uses


def unpickle(
    data: bytes | io.BufferedIOBase,
    allowed: Mapping[str, Any],
    persistent_load: Callable[[Any], Any] | None = None,
) -> tuple[Any, dict[str, GlobalRef]]:
    """Load one pickle (bytes, or a file positioned at it) through :class:`RestrictedUnpickler`.

    Returns the object and the globals it named. Raises :class:`PickleError` for any malformed
    or refused input (the usual exception types from the unpickler or from the allowed callables
    are turned into it); any other exception a callback raises on purpose passes through.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        if copyreg._extension_cache or copyreg._inverted_registry:  # type: ignore[attr-defined]
            _refuse_ext(bytes(data))
        file: Any = io.BytesIO(data)
    else:
        if copyreg._extension_cache or copyreg._inverted_registry:  # type: ignore[attr-defined]
            raise PickleError(
                "copyreg extensions are registered in this process; refusing a stream pickle"
            )
        file = data
    unpickler = RestrictedUnpickler(file, allowed, persistent_load)
    size = len(data) if isinstance(data, (bytes, bytearray, memoryview)) else _remaining(file)
    start = _tell(file)
    try:
        with gc_paused(), address_space_capped(max(MEMORY_FLOOR, MEMORY_PER_BYTE * size)):
            obj = unpickler.load()
    except (PickleError, RecursionError, MemoryError, *_LOAD_ERRORS) as e:
        err = _as_pickle_error(e)
        unpickler.check_handed_out()
        err.globals = _whole_pickle(data, file, start, allowed, persistent_load, unpickler)
        raise err from None
    unpickler.check_handed_out()
    return obj, unpickler.globals


def _tell(file: Any) -> int | None:
    try:
        return file.tell() if file.seekable() else None
    except (OSError, AttributeError, ValueError):
        return None


def _whole_pickle(
    data: Any,
    file: Any,
    start: int | None,
    allowed: Mapping[str, Any],
    persistent_load: Callable[[Any], Any] | None,
    unpickler: _Restricted,
) -> dict[str, GlobalRef]:
    """Every global of a pickle the reader stopped in, with its verdict: the reader's own, and
    those :mod:`.pickle_walk` finds walking every opcode from the start (the worse of the two
    verdicts for a global both saw). The file is left where the reader stopped."""
    from .pickle_walk import merge, walk

    seen = unpickler.globals
    if start is None:
        return seen
    end = _tell(file)
    try:
        file.seek(start)
        with gc_paused(), address_space_capped(max(MEMORY_FLOOR, MEMORY_PER_BYTE * (
                len(data) if isinstance(data, (bytes, bytearray, memoryview))
                else _remaining(file)))):
            walked = walk(file, allowed, persistent_load).names.globals
    except (MemoryError, RecursionError, OSError, ValueError):
        walked = {}
    finally:
        if end is not None:
            file.seek(end)
    return merge(walked, seen)


_LOAD_ERRORS = (
    pickle.UnpicklingError,
    EOFError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    struct.error,
    UnicodeDecodeError,
    OverflowError,
)


def _as_pickle_error(e: BaseException) -> PickleError:
    """One-line :class:`PickleError` for what a hostile or broken pickle makes the load raise."""
    if isinstance(e, PickleError):
        return e
    if isinstance(e, RecursionError):
        return PickleError("the pickle nests too deeply")
    if isinstance(e, MemoryError):
        return PickleError("the pickle asks for more memory than is available (hostile sizes?)")
    if isinstance(e, (pickle.UnpicklingError, EOFError)):
        return PickleError(f"malformed pickle: {e or 'truncated'}")
    if "extension code" in str(e):
        return PickleError("EXT opcode (copyreg extension registry) is not supported")
    return PickleError(f"malformed pickle ({type(e).__name__}: {e})")


# A legitimate pickle never needs more than a small multiple of its own size; the floor covers
# the objects a small pickle builds.
MEMORY_FLOOR = 1 << 30
MEMORY_PER_BYTE = 64


def _remaining(file: Any) -> int:
    """Bytes left in a stream (the most a pickle read from it can be); 0 if unknown."""
    try:
        return max(0, os.fstat(file.fileno()).st_size - file.tell())
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return 0


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC, restoring its previous state on exit.

    The collector walks every container a big unpickle creates, several times over (it doubles
    the load time of a 50,000-tensor state dict); nothing made meanwhile needs collecting early.
    On resume, freeze()+unfreeze() moves the survivors (our result, mostly) to the oldest
    generation in O(1), as two collections would have, instead of the first allocation after
    enable() traversing all of them as one huge young generation (~0.1 s for 50,000 tensors).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:  # never thaw what the application froze itself
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _refuse_ext(data: bytes) -> None:
    try:
        for op, _arg, pos in pickletools.genops(data):
            if op.name in _EXT_OPCODES:
                raise PickleError(f"EXT opcode {op.name} at byte {pos} is not supported")
            if op.name == "STOP":
                return
    except PickleError:
        raise
    except Exception as e:  # noqa: BLE001 - genops raises ValueError on garbage; the load will say more
        raise PickleError(f"malformed pickle ({e})") from None


def render(value: Any, depth: int = 0) -> Any:
    """A JSON-friendly copy of a plain value for hyperparameters; placeholders by name.

    An ``argparse.Namespace``-like placeholder (state dict, no args) becomes its ``__dict__``;
    a pickled NumPy scalar becomes its Python value; any other placeholder becomes
    ``"dotted.name(args...)"``. Deep or huge values are summarised, never walked in full.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, str) and len(value) > _RENDER_STR:
            return value[:_RENDER_STR] + f"... ({len(value)} chars)"
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
            return str(value)
        return value
    if depth >= _RENDER_DEPTH:
        return f"<{type(value).__name__} nested deeper than {_RENDER_DEPTH}>"
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, complex):
        return str(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= _RENDER_KEYS:
                out["..."] = f"{len(value) - i} more"
                break
            out[k if isinstance(k, str) else str(render(k, depth + 1))] = render(v, depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)[:_RENDER_ITEMS] if not isinstance(value, (list, tuple)) else value
        out_l = [render(v, depth + 1) for v in items[:_RENDER_ITEMS]]
        if len(value) > _RENDER_ITEMS:
            out_l.append(f"... {len(value) - _RENDER_ITEMS} more")
        return out_l
    if isinstance(value, slice):
        return f"slice({value.start}, {value.stop}, {value.step})"
    if is_placeholder_type(value):
        return value.global_name
    if isinstance(value, Placeholder):
        return _render_placeholder(value, depth)
    named = getattr(value, "global_name", None)  # a pure builtin the reader computes
    if isinstance(named, str):
        return named
    return f"<{type(value).__name__}>"


def _render_placeholder(p: Placeholder, depth: int) -> Any:
    name = type(p).global_name
    scalar = numpy_scalar(p)
    if scalar is not None:
        return scalar
    state = p.state
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
        state = state[0]  # (__dict__, slotstate)
    if not p.args and not p.kwargs and isinstance(state, dict):
        return render(state, depth)
    parts = [repr(render(a, depth + 1)) for a in p.args[:_RENDER_ITEMS]]
    parts += [f"{k}={render(v, depth + 1)!r}" for k, v in list(p.kwargs.items())[:_RENDER_ITEMS]]
    text = f"{name}({', '.join(parts)})"
    return text if len(text) <= _RENDER_STR else text[:_RENDER_STR] + "...)"


# numpy dtype.str kind+size -> struct format character.
_NUMPY_SCALARS = {
    "f8": "d",
    "f4": "f",
    "f2": "e",
    "i8": "q",
    "i4": "i",
    "i2": "h",
    "i1": "b",
    "u8": "Q",
    "u4": "I",
    "u2": "H",
    "u1": "B",
    "b1": "?",
}


def numpy_scalar(p: Placeholder) -> Any:
    """Decode ``numpy.core.multiarray.scalar(numpy.dtype('f8', ...), b'...')``, else None."""
    if (
        type(p).global_name not in ("numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar")
        or len(p.args) != 2
    ):
        return None
    dtype, raw = p.args
    if (
        not isinstance(dtype, Placeholder)
        or not dtype.args
        or not isinstance(raw, (bytes, bytearray))
    ):
        return None
    fmt = _NUMPY_SCALARS.get(str(dtype.args[0]).lstrip("<>|="))
    order = (
        ">"
        if isinstance(dtype.state, tuple) and len(dtype.state) > 1 and dtype.state[1] == ">"
        else "<"
    )
    if fmt is None or struct.calcsize(fmt) != len(raw):
        return None
    return struct.unpack(order + fmt, raw)[0]
