"""PyTorch architectures (``seed001-lm``, ``torch-rnn``, ``torch-mha``, ``torch-transformer``)
against real torch: the fixtures' ``*.truth.json`` (names, shapes and counts recorded by torch at
generation time, one-hyperparameter variants included) and seed 001's stated counts."""

from __future__ import annotations

import json

import pytest

from inspector.adapters.errors import UsageError
from inspector.adapters.registry import load
from inspector.formulas import get
from inspector.formulas.check import check
from inspector.formulas.closed_form import closed_form
from inspector.formulas.core import tied_to

from conftest import FIXTURES, load_truth, run_cli

TORCH = FIXTURES / "torch"
NN_TRUTHS = sorted(TORCH.glob("nn_*.pt.truth.json"))
CLASS_ARCH = {  # torch.nn class -> (arch, fixed hyperparameters)
    "LSTM": ("torch-rnn", {"mode": "LSTM"}),
    "GRU": ("torch-rnn", {"mode": "GRU"}),
    "RNN": ("torch-rnn", {"mode": "RNN"}),
    "MultiheadAttention": ("torch-mha", {}),
    "TransformerEncoderLayer": ("torch-transformer", {"module": "encoder_layer"}),
    "TransformerDecoderLayer": ("torch-transformer", {"module": "decoder_layer"}),
    "Transformer": ("torch-transformer", {"module": "transformer"}),
}
SHAPE_ONLY = {"nonlinearity"}  # constructor arguments that change no tensor


def _nn_case(truth: dict) -> tuple[str, dict]:
    arch, fixed = CLASS_ARCH[truth["module_class"].split(".")[-1]]
    kw = {k: v for k, v in truth["hyperparameters"].items() if k not in SHAPE_ONLY}
    return arch, {**fixed, **kw}


def _predict(arch: str, hp: dict):
    a = get(arch)
    return a.predict(a.resolve(hp))


def _shapes(tensors) -> dict[str, tuple[int, ...]]:
    return {t["name"]: tuple(t["shape"]) for t in tensors}


def _changed(a: dict, b: dict) -> set[str]:
    return {n for n in set(a) | set(b) if a.get(n) != b.get(n)}


# --- seed 001 -----------------------------------------------------------------------------------

# Seed 001's outputs (num_parameters of each model, /work/shared/seeds/001_*.txt).
SEED001_STATED = [
    ({"model": "embedding"}, 1280),
    ({"model": "model1"}, 1280),
    ({"model": "mlp"}, 181),
    ({"model": "feedforward-lm"}, 1461),
    ({"model": "transformer-layer", "n_hidden": 5}, 200),  # BareBonesTransformerLayer(5, 5)
    ({"model": "transformer-lm"}, 1851),
    ({"model": "self-attention"}, 120),
]


@pytest.mark.parametrize(("hp", "count"), SEED001_STATED, ids=lambda x: str(x))
def test_seed001_stated_counts(hp, count):
    assert _predict("seed001-lm", hp).total() == count


# fixture -> (seed class as the arch names it, prefix the file adds to state_dict names)
SEED001_FIXTURES = {
    "seed001_model1.pt": ("model1", ""),
    "seed001_feedforward_lm.pt": ("feedforward-lm", ""),
    "seed001_transformer_lm.pt": ("transformer-lm", ""),
    "train_checkpoint.pt": ("feedforward-lm", "model."),
    "ddp_transformer_lm.pt": ("transformer-lm", "module."),
    "hf_model/pytorch_model.bin": ("transformer-lm", ""),
}


@pytest.mark.parametrize("name", sorted(SEED001_FIXTURES))
def test_seed001_fixture_prediction_equals_torch(name):
    model, prefix = SEED001_FIXTURES[name]
    truth = load_truth(TORCH / f"{name}.truth.json")
    hp = {"model": model, **truth["hyperparameters"]}
    pred = _predict("seed001-lm", hp)
    params = [t for t in truth["tensors"] if t["stored_name"].startswith(prefix)
              and "optimizer" not in t["stored_name"]]
    want = {t["stored_name"][len(prefix):]: tuple(t["shape"]) for t in params}
    assert list(pred.shapes().items()) == list(want.items())
    assert pred.total() == truth["parameter_count"]
    tied = {(t.name, tied_to(t)) for t in pred.tensors if tied_to(t)}
    assert tied == {(b[len(prefix):], a[len(prefix):]) for a, b in truth["tied"]}


