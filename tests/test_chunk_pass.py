"""Chunk-parallel value passes: the same numbers on any number of threads and through either
reader (positioned reads by chunk, or the in-order stream the Dask tasks use), the 16-bit
widenings exact on every bit pattern, the fast reduction within its stated accuracy of float64,
and peak memory bounded on a file larger than the budget."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys

import pytest

import inspector
from inspector import chunk_pass, fused, kernels, values
from inspector import value_stats as stats
from inspector.diffing import align, compare_values
from inspector.partial import Partial, fast_reduce, reduce

from conftest import FIXTURES, ROOT

np = pytest.importorskip("numpy")

STATS = sorted(p for p in (FIXTURES / "stats").rglob("*") if p.suffix in (".pt", ".safetensors")
               or p.name.startswith("params."))
STATS = [p for p in STATS if not p.name.endswith(".json")]
PAIRS = [("diff/torch_finetune/before.pt", "diff/torch_finetune/after.pt"),
         ("diff/torch_finetune_bf16/before.bf16.safetensors",
          "diff/torch_finetune_bf16/after.bf16.safetensors"),
         ("diff/nan_inf/a.pt", "diff/nan_inf/b.pt")]


def _in_order(ckpt, chunk, prev=None):
    """Each tensor's result through the in-order reader alone (what a Dask task computes)."""
    out = []
    for t in stats.selected(ckpt):
        before = stats.previous(prev, t)
        out.append(stats.tensor_result(ckpt, t, chunk, None,
                                       None if before is None else (prev, before)))
    return out


@pytest.mark.parametrize("path", STATS, ids=lambda p: str(p.relative_to(FIXTURES)))
@pytest.mark.parametrize("chunk", [5, 64])
def test_stats_do_not_depend_on_threads_or_reader(path, chunk):
    ckpt = inspector.load(path)
    chunked = [entry for entry in stats.selected(ckpt) if chunk_pass.locate(ckpt, entry)]
    if path.suffix == ".safetensors":
        assert chunked  # the positioned reads are what this test is about
    one = stats.file_stats(ckpt, chunk=chunk, threads=1)
    for threads in (2, 4):
        many = stats.file_stats(ckpt, chunk=chunk, threads=threads)
        assert [t.stats for t in many.tensors] == [t.stats for t in one.tensors]
        assert stats.report(many) == stats.report(one)
    assert [(t.stats, t.delta_ss, t.note) for t in one.tensors] == [
        (p, None, n) for p, _, n in _in_order(ckpt, chunk)]


def test_a_run_does_not_depend_on_threads_or_reader():
    run = sorted((FIXTURES / "stats/sockeye1_run").glob("params.0000?"))
    ckpts = [inspector.load(p) for p in run]
    for prev, cur in zip(ckpts, ckpts[1:], strict=False):
        one = stats.file_stats(cur, chunk=7, threads=1, prev=prev)
        many = stats.file_stats(cur, chunk=7, threads=3, prev=prev)
        got = [(t.stats, t.delta_ss) for t in one.tensors]
        assert got == [(t.stats, t.delta_ss) for t in many.tensors]
        assert got == [(p, d) for p, d, _ in _in_order(cur, 7, prev)]


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0].split("/")[1])
def test_diff_values_do_not_depend_on_threads_or_reader(pair):
    a, b = (inspector.load(FIXTURES / p) for p in pair)
    records = align(a.tensors, b.tensors)
    one = compare_values(a, b, records, chunk=7, threads=1)
    many = compare_values(a, b, records, chunk=7, threads=4)
    assert [(r.op, r.values, r.note) for r in many] == [(r.op, r.values, r.note) for r in one]
    compared = 0
    for r in one:
        if r.values is not None:
            assert r.values == values.compare(a, r.a, b, r.b, chunk=7)  # the in-order reader
            compared += 1
    assert compared


@pytest.mark.parametrize("run_bytes", [1, 60, 1 << 20])
def test_units_of_several_chunks_give_each_chunk_s_numbers(run_bytes, monkeypatch):
    """A unit reads several consecutive chunks at once (one, a few, or a whole tensor of the
    fixture); each chunk is still reduced and folded on its own, in order: the same numbers as
    the in-order reader, chunk by chunk, for stats, a run's changes and diff --values."""
    monkeypatch.setattr(chunk_pass, "RUN_BYTES", run_bytes)
    assert [m for _, m in chunk_pass.runs(inspector.load(STATS[0]).tensors[0], 7, 4)]
    path = FIXTURES / "stats/torch/dtypes.safetensors"
    ckpt = inspector.load(path)
    for threads in (1, 2):
        got = stats.file_stats(ckpt, chunk=7, threads=threads)
        assert [(t.stats, t.delta_ss, t.note) for t in got.tensors] == [
            (p, None, n) for p, _, n in _in_order(ckpt, 7)]
    run = [inspector.load(p) for p in sorted((FIXTURES / "stats/sockeye1_run")
                                              .glob("params.0000?"))[:2]]
    got = stats.file_stats(run[1], chunk=7, threads=2, prev=run[0])
    assert [(t.stats, t.delta_ss) for t in got.tensors] == [
        (p, d) for p, d, _ in _in_order(run[1], 7, run[0])]
    a, b = (inspector.load(FIXTURES / p) for p in PAIRS[1])
    for r in compare_values(a, b, align(a.tensors, b.tensors), chunk=7, threads=2):
        if r.values is not None:
            assert r.values == values.compare(a, r.a, b, r.b, chunk=7)


