"""The compiled one-pass kernels of the value passes (numba); imported by :mod:`inspector.fused`
only, and only when a value pass runs with numba installed.

Each kernel reads a chunk as stored, through an integer view (float32 as int32, bfloat16 and
float16 as int16), widens each element to float32 in registers (no temporary array) and folds
it into its sums in one pass. Sums are float64 (a float32's square is exact in float64); the
``reassoc`` flag lets LLVM split them over vector lanes (the order is fixed by the code, so
a chunk gives the same numbers on every run and thread). Minimum and maximum are taken over
integer keys (the float32 bits with the magnitude bits flipped for negative numbers: ordered as
the floats are), which vectorize without assuming anything about NaN, and which show NaN and
Inf without a comparison: the caller hands such a chunk to the exact NumPy path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

_FLAGS = {"reassoc", "nsz", "contract"}  # no nnan/ninf: NaN and Inf keep their IEEE meaning
_M = np.int32(0x7FFFFFFF)
_S = np.int32(31)
_BIG = np.int32(0x7FFFFFFF)
_HALF_SCALE = np.float32(2.0**112)
_INF = np.int32(0x7F800000)
_F16_EXP = np.int32(0x0F800000)  # float16's exponent bits once moved into place


def _jit(fn: Any) -> Any:
    """``fn`` compiled without the GIL, cached on disk where numba finds a writable place (next
    to this file, else the user's cache directory), compiled per process where it finds none."""
    try:
        return njit(nogil=True, fastmath=_FLAGS, error_model="numpy", boundscheck=False,
                    cache=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(nogil=True, fastmath=_FLAGS, error_model="numpy", boundscheck=False)(fn)


def _inline(fn: Any) -> Any:
    return njit(inline="always", cache=False)(fn)


@_inline
def _widen(raw: Any, i: int, half: bool) -> Any:
    """Element ``i`` as float32 bits: float32 as is, bfloat16 shifted into the upper half,
    float16 (``half``) by its bits: the element sign-extended to 32 bits and shifted left by
    13 moves the 15 bits below the sign into float32's exponent and mantissa place with the
    sign repeated above them (bits 28-30 then cleared; two integer operations where moving the
    bits to the top and back took three), the product with 2**112 restoring the exponent
    exactly (see :func:`inspector.kernels.half_to_float32`). float16 NaN and Inf
    come out as finite numbers of magnitude 65536 and above, which no finite float16 reaches:
    the caller looks at the largest magnitude."""
    if raw.itemsize == 4:
        return np.int32(raw[i])
    if half:
        k = np.int32(np.int32(np.int32(raw[i]) << np.int32(13)) & np.int32(-0x70002000))
        return np.float32(k.view(np.float32) * _HALF_SCALE).view(np.int32)
    return np.int32(np.int32(raw[i]) << np.int32(16))


@_inline
def _widen_ieee(raw: Any, i: int, half: bool) -> Any:
    """:func:`_widen` with float16 NaN and Inf given float32's all-ones exponent, so that they
    stay NaN and Inf (and so does a difference with them)."""
    if raw.itemsize == 4:
        return np.int32(raw[i])
    if half:
        k = np.int32(np.int32(np.int32(raw[i]) << np.int32(13)) & np.int32(-0x70002000))
        bits = np.float32(k.view(np.float32) * _HALF_SCALE).view(np.int32)
        special = np.int32(k & _F16_EXP) == _F16_EXP
        return np.int32(bits | _INF) if special else bits
    return np.int32(np.int32(raw[i]) << np.int32(16))


@_jit
def moments(raw: Any, half: bool) -> Any:
    """(sum, sum of squares, min key, max key, min magnitude bits) of the chunk."""
    s = 0.0
    ss = 0.0
    lo = _BIG
    hi = np.int32(-_BIG)
    small = _BIG
    for i in range(raw.size):
        k = _widen(raw, i, half)
        d = np.float64(np.int32(k).view(np.float32))
        s += d
        ss += d * d
        small = min(small, np.int32(k & _M))
        k = np.int32(k ^ np.int32(np.int32(k >> _S) & _M))
        lo = min(lo, k)
        hi = max(hi, k)
    return s, ss, lo, hi, small


@_jit
def moments_counted(raw: Any, half: bool, tiny: Any, over: Any) -> Any:
    """:func:`moments` with :func:`counts` in the same pass (for float16, whose subnormals
    are common in weights: one pass costs less than two)."""
    s = 0.0
    ss = 0.0
    lo = _BIG
    hi = np.int32(-_BIG)
    zeros = np.int32(0)
    below = np.int32(0)
    above = np.int32(0)
    for i in range(raw.size):
        k = _widen(raw, i, half)
        d = np.float64(np.int32(k).view(np.float32))
        s += d
        ss += d * d
        a = np.int32(k & _M)
        zeros = np.int32(zeros + np.int32(a == 0))
        below = np.int32(below + np.int32(a < tiny))
        above = np.int32(above + np.int32(a >= over))
        k = np.int32(k ^ np.int32(np.int32(k >> _S) & _M))
        lo = min(lo, k)
        hi = max(hi, k)
    return s, ss, lo, hi, zeros, below, above


_M16 = np.int16(0x7FFF)
_S16 = np.int16(15)


@_jit
def moments_half(raw: Any, tiny: Any) -> Any:
    """:func:`moments_counted` of a float16 chunk (as int16) with the integer work on the
    stored 16 bits: (sum, sum of squares, min key, max key, zeros, magnitudes below the bits
    ``tiny``), the keys float16's own (bits with the magnitude flipped when negative). The
    sums are the same operations in the same order as :func:`moments_counted`'s (only the
    integer lanes are narrower), so the same bits."""
    s = 0.0
    ss = 0.0
    lo = _M16
    hi = np.int16(-_M16)
    zeros = np.int32(0)
    below = np.int32(0)
    for i in range(raw.size):
        r = raw[i]
        d = np.float64(np.int32(_widen(raw, i, True)).view(np.float32))
        s += d
        ss += d * d
        a = np.int16(r & _M16)
        zeros = np.int32(zeros + np.int32(a == 0))
        below = np.int32(below + np.int32(a < tiny))
        e = np.int16(r ^ np.int16(np.int16(r >> _S16) & _M16))
        lo = min(lo, e)
        hi = max(hi, e)
    return s, ss, lo, hi, zeros, below


@_jit
def deviation(raw: Any, half: bool, mean: float) -> Any:
    """The sum of squared deviations from ``mean`` of the chunk, in float64."""
    m2 = 0.0
    for i in range(raw.size):
        d = np.float64(np.int32(_widen(raw, i, half)).view(np.float32)) - mean
        m2 += d * d
    return m2


@_jit
def counts(raw: Any, half: bool, tiny: Any, over: Any) -> Any:
    """(zeros, magnitudes below the bits ``tiny``, magnitudes at or above the bits ``over``) of
    the chunk (fewer than 2**31 elements: int32 counters, which vectorize)."""
    zeros = np.int32(0)
    below = np.int32(0)
    above = np.int32(0)
    for i in range(raw.size):
        a = np.int32(_widen(raw, i, half) & _M)
        zeros = np.int32(zeros + np.int32(a == 0))
        below = np.int32(below + np.int32(a < tiny))
        above = np.int32(above + np.int32(a >= over))
    return zeros, below, above


@_jit
def difference(raw_a: Any, raw_b: Any, half: bool) -> Any:
    """(bits of max |a - b| as int64, sum (a - b)^2, sum a^2, sum b^2, sum (a - b)(a + b)) over
    the chunk pair, in float64. A NaN or Inf on either side makes a - b NaN or Inf: the bits
    are then at least those of Inf (the caller's sign to take the exact path)."""
    top = np.int64(0)
    ss_d = 0.0
    ss_a = 0.0
    ss_b = 0.0
    ss_ab = 0.0
    for i in range(raw_a.size):
        a = np.float64(np.int32(_widen_ieee(raw_a, i, half)).view(np.float32))
        b = np.float64(np.int32(_widen_ieee(raw_b, i, half)).view(np.float32))
        d = a - b
        top = max(top, np.float64(abs(d)).view(np.int64))
        ss_d += d * d
        ss_a += a * a
        ss_b += b * b
        ss_ab += d * (a + b)
    return top, ss_d, ss_a, ss_b, ss_ab