@pytest.mark.parametrize("name", sorted(SEED001_FIXTURES) + ["../safetensors/seed001_transformer_lm.safetensors"])
def test_seed001_check_recognises_and_infers(name):
    """No --arch, no --set: the arch is recognised and the shapes give every hyperparameter."""
    ckpt = load(TORCH / name)
    res = check(ckpt)
    assert res.arch == "seed001-lm"
    if name.endswith(".safetensors"):  # save_model keeps lm_head.weight, drops its alias
        assert res.predicted_total == res.found_total == 1851
        return
    assert res.ok, res.to_dict()["tensors"]
    model = SEED001_FIXTURES[name][0]
    assert res.hparams["model"] == model


def test_seed001_training_dict_args_are_read():
    ckpt = load(TORCH / "train_checkpoint.pt")
    res = check(ckpt)
    assert res.provenance["n_hidden"] == "checkpoint" and res.provenance["tie_weights"] == "checkpoint"


def test_seed001_hf_config_json_is_read():
    ckpt = load(TORCH / "hf_model" / "pytorch_model.bin")
    res = check(ckpt)
    assert res.ok
    assert {k for k, v in res.provenance.items() if v == "checkpoint"} == {
        "n_vocab", "emb_dim", "n_hidden", "max_len", "tie_weights"}


def test_seed001_wrong_hidden_flags_exactly_the_mlp():
    res = check(load(TORCH / "seed001_transformer_lm.pt"), get("seed001-lm"), {"n_hidden": 17})
    assert not res.ok
    assert {i.name for i in res.issues} == {
        "model.mlp.model.0.weight", "model.mlp.model.0.bias", "model.mlp.model.2.weight"}
    assert {g.name for g in res.groups if g.status != "ok"} == {"mlp"}


def test_seed001_untied_adds_the_head():
    tied = _predict("seed001-lm", {"model": "feedforward-lm"}).total()
    untied = _predict("seed001-lm", {"model": "feedforward-lm", "tie_weights": False}).total()
    assert untied - tied == 256 * 5


def test_seed001_closed_form_gives_the_seed_number():
    arch = get("seed001-lm")
    form = closed_form(arch, arch.resolve({}))
    assert form(v=256, e=5, h=16, m=50) == 1851


# --- torch.nn modules -------------------------------------------------------------------------


@pytest.mark.parametrize("truth_path", NN_TRUTHS, ids=lambda p: p.name[: -len(".truth.json")])
def test_nn_prediction_equals_torch(truth_path):
    truth = load_truth(truth_path)
    arch, hp = _nn_case(truth)
    pred = _predict(arch, hp)
    assert list(pred.shapes().items()) == list(_shapes(truth["tensors"]).items())
    assert pred.total() == truth["parameter_count"]


@pytest.mark.parametrize("truth_path", NN_TRUTHS, ids=lambda p: p.name[: -len(".truth.json")])
def test_nn_one_hyperparameter_changes_exactly_its_tensors(truth_path):
    """Each variant torch built with one constructor argument changed: the prediction equals
    torch's state_dict, so the tensors that change are exactly torch's."""
    truth = load_truth(truth_path)
    arch, hp = _nn_case(truth)
    base = _predict(arch, hp).shapes()
    torch_base = _shapes(truth["tensors"])
    assert truth["variants"]
    for v in truth["variants"]:
        pred = _predict(arch, {**hp, **v["set"]})
        torch_variant = {n: tuple(s) for n, s in v["tensors"].items()}
        assert pred.shapes() == torch_variant, v["set"]
        assert pred.total() == v["parameter_count"], v["set"]
        assert _changed(base, pred.shapes()) == _changed(torch_base, torch_variant) != set()


