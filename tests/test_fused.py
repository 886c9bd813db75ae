"""The compiled one-pass kernels (numba, optional) against the NumPy path they stand in for:
counts, minimum and maximum equal, moments within float64's rounding of the NumPy figures'
stated accuracy, every bit pattern of the 16-bit types widened alike, NaN and Inf left to the
exact NumPy path, and whole passes over real fixtures giving the same report either way."""

from __future__ import annotations

import math

import pytest

import inspector
from inspector import fused
from inspector import value_stats as stats
from inspector.diffing import align, compare_values
from inspector.partial import reduce

from conftest import FIXTURES

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.skipif(fused.kernels() is None, reason="numba is not installed")

TINY = {"float32": 2.0**-126, "bfloat16": 2.0**-126, "float16": 2.0**-14}
EXACT = ("count", "finite", "min", "max", "nan", "posinf", "neginf", "zeros", "subnormal",
         "f16_overflow")
CASES = {
    "weights": lambda r, n: r.standard_normal(n) * 0.02,
    "layer norm": lambda r, n: 1 + 0.01 * r.standard_normal(n),  # mean far above the spread
    "with zeros": lambda r, n: np.where(r.random(n) < 0.3, 0.0, r.standard_normal(n)),
    "subnormal": lambda r, n: np.where(r.random(n) < 0.1, 1e-39, r.standard_normal(n) * 1e-3),
    "large": lambda r, n: np.clip(r.standard_normal(n) * 3e4, -6e4, 6e4),  # float16 overflows
    "huge": lambda r, n: r.standard_normal(n) * 1e30,  # squares beyond float32
}


