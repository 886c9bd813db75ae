"""Stream tensor values from a checkpoint file and compare two tensors chunk by chunk.

Values are read where the checkpoint's adapter says they are (``Checkpoint.reader``, see
:mod:`inspector.adapters.model`), never through a framework and never by format name: a byte range
of a source (contiguous or a strided view), a stream of elements (a zip member), or an array-like
object that slices (an HDF5 dataset). Peak memory is bounded by one chunk of
:data:`CHUNK_ELEMENTS` elements per side (plus the float64 copies of it), not by the tensor or the
file.

ggml's block-quantized types are dequantized as ggml defines them (:mod:`inspector.dequantize`:
q8_0, q4_0); the others are named as not decoded, never guessed.

NumPy is imported here and in :mod:`inspector.dequantize` (only from here), lazily, when values
are read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, BinaryIO

from inspector import kernels
from inspector.adapters.dtypes import BLOCKS, NUMPY_STORAGE
from inspector.adapters.errors import FormatError, UsageError
from inspector.adapters.model import (
    Blocks,
    ByteRange,
    Checkpoint,
    Stream,
    TensorEntry,
    c_strides,
)

CHUNK_ELEMENTS = 1 << 18  # elements per chunk and side: 2 MiB once upcast to float64
# A non-contiguous view is read as the byte span it covers; refuse when that span is larger.
MAX_VIEW_SPAN_BYTES = 64 << 20
# canonical dtype -> the NumPy type its stored elements are read as: the storage column of the
# one dtype table (adapters/dtypes.py), which says how bfloat16, float8, complex32 and the
# quantized types are read.
NUMPY_DTYPES = NUMPY_STORAGE
# float8 name -> (exponent bits, mantissa bits, bias, kind): "ieee" has inf and NaNs like IEEE
# 754 (e5m2); "fn" has no inf and NaN only at all ones (e4m3fn); "fnuz" has no inf, no -0 and
# NaN only at 0x80; "e8m0" is an unsigned power of two with NaN at 0xff (OCP MX spec).
FLOAT8 = {
    "float8_e4m3fn": (4, 3, 7, "fn"),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz"),
    "float8_e5m2": (5, 2, 15, "ieee"),
    "float8_e5m2fnuz": (5, 2, 16, "fnuz"),
    "float8_e8m0fnu": (8, 0, 127, "e8m0"),
}
_TABLES: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class ValueStats:
    """How two tensors' values compare (float64 arithmetic over every element).

    ``identical``: every element equal (NaN equal to NaN). ``max_abs``: max |a - b|.
    ``rel_l2``: ||a - b|| / ||a|| (0 when both are zero, inf when only a is). ``cosine``: None
    when either side is all zeros. ``changed``: some element has |a - b| > atol + rtol * |b|
    (a NaN against a number is changed, against a NaN not). With NaN or Inf in either tensor the
    three numbers are NumPy's (``np.max(np.abs(a - b))``, ``np.linalg.norm(a - b) /
    np.linalg.norm(a)``, ``a @ b / (norm(a) * norm(b))``): a NaN anywhere in ``a - b`` (NaN in
    either, inf - inf) makes ``max_abs`` and ``rel_l2`` NaN, any NaN or Inf makes ``cosine``
    NaN. ``nonfinite``: the count of NaN, +Inf and -Inf elements of each side, when any.
    """

    identical: bool
    max_abs: float
    rel_l2: float
    cosine: float | None
    changed: bool
    nonfinite: dict[str, dict[str, int]] | None = None


def compare(
    ckpt_a: Checkpoint,
    a: TensorEntry,
    ckpt_b: Checkpoint,
    b: TensorEntry,
    atol: float = 0.0,
    rtol: float = 0.0,
    chunk: int = CHUNK_ELEMENTS,
    advance: Any = None,
) -> ValueStats:
    """Compare two tensors of equal element count, one chunk of each at a time.

    Bytes first: chunks stored alike and byte-equal cost one comparison and a sum of squares.
    Floats that differ are subtracted in their own type (float16 and bfloat16 in float32); the
    largest difference is then recomputed exactly in float64 on the elements that reach it
    (rounding is monotonic, so they hold the exact maximum). Sums of squares are BLAS dot
    products in that type per chunk, added in float64 (``rel_l2`` and ``cosine`` to about 1e-6
    relative; ``identical``, ``changed`` and ``max_abs`` exact); 1 - cosine comes from
    ||a - b||^2 and ||a||^2 - ||b||^2 = (a - b).(a + b), which do not cancel when a and b are
    close. NaN, Inf, tolerances and integers take the float64 path. ``advance(nbytes)`` is
    called per chunk pair (a progress bar)."""
    integral = check_pair(ckpt_a, a, b, atol, rtol)
    acc = _Acc()
    per = ((a.nbytes or 0) + (b.nbytes or 0)) / max(1, a.numel)
    with ExitStack() as stack:
        chunks_a = stack.enter_context(_Reader(ckpt_a, a, chunk, stored=True))
        chunks_b = stack.enter_context(_Reader(ckpt_b, b, chunk, stored=True))
        for xa, xb in zip(chunks_a, chunks_b, strict=True):
            acc.add(compare_chunk(xa, xb, a.dtype, b.dtype, integral, atol, rtol))
            if advance is not None:
                advance(int(per * xa.size))
    return finish(acc)


def check_pair(ckpt_a: Checkpoint, a: TensorEntry, b: TensorEntry, atol: float,
               rtol: float) -> bool:
    """Refuse what :func:`compare` cannot compare; whether both sides are integral."""
    if a.numel != b.numel:
        raise UsageError(f"cannot compare {a.name!r} ({a.numel} elements) with {b.numel}")
    if atol < 0 or rtol < 0:
        raise UsageError("--atol and --rtol must be >= 0")
    for e in (a, b):
        if e.dtype.startswith("complex"):
            raise refusal(e, ckpt_a.path, f"{e.dtype} values are not compared")
    return _integral(a.dtype) and _integral(b.dtype)


def compare_chunk(xa: Any, xb: Any, dtype_a: str, dtype_b: str, integral: bool, atol: float,
                  rtol: float, slots: tuple[str, str] | None = None) -> _Acc:
    """What one pair of chunks (as stored) adds to a comparison: each sum gets one term, so
    adding the chunks' results in order (:meth:`_Acc.add`) gives the same numbers as one pass
    over both tensors. ``slots``: widen into these scratch buffers (the caller keeps none)."""
    acc = _Acc()
    if not (integral or atol or rtol) and dtype_a == dtype_b:
        from inspector import fused

        got = fused.difference(xa, xb, dtype_a)  # one compiled pass (numba installed)
        if got is not None:
            acc.max_abs, acc.ss_diff, acc.ss_a, acc.ss_b, acc.ss_ab = got
            acc.identical = acc.max_abs == 0
            acc.changed = not acc.identical
            return acc
    sa, sb = slots if slots is not None else ("compare.a.wide", "compare.b.wide")
    if dtype_a == dtype_b == "bfloat16" and xa.dtype.isnative and xb.dtype.isnative:
        # both widened pairwise (the same order on both sides: see kernels.paired)
        if xa.dtype.kind in "ui" and xb.dtype.kind in "ui":
            xa = kernels.bfloat16_to_float32(xa, _buffer(sa, xa.size))
            xb = kernels.bfloat16_to_float32(xb, _buffer(sb, xb.size))
            dtype_a = dtype_b = "float32"
    if dtype_a == dtype_b and xa.dtype == xb.dtype and _bytes_equal(xa, xb):
        wa = widen(xa, dtype_a, sa)
        sq = _ss(wa)
        if not math.isfinite(sq) and wa.dtype.kind == "f":  # NaN or Inf (or overflow)
            _slow(acc, wa, wa, False, atol, rtol)
            return acc
        acc.ss_a += sq
        acc.ss_b += sq
    else:
        fa, fb = widen(xa, dtype_a, sa), widen(xb, dtype_b, sb)
        if integral or rtol or atol or not _fast(acc, fa, fb):
            _slow(acc, fa, fb, integral, atol, rtol)
    return acc


def _buffer(slot: str, n: int) -> Any:
    import numpy as np

    from inspector import scratch

    return scratch.buffer(slot, n, np.float32)


def finish(acc: _Acc) -> ValueStats:
    """The comparison of everything added to ``acc``."""
    ss_a, ss_b, ss_diff, max_abs = acc.ss_a, acc.ss_b, acc.ss_diff, acc.max_abs
    if ss_a > 0:
        rel = math.sqrt(ss_diff) / math.sqrt(ss_a)
    else:
        rel = 0.0 if ss_diff == 0 and max_abs == 0 else math.inf
    cosine = None
    if ss_a > 0 and ss_b > 0:  # clamped: rounding can put it a hair outside [-1, 1]
        na, nb = math.sqrt(ss_a), math.sqrt(ss_b)
        gap = acc.ss_ab / (na + nb)  # ||a|| - ||b||
        one_minus = (ss_diff - gap * gap) / (2 * na * nb)
        cosine = max(-1.0, min(1.0, 1.0 - one_minus))
    if acc.nonfinite:
        return _nonfinite_stats(acc)
    return ValueStats(acc.identical, max_abs, rel, cosine, acc.changed)


def _nonfinite_stats(acc: _Acc) -> ValueStats:
    """The comparison when NaN or Inf is in either tensor, with NumPy's numbers: the sums
    above hold the finite elements only; what the others make of them follows IEEE 754."""
    nan, inf = math.nan, math.inf
    counts = {side: dict(zip(("nan", "+inf", "-inf"), acc.nonfinite[i], strict=True))
              for i, side in enumerate(("a", "b"))}
    inf_a = counts["a"]["+inf"] + counts["a"]["-inf"] > 0
    if acc.nan_diff:  # np.max propagates NaN; so does the norm of a - b
        max_abs, rel = nan, nan
    else:
        max_abs = inf if acc.inf_diff else acc.max_abs
        top = inf if acc.inf_diff else math.sqrt(acc.ss_diff)
        bottom = inf if inf_a else math.sqrt(acc.ss_a)
        rel = (nan if top == inf and bottom == inf else
               top / bottom if bottom else (0.0 if top == 0 else inf))
    cosine = nan  # a.b / (|a| |b|): a NaN or an Inf in a or b leaves no number
    return ValueStats(acc.identical, max_abs, rel, cosine, acc.changed,
                      {side: c for side, c in counts.items() if any(c.values())})


class _Acc:
    """What :func:`compare` accumulates over chunk pairs."""

    __slots__ = ("changed", "identical", "inf_diff", "max_abs", "nan_diff", "nonfinite",
                 "ss_a", "ss_ab", "ss_b", "ss_diff")

    def __init__(self) -> None:
        # ss_ab: ||a||^2 - ||b||^2, summed as (a - b).(a + b) where a and b differ
        self.max_abs = self.ss_diff = self.ss_a = self.ss_b = self.ss_ab = 0.0
        self.identical, self.changed = True, False
        # NaN / Inf: counts (nan, +inf, -inf) per side once one is seen; whether a - b has a
        # NaN (NaN in either, inf - inf) or an infinite element (sums above: finite only)
        self.nonfinite: list[list[int]] | None = None
        self.nan_diff = self.inf_diff = False

    def add(self, other: _Acc) -> _Acc:
        """Fold in the next chunk pair's comparison (in order: the sums are not associative)."""
        self.max_abs = max(self.max_abs, other.max_abs)
        self.ss_diff += other.ss_diff
        self.ss_a += other.ss_a
        self.ss_b += other.ss_b
        self.ss_ab += other.ss_ab
        self.identical = self.identical and other.identical
        self.changed = self.changed or other.changed
        if other.nonfinite is not None:
            if self.nonfinite is None:
                self.nonfinite = [[0, 0, 0], [0, 0, 0]]
            for mine, theirs in zip(self.nonfinite, other.nonfinite, strict=True):
                for i in range(3):
                    mine[i] += theirs[i]
        self.nan_diff = self.nan_diff or other.nan_diff
        self.inf_diff = self.inf_diff or other.inf_diff
        return self

    def count(self, fa: Any, fb: Any, d: Any) -> None:
        """Record the NaN and Inf of a chunk pair (``d`` = a - b in float64)."""
        import numpy as np

        if self.nonfinite is None:
            self.nonfinite = [[0, 0, 0], [0, 0, 0]]
        for i, x in enumerate((fa, fb)):
            row = self.nonfinite[i]
            row[0] += int(np.count_nonzero(np.isnan(x)))
            row[1] += int(np.count_nonzero(x == np.inf))
            row[2] += int(np.count_nonzero(x == -np.inf))
        self.nan_diff = self.nan_diff or bool(np.isnan(d).any())
        self.inf_diff = self.inf_diff or bool(np.isinf(d).any())


