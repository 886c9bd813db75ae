"""One pass per chunk for the value passes, when numba is installed (``pip install
ckpt-inspector[fast]``): float32, bfloat16 and float16 chunks reduced as stored, every statistic
in one read of the bytes (see :mod:`inspector.fused_kernels`). Without numba, or with
``INSPECTOR_NUMBA=0`` in the environment, every function here returns None and the NumPy path
computes the chunk. numba is imported on the first value pass that asks, never by a listing.

A chunk with NaN or Inf gives None too: the exact NumPy path counts and places them.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from inspector.partial import F16_OVERFLOW, Partial

_LOCK = threading.Lock()
_KERNELS: list[Any] = []  # [] not tried yet; [None] numba absent or off; [module]
_INF32 = 0x7F800000
_INF64 = 0x7FF0000000000000
_F16_OVER = 0x477FF000  # float32 bits of F16_OVERFLOW (65520)
_HALF_TINY, _HALF_TINY_BITS = 2.0**-14, 0x0400  # float16's smallest normal, its float16 bits
TYPES = ("float32", "bfloat16", "float16")


def installed() -> bool:
    """Whether the kernels will be used: numba installed and not turned off (numba is not
    imported to tell)."""
    if _KERNELS:
        return _KERNELS[0] is not None
    if _off():
        return False
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def _off() -> bool:
    return os.environ.get("INSPECTOR_NUMBA", "1").strip().lower() in ("0", "no", "false", "off")


def kernels() -> Any:
    """The compiled kernels module, or None (numba not installed, or turned off)."""
    if not _KERNELS:
        with _LOCK:
            if not _KERNELS:
                _KERNELS.append(_load())
    return _KERNELS[0]


def _load() -> Any:
    if not installed():
        return None
    try:
        from inspector import fused_kernels
    except Exception:  # a numba that cannot load here (version skew): NumPy does the work
        return None
    return fused_kernels


def _raw(x: Any, dtype: str) -> tuple[Any, bool] | None:
    """The chunk as the integer view the kernels read, and whether it is float16; None when
    the kernels do not take it (another type, or not native byte order)."""
    import numpy as np

    if dtype not in TYPES or not x.dtype.isnative or x.ndim != 1:
        return None
    size = 4 if dtype == "float32" else 2
    if x.dtype.itemsize != size:
        return None
    if not x.flags.c_contiguous:
        return None
    return x.view(np.int32 if size == 4 else np.int16), dtype == "float16"


def stats(x: Any, dtype: str, tiny: float | None, f16: bool) -> Partial | None:
    """The :class:`Partial` of a chunk of ``dtype`` as stored (bfloat16 as its 16-bit integers),
    or None (no numba, another type, or NaN or Inf in the chunk: the NumPy path's job). The
    numbers are those of :func:`inspector.partial.reduce`, the sums in float64 in one pass:
    counts, minimum and maximum exact; the mean and the sum of squares to float64's rounding
    of the chunk's sums; values close to their mean (variance under 1% of the mean square) get
    the sum of squared deviations from the mean in a second pass."""
    import numpy as np

    k = kernels()
    n = int(x.size)
    if k is None or n == 0 or n >= 1 << 31:
        return None
    got = _raw(x, dtype)
    if got is None:
        return None
    raw, half = got
    tiny_bits = _bits(tiny) if tiny is not None else 0
    limits = np.int32(max(tiny_bits, 1)), np.int32(_F16_OVER)
    counted = None
    if half and not f16 and tiny == _HALF_TINY:  # float16's own: its 16 bits compared
        got = _call(k.moments_half, raw, np.int16(_HALF_TINY_BITS))
        if got is None:
            return None
        s, ss, lo_key, hi_key, zeros, below = got
        lo_key, hi_key = _half_key(int(lo_key)), _half_key(int(hi_key))
        counted, small = [zeros, below, 0], 0
    elif half:
        got = _call(k.moments_counted, raw, half, *limits)
        if got is None:
            return None
        s, ss, lo_key, hi_key, *counted = got
        small = 0
    else:
        got = _call(k.moments, raw, half)
        if got is None:
            return None
        s, ss, lo_key, hi_key, small = got
    lo_bits, hi_bits = _unkey(int(lo_key)), _unkey(int(hi_key))
    if (hi_bits & 0x7FFFFFFF) >= _INF32 or (lo_bits & 0x7FFFFFFF) >= _INF32:
        return None  # NaN or Inf (a NaN's key lies beyond the infinities)
    lo, hi = _float(lo_bits), _float(hi_bits)
    top = max(-lo, hi)
    if half and top >= 65536.0:
        return None  # a float16 NaN or Inf (widened to 65536 and above)
    over = f16 and top >= F16_OVERFLOW
    mean = s / n
    m2 = ss - s * mean
    zeros = subnormal = overflow = 0
    if counted is not None or int(small) < max(tiny_bits, 1) or over:
        counted = counted or _call(k.counts, raw, half, *limits)
        if counted is None:
            return None
        zeros, below, above = (int(c) for c in counted)
        if tiny is not None:
            subnormal = below - zeros
        if over:
            overflow = above
    if m2 < 1e-2 * ss:  # values close to their mean: the deviations summed in a second pass
        dev = _call(k.deviation, raw, half, mean)
        if dev is None:
            return None
        m2 = float(dev)
    return Partial(n, n, mean, max(m2, 0.0), float(ss), lo, hi, 0, 0, 0, zeros, subnormal,
                   overflow)


def difference(xa: Any, xb: Any, dtype: str) -> tuple[float, float, float, float, float] | None:
    """(max |a - b|, sum (a - b)^2, sum a^2, sum b^2, sum (a - b)(a + b)) of a pair of chunks
    of ``dtype`` as stored, in float64 (the maximum exact), or None (no numba, another type, NaN
    or Inf on either side)."""
    k = kernels()
    if k is None or xa.size != xb.size:
        return None
    ga, gb = _raw(xa, dtype), _raw(xb, dtype)
    if ga is None or gb is None:
        return None
    got = _call(k.difference, ga[0], gb[0], ga[1])
    if got is None:
        return None
    top, ss_d, ss_a, ss_b, ss_ab = got
    if int(top) >= _INF64:
        return None
    import struct

    top_f = struct.unpack("<d", struct.pack("<q", int(top)))[0]
    return top_f, float(ss_d), float(ss_a), float(ss_b), float(ss_ab)


def _call(kernel: Any, *args: Any) -> Any:
    """``kernel(*args)``; None, and the kernels off for the rest of the process, when it cannot
    compile or load here (a numba that does not work with this NumPy or this CPU)."""
    try:
        return kernel(*args)
    except Exception:
        with _LOCK:
            _KERNELS[:] = [None]
        return None


def _half_key(key: int) -> int:
    """A float16 order key (of :func:`inspector.fused_kernels.moments_half`) as the float32
    order key of the same value (NaN and Inf: a key beyond every finite float16's, which
    :func:`stats` sees as the NumPy path's chunk)."""
    import struct

    bits = (key ^ 0x7FFF if key < 0 else key) & 0xFFFF
    if bits & 0x7C00 == 0x7C00:
        return _INF32 if key >= 0 else -_INF32 - 1
    f32 = _bits(struct.unpack("<e", struct.pack("<H", bits))[0])
    return (f32 ^ 0x7FFFFFFF) - (1 << 32) if f32 & 0x80000000 else f32


def _unkey(key: int) -> int:
    """The float32 bits of a kernel's order key (the magnitude bits flipped back when
    negative)."""
    bits = key ^ 0x7FFFFFFF if key < 0 else key
    return bits & 0xFFFFFFFF


def _float(bits: int) -> float:
    import struct

    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _bits(x: float) -> int:
    import struct

    return struct.unpack("<I", struct.pack("<f", x))[0]
