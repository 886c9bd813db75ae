"""Mergeable value statistics: :class:`Partial` summarises any set of elements, and two partials
of disjoint sets merge exactly into the partial of their union.

A partial is a plain frozen record of numbers (picklable, no reader, no numpy inside), so shards of
one tensor, tensors of one group or whole files can be reduced anywhere (threads, processes,
Dask tasks) and combined with :meth:`Partial.merge` in any order.

Moments are over the finite elements only; NaN, +Inf and -Inf are counted apart. The variance is
kept as the sum of squared deviations from the mean (``m2``) and merged with Chan, Golub and
LeVeque's pairwise update, which stays accurate where ``sum(x^2) - n*mean^2`` would cancel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

F16_OVERFLOW = 65520.0  # the smallest magnitude that rounds to inf in float16 (half-way to 2^16)


@dataclass(frozen=True, slots=True)
class Partial:
    """Statistics of a set of elements (see the module docstring)."""

    count: int = 0  # every element
    finite: int = 0  # the elements the moments, min and max are over
    mean: float = 0.0
    m2: float = 0.0  # sum of squared deviations from the mean
    sumsq: float = 0.0  # sum of squares (the L2 norm's square)
    min: float = math.inf
    max: float = -math.inf
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    zeros: int = 0
    subnormal: int = 0
    f16_overflow: int = 0  # finite elements that become inf when cast to float16

    def merge(self, other: Partial) -> Partial:
        """The partial of both sets (exact counts; moments by the pairwise update)."""
        n = self.finite + other.finite
        if other.finite == 0:
            mean, m2 = self.mean, self.m2
        elif self.finite == 0:
            mean, m2 = other.mean, other.m2
        else:
            delta = other.mean - self.mean
            mean = self.mean + delta * (other.finite / n)
            m2 = self.m2 + other.m2 + delta * delta * (self.finite * other.finite / n)
        return Partial(
            self.count + other.count, n, mean, m2, self.sumsq + other.sumsq,
            min(self.min, other.min), max(self.max, other.max), self.nan + other.nan,
            self.posinf + other.posinf, self.neginf + other.neginf, self.zeros + other.zeros,
            self.subnormal + other.subnormal, self.f16_overflow + other.f16_overflow,
        )

    @property
    def std(self) -> float | None:
        """Population standard deviation of the finite elements (None when there are none)."""
        return math.sqrt(max(self.m2, 0.0) / self.finite) if self.finite else None

    @property
    def l2(self) -> float:
        """L2 norm of the finite elements."""
        return math.sqrt(self.sumsq)

    @property
    def nonfinite(self) -> int:
        return self.nan + self.posinf + self.neginf

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready numbers (min/max/mean/std None when no element is finite)."""
        some = self.finite > 0
        return {
            "count": self.count, "min": self.min if some else None,
            "max": self.max if some else None, "mean": self.mean if some else None,
            "std": self.std, "l2": self.l2, "nan": self.nan, "posinf": self.posinf,
            "neginf": self.neginf, "zeros": self.zeros, "subnormal": self.subnormal,
            "f16_overflow": self.f16_overflow,
        }


def merge_all(parts: Any) -> Partial:
    """The merge of an iterable of partials (the empty partial when there is none)."""
    out = Partial()
    for p in parts:
        out = out.merge(p)
    return out


