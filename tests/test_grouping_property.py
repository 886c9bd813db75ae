"""For any checkpoint and any scheme: every tensor is in exactly one group and the group totals
sum exactly to the checkpoint's totals (tied tensors counted once everywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inspector
from inspector import grouping
from inspector.adapters.model import Checkpoint, Role, TensorEntry

from conftest import FIXTURES, load_truth, truth_files

SCHEMES = grouping.builtin_names()
SEGMENT = st.sampled_from(
    ["encoder", "decoder", "layers", "h", "0", "1", "12", "attn", "self_attention", "mlp",
     "weight", "bias", "weight_ih_l0", "bias_hh_l1_reverse", "rnn", "l0", "birnn", "forward",
     "kernel", "lstm_cell", "embed", "norm", "ln_f", "wte", "", "x y", "ü"]
)
NAME = st.tuples(st.lists(SEGMENT, min_size=1, max_size=5), st.sampled_from([".", "_", "/"])).map(
    lambda p: p[1].join(p[0])
) | st.text(max_size=12)


@st.composite
def checkpoints(draw) -> Checkpoint:
    names = draw(st.lists(NAME, min_size=0, max_size=25))
    tensors = []
    for i, name in enumerate(names):
        shape = tuple(draw(st.lists(st.integers(0, 7), max_size=3)))
        role = draw(st.sampled_from(list(Role)))
        # a few tensors share a storage with an earlier one of the same shape (tied weights)
        tie = draw(st.booleans()) and any(t.shape == shape for t in tensors)
        storage = next(t.storage for t in tensors if t.shape == shape) if tie else f"s{i}"
        n = 1
        for d in shape:
            n *= d
        tensors.append(TensorEntry(f"{name}#{i}", name, shape, "float32", role, nbytes=4 * n,
                                   storage=storage, offset=0))
    return Checkpoint(("generated",), "generated", tensors)


def assert_groups_partition(report: dict) -> None:
    groups, totals = report["groups"], report["totals"]
    assert sum(g["tensors"] for g in groups) == totals["tensors"] == len(report["tensors"])
    assert sum(g["parameters"] for g in groups) == totals["parameters"]
    assert sum(g["elements"] for g in groups) == totals["all"]
    assert sum(g["bytes"] for g in groups) == totals["bytes"]
    assert sum(g["tied_aliases"] for g in groups) == totals["tied_aliases"]
    names = [g["name"] for g in groups]
    assert len(names) == len(set(names))
    for t in report["tensors"]:  # each tensor names exactly one of the listed groups
        assert t["group"] in names
    for g in groups:
        members = [t for t in report["tensors"] if t["group"] == g["name"]]
        assert len(members) == g["tensors"]
        if "layers" in g:  # per-layer subtotals cover the layer-captured part of the group
            layered = [t for t in members if "layer" in t]
            assert sum(r["tensors"] for r in g["layers"]) == len(layered)
            assert sum(r["elements"] for r in g["layers"]) <= g["elements"]
            assert sum(r["count"] for r in g["repeats"]) == len(g["layers"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ckpt=checkpoints(), scheme=st.sampled_from([*SCHEMES, "auto"]), depth=st.integers(1, 4))
def test_generated_checkpoints(ckpt, scheme, depth):
    report = inspector.listing(ckpt, scheme=scheme, scheme_params={"depth": depth})
    assert_groups_partition(report)


# Truths that describe no single checkpoint: configurations that carry code (what a loader ran)
# and a store of many checkpoints (its lineage edges).
NOT_CHECKPOINTS = ("code_config", "lineage")


def _refused(truth_path: Path) -> bool:
    """A truth of an input the producer says is no checkpoint (look-alikes, several checkpoints
    in one folder): tests/test_dirs.py checks those are refused."""
    if truth_path.relative_to(FIXTURES).parts[0] in NOT_CHECKPOINTS:
        return True
    truth = load_truth(truth_path)
    files = truth.get("files")
    return ("format" in truth and truth["format"] is None) or (
        "format" not in truth and isinstance(files, dict)
        and all(isinstance(f, dict) and f.get("format") is None for f in files.values()))


def _opened(truth_path: Path) -> str:
    """What a truth describes: its ``open`` path (beside the truth) when it names one."""
    if truth_path.parent.parent.name == "sockeye":
        return str(truth_path.parent)
    opened = load_truth(truth_path).get("open")
    return str(truth_path.parent / opened) if isinstance(opened, str) \
        else str(truth_path)[: -len(".truth.json")]


REAL = sorted({
    _opened(p)
    for p in truth_files()
    if "sharded/model-" not in str(p) and Path(str(p)[: -len(".truth.json")]).exists()
    and not _refused(p)
})


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(Path(p).relative_to(FIXTURES)))
def test_real_fixtures_every_scheme(path):
    ckpt = inspector.load(path, allow_unsafe=True)  # every fixture opens (read only)
    for scheme in SCHEMES:
        assert_groups_partition(inspector.listing(ckpt, scheme=scheme))