def test_runs_cover_every_chunk_once_within_their_size():
    entry = inspector.load(FIXTURES / "stats/torch/dtypes.safetensors").tensors[0]
    for chunk, itemsize in ((1, 4), (7, 2), (1 << 20, 4), (3, 8)):
        units = list(chunk_pass.runs(entry, chunk, itemsize))
        assert [k for k, _ in units] == [sum(m for _, m in units[:i]) for i in range(len(units))]
        assert sum(m for _, m in units) == chunk_pass.count(entry, chunk)
        assert all(m == 1 or m * chunk * itemsize <= chunk_pass.RUN_BYTES for _, m in units)


# ---------------------------------------------------------------------------------------------
# The kernels


@pytest.mark.parametrize("n", [65536, 65535, 3, 1, 0])
def test_16_bit_widenings_are_exact_on_every_bit_pattern(n):
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)[:n]
    want = kernels.paired(bits.view(np.float16).astype(np.float32))
    got = kernels.half_to_float32(bits.view(np.float16), np.empty(n, np.float32))
    finite = np.isfinite(want)
    assert np.array_equal(got[finite].view(np.uint32), want[finite].view(np.uint32))  # and -0
    assert not np.any(np.abs(got[~finite]) < kernels.HALF_NONFINITE)  # NaN and Inf: flagged
    want = kernels.paired((bits.astype(np.uint32) << 16).view(np.float32))
    got = kernels.bfloat16_to_float32(bits, np.empty(n, np.float32))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _exact(x):
    d = x[np.isfinite(x)].astype(np.float64)
    total, sumsq = math.fsum(d), math.fsum(d * d)
    mean = total / d.size
    return mean, math.sqrt(math.fsum((d - mean) ** 2) / d.size), math.sqrt(sumsq)


CASES = {
    "weights": lambda r, n: r.standard_normal(n) * 0.02,
    "layer norm": lambda r, n: 1 + 0.01 * r.standard_normal(n),  # mean far above the spread
    "offset": lambda r, n: 0.1 + 0.05 * r.standard_normal(n),
    "large": lambda r, n: np.clip(r.standard_normal(n) * 3e4, -6e4, 6e4),  # float16 overflows
    "with zeros": lambda r, n: np.where(r.random(n) < 0.3, 0.0, r.standard_normal(n)),
    "subnormal": lambda r, n: np.where(r.random(n) < 0.1, 1e-39, r.standard_normal(n)),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_fast_reduce_is_within_its_accuracy_of_float64(case, dtype):
    """Counts, min and max exact; the mean to float64's precision (1e-12 of the mean
    magnitude), the sum of squares to 1e-7 relative, the standard deviation to 1e-6."""
    rng = np.random.default_rng(len(case))
    x = CASES[case](rng, 300_001).astype(dtype)
    tiny = 2.0**-126 if dtype == "float32" else 2.0**-14
    fast = fast_reduce(x, tiny, dtype == "float32")
    assert fast is not None
    general = reduce(x.astype(np.float32), tiny, dtype == "float32")  # via float32 as before
    for key in ("count", "finite", "min", "max", "nan", "zeros", "subnormal", "f16_overflow"):
        assert getattr(fast, key) == getattr(general, key), key
    a = np.abs(x.astype(np.float64))
    assert fast.zeros == int(np.count_nonzero(a == 0))
    assert fast.subnormal == int(np.count_nonzero((a > 0) & (a < tiny)))
    mean, std, l2 = _exact(x)
    assert abs(fast.mean - mean) <= 1e-12 * float(a.mean())
    assert fast.std == pytest.approx(std, rel=1e-6)
    assert fast.l2 == pytest.approx(l2, rel=1e-7)


def test_fast_reduce_leaves_nonfinite_and_extreme_chunks_to_the_general_path():
    for x in (np.array([1.0, np.nan], np.float32), np.array([1.0, -np.inf], np.float16),
              np.array([1e30, 1.0], np.float32), np.array([1e-30, 0.0], np.float32)):
        assert fast_reduce(x, 2.0**-126) is None
        assert reduce(x, 2.0**-126).count == 2
    assert fast_reduce(np.zeros(5, np.float32)) == Partial(5, 5, 0.0, 0.0, 0.0, 0.0, 0.0,
                                                           zeros=5)


def test_row_dots_add_rows_in_float64_and_the_rest_exactly():
    x = np.random.default_rng(1).standard_normal(3 * kernels.ROW + 17)
    assert kernels.dot(x, x) == pytest.approx(math.fsum(x * x), rel=1e-13)
    y = x.astype(np.float32)
    total, sumsq = kernels.sums(y)
    d = y.astype(np.float64)
    assert sumsq == pytest.approx(math.fsum(d * d), rel=1e-7)
    assert abs(total - math.fsum(d)) <= 1e-13 * math.fsum(np.abs(d))
    short = y[:100]  # shorter than a row: all in float64
    assert kernels.sums(short)[1] == float(np.einsum("i,i->", short, short, dtype=np.float64))


# ---------------------------------------------------------------------------------------------
# Errors and memory


def _safetensors(path, tensors):
    """name -> float32 array, written as safetensors lays them out (header, then the data)."""
    header, offset = {}, 0
    for name, x in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(x.shape),
                        "data_offsets": [offset, offset + x.nbytes]}
        offset += x.nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for x in tensors.values():
            f.write(x.tobytes())


