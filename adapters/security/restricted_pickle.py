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
) -> GlobalRef:
    """The :class:`GlobalRef` of one global from its names and the uses a load recorded
    (``nested``: for a nested loader, "level\tsummary" of each blob it would load)."""
    v = verdicts.verdict(module, qualname, uses, how)
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
    if v.level != verdicts.DANGEROUS and written != f"{module}.{qualname}":
        w_module, _, w_name = written.rpartition(".")
        why = verdicts.listed(w_module, w_name)  # the Python 2 spelling, as written
        if why is not None:
            v = verdicts.Verdict(verdicts.DANGEROUS, v.use, why)
    return GlobalRef(
        written, f"{module}.{qualname}", v.level == verdicts.SAFE, _SEVERITY[v.level], v
    )


class Placeholder:
    """An inert stand-in for a global (subclassed once per dotted name) or for its instances.

    ``global_name`` is the dotted name; instances record what the pickle did to them. The
    per-load types also record how a loader would use their global in ``uses`` (a dict shared
    by one load: name -> {"called", "constructed"} and name -> how): ``__new__`` runs for every
    instantiation (NEWOBJ, copyreg._reconstructor), ``__init__`` only when the type is called
    (REDUCE, and INST/OBJ because ``__getinitargs__`` exists, as for a function global).
    """

    __slots__ = ("args", "kwargs", "state", "items", "listitems")
    global_name = "?"
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
            cls.uses.setdefault(cls.global_name, set()).add(verdicts.CONSTRUCTED)
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # REDUCE calls cls(*args)
        cls = type(self)
        mark_called(cls)
        if cls.global_name in NESTED_LOADERS and cls.uses is not None:
            from .nested import examine  # bytes of a file inside the file

            level, summary = examine(args[0] if args else None)
            cls.uses.setdefault("nested:" + cls.global_name, set()).add(f"{level}\t{summary}")
        at = CALLS_ARGUMENT.get(cls.global_name, -1)
        if 0 <= at < len(args) and args[at] is not object:
            # an inert helper a loader calls, which calls this argument (when not implemented
            # by the reader, it is a placeholder: the argument's call is recorded here)
            mark_called(args[at], f"by {cls.global_name}")

    def __setstate__(self, state: Any) -> None:  # BUILD
        self.state = state
        # A BUILD state can plant __setstate__/append/extend on the instance; a loader looks
        # them up on the instance and calls them on the next BUILD/APPEND(S).
        for d in state if isinstance(state, tuple) else (state,):
            if isinstance(d, dict):
                for key in _PLANTED:
                    if key in d:
                        mark_called(d[key], f"through a planted {key}")

    def __setitem__(self, key: Any, value: Any) -> None:  # SETITEM(S)
        if self.items is None:
            self.items = []
        self.items.append((key, value))

    def append(self, value: Any) -> None:  # APPEND
        if self.listitems is None:
            self.listitems = []
        self.listitems.append(value)

    def extend(self, values: Any) -> None:  # APPENDS
        for v in values:
            self.append(v)

    def __call__(self, *args: Any, **kwargs: Any) -> Placeholder:  # REDUCE on an instance
        cls = type(self)
        called = cls.uses is not None and verdicts.CALLED in cls.uses.get(cls.global_name, ())
        mark_called(cls, "and its result called" if called else "an instance called")
        return _call_result_type(type(self).global_name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<placeholder {type(self).global_name}>"


_PLANTED = ("__setstate__", "append", "extend")


def mark_called(obj: Any, how: str = "") -> None:
    """Record that a loader would call ``obj`` (a placeholder type, or an instance: its class's
    ``__call__``); anything else (an allowed callable, a plain value) is left alone."""
    cls = obj if is_placeholder_type(obj) else type(obj) if isinstance(obj, Placeholder) else None
    if cls is None or cls.uses is None:
        return
    cls.uses.setdefault(cls.global_name, set()).add(verdicts.CALLED)
    if how:
        cls.uses.setdefault("how:" + cls.global_name, set()).add(how)


def is_placeholder_type(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, Placeholder)


def _make_type(name: str, uses: dict[str, set[str]] | None = None) -> type[Placeholder]:
    qual = name.rsplit(".", 1)[-1] or "placeholder"
    return type(
        qual,
        (Placeholder,),
        {"__slots__": (), "global_name": name, "__module__": __name__, "uses": uses},
    )


@functools.lru_cache(maxsize=256)
def _call_result_type(name: str) -> type[Placeholder]:
    return _make_type(name + "()")


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
        raise PickleError(
            f"copyreg._reconstructor on {type(cls).__name__}, not a class of the file"
        )

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

    return {
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


def scan_globals(data: bytes) -> list[tuple[str, int]]:
    """(dotted name, byte position) of every GLOBAL/INST/STACK_GLOBAL, without loading anything.

    STACK_GLOBAL names are taken from the two most recent string arguments, as pickletools'
    own annotations do. Pure Python and slow (~0.3 us per opcode): for audits and tests, not for
    the read path, where :class:`RestrictedUnpickler` records the globals as it resolves them.
    """
    out: list[tuple[str, int]] = []
    strings: list[str] = []
    for op, arg, pos in pickletools.genops(data):
        if op.name in ("GLOBAL", "INST"):
            out.append((str(arg).replace(" ", ".", 1), pos))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            out.append((f"{strings[-2]}.{strings[-1]}", pos))
        if isinstance(arg, str):
            strings.append(arg)
            del strings[:-2]
        if op.name == "STOP":
            break
    return out


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
            return found
        t = self._types.get(dotted)
        if t is None:
            t = self._types[dotted] = _make_type(dotted, self.uses)
        return t

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
            how = ", ".join(sorted(self.uses.get("how:" + dotted, ())))
            nested = self.uses.get("nested:" + dotted)
            out[written] = judge(written, module, qualname, frozenset(uses), how, nested)
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
    try:
        with gc_paused(), address_space_capped(max(MEMORY_FLOOR, MEMORY_PER_BYTE * size)):
            obj = unpickler.load()
    except (PickleError, RecursionError, MemoryError, *_LOAD_ERRORS) as e:
        err = _as_pickle_error(e)
        err.globals = unpickler.globals
        raise err from None
    return obj, unpickler.globals


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
            if i >= _RENDER_ITEMS:
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
