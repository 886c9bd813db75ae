"""rau language models (seed 003): predictions against what real rau built.

Ground truth: ``fixtures/rau/seed003_*.json`` (every configuration of seed 003, recorded from the
models rau 0.2.0 and rau's differentiable-stacks branch built) and the committed rau model
directories with their ``*.truth.json``; the counts in ``SEED`` are copied from seed 003.
"""

from __future__ import annotations

import json

import pytest

from inspector.adapters.errors import FormatError, UsageError
from inspector.adapters.registry import load
from inspector.formulas import core
from inspector.formulas.core import tied_to
from inspector.formulas.rau import parse_layers

from conftest import FIXTURES, load_truth, run_cli

RAU = FIXTURES / "rau"
RECORDED = [m for f in sorted(RAU.glob("seed003_*.json")) for m in load_truth(f)["models"]]
CHECKPOINTS = sorted(RAU.glob("*/**/*.truth.json"))
ARCHS = ("rau-lstm", "rau-rnn", "rau-transformer", "rau-stack-rnn", "rau-stack-transformer")

# Seed 003's "Empirical Parameter Counts" (vocab 64, 3 layers; heads 4, ff 4d), as printed.
SEED = [
    ("rau-lstm", {"hidden_units": 32}, 27_104),
    ("rau-lstm", {"hidden_units": 64}, 103_360),
    ("rau-lstm", {"hidden_units": 128}, 403_328),
    *[("rau-transformer", {"d_model": d, "feedforward_size": 4 * d}, n) for d, n in
      ((32, 40_224), (48, 87_984), (56, 118_776), (64, 154_176), (128, 603_264))],
    *[("rau-stack-rnn", {"hidden_units": h, "stack_size": s}, n) for h, s, n in
      ((32, 20, 30_423), (32, 32, 32_355), (32, 64, 37_507),
       (64, 20, 109_975), (64, 32, 113_827), (64, 64, 124_099))],
    # the notebook's layer string "<d_model>-<num_layers>.superposition-<s>.<num_stack_layers>"
    *[("rau-stack-transformer",
       {"d_model": d, "feedforward_size": 4 * d, "layers": f"{d}-1.superposition-{s}.1"}, n)
      for d, s, n in ((16, 16, 59_568), (20, 8, 111_340), (20, 16, 111_660), (24, 16, 187_848))],
]


def predict(arch: str, hp: dict) -> core.Prediction:
    a = core.get(arch)
    return a.predict(a.resolve(hp))


@pytest.mark.parametrize("arch,hp,count", SEED, ids=lambda x: str(x))
def test_seed003_counts(arch, hp, count):
    base = {"vocab_size": 64, "num_layers": 3, "num_heads": 4}
    a = core.get(arch)
    base = {k: v for k, v in base.items() if k in {h.name for h in a.hparams}}
    assert predict(arch, {**base, **hp}).total() == count


@pytest.mark.parametrize("model", RECORDED, ids=lambda m: m["note"].split(";")[0])
def test_prediction_is_what_rau_built(model):
    """Every name, shape and their order as rau's state_dict had them; tied once."""
    pred = predict(model["arch"], model["hyperparameters"])
    assert [(t.name, list(t.shape)) for t in pred.tensors] == [
        (t["stored_name"], t["shape"]) for t in model["tensors"]]
    assert pred.total() == model["parameter_count"]
    tied = [sorted([t.name, tied_to(t)]) for t in pred.tensors if tied_to(t)]
    assert sorted(tied) == sorted(sorted(g) for g in model["tied"])


@pytest.mark.parametrize("truth_path", CHECKPOINTS, ids=lambda p: p.parent.name)
def test_checkpoint_matches_prediction(truth_path):
    """The committed rau model directories: hyperparameters from rau's kwargs.json, shapes from
    the file, counts from the truth rau recorded."""
    truth = load_truth(truth_path)
    ckpt = load(truth_path.with_name(truth["file"]))
    a = core.get(truth["arch"])
    found = a.from_checkpoint(ckpt)
    pred = a.predict(a.resolve({**truth["hyperparameters"], **found}))
    assert pred.shapes() == {t.name: tuple(t.shape) for t in ckpt.tensors}
    assert pred.total() == truth["parameter_count"]
    inferred = a.infer(ckpt)
    for k, v in inferred.items():
        assert truth["hyperparameters"].get(k, a.defaults()[k]) == v or k == "vocab_size", k
    recognised = [n for n in ARCHS if core.get(n).applies(ckpt)]
    assert recognised == [truth["arch"]]


