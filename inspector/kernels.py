"""The array kernels the value passes share: dot products on the calling thread, row sums, and
float16 widened by bit operations.

A value pass runs its own threads; OpenBLAS (NumPy's BLAS) starts threads of its own for a dot
product longer than 10,000 elements, and the two sets contend for the same cores (on a loaded
2-core machine a 256K-element ``np.dot`` took 30x its single-thread time). So vectors are cut
into rows of at most :data:`ROW` elements, each row's dot product is computed by BLAS on this
thread, and the rows are added in float64, which also keeps a float32 sum's rounding to one
row's length.
"""

from __future__ import annotations

from typing import Any

ROW = 8192  # elements per BLAS call: below OpenBLAS's threading threshold (10,000)
SHORT_ROW = 1024  # rows of float32 sums: their rounding stays near 1e-9 relative (see partial)
HALF_SCALE = 2.0**112  # float16 bits shifted into float32's place, times this: the value
HALF_NONFINITE = 65536.0  # half_to_float32 gives NaN and Inf at or above this magnitude


def dot(x: Any, y: Any, row: int = ROW) -> float:
    """``x . y`` for two 1-d arrays of one float dtype and size, as a Python float (float32
    arrays: float32 sums within rows of ``row`` elements, rows added in float64)."""
    import numpy as np

    n = int(x.size)
    rows = n // row
    total = 0.0
    if rows:
        a = x[: rows * row].reshape(rows, row)
        b = y[: rows * row].reshape(rows, row)
        total = float(np.add.reduce(_rowdots(np, a, b), dtype=np.float64))
    if n > rows * row:  # the rest, shorter than a row: products and sum in float64
        total += float(np.einsum("i,i->", x[rows * row:], y[rows * row:], dtype=np.float64))
    return total


def sums(x: Any, row: int = SHORT_ROW) -> tuple[float, float]:
    """The sum and the sum of squares of a 1-d float32 array, as Python floats. The sum in
    float64 (``einsum``'s float64 accumulation, the fastest of NumPy's: a mean as exact as
    float64's, which a tensor's mean, small against its values, needs); the sum of squares, all
    terms
    positive, as BLAS dot products in float32 per row of ``row`` elements, rows added in
    float64 (about 1e-9 relative), the rest, shorter than a row, in float64."""
    import numpy as np

    n = int(x.size)
    rows = n // row
    total = float(np.einsum("i->", x, dtype=np.float64))
    sumsq = 0.0
    if rows:
        a = x[: rows * row].reshape(rows, row)
        sumsq = float(np.add.reduce(_rowdots(np, a, a), dtype=np.float64))
    if n > rows * row:
        rest = x[rows * row:]
        sumsq += float(np.einsum("i,i->", rest, rest, dtype=np.float64))
    return total, sumsq


def _rowdots(np: Any, a: Any, b: Any) -> Any:
    vecdot = getattr(np, "vecdot", None)  # NumPy >= 2.0
    if vecdot is not None:
        return vecdot(a, b)
    if b.ndim == 1:
        return a @ b
    return np.einsum("ij,ij->i", a, b)


def half_to_float32(x: Any, out: Any) -> Any:
    """Widen a native float16 array into the float32 array ``out`` (same size) by integer
    operations, where NumPy's own conversion is a slow scalar loop on some CPUs; returns
    ``out``, its elements in :func:`paired` order. Every finite value comes out exact; NaN and
    Inf come out as finite numbers of magnitude >= 65536, which no finite float16 reaches
    (largest 65504): a caller that sees one converts the chunk its own way.

    Each element's 16 bits are moved to the top of a 32-bit word and shifted right by 3 with
    the sign repeated (so the 15 bits below the sign sit in float32's exponent and mantissa
    place, float16's exponent bias 15 read as float32's 127), bits 28-30 cleared; the product
    with 2**112 restores the exponent. float16 subnormals land on float32 subnormals, which the
    product makes normal, exactly."""
    import numpy as np

    n = x.size - x.size % 2
    word = out[:n].view(np.int32)
    _pairs(np, x[:n].view(np.int32), word, lambda src, dst: np.right_shift(src, 3, out=dst),
           lambda src, dst: (np.left_shift(src, 16, out=dst), np.right_shift(dst, 3, out=dst)))
    np.bitwise_and(word, np.int32(-0x70002000), out=word)  # 0x8FFFE000: sign + 15 value bits
    np.multiply(out[:n], np.float32(HALF_SCALE), out=out[:n])
    if n < x.size:  # the odd last element
        out[n:] = x[n:]
    return out


def bfloat16_to_float32(x: Any, out: Any) -> Any:
    """Widen a native bfloat16 array (as uint16) into the float32 array ``out``, exactly (its
    bits are float32's upper half), in :func:`paired` order; returns ``out``."""
    import numpy as np

    n = x.size - x.size % 2
    _pairs(np, x[:n].view(np.uint32), out[:n].view(np.uint32),
           lambda src, dst: np.bitwise_and(src, np.uint32(0xFFFF0000), out=dst),
           lambda src, dst: np.left_shift(src, 16, out=dst))
    if n < x.size:  # the odd last element
        out[n:].view(np.uint32)[:] = x[n:].astype(np.uint32) << 16
    return out


def paired(x: Any) -> Any:
    """``x`` in the order the 16-bit widenings put it: for each 32-bit pair of elements, the
    second ones first, then the first ones (the odd last element last). Sums, extremes and
    counts do not depend on order; an elementwise comparison of two chunks needs both widened
    alike."""
    import numpy as np

    n = x.size - x.size % 2
    return np.concatenate([x[1:n:2], x[0:n:2], x[n:]])


def _pairs(np: Any, src: Any, word: Any, high: Any, low: Any) -> None:
    """Apply ``high`` and ``low`` to the 32-bit pairs ``src`` (little-endian: the high half is
    a pair's second element), writing the first and the second half of ``word``."""
    m = src.size
    high(src, word[:m])
    low(src, word[m:])
