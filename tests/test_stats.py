"""`inspector stats` against the numbers its producers computed (torch, MXNet, Keras in float64),
what was injected into real files, the exact merge of partial statistics, runs, bad input and the
progress bar."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import pickle
import shutil
import sys

import pytest

import inspector
from inspector import value_stats as stats
from inspector import values
from inspector.adapters.errors import FormatError
from inspector.partial import Partial, merge_all, reduce
from inspector.progress import Progress

from conftest import FIXTURES, load_truth, run_cli

np = pytest.importorskip("numpy")

STATS = FIXTURES / "stats"
TRUTHS = sorted(STATS.rglob("*.truth.json"))
KEYS = ("count", "min", "max", "mean", "std", "l2", "nan", "posinf", "neginf", "zeros",
        "subnormal", "f16_overflow")


def _target(truth_path):
    return truth_path.with_name(truth_path.name[: -len(".truth.json")])


def _rows(truth):
    """name -> the producer's row (Keras rows are named by the variable path)."""
    if "weights" in truth:
        return {w["path"]: w for w in truth["weights"]}
    return {t["stored_name"]: t for t in truth["tensors"]}


def _check(got: dict, want: dict, label: str) -> None:
    for k in KEYS:
        if k not in want or (got[k] is None and k in ("subnormal", "f16_overflow")
                             and want[k] == 0):  # not a floating format: not applicable
            continue
        assert got[k] == pytest.approx(want[k], rel=1e-6, abs=1e-12), f"{label}: {k}"


@pytest.mark.parametrize("truth_path", TRUTHS, ids=lambda p: str(p.relative_to(STATS)))
@pytest.mark.parametrize("chunk", [5, stats.CHUNK])
def test_numbers_match_the_producer(truth_path, chunk):
    truth = load_truth(truth_path)
    result = stats.file_stats(_target(truth_path), chunk=chunk)
    rep = stats.report(result)
    assert rep["complete"]
    keras = "weights" in truth
    got = {(t["name"] if keras else t["stored_name"]): t for t in rep["tensors"]}
    want = _rows(truth)
    for name, w in want.items():
        g = got[name]
        assert g["shape"] == w["shape"], name
        assert g["dtype"] == w["dtype"], name
        _check(g["stats"], w["stats"], name)
    if not keras:  # Keras files also hold optimizer variables the truth does not list
        assert sorted(got) == sorted(want)


def test_every_dtype_says_what_its_numbers_are_of():
    rep = stats.report(stats.file_stats(STATS / "torch/dtypes.pt"))
    of = {t["name"]: t["of"] for t in rep["tensors"]}
    assert of["q8"] == "stored integers (scale and zero point not applied)"
    assert of["i8"] == "stored integers" and of["bool"] == "0 and 1"
    assert of["c64"] == "magnitudes |z|" and of["bf16"] == of["f8_e5m2"] == "values"
    ints = {t["name"]: t["stats"] for t in rep["tensors"]}["i8"]
    assert ints["subnormal"] is None and ints["f16_overflow"] is None and ints["nan"] == 0


def test_findings_are_exactly_what_torch_injected():
    path = STATS / "torch/lm_nan_zero.pt"
    truth = load_truth(path.with_name(path.name + ".truth.json"))
    result = stats.file_stats(path)
    by_code: dict[str, set[str]] = {}
    for f in result.findings:
        by_code.setdefault(f.code, set()).add(f.subject)
    inj = truth["injected"]
    assert by_code.pop("nonfinite") == set(inj["nan"]) | set(inj["neginf"])
    assert by_code.pop("zeros") == set(inj["zeroed"])
    # the layer-outlier rule applied to the producer's own norms (L2 of each layers.N)
    norms: dict[str, float] = {}
    for t in truth["tensors"]:
        parts = t["stored_name"].split(".")
        if parts[0] == "layers":
            norms[parts[1]] = norms.get(parts[1], 0.0) + t["stats"]["l2"] ** 2
    med = float(np.median([math.sqrt(v) for v in norms.values()]))
    outliers = {f"layers layer {k}" for k, v in norms.items()
                if not 0.1 < math.sqrt(v) / med < 10}
    assert by_code.pop("outlier", set()) == outliers
    assert by_code == {}
    assert {f.severity for f in result.findings if f.code == "nonfinite"} == {"error"}


def test_a_layer_far_from_its_kind_is_flagged():
    """Four layers of one kind, one 100x larger: the rule flags exactly that one."""
    def layer(scale):
        return stats.GroupStats("blocks", 1, reduce(np.full(10, scale, dtype=np.float32)), "x",
                                ("blocks", None, None))
    rows = [layer(1.0), layer(1.2), layer(100.0), layer(0.9)]
    rows = [stats.GroupStats(r.name, 1, r.stats, str(i), r.kind) for i, r in enumerate(rows)]
    found = stats.outlier_findings(rows)
    assert [f.subject for f in found] == ["blocks layer 2"]


# ---------------------------------------------------------------------------------------------
# The mergeable record


