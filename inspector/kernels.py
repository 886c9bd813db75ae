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


def total(x: Any, row: int = SHORT_ROW) -> float:
    """The sum of a 1-d float array as a Python float: per row of ``row`` elements a BLAS dot
    product with ones (in the array's type), rows added in float64."""
    import numpy as np

    n = int(x.size)
    rows = n // row
    out = 0.0
    if rows:
        ones = np.ones(row, dtype=x.dtype)
        out = float(np.add.reduce(_rowdots(np, x[: rows * row].reshape(rows, row), ones),
                                  dtype=np.float64))
    if n > rows * row:
        out += float(np.add.reduce(x[rows * row:], dtype=np.float64))
    return out


def _rowdots(np: Any, a: Any, b: Any) -> Any:
    vecdot = getattr(np, "vecdot", None)  # NumPy >= 2.0
    if vecdot is not None:
        return vecdot(a, b)
    if b.ndim == 1:
        return a @ b
    return np.einsum("ij,ij->i", a, b)


def half_to_float32(x: Any, out: Any) -> Any:
    """Widen a native float16 array into the float32 array ``out`` (same size) by bit
    operations, three passes where NumPy's own conversion is a slow scalar loop on some CPUs;
    returns ``out``. Every finite value comes out exact; NaN and Inf come out as finite numbers
    of magnitude >= 65536, which no finite float16 reaches (largest 65504): a caller that sees
    one converts the chunk its own way. The 15 bits below the sign go to float32's exponent and
    mantissa place (float16's exponent bias 15 read as float32's 127), the sign to float32's,
    and the product with 2**112 restores the exponent; float16 subnormals land on float32
    subnormals, which the product makes normal, exactly."""
    import numpy as np

    word = out.view(np.int32)
    np.left_shift(x.view(np.int16), 13, out=word, dtype=np.int32)  # the sign fills bits 28-31
    np.bitwise_and(word, np.int32(-0x70002000), out=word)  # 0x8FFFE000: sign + 15 value bits
    np.multiply(out, np.float32(HALF_SCALE), out=out)
    return out


HALF_NONFINITE = 65536.0  # half_to_float32's NaN and Inf come out at or above this magnitude