@pytest.mark.parametrize("truth_path", NN_TRUTHS, ids=lambda p: p.name[: -len(".truth.json")])
def test_nn_check_passes_from_the_file_alone(truth_path):
    truth = load_truth(truth_path)
    arch, hp = _nn_case(truth)
    res = check(load(truth_path.with_name(truth["file"])))
    assert res.arch == arch and res.ok, res.to_dict()["tensors"]
    determined = {k: v for k, v in hp.items() if k not in ("num_heads", "nhead")}
    assert {k: res.hparams[k] for k in determined} == determined


@pytest.mark.parametrize("truth_path", NN_TRUTHS, ids=lambda p: p.name[: -len(".truth.json")])
def test_nn_check_flags_exactly_the_dependent_tensors(truth_path):
    """The producer's file, checked with one hyperparameter set as in a torch variant: the
    flagged tensors are exactly those whose name or shape differs between the two torch models."""
    truth = load_truth(truth_path)
    arch, hp = _nn_case(truth)
    ckpt = load(truth_path.with_name(truth["file"]))
    torch_base = _shapes(truth["tensors"])
    for v in truth["variants"]:
        res = check(ckpt, get(arch), {**hp, **v["set"]})
        torch_variant = {n: tuple(s) for n, s in v["tensors"].items()}
        assert not res.ok
        assert {i.name for i in res.issues} == _changed(torch_base, torch_variant), v["set"]


def test_legacy_rnn_fixtures_check():
    """The adapter fixtures written earlier (their truth records torch's constructor)."""
    for name in ("lstm_bidir.pt", "lstm_proj.pt", "gru.pt", "lstm_bidir_legacy.pt"):
        truth = load_truth(TORCH / f"{name}.truth.json")
        hp = {("mode" if k == "cell" else k): v for k, v in truth["hyperparameters"].items()}
        res = check(load(TORCH / name))
        assert res.arch == "torch-rnn" and res.ok, name
        assert res.predicted_total == truth["parameter_count"]
        assert {k: res.hparams[k] for k in hp} == hp


def test_training_dict_args_give_rnn_hyperparameters():
    res = check(load(TORCH / "nn_gru_train_checkpoint.pt"))
    assert res.ok
    assert res.provenance["mode"] == "checkpoint" and res.provenance["hidden_size"] == "checkpoint"


def test_closed_form_matches_torch_counts():
    truth = load_truth(TORCH / "nn_gru_bidir.pt.truth.json")
    arch = get("torch-rnn")
    form = closed_form(arch, arch.resolve({"mode": "GRU", "bidirectional": True}))
    assert form(i=4, h=5, n=2) == truth["parameter_count"]
    for v in truth["variants"]:
        point = {"i": 4, "h": 5, "n": 2}
        key = {"input_size": "i", "hidden_size": "h", "num_layers": "n"}.get(next(iter(v["set"])))
        if key:
            point[key] = next(iter(v["set"].values()))
            assert form(**point) == v["parameter_count"]


@pytest.mark.parametrize(("arch", "hp"), [
    ("torch-rnn", {"mode": "GRU", "proj_size": 2, "hidden_size": 4}),
    ("torch-rnn", {"mode": "LSTM", "proj_size": 4, "hidden_size": 4}),
    ("torch-mha", {"embed_dim": 10, "num_heads": 3}),
    ("torch-transformer", {"d_model": 10, "nhead": 4}),
])
def test_invalid_combinations_are_usage_errors(arch, hp):
    with pytest.raises(UsageError):
        _predict(arch, hp)


def test_predict_cli_prints_seed_total():
    r = run_cli("predict", "--arch", "seed001-lm", "--set", "model=transformer-layer",
                "--set", "n_hidden=5", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total"] == 200


def test_check_cli_exit_codes():
    ok = run_cli("check", str(TORCH / "nn_lstm_bidir_proj.pt"))
    bad = run_cli("check", str(TORCH / "nn_lstm_bidir_proj.pt"), "--set", "proj_size=2")
    assert (ok.returncode, bad.returncode) == (0, 1), ok.stdout + bad.stdout
    assert "weight_hr_l0" in bad.stdout