def _stored(x, dtype):
    """float64 values as stored in ``dtype`` (bfloat16 as its 16-bit integers, rounded to
    nearest even as torch does), and the same values as float32."""
    if dtype == "bfloat16":
        u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        raw = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        return raw, (raw.astype(np.uint32) << 16).view(np.float32)
    with np.errstate(over="ignore"):
        raw = x.astype(dtype)
    return raw, raw.astype(np.float32)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_stats_kernel_matches_the_numpy_path(case, dtype):
    rng = np.random.default_rng(len(case))
    raw, wide = _stored(CASES[case](rng, 300_001), dtype)
    f16 = dtype != "float16"
    got = fused.stats(raw, dtype, TINY[dtype], f16)
    want = reduce(wide, TINY[dtype], f16)  # float64 sums where float32 squares overflow
    if not np.isfinite(wide).all():  # float16 overflowed: the NumPy path's
        assert got is None
        return
    assert got is not None
    for key in EXACT:
        assert getattr(got, key) == getattr(want, key), key
    d = wide.astype(np.float64)
    mean = math.fsum(d) / d.size
    assert abs(got.mean - mean) <= 1e-13 * float(np.abs(d).mean())
    assert got.l2 == pytest.approx(math.sqrt(math.fsum(d * d)), rel=1e-13)
    assert got.std == pytest.approx(math.sqrt(math.fsum((d - mean) ** 2) / d.size), rel=1e-10)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_every_16_bit_pattern_is_widened_exactly(dtype):
    """Each finite pattern alone (its minimum is its value, its zeros and subnormals its
    class); each NaN and Inf pattern sends its chunk to the NumPy path."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    if dtype == "bfloat16":
        wide = (bits.astype(np.uint32) << 16).view(np.float32)
        raw = bits
    else:
        raw = bits.view(np.float16)
        wide = raw.astype(np.float32)
    finite = np.isfinite(wide)
    for i in range(1 << 16):
        got = fused.stats(raw[i:i + 1], dtype, TINY[dtype], False)
        if not finite[i]:
            assert got is None, hex(i)
            continue
        v = float(wide[i])
        assert got.min == got.max == v and math.copysign(1, got.min) == math.copysign(1, v)
        assert got.zeros == (v == 0) and got.subnormal == (0 < abs(v) < TINY[dtype]), hex(i)
        assert got.sumsq == v * v
    for f16 in (True, False):  # float16 without overflows counted: its 16 bits compared
        whole = fused.stats(raw[finite], dtype, TINY[dtype], f16)
        want = reduce(wide[finite], TINY[dtype], f16)
        for key in EXACT:
            assert getattr(whole, key) == getattr(want, key), key
        for pattern in (finite & (wide < 0), finite & (wide > 0)):  # one sign: both extremes
            part = fused.stats(raw[pattern], dtype, TINY[dtype], f16)
            assert (part.min, part.max) == (float(wide[pattern].min()),
                                            float(wide[pattern].max()))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_difference_kernel_is_float64_exact_where_it_must_be(dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(100_003) * 0.02
    ra, a = _stored(x, dtype)
    rb, b = _stored(x + rng.standard_normal(x.size) * 1e-3 * (rng.random(x.size) < 0.5), dtype)
    top, ss_d, ss_a, ss_b, ss_ab = fused.difference(ra, rb, dtype)
    a, b = a.astype(np.float64), b.astype(np.float64)
    d = a - b
    assert top == float(np.max(np.abs(d)))  # exact
    assert ss_d == pytest.approx(math.fsum(d * d), rel=1e-13)
    assert ss_a == pytest.approx(math.fsum(a * a), rel=1e-13)
    assert ss_b == pytest.approx(math.fsum(b * b), rel=1e-13)
    assert ss_ab == pytest.approx(math.fsum(d * (a + b)), rel=1e-9)
    assert fused.difference(ra, ra, dtype)[:2] == (0.0, 0.0)
    bad = ra.copy()
    bad[7] = {"float32": np.float32(np.nan), "float16": np.float16(np.inf),
              "bfloat16": 0x7F80}[dtype]
    assert fused.difference(bad, rb, dtype) is None
    assert fused.difference(rb, bad, dtype) is None


def test_the_numpy_path_when_numba_is_off(monkeypatch):
    monkeypatch.setattr(fused, "_KERNELS", [None])
    x = np.ones(10, np.float32)
    assert fused.stats(x, "float32", None, False) is None
    assert fused.difference(x, x, "float32") is None


STATS = [FIXTURES / p for p in ("stats/torch/dtypes.pt",)] + sorted(
    p for p in (FIXTURES / "stats").rglob("*.safetensors"))
PAIRS = [("diff/torch_finetune/before.pt", "diff/torch_finetune/after.pt"),
         ("diff/torch_finetune_bf16/before.bf16.safetensors",
          "diff/torch_finetune_bf16/after.bf16.safetensors"),
         ("diff/nan_inf/a.pt", "diff/nan_inf/b.pt")]


def _close(x, y):
    if isinstance(x, dict):
        assert x.keys() == y.keys()
        for k in x:
            _close(x[k], y[k])
    elif isinstance(x, list):
        assert len(x) == len(y)
        for p, q in zip(x, y, strict=True):
            _close(p, q)
    elif isinstance(x, float) and isinstance(y, float):
        assert x == pytest.approx(y, rel=1e-6, abs=1e-12)
    else:
        assert x == y


@pytest.mark.parametrize("path", STATS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_stats_reports_agree_with_and_without_numba(path, monkeypatch):
    ckpt = inspector.load(path)
    with_numba = stats.report(stats.file_stats(ckpt, chunk=64, threads=2))
    monkeypatch.setattr(fused, "_KERNELS", [None])
    without = stats.report(stats.file_stats(ckpt, chunk=64, threads=2))
    _close(with_numba, without)  # counts, extremes and findings equal; moments to 1e-6


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0].split("/")[1])
def test_diff_values_agree_with_and_without_numba(pair, monkeypatch):
    a, b = (inspector.load(FIXTURES / p) for p in pair)
    records = align(a.tensors, b.tensors)
    with_numba = compare_values(a, b, records, chunk=7, threads=2)
    monkeypatch.setattr(fused, "_KERNELS", [None])
    without = compare_values(a, b, records, chunk=7, threads=2)
    compared = 0
    for p, q in zip(with_numba, without, strict=True):
        assert (p.op, p.note) == (q.op, q.note)
        if p.values is None:
            assert q.values is None
            continue
        compared += 1
        u, v = p.values, q.values
        assert (u.identical, u.changed, u.nonfinite) == (v.identical, v.changed, v.nonfinite)
        for key in ("max_abs", "rel_l2", "cosine"):
            x, y = getattr(u, key), getattr(v, key)
            if x is None or y is None or math.isnan(x):
                assert x is y or (x is not None and y is not None and math.isnan(y)), key
            else:
                assert x == pytest.approx(y, rel=1e-6, abs=1e-12), key
    assert compared


def test_a_run_agrees_with_and_without_numba(monkeypatch):
    """Per-group norms and relative changes (sums of squared differences) either way."""
    run = sorted((FIXTURES / "stats/sockeye1_run").glob("params.0000?"))
    assert len(run) >= 2
    with_numba = stats.run_report(stats.run_stats(run, chunk=64, threads=2))
    monkeypatch.setattr(fused, "_KERNELS", [None])
    without = stats.run_report(stats.run_stats(run, chunk=64, threads=2))
    _close(with_numba, without)


@pytest.mark.parametrize("tiny", [2.0**-14, 2.0**-10, 2.0**-126, None])
def test_float16_counts_for_any_threshold(tiny):
    """float16's own threshold takes the kernel that compares the stored 16 bits; any other
    (or none) the widened compare: the same counts as the NumPy path either way."""
    rng = np.random.default_rng(4)
    x = np.where(rng.random(50_001) < 0.2, 0.0, rng.standard_normal(50_001) * 1e-4)
    raw, wide = _stored(x, "float16")
    got = fused.stats(raw, "float16", tiny, False)
    want = reduce(wide, tiny, False)
    for key in EXACT:
        assert getattr(got, key) == getattr(want, key), key
    assert got.subnormal > 0 or tiny is None or tiny < 2.0**-24  # below float16's least