def test_merge_is_exact_in_any_split():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10_001) * 3 + 1e4).astype(np.float32)  # large mean, small spread
    x[[5, 77, 900]] = [np.nan, np.inf, 0.0]
    x[100] = np.float32(1e-40)
    whole = reduce(x, tiny=2.0**-126, f16=True)
    for cuts in ([5000], [1, 2, 3, 9000], list(range(0, 10_001, 97))):
        parts = [reduce(p, tiny=2.0**-126, f16=True) for p in np.split(x, cuts)]
        merged = merge_all(parts)
        merged_rev = merge_all(reversed(parts))
        for m in (merged, merged_rev):
            assert (m.count, m.finite, m.nan, m.posinf, m.zeros, m.subnormal, m.f16_overflow) == (
                whole.count, whole.finite, whole.nan, whole.posinf, whole.zeros, whole.subnormal,
                whole.f16_overflow)
            assert (m.min, m.max) == (whole.min, whole.max)
            finite = x[np.isfinite(x)].astype(np.float64)
            assert m.mean == pytest.approx(finite.mean(), rel=1e-12)
            assert m.std == pytest.approx(finite.std(), rel=1e-9)
            assert m.l2 == pytest.approx(np.sqrt(np.dot(finite, finite)), rel=1e-12)
    assert pickle.loads(pickle.dumps(whole)) == whole
    # shards of a real tensor, reduced apart (as workers would) and merged in any order
    ckpt = inspector.load(STATS / "torch/dtypes.pt")
    for entry in ckpt.tensors:
        whole = stats.tensor_partial(ckpt, entry)[0]
        shards = [stats.chunk_partial(c, entry.dtype)
                  for c in values.iter_values(ckpt, entry, chunk=5)]
        merged = merge_all(pickle.loads(pickle.dumps(p)) for p in reversed(shards))
        assert merged.count == whole.count and merged.zeros == whole.zeros, entry.name
        assert merged.l2 == pytest.approx(whole.l2, rel=1e-12), entry.name
    assert Partial().merge(whole) == whole.merge(Partial()) == whole


# ---------------------------------------------------------------------------------------------
# Training runs


def _run_truths():
    return [load_truth(p) for p in sorted((STATS / "sockeye1_run").glob("*.truth.json"))]


def test_sockeye_run_frozen_groups_and_changes_match_mxnet():
    truths = _run_truths()
    run = stats.run_stats(stats.expand([STATS / "sockeye1_run"]))
    assert [f.ckpt.path.rsplit("/", 1)[1] for f in run.files] == [
        "params.00001", "params.00002", "params.00003"]
    rep = stats.run_report(run)
    # per tensor: the change from the previous checkpoint equals MXNet's
    for fs, truth in zip(run.files[1:], truths[1:], strict=True):
        want = {t["stored_name"]: t for t in truth["tensors"]}
        for r in fs.tensors:
            w = want[r.entry.stored_name]
            assert math.sqrt(r.delta_ss) == pytest.approx(w["delta_l2"], rel=1e-6, abs=1e-12)
            assert (r.delta_ss == 0) == w["equal_to_previous"]
    # per group: ||delta|| / ||W_prev|| from the producer's per-tensor numbers
    group_of = {r.entry.stored_name: r.group for r in run.files[0].tensors}
    for k in (1, 2):
        step = {g["group"]: g for g in rep["steps"][k]["groups"]}
        for g, row in step.items():
            members = [n for n, gg in group_of.items() if gg == g]
            cur = {t["stored_name"]: t for t in truths[k]["tensors"]}
            prev = {t["stored_name"]: t for t in truths[k - 1]["tensors"]}
            d = math.sqrt(sum(cur[n]["delta_l2"] ** 2 for n in members))
            base = math.sqrt(sum(prev[n]["stats"]["l2"] ** 2 for n in members))
            assert row["relative_change"] == pytest.approx(d / base, rel=1e-6, abs=1e-15)
    # frozen: exactly the groups whose every tensor Sockeye's strategy fixed
    fixed: dict[str, bool] = {}
    for t in truths[0]["tensors"]:
        g = group_of[t["stored_name"]]
        fixed[g] = fixed.get(g, True) and t["fixed_by_strategy"]
    frozen = {f.subject for f in run.findings if f.code == "frozen"}
    assert frozen == {g for g, all_fixed in fixed.items() if all_fixed}
    assert frozen  # the strategy did freeze something
    assert not run.errors