def test_a_file_cut_short_during_the_pass_is_one_error_naming_a_tensor(tmp_path):
    path = tmp_path / "cut.safetensors"
    x = np.arange(4096, dtype=np.float32)
    _safetensors(path, {"a": x, "b": x})
    ckpt = inspector.load(path)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 100)
    for threads in (1, 2):
        with pytest.raises(inspector.FormatError, match="tensor '[ab]': .*(changed size|ends)"):
            stats.file_stats(ckpt, chunk=1000, threads=threads)
    span = chunk_pass.locate(ckpt, ckpt["b"])  # as listed, before the cut
    with pytest.raises(inspector.FormatError, match="tensor 'b': data at offset .* the file "
                                                    "ends after"):
        with chunk_pass.Files() as files:  # a positioned read that comes up short says so
            files.read(span, 4, 1000, "test")


PEAK = """
import sys
from inspector.cli import main
rc = main(sys.argv[1:])
for line in open('/proc/self/status'):
    if line.startswith('VmHWM:'):
        print(line.split()[1], file=sys.stderr)
sys.exit(rc)
"""


RUNTIME = """
import sys
import numpy as np
from inspector import fused
if fused.kernels() is not None:
    x = np.zeros(1024, np.float32)
    for dtype, y in (("float32", x), ("bfloat16", x.view(np.uint16)), ("float16", x.astype(np.float16))):
        fused.stats(y, dtype, 2.0**-14, True)
        fused.difference(y, y, dtype)
for line in open('/proc/self/status'):
    if line.startswith('VmHWM:'):
        print(line.split()[1])
"""


def _peak_kib(code, *args, numba="0"):
    env = {**os.environ, "INSPECTOR_NUMBA": numba}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, env=env)
    return proc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("numba", ["0", "1"], ids=["numpy", "numba"])
def test_peak_memory_stays_under_100_mb_on_a_300_mb_file(tmp_path, numba):
    """stats and diff --values over files three times the budget: the process's high-water
    mark (VmHWM, the child's own) stays under 100 MB, whatever the file size. With numba, its
    runtime (LLVM's library and the loaded kernels: a fixed cost, measured apart in a child
    that only loads and runs them) comes on top; the pass itself stays under the same 100
    MB."""
    extra = 0
    if numba == "1":
        if not fused.kernels():
            pytest.skip("numba is not installed")
        base = [int(_peak_kib(RUNTIME, numba=n).stdout.split()[-1]) for n in ("0", "1")]
        extra = base[1] - base[0]
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    for path, seed in ((a, 0), (b, 1)):
        rng = np.random.default_rng(seed)
        tensors = {f"layers.{i}.weight": rng.standard_normal((2048, 4096), dtype=np.float32)
                   for i in range(9)}
        _safetensors(path, tensors)
        del tensors
    assert a.stat().st_size > 300e6
    for args in (["stats", str(a), "--format", "json"],
                 ["diff", str(a), str(b), "--values", "--format", "json"]):
        proc = _peak_kib(PEAK, *args, numba=numba)
        assert proc.returncode in (0, 1), proc.stderr
        json.loads(proc.stdout)
        peak_kib = int(proc.stderr.strip().splitlines()[-1]) - extra
        assert peak_kib * 1024 < 100e6, f"{args[0]}: peak RSS {peak_kib / 1024:.0f} MiB"