def test_kwargs_json_gives_the_hyperparameters():
    ckpt = load(RAU / "stack_transformer_mixed" / "parameters.pt")
    got = core.get("rau-stack-transformer").from_checkpoint(ckpt)
    assert got["layers"] == "2.superposition-6.1.superposition-4"
    assert (got["d_model"], got["num_heads"], got["feedforward_size"]) == (12, 3, 20)
    assert core.get("rau-lstm").from_checkpoint(ckpt) == {}


def test_notebook_layer_string_is_read_as_rau_reads_it():
    parsed, notes = parse_layers("16-1.superposition-16.1")
    assert parsed == [("transformer", 16), ("superposition", 16), ("transformer", 1)]
    assert notes == ["rau reads layer part '16-1' as 16 standard layers and ignores '-1'"]


def test_structured_stack_transformer_is_the_meant_model():
    """num_layers=1, num_stack_layers=1 (the notebook's intent) = rau's "1.superposition-16"."""
    meant = next(m for m in RECORDED if m["hyperparameters"].get("layers") == "1.superposition-16"
                 and m["hyperparameters"]["d_model"] == 16)
    hp = {"vocab_size": 64, "d_model": 16, "feedforward_size": 64, "num_layers": 1,
          "num_stack_layers": 1, "stack_size": 16}
    assert predict("rau-stack-transformer", hp).total() == meant["parameter_count"] == 7_088


def test_stack_size_changes_only_stack_dependent_tensors():
    a = predict("rau-stack-rnn", {"hidden_units": 32, "stack_size": 20}).shapes()
    b = predict("rau-stack-rnn", {"hidden_units": 32, "stack_size": 21}).shapes()
    changed = sorted(n for n in a if a[n] != b[n])
    assert changed == [
        "first.first.second.controller.rnn.weight_ih_l0",
        "first.first.second.push_value_layer.linear.bias",
        "first.first.second.push_value_layer.linear.weight",
    ]


@pytest.mark.parametrize("arch,hp,message", [
    ("rau-transformer", {"d_model": 30, "num_heads": 4}, "divisible by num_heads"),
    ("rau-lstm", {"hidden_units": 0}, "hidden_units must be at least 1"),
    ("rau-stack-transformer", {"layers": "2.nondeterministic-3-3-5"}, "nondeterministic"),
    ("rau-stack-transformer", {"layers": "2.stratification-4"}, "not a stack transformer"),
    ("rau-transformer", {"output_vocab_size": 99}, "cannot exceed vocab_size"),
])
def test_refused_hyperparameters(arch, hp, message):
    with pytest.raises(UsageError, match=message):
        predict(arch, hp)


def test_bad_kwargs_json_is_a_format_error(tmp_path):
    src = RAU / "rnn_h24"
    (tmp_path / "parameters").mkdir()
    (tmp_path / "parameters" / "main.pt").write_bytes((src / "parameters" / "main.pt").read_bytes())
    (tmp_path / "kwargs.json").write_text("{not json")
    ckpt = load(tmp_path / "parameters" / "main.pt")
    with pytest.raises(FormatError, match="kwargs"):
        core.get("rau-rnn").from_checkpoint(ckpt)


def test_recorded_truth_is_from_rau():
    for f in RAU.glob("seed003_*.json"):
        assert json.loads(f.read_text())["producer"]["framework"] == "rau"


@pytest.mark.parametrize("truth_path", CHECKPOINTS, ids=lambda p: p.parent.name)
def test_check_passes_with_nothing_given_and_groups_by_rau(truth_path):
    """`inspector check` finds the arch and its hyperparameters on its own (kwargs.json beside
    the file or its parent, shapes otherwise); the rau scheme is chosen and leaves nothing in
    `other`; the group totals add up to rau's own count."""
    from inspector.grouping import choose_scheme, group_counts

    truth = load_truth(truth_path)
    path = truth_path.with_name(truth["file"])
    proc = run_cli("check", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["arch"] == truth["arch"]
    ckpt = load(path)
    scheme = choose_scheme([t.name for t in ckpt.tensors], ckpt.format)
    assert scheme.name == "rau"
    counts = group_counts(scheme, [(t.name, t.numel) for t in ckpt.unique()])
    assert "other" not in counts, counts
    assert sum(counts.values()) == truth["parameter_count"]
