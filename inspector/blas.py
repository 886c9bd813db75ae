"""Dot products for the value passes, on the calling thread.

A value pass runs its own threads; OpenBLAS (NumPy's BLAS) starts threads of its own for a dot
product longer than 10,000 elements, and the two sets contend for the same cores (on a loaded
2-core machine a 256K-element ``np.dot`` took 30x its single-thread time). So vectors are cut
into rows of :data:`ROW` elements, each row's dot product is computed by BLAS on this thread, and
the rows are added in float64, which also keeps a float32 sum's rounding to one row's length.
"""

from __future__ import annotations

from typing import Any

ROW = 8192  # elements per BLAS call: below OpenBLAS's threading threshold (10,000)


def dot(x: Any, y: Any) -> float:
    """``x . y`` for two 1-d arrays of one float dtype and size, as a Python float."""
    import numpy as np

    n = int(x.size)
    rows = n // ROW
    total = 0.0
    if rows:
        a = x[: rows * ROW].reshape(rows, ROW)
        b = y[: rows * ROW].reshape(rows, ROW)
        total = float(np.add.reduce(_rowdots(np, a, b), dtype=np.float64))
    if n > rows * ROW:
        total += float(np.dot(x[rows * ROW:], y[rows * ROW:]))
    return total


def _rowdots(np: Any, a: Any, b: Any) -> Any:
    vecdot = getattr(np, "vecdot", None)  # NumPy >= 2.0
    if vecdot is not None:
        return vecdot(a, b)
    return np.einsum("ij,ij->i", a, b)