def test_run_flags_the_first_nan_and_a_jump(tmp_path):
    """A run made of real files: the clean checkpoint, then the one torch put a NaN into."""
    clean = tmp_path / "epoch=1.ckpt"
    bad = tmp_path / "epoch=10.ckpt"
    shutil.copy(FIXTURES / "diff/torch_finetune/before.pt", clean)
    shutil.copy(STATS / "torch/lm_nan_zero.pt", bad)
    shutil.copy(STATS / "torch/lm_nan_zero.pt", tmp_path / "epoch=2.ckpt")
    paths = stats.expand([tmp_path])
    assert [p.name for p in paths] == ["epoch=1.ckpt", "epoch=2.ckpt", "epoch=10.ckpt"]
    run = stats.run_stats(paths[1:])
    first = [f for f in run.findings if f.code == "first_nonfinite"]
    assert [f.checkpoint.rsplit("/", 1)[1] for f in first] == ["epoch=2.ckpt"]
    assert run.errors
    # jumps: a series of changes where the last is 20x the earlier median
    g = [stats.GroupStats("g", 1, Partial(finite=1, sumsq=1.0), None, (), ss)
         for ss in (None, 1e-4, 1.1e-4, 4e-2)]
    files = [stats.FileStats(inspector.load(clean), "x", [], [x], []) for x in g]
    jumps = [f for f in stats.run_findings(files) if f.code == "jump"]
    assert len(jumps) == 1 and jumps[0].checkpoint == files[3].ckpt.path


def test_natural_order_of_run_members(tmp_path):
    for n in ("params.00010", "params.00002", "params.best", "config"):
        (tmp_path / n).write_bytes(b"")
    assert [p.name for p in stats.run_members(tmp_path)] == ["params.00002", "params.00010"]
    d = tmp_path / "hf"
    d.mkdir()
    for n in ("checkpoint-1000", "checkpoint-200", "runs"):
        (d / n).mkdir()
    assert [p.name for p in stats.run_members(d)] == ["checkpoint-200", "checkpoint-1000"]


# ---------------------------------------------------------------------------------------------
# Command line


def test_cli_exit_codes_and_formats():
    r = run_cli("stats", str(STATS / "torch/lm_nan_zero.pt"))
    assert r.returncode == 1, r.stderr
    assert "1 NaN" in r.stdout and "error: layers.1.weight" in r.stdout
    r = run_cli("stats", str(STATS / "keras/lstm_lm.keras"), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == stats.SCHEMA
    r = run_cli("stats", str(STATS / "sockeye1_run"), "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {row["step"] for row in rows} == {"0", "1", "2"}
    frozen = {row["group"] for row in rows if row["step"] != "0"
              and float(row["relative_change"]) == 0}
    assert frozen == {"io", "birnn"}
    r = run_cli("stats", str(STATS / "torch/dtypes.safetensors"), "--match", "^f8_e4",
                "--format", "markdown", "--groups")
    assert r.returncode == 0, r.stderr
    assert "| group" in r.stdout


def _truncated(tmp_path, cut):
    src = STATS / "torch/dtypes.safetensors"
    dst = tmp_path / "cut.safetensors"
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) - cut])
    return dst


def test_tensor_past_eof_is_one_line_exit_2(tmp_path):
    path = _truncated(tmp_path, 10)
    r = run_cli("stats", str(path))
    assert r.returncode == 2
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    assert "tensor 'bool'" in r.stderr and " past " in r.stderr  # the last tensor, named


def test_truncated_shard_is_one_line_exit_2(tmp_path):
    d = tmp_path / "sharded"
    shutil.copytree(FIXTURES / "safetensors/sharded", d)
    last = sorted(d.glob("model-*.safetensors"))[-1]
    last.write_bytes(last.read_bytes()[:-100])
    r = run_cli("stats", str(d))
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    assert last.name in r.stderr and "tensor '" in r.stderr


def test_file_changing_size_during_the_pass(tmp_path):
    src = STATS / "torch/dtypes.safetensors"
    path = tmp_path / "moving.safetensors"
    shutil.copy(src, path)
    ckpt = inspector.load(path)
    with open(path, "ab") as f:  # rewritten after it was opened, before the values are read
        f.write(b"\0" * 64)
    with pytest.raises(FormatError, match="changed size during the pass") as e:
        stats.file_stats(ckpt, threads=1)
    assert "tensor '" in str(e.value)
    path.write_bytes(src.read_bytes()[:200])  # and truncated under the reader
    with pytest.raises(FormatError, match="tensor '"):
        stats.file_stats(ckpt, threads=1)


# ---------------------------------------------------------------------------------------------
# Progress bar


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv("INSPECTOR_PROGRESS", raising=False)
    if importlib.util.find_spec("tqdm") is not None:  # the test extra installs it
        tty = _Tty()
        with Progress(1000, "stats", tty, delay=0) as bar:
            bar.advance(10)
            bar.advance(500)
        assert "B" in tty.getvalue()  # tqdm drew bytes done / total
    pipe = io.StringIO()
    with Progress(1000, "stats", pipe, delay=0) as bar:
        bar.advance(1000)
    assert pipe.getvalue() == ""
    slow = _Tty()
    with Progress(1000, "stats", slow, delay=60) as bar:  # a short pass: no bar
        bar.advance(1000)
    assert slow.getvalue() == ""
    monkeypatch.setitem(sys.modules, "tqdm", None)  # tqdm not installed: no bar, no error
    quiet = _Tty()
    with Progress(1000, "stats", quiet, delay=0) as bar:
        bar.advance(5)
        bar.advance(5)
    assert quiet.getvalue() == "" and bar.done == 10