def reduce(x: Any, tiny: float | None = None, f16: bool = False) -> Partial:
    """The partial of one chunk: a 1-d numpy array of a real dtype (floats in their own dtype,
    integers, bool); ``tiny`` the smallest normal number of the stored float format (subnormals
    are counted below it), ``f16`` whether to count float16 overflows."""
    import numpy as np

    from inspector import kernels

    n = int(x.size)
    if n == 0:
        return Partial()
    if x.dtype.kind == "f" and x.dtype.itemsize <= 4 and x.dtype.isnative:
        fast = fast_reduce(x, tiny, f16)
        if fast is not None:
            return fast
    if x.dtype == np.bool_:
        x = x.view(np.uint8)
    floating = x.dtype.kind == "f"
    total = float(np.einsum("i->", x, dtype=np.float64))
    nan = posinf = neginf = 0
    if floating and not math.isfinite(total):  # some NaN or Inf (or an overflowing sum)
        finite = np.isfinite(x)
        nf = n - int(np.count_nonzero(finite))
        if nf:
            nan = int(np.count_nonzero(np.isnan(x)))
            posinf = int(np.count_nonzero(x == np.inf))
            neginf = nf - nan - posinf
            x = x[finite]
        total = float(np.einsum("i->", x, dtype=np.float64))
    m = int(x.size)
    if m == 0:
        return Partial(n, 0, nan=nan, posinf=posinf, neginf=neginf)
    # products of float32 (and smaller) values are exact in float64; one pass, no copy
    sumsq = float(np.einsum("i,i->", x, x, dtype=np.float64))
    mean = total / m
    m2 = sumsq - total * mean
    if not (math.isfinite(mean) and math.isfinite(m2)) or m2 < 1e-6 * sumsq:
        # cancellation (values close to their mean) or overflow: the two-pass formula
        if not math.isfinite(mean):
            scale = float(np.max(np.abs(x)))
            mean = float(np.einsum("i->", x / scale, dtype=np.float64)) / m * scale
        d = np.subtract(x, mean, dtype=np.float64)
        m2 = kernels.dot(d, d)
        if not math.isfinite(sumsq):
            sumsq = m2 + m * mean * mean
    lo, hi = x.min(), x.max()
    zeros = int(np.count_nonzero(x == 0))
    subnormal = over = 0
    if floating and (tiny is not None or f16):
        a = np.abs(x)
        if tiny is not None:
            subnormal = int(np.count_nonzero(a < tiny)) - zeros
        if f16 and max(-float(lo), float(hi)) >= F16_OVERFLOW:
            over = int(np.count_nonzero(a >= F16_OVERFLOW))
    return Partial(n, m, mean, max(m2, 0.0), sumsq, float(lo), float(hi), nan, posinf, neginf,
                   zeros, subnormal, over)


def fast_reduce(x: Any, tiny: float | None = None, f16: bool = False) -> Partial | None:
    """:func:`reduce` of a native float16 or float32 chunk with no NaN or Inf, in few passes
    (float16 widened exactly into this thread's scratch buffer first): min and max; the sum in
    float64; the sum of squares as float32 sums over rows of 1,024 elements added in float64
    (about 1e-9 relative: see :mod:`inspector.kernels`); the bits with the sign cleared for
    zeros, subnormals and float16 overflows, counted only when the smallest or largest
    magnitude says there are some. Values
    close to their mean (variance under 1% of the mean square) take the exact two-pass formula
    in float64. None (use :func:`reduce`) when the chunk holds NaN or Inf, or magnitudes whose
    float32 squares could overflow or vanish."""
    import numpy as np

    from inspector import kernels, scratch

    n = int(x.size)
    if n == 0:
        return Partial()
    half = x.dtype.itemsize == 2
    w = kernels.half_to_float32(x, scratch.buffer("reduce.f32", n, np.float32)) if half else x
    lo, hi = float(np.minimum.reduce(w)), float(np.maximum.reduce(w))
    top = max(-lo, hi)
    if not top < (kernels.HALF_NONFINITE if half else 2.0**50) or 0 < top < 2.0**-50:
        return None  # NaN (no comparison holds), Inf, or squares out of float32's range
    limit = None if tiny is None else np.float32(tiny)
    if limit is not None and float(limit) != tiny:
        return None
    total, sumsq = kernels.sums(w)
    bits = scratch.buffer("reduce.bits", n, np.uint32)
    np.bitwise_and(w.view(np.uint32), np.uint32(0x7FFFFFFF), out=bits)  # |x| as ordered ints
    smallest = int(bits.min())
    zeros = subnormal = over = 0
    if smallest == 0:
        zeros = int(np.count_nonzero(bits == 0))
    if limit is not None and smallest < int(limit.view(np.uint32)):
        subnormal = int(np.count_nonzero(bits < limit.view(np.uint32))) - zeros
    if f16 and top >= F16_OVERFLOW:
        over = int(np.count_nonzero(bits >= np.float32(F16_OVERFLOW).view(np.uint32)))
    mean = total / n
    m2 = sumsq - total * mean
    if m2 < 1e-2 * sumsq:  # values close to their mean: exact, in float64, in two passes
        d = scratch.buffer("reduce.f64", n, np.float64)
        np.copyto(d, w)
        total = float(np.add.reduce(d))
        sumsq = kernels.dot(d, d)
        mean = total / n
        np.subtract(d, mean, out=d)
        m2 = kernels.dot(d, d)
    return Partial(n, n, mean, max(m2, 0.0), sumsq, lo, hi, 0, 0, 0, zeros, subnormal, over)
