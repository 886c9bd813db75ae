"""The fast paths of a value comparison (bytes first, own dtype, exact maximum) agree with a
float64 computation on real fixtures and on the edge cases that must leave them."""

from __future__ import annotations

import math
import os

import pytest

import inspector
from inspector import values

from conftest import FIXTURES

np = pytest.importorskip("numpy")

PAIRS = [("diff/torch_finetune/before.pt", "diff/torch_finetune/after.pt"),
         ("diff/torch_finetune_bf16/before.bf16.safetensors",
          "diff/torch_finetune_bf16/after.bf16.safetensors")]


def _reference(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    d = x - y
    na, nb = np.sqrt(x @ x), np.sqrt(y @ y)
    cos = None if not (na > 0 and nb > 0) else float(x @ y / (na * nb))
    rel = float(np.sqrt(d @ d) / na) if na > 0 else (0.0 if not d.any() else math.inf)
    return float(np.max(np.abs(d))) if d.size else 0.0, rel, cos


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0].split("/")[1])
@pytest.mark.parametrize("chunk", [7, values.CHUNK_ELEMENTS])
def test_compare_matches_float64_on_real_pairs(pair, chunk):
    a, b = (inspector.load(FIXTURES / p) for p in pair)
    checked = 0
    for ta in a.tensors:
        tb = b.get(ta.name)
        if tb is None or tb.numel != ta.numel or ta.numel == 0:
            continue
        x = np.concatenate(list(values.iter_values(a, ta)))
        y = np.concatenate(list(values.iter_values(b, tb)))
        got = values.compare(a, ta, b, tb, chunk=chunk)
        max_abs, rel, cos = _reference(x, y)
        assert got.max_abs == max_abs, ta.name  # exact
        assert got.identical == (max_abs == 0) and got.changed == (max_abs > 0)
        assert got.rel_l2 == pytest.approx(rel, rel=1e-5, abs=1e-12), ta.name
        if cos is None:
            assert got.cosine is None
        else:
            assert got.cosine == pytest.approx(cos, rel=1e-6), ta.name
        checked += 1
    assert checked


def _acc(x, y):
    acc = values._Acc()
    if not values._fast(acc, x, y):
        values._slow(acc, x, y, False, 0.0, 0.0)
    return acc


def test_edge_values_take_the_exact_path():
    f32 = np.float32
    # NaN equals NaN (identical, not changed), NaN against a number is changed; either way
    # a - b holds a NaN, so max |a - b| is NaN as NumPy computes it
    acc = _acc(np.array([np.nan, 1, 2], f32), np.array([np.nan, 1, 2], f32))
    assert acc.identical and not acc.changed and acc.nan_diff
    assert math.isnan(values._nonfinite_stats(acc).max_abs)
    acc = _acc(np.array([np.nan, 1], f32), np.array([0, 1], f32))
    assert acc.changed and not acc.identical and acc.nan_diff
    # -0.0 and 0.0: different bytes, equal values
    acc = _acc(np.array([-0.0, 3], f32), np.array([0.0, 3], f32))
    assert acc.identical and not acc.changed
    # float16 values whose difference overflows float16: exact in float64
    h = np.float16
    acc = _acc(np.array([60000, 1], h), np.array([-60000, 1], h))
    assert acc.max_abs == 120000.0
    # float32 difference that rounds: the maximum is recomputed exactly
    x = np.array([1e8, 3.0], f32)
    y = np.array([-1.5, 1.0], f32)
    acc = _acc(x, y)
    assert acc.max_abs == float(np.float64(x[0]) - np.float64(y[0]))
    # huge values whose float32 difference overflows
    acc = _acc(np.array([3e38], f32), np.array([-3e38], f32))
    assert acc.max_abs == 2 * float(np.float32(3e38))


def test_remote_sources_are_read_on_one_thread():
    """Threads interleaving reads of one remote file defeat its read-ahead (measured: 515
    requests instead of 138 on moto S3): a pass over a remote source uses one thread, a local
    one of the same tensors several."""
    from types import SimpleNamespace

    from inspector.adapters.model import TensorEntry

    entries = [TensorEntry(f"t{i}", f"t{i}", (1 << 20,), "float32", nbytes=4 << 20)
               for i in range(4)]
    local = inspector.load(FIXTURES / "hf" / "gpt2_tiny" / "model.safetensors")
    assert local.source.local_path is not None
    remote = SimpleNamespace(source=SimpleNamespace(local_path=None))  # what a URL source says
    assert values.threads_for(entries, [remote]) == 1
    assert values.threads_for(entries, [local, remote]) == 1
    assert values.threads_for(entries, [local]) > 1 or (os.cpu_count() or 1) == 1
