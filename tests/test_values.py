"""The streaming value reader against values the producers recorded, and its memory bound."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import inspector
from inspector import values
from inspector.adapters.errors import FormatError

from conftest import FIXTURES, ROOT, load_truth

np = pytest.importorskip("numpy")

# MXNet 1.x/2.x fixtures whose truth lists every element as mx.nd.load returned it.
VALUE_TRUTHS = sorted(
    p
    for p in (FIXTURES / "mxnet").rglob("*.truth.json")
    if any("values" in t and t.get("stype", "default") == "default"
           for t in load_truth(p).get("tensors", []))
)


def _entries(ckpt):
    return {t.stored_name: t for t in ckpt.tensors}


@pytest.mark.parametrize("truth_path", VALUE_TRUTHS, ids=lambda p: str(p.relative_to(FIXTURES)))
@pytest.mark.parametrize("chunk", [1, 4, values.CHUNK_ELEMENTS])
def test_values_match_the_producer(truth_path: Path, chunk: int):
    truth = load_truth(truth_path)
    ckpt = inspector.load(truth_path.with_name(truth_path.name[: -len(".truth.json")]))
    entries = _entries(ckpt)
    checked = 0
    for t in truth["tensors"]:
        if "values" not in t or t.get("stype", "default") != "default":
            continue
        entry = entries[t["stored_name"]]
        if entry.dtype not in values.NUMPY_DTYPES:
            continue
        got = [x for c in values.iter_values(ckpt, entry, chunk) for x in c.tolist()]
        want = np.asarray(t["values"], dtype=np.float64).reshape(-1).tolist()
        assert [float(x) for x in got] == pytest.approx(want, nan_ok=True), t["stored_name"]
        checked += 1
    assert checked


def test_bfloat16_bits_widen_exactly():
    path = FIXTURES / "mxnet/mxnet-1.9.1/dtype_bfloat16.params"
    truth = load_truth(path.with_name(path.name + ".truth.json"))["tensors"][0]
    ckpt = inspector.load(path)
    got = np.concatenate(list(values.iter_values(ckpt, ckpt.tensors[0])))
    assert got.dtype == np.float32
    bits = (got.view(np.uint32) >> 16).tolist()
    assert bits == truth["values_bfloat16_bits"]


def test_sparse_is_refused_clearly():
    path = FIXTURES / "mxnet/mxnet-1.9.1/row_sparse.params"
    ckpt = inspector.load(path)
    entry = next(t for t in ckpt.tensors if t.extra.get("stype"))
    with pytest.raises(FormatError, match="values cannot be compared: sparse row_sparse"):
        values.compare(ckpt, entry, ckpt, entry)


def test_wide_strided_view_is_refused(monkeypatch):
    """A transposed view is read as the span it covers; past the limit it is refused, naming
    the tensor, instead of reading an unbounded span."""
    path = FIXTURES / "diff/state_dict_vs_safetensors/zoo.pt"
    ckpt = inspector.load(path)
    t = _entries(ckpt)["transposed.weight"]
    assert t.extra["stride"] == (1, 5)
    monkeypatch.setattr(values, "MAX_VIEW_SPAN_BYTES", 16)
    with pytest.raises(FormatError, match="'transposed.weight'.*strided view"):
        values.compare(ckpt, t, ckpt, t, chunk=values.CHUNK_ELEMENTS)


def _write_safetensors(path: Path, tensors: dict[str, tuple[int, int]], seed: int, noise: str):
    """F32 tensors name -> (rows, cols) of seeded random values, written chunk by chunk."""
    header, offset = {}, 0
    for name, (r, c) in tensors.items():
        header[name] = {"dtype": "F32", "shape": [r, c], "data_offsets": [offset, offset + r * c * 4]}
        offset += r * c * 4
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for i, (name, (r, c)) in enumerate(tensors.items()):
            rng = np.random.default_rng(i)  # same base values in both files
            noisy = np.random.default_rng(seed)
            for start in range(0, r, 1024):
                block = rng.standard_normal((min(1024, r - start), c), dtype=np.float32)
                if name == noise:
                    block += noisy.standard_normal(block.shape, dtype=np.float32) * 1e-3
                f.write(block.tobytes())


def test_values_diff_memory_is_bounded_by_a_chunk(tmp_path):
    """Two ~200 MB checkpoints: the diff process's peak RSS stays far below one file."""
    shapes = {"embed.weight": (16384, 1024), "layers.0.ff.weight": (16384, 1024),
              "layers.1.ff.weight": (16384, 1024), "head.bias": (1, 1024)}
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    _write_safetensors(a, shapes, 1, noise="")
    _write_safetensors(b, shapes, 2, noise="layers.1.ff.weight")
    size = a.stat().st_size
    assert size > 190e6
    # The child reports its own high-water mark (VmHWM belongs to the post-exec address space;
    # getrusage's ru_maxrss would also count the forked pytest image before exec).
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_PROBE, "diff", str(a), str(b), "--values", "--format", "json"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "INSPECTOR_NUMBA": "0"},  # the NumPy path (numba's: test_chunk_pass)
    )
    assert proc.returncode == 1, proc.stderr
    peak_kib = int(proc.stderr.strip().splitlines()[-1])
    doc = json.loads(proc.stdout)
    assert [t["name"] for t in doc["tensors"] if t["op"] == "changed"] == ["layers.1.ff.weight"]
    assert peak_kib * 1024 < 120e6, f"peak RSS {peak_kib / 1024:.0f} MiB for 2 x {size:,} B"
    os.environ.get("INSPECTOR_REPORT_RSS") and print(
        f"peak RSS {peak_kib / 1024:.0f} MiB for two {size / 1e6:.0f} MB files"
    )


PEAK_PROBE = """
import sys
from inspector.cli import main
rc = main(sys.argv[1:])
for line in open('/proc/self/status'):
    if line.startswith('VmHWM:'):
        print(line.split()[1], file=sys.stderr)
sys.exit(rc)
"""


def test_chunk_blocks_cover_in_c_order():
    """Blocks walk the array in C order, each at most ``chunk`` elements."""
    shape = (3, 5, 7)
    for chunk in (1, 6, 7, 20, 35, 36, 105, 1000):
        covered = []
        for prefix, start, stop in values._blocks(shape, chunk):
            rest = shape[len(prefix) + 1:]
            n = (stop - start) * math.prod(rest)
            assert n <= max(chunk, 1)
            base = np.arange(math.prod(shape)).reshape(shape)[(*prefix, slice(start, stop))]
            covered.extend(base.reshape(-1).tolist())
        assert covered == list(range(math.prod(shape))), chunk


def test_values_an_adapter_cannot_locate_are_noted_not_fatal():
    """Arrays kept inside pickle opcodes (protocol 2 NumPy pickles) are not located by their
    adapter; joblib writes the same arrays as raw bytes, which are. A diff of the two compares
    nothing it cannot read, says why per tensor, and still ends normally."""
    a = FIXTURES / "dirs/pickles/numpy_dict.p2.pkl"
    b = FIXTURES / "dirs/pickles/numpy_dict.p2.pkl"
    proc = subprocess.run(
        [sys.executable, "-m", "inspector", "diff", str(a), str(b), "--values", "--format", "json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["tensors"]
    assert rows and all("not located" in (r.get("note") or "") for r in rows), rows
