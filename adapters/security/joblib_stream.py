"""joblib streams: a pickle whose NumPy arrays are written raw between its opcodes.

``joblib.dump`` pickles each array as a ``NumpyArrayWrapper`` (shape, dtype, order, alignment)
and writes the array's bytes right after that object's BUILD opcode (an object array as a nested
pickle instead); ``joblib.load`` reads them there. This reader does the same without running
anything: the restricted pure-Python unpickler, which skips a plain array's bytes and reads an
object array's nested pickle through the same restrictions.
"""

from __future__ import annotations

import io
import math
import pickle
from typing import Any, BinaryIO

from inspector.adapters.security.pickle_walk import StopWalk, Walk, merge, walk
from inspector.adapters.security.placeholders import mark_called
from inspector.adapters.security.restricted_pickle import (
    GlobalRef,
    PickleError,
    Placeholder,
    PyRestrictedUnpickler,
    as_pickle_error,
    base_allowed,
    examine_nested,
)

WRAPPER = "joblib.numpy_pickle.NumpyArrayWrapper"
# The wrapper's methods joblib.load calls right after its BUILD (joblib 1.6.0
# numpy_pickle.py: load_build -> read -> read_array / read_mmap ->
# safe_get_numpy_array_alignment_bytes). A state key of the same name shadows the method on the
# instance, so the value it holds is what joblib calls.
WRAPPER_METHODS = ("read", "read_array", "read_mmap", "safe_get_numpy_array_alignment_bytes")
MAX_NESTED = 64  # object arrays inside object arrays


class JoblibUnpickler(PyRestrictedUnpickler):
    dispatch = dict(PyRestrictedUnpickler.dispatch)

    def __init__(self, file: BinaryIO, size: int, persistent_load: Any, depth: int = 0) -> None:
        super().__init__(file, base_allowed(), persistent_load)
        self.file_handle = file
        self.size = size
        self.depth = depth

    def load_build(self) -> None:
        pickle._Unpickler.load_build(self)  # type: ignore[attr-defined]
        top = self.stack[-1]
        if isinstance(top, Placeholder) and type(top).global_name == WRAPPER:
            planted_methods(top.state)
            self._skip_array(top.state)

    dispatch[pickle.BUILD[0]] = load_build

    def _skip_array(self, state: Any) -> None:
        fh = self.file_handle
        if skip_raw(fh, state, self.size):  # an object array: a nested pickle follows
            if self.depth >= MAX_NESTED:
                raise PickleError("object arrays nest too deeply")
            nested = JoblibUnpickler(fh, self.size, self.persistent_load, self.depth + 1)
            nested._seen, nested.uses, nested._types = self._seen, self.uses, self._types
            nested.load()


def planted_methods(state: Any) -> None:
    """Record as called whatever a wrapper's BUILD state puts under a method joblib calls."""
    parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
    for d in parts:
        if isinstance(d, dict):
            for key in WRAPPER_METHODS:
                if key in d:
                    mark_called(d[key], f"by joblib.load, through a planted {key}")


def skip_raw(fh: BinaryIO, state: Any, size: int) -> bool:
    """Move ``fh`` past the raw bytes joblib wrote after a ``NumpyArrayWrapper`` with
    ``state``; True for an object array (``pickle.dump(array, fh, protocol=2)`` follows)."""
    if not isinstance(state, dict):
        raise PickleError("NumpyArrayWrapper state is not a dict")
    shape, dtype = state.get("shape"), state.get("dtype")
    if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape)):
        raise PickleError(f"NumpyArrayWrapper shape {shape!r:.60} is not a tuple of ints")
    code, itemsize = _dtype(dtype)
    if code.startswith("O"):
        return True
    align = state.get("numpy_array_alignment_bytes")
    if align is not None:
        pad = fh.read(1)
        if len(pad) != 1:
            raise PickleError("truncated joblib array padding")
        fh.seek(pad[0], io.SEEK_CUR)
    n = math.prod(shape) * itemsize
    if fh.tell() + n > size:
        raise PickleError(f"joblib array of {n:,} bytes runs past the end of the file")
    fh.seek(n, io.SEEK_CUR)
    return False


def _dtype(dtype: Any) -> tuple[str, int]:
    """(type code, item size) of a pickled ``numpy.dtype(code, align, copy)`` placeholder."""
    if not isinstance(dtype, Placeholder) or not dtype.args or not isinstance(dtype.args[0], str):
        raise PickleError("NumpyArrayWrapper dtype is not a numpy.dtype")
    code = dtype.args[0].lstrip("<>|=")
    state = dtype.state
    if isinstance(state, tuple) and len(state) > 5 and type(state[5]) is int and state[5] > 0:
        return code, state[5]  # elsize of flexible types (U/S/V)
    digits = "".join(c for c in code if c.isdigit())
    if code.startswith("O"):
        return code, 8
    if not digits:
        raise PickleError(f"numpy dtype {code!r} has no item size")
    return code, int(digits)


def read_joblib(
    f: BinaryIO, size: int, persistent_load: Any
) -> tuple[dict[str, GlobalRef], str | None]:
    """(globals, error) of a joblib stream from the start of ``f``."""
    f.seek(0)
    u = JoblibUnpickler(f, size, persistent_load)
    try:
        u.load()
    except (PickleError, RecursionError, MemoryError, pickle.UnpicklingError, EOFError,
            ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as e:
        return merge(_walk(f, size, persistent_load), u.globals), str(as_pickle_error(e))
    return u.globals, None


def _walk(f: BinaryIO, size: int, persistent_load: Any) -> dict[str, GlobalRef]:
    """Every global of the stream, walked opcode by opcode past whatever stopped the reader
    (:mod:`.pickle_walk`), skipping each array's raw bytes as joblib.load reads them."""
    depth = [0]

    def after_build(w: Walk, obj: Any) -> None:
        if not (isinstance(obj, Placeholder) and type(obj).global_name == WRAPPER):
            return
        planted_methods(obj.state)
        try:
            nested = skip_raw(f, obj.state, size)
        except PickleError:
            raise StopWalk from None  # where the pickle resumes is not known
        if nested:
            if depth[0] >= MAX_NESTED:
                raise StopWalk
            depth[0] += 1
            inner = Walk(w.names._allowed, persistent_load, after_build, examine_nested)
            inner.names = w.names
            inner.run(f)
            depth[0] -= 1

    end = f.tell()
    try:
        f.seek(0)
        return walk(f, base_allowed(), persistent_load, after_build,
                    examine_nested).names.globals
    except (OSError, MemoryError, RecursionError):
        return {}
    finally:
        f.seek(end)
