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
  scanned first (:mod:`.pickle_grammar`, the loaders' opcode grammar) and any EXT opcode is refused.
* PERSID/BINPERSID go to the caller's ``persistent_load``.
* Protocol 5 out-of-band buffers are refused (no ``buffers`` argument).

Bounds: the caller caps the pickle's size; the C unpickler itself is iterative (no recursion on
deep nesting); MemoryError and RecursionError become :class:`PickleError`. CPython < 3.14 sizes its
memo by the largest PUT index, so a hostile LONG_BINPUT can ask for up to 2**32 slots; Linux
refuses such an allocation outright (MemoryError) on ordinary overcommit settings.
"""

from __future__ import annotations

import collections
import contextlib
import copyreg
import gc
import io
import os
import pickle
import struct
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..memory_cap import address_space_capped
from . import nested
from .pickle_grammar import genops
from .pickle_walk import merge, walk
from .placeholders import (  # the placeholder model, importable from here as before
    GlobalRef,
    PickleError,
    Placeholder,
    construct_as_class,
    instance_of,
    is_placeholder_type,
    mark_called,
    result_type,
)
from .pure_builtins import TABLE
from .restricted_names import RestrictedNames

__all__ = ["GlobalRef", "PickleError", "Placeholder", "PyRestrictedUnpickler",
           "RestrictedUnpickler", "as_pickle_error", "base_allowed", "examine_nested",
           "gc_paused", "is_placeholder_type", "numpy_scalar", "render", "scan_globals",
           "unpickle"]

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
            return instance_of(result_type(type(cls)))
        raise PickleError(
            f"copyreg._reconstructor on {type(cls).__name__}, not a class of the file"
        )

    def newobj(cls: Any, *args: Any, **kwargs: Any) -> Any:
        # copyreg.__newobj__(cls, *args) is cls.__new__(cls, *args); __newobj_ex__ adds kwargs
        if is_placeholder_type(cls):
            return cls.__new__(cls, *args, **kwargs)
        if isinstance(cls, Placeholder):
            construct_as_class(cls, "copyreg.__newobj__")
            return instance_of(result_type(type(cls)))
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
    return walk(data, {}, examine_nested=examine_nested).positions


class RestrictedUnpickler(RestrictedNames, pickle.Unpickler):
    """The C unpickler under :class:`RestrictedNames`."""

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
        self._setup(allowed, examine_nested)


class PyRestrictedUnpickler(RestrictedNames, pickle._Unpickler):  # type: ignore[name-defined,misc]
    """The pure-Python unpickler under :class:`RestrictedNames` (its ``dispatch`` can be extended).
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
        self._setup(allowed, examine_nested)
        if uses is not None:
            self.uses = uses


def examine_nested(blob: Any) -> tuple[str, str]:
    """What the bytes a nested loader (``torch.storage._load_from_bytes``) would load hold,
    read through this same unpickler (:func:`.nested.examine`): every load's placeholders and
    stand-ins ask it."""
    return nested.examine(blob, _nested_globals)


def _nested_globals(data: bytes) -> dict[str, GlobalRef]:
    return unpickle(data, base_allowed(), _no_persistent_ids)[1]


def _no_persistent_ids(pid: Any) -> Any:
    return None


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
        err = as_pickle_error(e)
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
    unpickler: RestrictedNames,
) -> dict[str, GlobalRef]:
    """Every global of a pickle the reader stopped in, with its verdict: the reader's own, and
    those :mod:`.pickle_walk` finds walking every opcode from the start (the worse of the two
    verdicts for a global both saw). The file is left where the reader stopped."""
    seen = unpickler.globals
    if start is None:
        return seen
    end = _tell(file)
    try:
        file.seek(start)
        with gc_paused(), address_space_capped(max(MEMORY_FLOOR, MEMORY_PER_BYTE * (
                len(data) if isinstance(data, (bytes, bytearray, memoryview))
                else _remaining(file)))):
            walked = walk(file, allowed, persistent_load,
                          examine_nested=examine_nested).names.globals
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


def as_pickle_error(e: BaseException) -> PickleError:
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
        for op, _arg, pos in genops(data):
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