def _bytes_equal(x: Any, y: Any) -> bool:
    """Whether two chunks of one stored type hold the same bytes."""
    import numpy as np

    if x.dtype.itemsize not in (1, 2, 4, 8) or x.dtype.kind == "b":
        return bool(np.array_equal(x, y))
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    return bool(np.array_equal(x.view(unsigned), y.view(unsigned)))


def _ss(x: Any) -> float:
    """Sum of squares of a chunk: a BLAS dot for floats, exact in float64 for the rest."""
    import numpy as np

    if x.dtype.kind == "b":
        return float(np.count_nonzero(x))
    if x.dtype.kind == "f" and x.dtype.itemsize >= 4 and x.dtype.isnative:
        return kernels.dot(x, x)
    return float(np.einsum("i,i->", x, x, dtype=np.float64))


def _fast(acc: _Acc, fa: Any, fb: Any) -> bool:
    """Floats of one type, no tolerance: the own-type pass; False when NaN or Inf (or an
    overflowing difference) sends the chunk to the float64 path (nothing accumulated then)."""
    import numpy as np

    if fa.dtype != fb.dtype or fa.dtype.kind != "f":
        return False
    if fa.dtype.itemsize == 2 and fa.dtype.isnative:  # float16: as float32 (exact)
        from inspector import scratch

        fa = kernels.half_to_float32(fa, scratch.buffer("compare.a", fa.size, np.float32))
        fb = kernels.half_to_float32(fb, scratch.buffer("compare.b", fb.size, np.float32))
        for w in (fa, fb):  # NaN and Inf come out as magnitudes no float16 number reaches
            if not max(-float(np.minimum.reduce(w)), float(np.maximum.reduce(w))) < (
                    kernels.HALF_NONFINITE):
                return False
    elif fa.dtype.itemsize == 2:
        fa, fb = float32(fa), float32(fb)
    elif not fa.dtype.isnative:  # byte-swapped
        fa, fb = fa.astype(fa.dtype.newbyteorder("=")), fb.astype(fb.dtype.newbyteorder("="))
    from inspector import scratch

    d = scratch.buffer("compare.d", fa.size, fa.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # inf / NaN go to the float64 path
        np.subtract(fa, fb, out=d)
    hi, lo = float(np.maximum.reduce(d)), -float(np.minimum.reduce(d))
    m = max(hi, lo)
    if not math.isfinite(m):
        return False
    if m > 0:  # the exact maximum is among the elements that reach m in float32
        at = np.flatnonzero(d == m) if hi == m else np.empty(0, dtype=np.intp)
        if lo == m:
            at = np.concatenate([at, np.flatnonzero(d == -m)])
        exact = float(np.max(np.abs(np.subtract(fa[at], fb[at], dtype=np.float64))))
        acc.max_abs = max(acc.max_abs, exact)
        acc.identical = False
        acc.changed = True
        ss_d, ss_a = kernels.dot(d, d), kernels.dot(fa, fa)
        ss_ab = ss_d + 2 * kernels.dot(d, fb)  # a^2 - b^2 = (a - b)(a + b) = d^2 + 2 d b
        acc.ss_diff += ss_d
        acc.ss_a += ss_a
        acc.ss_b += ss_a - ss_ab
        acc.ss_ab += ss_ab
    else:  # equal values in different bytes (0.0 and -0.0)
        sq = _ss(fa)
        acc.ss_a += sq
        acc.ss_b += sq
    return True


def _slow(acc: _Acc, xa: Any, xb: Any, integral: bool, atol: float, rtol: float) -> None:
    """The float64 path: NaN equals NaN, inf equals inf, a NaN against a number is infinitely
    far; tolerances; integers (int64 beyond 2**53 can differ where float64 cannot tell)."""
    import numpy as np

    fa = xa.astype(np.float64)
    fb = xb.astype(np.float64)
    with np.errstate(invalid="ignore"):
        raw = fa - fb
    d = np.abs(raw)
    if not (np.isfinite(fa).all() and np.isfinite(fb).all()):
        acc.count(fa, fb, raw)
        same = (fa == fb) | (np.isnan(fa) & np.isnan(fb))
        d[same] = 0.0  # for identical and changed: NaN equals NaN, inf equals inf
        d[np.isnan(d)] = np.inf  # a NaN against a number: infinitely far
        keep = np.isfinite(raw)  # the sums: finite elements only (the rest: _nonfinite_stats)
        fa, fb = np.where(np.isfinite(fa), fa, 0.0), np.where(np.isfinite(fb), fb, 0.0)
    else:
        keep = None
    if integral and not np.array_equal(xa, xb) or d.any():
        acc.identical = False
    acc.changed = acc.changed or bool((d > atol + rtol * np.abs(fb)).any())
    if keep is not None:
        d = np.where(keep, d, 0.0)
    acc.max_abs = max(acc.max_abs, float(d.max()))
    acc.ss_diff += kernels.dot(d, d)
    acc.ss_a += kernels.dot(fa, fa)
    acc.ss_b += kernels.dot(fb, fb)
    acc.ss_ab += kernels.dot(fa - fb, fa + fb)


def iter_values(ckpt: Checkpoint, entry: TensorEntry, chunk: int = CHUNK_ELEMENTS,
                stored: bool = False) -> Iterator[Any]:
    """The tensor's elements in C order, as numpy arrays of at most ``chunk`` elements
    (bfloat16 widened to float32, float8 decoded, everything else in its own dtype; with
    ``stored`` as stored, for :func:`widen` later)."""
    with _Reader(ckpt, entry, chunk, stored) as it:
        yield from it


def threads_for(entries: Any, ckpts: Any = ()) -> int:
    """Threads worth starting for a pass over ``entries`` of ``ckpts``: one for a small pass (a
    pool costs more than it saves) or a remote source (threads interleaving reads of one file
    defeat its read-ahead: 515 requests instead of 138 on moto S3, 3.8x slower), else one per
    core up to 8 (numpy releases the GIL; one large tensor is shared out by chunks, see
    :mod:`inspector.chunk_pass`)."""
    import os

    if any(c.source is not None and c.source.local_path is None for c in ckpts):
        return 1
    total = sum(t.nbytes or 0 for t in entries)
    if total < (8 << 20):
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def _integral(dtype: str) -> bool:
    return dtype == "bool" or "int" in dtype


class _Reader:
    """Context manager and iterator over one tensor's chunks."""

    def __init__(self, ckpt: Checkpoint, entry: TensorEntry, chunk: int,
                 stored: bool = False) -> None:
        self.ckpt, self.entry, self.chunk = ckpt, entry, max(1, chunk)
        self.stored = stored  # chunks as stored (no widening; see widen())
        self.stack = ExitStack()
        self.it: Iterator[Any] | None = None

    def __enter__(self) -> _Reader:
        it = _named(_open(self.ckpt, self.entry, self.chunk, self.stack), self.entry,
                    self.ckpt.path)
        dtype = self.entry.dtype
        if not self.stored and (dtype == "bfloat16" or dtype in FLOAT8 or dtype == "complex32"):
            it = (widen(x, dtype) for x in it)
        self.it = it
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def __iter__(self) -> Iterator[Any]:
        assert self.it is not None
        return self.it


def _named(it: Iterator[Any], entry: TensorEntry, where: str) -> Iterator[Any]:
    """The chunks of ``it``; a read error (truncated file, size changed) names the tensor."""
    try:
        yield from it
    except ValuesUnavailable:
        raise
    except FormatError as e:
        if entry.stored_name in e.message:
            raise
        raise FormatError(f"tensor {entry.stored_name!r}: {e.message}", e.path or where,
                          e.where) from None


class ValuesUnavailable(FormatError):
    """A tensor whose values cannot be read here (sparse layout, unsupported dtype, not located by
    its adapter); ``why`` says which. A diff notes it and goes on with the other tensors."""

    def __init__(self, entry: TensorEntry, where: str, why: str) -> None:
        super().__init__(f"tensor {entry.stored_name!r}: values cannot be compared: {why}", where)
        self.why = why


def refusal(entry: TensorEntry, where: str, why: str) -> ValuesUnavailable:
    return ValuesUnavailable(entry, where, why)


def _open(ckpt: Checkpoint, entry: TensorEntry, chunk: int, stack: ExitStack) -> Iterator[Any]:
    """The tensor's chunks, from where its adapter says its values are."""
    where = ckpt.path
    extra = entry.extra
    if extra.get("stype") or entry.stored_numel is not None or extra.get("indices"):
        raise refusal(entry, where, f"sparse {extra.get('stype') or 'layout'} is not supported")
    block = entry.dtype in BLOCKS
    if block:
        _decodable(entry, where)
    elif entry.dtype not in NUMPY_DTYPES:
        raise refusal(entry, where, f"dtype {entry.dtype} is not supported")
    if entry.numel == 0:
        return iter(())
    if ckpt.reader is None:
        raise refusal(entry, where, "its adapter gives no way to read values")
    try:
        loc = ckpt.reader(entry)
    except ValuesUnavailable:
        raise
    except FormatError as e:  # the adapter cannot locate this one (compressed member, ...)
        raise refusal(entry, where, e.message) from None
    if isinstance(loc, ByteRange):
        size = loc.source.size
        end = _end(entry, loc)
        if end > size:
            raise FormatError(
                f"tensor {entry.stored_name!r}: its bytes end at {end}, past the end of the "
                f"file ({size} bytes)", loc.source.where)
        f = stack.enter_context(loc.source.open())
        if block:
            it = _block_values(f, entry, loc, chunk, where)
        elif loc.stride is not None and loc.stride != c_strides(entry.shape):
            it = _strided(
                f, entry, loc.source.where, loc.stride, loc.big_endian, chunk, loc.offset
            )
        else:
            it = _contiguous(f, loc.offset, entry.dtype, entry.numel, loc.big_endian, chunk)
        return _same_size(it, f, size, loc.source.where)
    if block:
        raise refusal(entry, where, f"{entry.dtype} blocks are decoded from byte ranges only")
    if isinstance(loc, Stream):
        f = loc.open(stack)
        if not loc.fortran or len(entry.shape) < 2:
            return _stream(f, entry.dtype, entry.numel, loc.big_endian, chunk)
        return _fortran(f, entry, where, loc.big_endian, chunk)
    if isinstance(loc, Blocks):
        return _array_blocks(loc.open(stack), entry.shape, chunk)
    raise refusal(entry, where, f"unknown value location {type(loc).__name__}")


def _decodable(entry: TensorEntry, where: str) -> None:
    """A block-quantized tensor's values are read only where the dequantization is known."""
    from inspector.dequantize import DECODERS

    if entry.dtype not in DECODERS:
        raise refusal(entry, where, f"{entry.dtype} values are not decoded (block "
                                    f"dequantization is implemented for {', '.join(DECODERS)})")


def _block_values(f: BinaryIO, entry: TensorEntry, loc: ByteRange, chunk: int,
                  where: str) -> Iterator[Any]:
    """A block-quantized tensor's elements as float32, whole blocks per chunk."""
    from inspector.dequantize import DECODERS

    if loc.big_endian:
        raise refusal(entry, where, f"big-endian {entry.dtype} blocks are not decoded")
    if loc.stride is not None and loc.stride != c_strides(entry.shape):
        raise refusal(entry, where, f"a strided view of {entry.dtype} blocks")
    per, size = BLOCKS[entry.dtype]
    decode = DECODERS[entry.dtype]
    blocks = -(-entry.numel // per)
    step = max(1, chunk // per)
    f.seek(loc.offset)
    done = 0
    while done < blocks:
        n = min(step, blocks - done)
        yield decode(_read_exact(f, n * size, f"data at offset {f.tell()}"))
        done += n


def _end(entry: TensorEntry, loc: ByteRange) -> int:
    """One past the last byte the tensor's elements occupy."""
    if entry.dtype in BLOCKS:
        per, size = BLOCKS[entry.dtype]
        return loc.offset + -(-entry.numel // per) * size
    span = entry.numel
    if loc.stride is not None and entry.shape:
        span = 1 + sum((d - 1) * st for d, st in zip(entry.shape, loc.stride, strict=True))
    return loc.offset + span * _itemsize(entry.dtype)


def _same_size(it: Iterator[Any], f: BinaryIO, size: int, where: str) -> Iterator[Any]:
    """The chunks of ``it``, then a check that the file still has the size it had when the
    checkpoint was opened (a file rewritten during the pass is an error, not a result)."""
    yield from it
    try:
        import os

        now = os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):  # not a local file: nothing to ask
        return
    if now != size:
        raise FormatError(f"the file changed size during the pass ({size} -> {now} bytes)", where)


def float8_table(dtype: str) -> Any:
    """The 256 values of a float8 format as float32 (every one exact), indexed by its byte."""
    import numpy as np

    table = _TABLES.get(dtype)
    if table is not None:
        return table
    ebits, mbits, bias, kind = FLOAT8[dtype]
    out = np.empty(256, dtype=np.float32)
    for b in range(256):
        if kind == "e8m0":
            out[b] = np.nan if b == 0xFF else np.float32(2.0 ** (b - bias))
            continue
        sign = -1.0 if b >> 7 else 1.0
        e = (b >> mbits) & ((1 << ebits) - 1)
        m = b & ((1 << mbits) - 1)
        top = (1 << ebits) - 1
        if kind == "ieee" and e == top:
            value = sign * math.inf if m == 0 else math.nan
        elif kind == "fn" and e == top and m == (1 << mbits) - 1:
            value = math.nan
        elif kind == "fnuz" and b == 0x80:
            value = math.nan
        elif e == 0:
            value = sign * m * 2.0 ** (1 - bias - mbits)
        else:
            value = sign * (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
        out[b] = value
    out.setflags(write=False)
    _TABLES[dtype] = out
    return out


def decode(raw: bytes | Any, dtype: str, big: bool) -> Any:
    """Stored bytes (any buffer) as a NumPy array of the stored type and byte order."""
    return _decode(raw, dtype, big)


def _decode(raw: bytes | Any, dtype: str, big: bool) -> Any:
    """Stored bytes as a numpy array of the stored type, in the stored byte order (see
    :func:`widen` for the types numpy has no arithmetic for)."""
    import numpy as np

    nd = np.dtype(NUMPY_DTYPES[dtype])
    if big:
        nd = nd.newbyteorder(">")
    return np.frombuffer(raw, dtype=nd)


def float32(x: Any) -> Any:
    """A float16 chunk as float32 (exact), through a 65,536-entry table: twice as fast as
    numpy's own conversion where the CPU path is not vectorised."""
    import numpy as np

    table = _TABLES.get("float16")
    if table is None:
        table = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
        table = _TABLES["float16"] = table.astype(np.float32)
    u = x.view(np.uint16) if x.dtype.isnative else x.astype(np.float16).view(np.uint16)
    return np.take(table, u)


def widen(x: Any, dtype: str, slot: str | None = None) -> Any:
    """A stored chunk as numbers numpy computes with: bfloat16 widened to float32 (its upper
    half), float8 decoded by its table, complex32 widened to complex64; others unchanged.
    ``slot``: bfloat16 is widened into this thread's scratch buffer of that name."""
    import numpy as np

    if x.dtype.kind not in "ui":  # already numbers (an HDF5 dataset's own type)
        return x
    if dtype == "bfloat16":
        if slot is None:
            return (x.astype(np.uint32) << 16).view(np.float32)
        from inspector import scratch

        wide = scratch.buffer(slot, x.size, np.uint32)
        np.left_shift(x, 16, out=wide, dtype=np.uint32)
        return wide.view(np.float32)
    if dtype in FLOAT8:
        return float8_table(dtype)[x]
    if dtype == "complex32":
        half = np.dtype("<f2").newbyteorder(x.dtype.byteorder if x.dtype.byteorder in "<>"
                                            else "=")
        return x.view(half).astype(np.float32).view(np.complex64)
    return x


def _read_exact(f: BinaryIO, n: int, what: str) -> bytes:
    raw = f.read(n)
    if len(raw) != n:
        raise FormatError(f"{what}: expected {n} bytes, the file ends after {len(raw)}")
    return raw


def _contiguous(
    f: BinaryIO, offset: int, dtype: str, numel: int, big: bool, chunk: int
) -> Iterator[Any]:
    size = _itemsize(dtype)
    f.seek(offset)
    done = 0
    while done < numel:
        n = min(chunk, numel - done)
        yield _decode(_read_exact(f, n * size, f"data at offset {f.tell()}"), dtype, big)
        done += n


def _itemsize(dtype: str) -> int:
    import numpy as np

    return np.dtype(NUMPY_DTYPES[dtype]).itemsize


def _blocks(shape: tuple[int, ...], chunk: int) -> Iterator[tuple[tuple[int, ...], int, int]]:
    """Cover ``shape`` in C order by blocks (index prefix, start, stop) along one dimension,
    each block holding at most ``chunk`` elements (or one innermost row if that is larger)."""
    if not shape:
        yield (), 0, 1
        return
    inner = 1
    dim = len(shape) - 1
    # the outermost dim whose sub-blocks still fit in a chunk
    while dim > 0 and inner * shape[dim] <= chunk:
        inner *= shape[dim]
        dim -= 1
    if inner * shape[dim] <= chunk:
        inner *= shape[dim]
        yield (), 0, shape[0]  # the whole tensor fits in one chunk
        return
    rows = max(1, chunk // inner)
    outer = shape[:dim]
    for prefix in _ndindex(outer):
        for start in range(0, shape[dim], rows):
            yield prefix, start, min(start + rows, shape[dim])


def _ndindex(shape: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    if not shape:
        yield ()
        return
    for i in range(shape[0]):
        for rest in _ndindex(shape[1:]):
            yield (i, *rest)


def _strided(
    f: BinaryIO,
    entry: TensorEntry,
    where: str,
    stride: tuple[int, ...],
    big: bool,
    chunk: int,
    offset: int,
) -> Iterator[Any]:
    """A non-contiguous view (transpose, every other row, ...): each block is read as the byte
    span it covers and its elements picked out with numpy strides."""
    import numpy as np

    if any(s < 0 for s in stride):
        raise refusal(entry, where, f"negative stride {list(stride)}")
    size = _itemsize(entry.dtype)
    shape = entry.shape
    for prefix, start, stop in _blocks(shape, chunk):
        dim = len(prefix)
        sub_shape = (stop - start, *shape[dim + 1 :]) if shape else ()
        sub_stride = stride[dim:]
        first = sum(i * s for i, s in zip(prefix, stride, strict=False)) + (
            start * stride[dim] if shape else 0
        )
        span = 1 + sum((d - 1) * s for d, s in zip(sub_shape, sub_stride, strict=True))
        if span * size > MAX_VIEW_SPAN_BYTES:
            raise refusal(
                entry,
                where,
                f"strided view (shape {list(shape)}, stride {list(stride)}) needs a "
                f"{span * size}-byte span per block, over the {MAX_VIEW_SPAN_BYTES}-byte limit",
            )
        f.seek(offset + first * size)
        flat = _decode(_read_exact(f, span * size, f"view of {entry.stored_name!r}"), entry.dtype,
                       big)
        view = np.lib.stride_tricks.as_strided(
            flat, sub_shape, tuple(s * flat.itemsize for s in sub_stride), writeable=False
        )
        yield np.ascontiguousarray(view).reshape(-1)


def _fortran(f: BinaryIO, entry: TensorEntry, where: str, big: bool, chunk: int) -> Iterator[Any]:
    """Fortran order is a transposed C array: read it whole when small enough."""
    import numpy as np

    nbytes = entry.numel * _itemsize(entry.dtype)
    if nbytes > MAX_VIEW_SPAN_BYTES:
        raise refusal(entry, where, f"Fortran-ordered array of {nbytes} bytes is too large")
    flat = _decode(_read_exact(f, nbytes, entry.stored_name), entry.dtype, big)
    c_order = flat.reshape(entry.shape[::-1]).T.reshape(-1)
    return iter(np.array_split(c_order, max(1, -(-entry.numel // chunk))))


def _stream(f: BinaryIO, dtype: str, numel: int, big: bool, chunk: int) -> Iterator[Any]:
    size = _itemsize(dtype)
    done = 0
    while done < numel:
        n = min(chunk, numel - done)
        yield _decode(_read_exact(f, n * size, "array data"), dtype, big)
        done += n


def _array_blocks(ds: Any, shape: tuple[int, ...], chunk: int) -> Iterator[Any]:
    """Chunks of an array-like (h5py dataset) that slices like numpy, in C order."""
    import numpy as np

    for prefix, start, stop in _blocks(shape, chunk):
        if not shape:
            yield np.asarray(ds[()]).reshape(-1)
        else:
            yield np.asarray(ds[(*prefix, slice(start, stop))]).reshape(-1)
