"""NumPy arrays inside a pickle, read as records (shape, dtype, order): no NumPy, no array bytes.

How NumPy pickles an array (``numpy/_core/src/multiarray/methods.c`` ``array_reduce`` /
``array_setstate``, ``numpy/_core/numeric.py`` ``_frombuffer``):

* protocols 0-4: ``numpy._core.multiarray._reconstruct(numpy.ndarray, (0,), b'b')`` (NumPy 1.x:
  ``numpy.core.multiarray``), then BUILD with ``(version, shape, dtype, is_fortran, data)``;
  ``data`` is the raw bytes, or for an object array the list of its elements;
* protocol 5: ``numpy._core.numeric._frombuffer(buffer, dtype, shape, order)``;
* a dtype is ``numpy.dtype(descr, align, copy)`` then BUILD with
  ``(version, byteorder, subdescr, names, fields, elsize, alignment, flags)``.

The stand-ins below take those calls and states and keep only the shape, dtype and order; the
data is never interpreted. An object array (``dtype('O')``, e.g. ``np.save`` of a dict with
``allow_pickle``) is replaced by its elements, so the arrays inside it are walked like any other
container: a 0-d object array by its one element, others by a list of elements. Records carry
``extra["numpy"] = True`` so a reader can tell them from torch tensors.
"""

from __future__ import annotations

import math
from typing import Any

from .dtypes import NUMPY_KINDS
from .security.restricted_pickle import PickleError, Placeholder
from .torch.rebuild import TensorRecord

# The globals NumPy's pickles name (both spellings: numpy._core since 2.0, numpy.core before).
RECONSTRUCT = ("numpy._core.multiarray._reconstruct", "numpy.core.multiarray._reconstruct")
FROMBUFFER = ("numpy._core.numeric._frombuffer", "numpy.core.numeric._frombuffer")
MAX_DEPTH = 200


class _NdArrayType:
    """The ``numpy.ndarray`` global: only a marker passed to ``_reconstruct``."""

    def __repr__(self) -> str:
        return "numpy.ndarray"


NDARRAY = _NdArrayType()


class DType:
    """``numpy.dtype(descr, align, copy)`` with its BUILD state (byte order)."""

    __slots__ = ("descr", "byteorder")

    def __init__(self, descr: Any = None, align: Any = False, copy: Any = False) -> None:
        if not isinstance(descr, str):
            raise PickleError(f"numpy.dtype of {type(descr).__name__}, not a type string")
        self.descr = descr
        self.byteorder = "="

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) > 1 and isinstance(state[1], str):
            self.byteorder = state[1]

    def canonical(self) -> tuple[str, int]:
        """(canonical dtype name, item size in bytes)."""
        d = self.descr.lstrip("<>|=")
        kind, size = d[:1], d[1:]
        if kind == "O":
            return "object", 0
        if size.isdigit() and (kind, int(size)) in NUMPY_KINDS:
            return NUMPY_KINDS[(kind, int(size))], int(size)
        if kind in "SU" and size.isdigit():
            return f"{'str' if kind == 'U' else 'bytes'}{size}", int(size) * (4 if kind == "U"
                                                                                else 1)
        if kind == "V" and size.isdigit():
            return f"void{int(size) * 8}", int(size)
        raise PickleError(f"numpy dtype {self.descr!r} is not supported")


class NdArray:
    """An array under construction: ``_reconstruct`` makes it, BUILD gives it its state."""

    __slots__ = ("shape", "dtype", "fortran", "elements")

    def __init__(self) -> None:
        self.shape: tuple[int, ...] | None = None
        self.dtype: DType | None = None
        self.fortran = False
        self.elements: list[Any] | None = None  # object arrays only

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise PickleError("ndarray state is not (version, shape, dtype, is_fortran, data)")
        shape, dtype, fortran, data = state[-4:]
        self.shape = _shape(shape)
        if not isinstance(dtype, DType):
            raise PickleError("ndarray state's dtype is not a numpy.dtype")
        self.dtype = dtype
        self.fortran = bool(fortran)
        if dtype.canonical()[0] == "object":
            if not isinstance(data, list) or len(data) != math.prod(self.shape):
                raise PickleError("object array state does not list its elements")
            self.elements = data

    def record(self) -> Any:
        """A :class:`TensorRecord` (numeric) or the elements (object arrays)."""
        if self.shape is None or self.dtype is None:
            raise PickleError("numpy array without its BUILD state")
        if self.elements is not None:
            return self.elements[0] if self.shape == () else list(self.elements)
        return array_record(self.shape, self.dtype, self.fortran)


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, tuple) or not all(
        type(d) is int and 0 <= d < 1 << 62 for d in value
    ):
        raise PickleError(f"numpy shape {value!r} is not a tuple of non-negative ints")
    return value


def array_record(shape: tuple[int, ...], dtype: DType, fortran: bool) -> TensorRecord:
    name, _itemsize = dtype.canonical()
    rec = TensorRecord(None, 0, shape, None, name, False)
    rec.add_extra(numpy=True, fortran_order=fortran,
                  **({"byteorder": "big"} if dtype.byteorder == ">" else {}))
    return rec


def allowed() -> dict[str, Any]:
    """The NumPy reconstruction globals as stand-ins, for one load."""

    def reconstruct(cls: Any, shape: Any = (0,), dtype: Any = b"b") -> NdArray:
        if cls is not NDARRAY:
            raise PickleError("numpy _reconstruct of a class other than numpy.ndarray")
        return NdArray()

    def frombuffer(buf: Any, dtype: Any, shape: Any, order: Any = "C") -> TensorRecord:
        if not isinstance(dtype, DType):
            raise PickleError("numpy _frombuffer without a numpy.dtype")
        return array_record(_shape(tuple(shape) if isinstance(shape, list) else shape), dtype,
                            order == "F")

    table: dict[str, Any] = {"numpy.ndarray": NDARRAY, "numpy.dtype": DType}
    table.update({n: reconstruct for n in RECONSTRUCT})
    table.update({n: frombuffer for n in FROMBUFFER})
    return table


def resolve(obj: Any) -> Any:
    """``obj`` with every :class:`NdArray` replaced by its record or elements, in place where
    containers are mutable; shared containers visited once, cycles left as they are."""
    done: dict[int, Any] = {}

    def go(x: Any, depth: int) -> Any:
        t = type(x)
        if t is NdArray:
            key = id(x)
            if key not in done:
                done[key] = None
                done[key] = go(x.record(), depth + 1)
            return done[key] if done[key] is not None else x
        if t in (str, int, float, bool, bytes, type(None), TensorRecord):
            return x
        if depth > MAX_DEPTH:
            raise PickleError(f"containers nest deeper than {MAX_DEPTH} levels")
        key = id(x)
        if key in done:
            return done[key] if done[key] is not None else x
        done[key] = None
        if isinstance(x, dict):
            for k, v in list(x.items()):
                x[k] = go(v, depth + 1)
            out = x
        elif t is list:
            x[:] = [go(v, depth + 1) for v in x]
            out = x
        elif t is tuple:
            out = tuple(go(v, depth + 1) for v in x)
        elif isinstance(x, Placeholder):
            if x.state is not None:
                x.state = go(x.state, depth + 1)
            x.args = tuple(go(v, depth + 1) for v in x.args)
            if x.listitems:
                x.listitems = [go(v, depth + 1) for v in x.listitems]
            if x.items:
                x.items = [(k, go(v, depth + 1)) for k, v in x.items]
            out = x
        else:
            out = x
        done[key] = out
        return out

    return go(obj, 0)
