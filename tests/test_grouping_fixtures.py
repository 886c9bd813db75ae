"""Every real fixture gets its own scheme by detection, nothing lands in ``other``, and the per-group
counts equal those computed here from the producer's ground truth (``*.truth.json``: the names,
sizes and tied groups the framework reported; Sockeye's logged parameter count).

The expected group of each truth tensor is decided by the small tables below, written from the
frameworks' own naming (Sockeye's module prefixes, torch's state-dict keys, Keras' layer list),
not by the scheme files under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import inspector
from inspector import grouping

from conftest import FIXTURES, load_truth, sockeye_true_count


def _stored_to_canonical(name: str) -> str:
    for p in ("arg:", "aux:", "module."):
        if name.startswith(p):
            return name[len(p):]
    return name


# -- Sockeye --

SOCKEYE_RNN = (  # (name prefix, group), first match; from sockeye 1.18 rnn.py/rnn_attention.py/coverage.py
    ("length_ratio_layer_", "length_ratio"), ("encoder_char_", "conv_embed"),  # layers.py, encoder.py
    ("encoder_transformer_", "encoder_transformer"),  # --encoder transformer --decoder rnn
    ("decoder_rnn_enc2decinit_", "enc2decinit"), ("decoder_rnn_hidden_", "hidden"),
    ("decoder_rnn_l", "decoder_lx"), ("encoder_birnn_", "birnn"), ("encoder_rnn_l", "encoder_lx"),
    ("decoder_rnn_att_", "attention"), ("cov_", "coverage"), ("decoder_rnn_gate_", "context_gating"),
    ("decoder_rnn_mapped_", "context_gating"), ("source_", "io"), ("target_", "io"),
)


def _sockeye_transformer(name: str) -> str:
    if "length_ratio" in name:  # layers.py LengthRatio
        return "length_ratio"
    if name.startswith("encoder_char_"):  # encoder.py ConvolutionalEmbeddingEncoder
        return "conv_embed"
    if name.startswith("nvs."):  # Sockeye 3 nvs.py
        return "vocab_selection"
    if "lhuc" in name:  # layers.py LHUC in each transformer block
        return "lhuc"
    if "norm" in name:
        return "layer_norms"
    if "pos_embed" in name:
        return "positional"
    if "embed" in name:
        return "embeddings"
    if name.startswith(("target_output", "output_layer", "factor_output_layers")):
        return "output_layer"
    side = "encoder" if name.startswith("encoder") else "decoder"
    if any(k in name for k in ("att_self", "self_attention", "autoregr")):
        return f"{side}_self_attention"
    if "att_enc" in name or "enc_attention" in name:
        return "decoder_encoder_attention"
    assert "_ff_" in name or ".ff." in name, name
    return f"{side}_feed_forward"


def _sockeye_cnn(name: str) -> str:
    if "pos_embed" in name:
        return "positional"
    if "embed" in name:
        return "embeddings"
    if name.startswith("target_output"):
        return "output_layer"
    return "encoder_cnn" if name.startswith("encoder") else "decoder_cnn"


def _by_prefix(table):
    return lambda name: next(g for p, g in table if name.startswith(p))


SOCKEYE_DIRS = sorted(p for p in (FIXTURES / "sockeye").iterdir() if p.is_dir())


def _sockeye_expected(d: Path):
    if d.name.startswith(("sockeye1_rnn", "sockeye1_transformer-rnn")):
        return "sockeye-rnn", _by_prefix(SOCKEYE_RNN)
    if d.name.startswith("sockeye1_cnn"):
        return "sockeye-cnn", _sockeye_cnn
    return "sockeye-transformer", _sockeye_transformer


def _truth_counts(truth: dict, classify, tied: list[list[str]] = ()) -> dict[str, int]:
    """Per-group element counts over the truth's tensors, each tied group counted once."""
    skip = {n for group in tied for n in group[1:]}
    out: dict[str, int] = {}
    for t in truth["tensors"]:
        if t["stored_name"] in skip or t["stored_name"].startswith("aux:"):
            continue
        g = classify(_stored_to_canonical(t["stored_name"]))
        out[g] = out.get(g, 0) + t["numel"]
    return out


def _listing_groups(path: Path) -> tuple[dict, dict[str, int]]:
    report = inspector.listing(inspector.load(path, allow_unsafe=True))
    return report, {g["name"]: g["elements"] for g in report["groups"]}


@pytest.mark.parametrize("model_dir", SOCKEYE_DIRS, ids=lambda p: p.name)
def test_sockeye_fixture_scheme_and_group_counts(model_dir):
    truth_file = next(model_dir.glob("params.best.truth.json"), None) or next(model_dir.glob("*.truth.json"))
    truth = load_truth(truth_file)
    scheme, classify = _sockeye_expected(model_dir)
    report, got = _listing_groups(model_dir)
    assert report["scheme"]["name"] == scheme and report["scheme"]["auto"]
    assert "other" not in got
    expected = _truth_counts(truth, classify, truth.get("shared_groups", []))
    assert got == expected
    assert list(got) == [g for g in _order(scheme) if g in got]  # scheme order
    assert sum(got.values()) == sockeye_true_count(truth)  # Sockeye's own log line


def _order(scheme: str) -> list[str]:
    return [g.name for g in grouping.get_scheme(scheme).groups]


# -- PyTorch / safetensors --

def _seed001(name: str) -> str:  # seed 001's modules (fixtures/torch/fixture_models.py)
    for key, group in (("word_to_embedding", "token_embedding"), ("pos_to_embedding", "position_embedding"),
                       ("norm", "norms"), ("self_attention", "attention"), ("mlp", "mlp"),
                       ("model.model.", "mlp"), ("lm_head", "lm_head"), ("optimizer.", "optimizer")):
        if key in name:
            return group
    raise AssertionError(name)


def _fvcore_depth1(name: str) -> str:
    if "." in name:
        return name.split(".")[0]
    return name.split("_")[0] if "_" in name else name


TORCH = {  # fixture -> (scheme, classifier of the truth's names)
    "torch/gru.pt": ("torch-rnn", lambda n: "rnn"),
    "torch/lstm_bidir.pt": ("torch-rnn", lambda n: "rnn"),
    "torch/lstm_bidir_legacy.pt": ("torch-rnn", lambda n: "rnn"),
    "torch/lstm_proj.pt": ("torch-rnn", lambda n: "rnn"),
    "torch/seed001_model1.pt": ("transformer-lm", _seed001),
    "torch/seed001_model1_legacy.pt": ("transformer-lm", _seed001),
    "torch/seed001_feedforward_lm.pt": ("transformer-lm", _seed001),
    "torch/seed001_transformer_lm.pt": ("transformer-lm", _seed001),
    "torch/ddp_transformer_lm.pt": ("transformer-lm", _seed001),
    "torch/hf_model/pytorch_model.bin": ("transformer-lm", _seed001),
    "torch/train_checkpoint.pt": ("transformer-lm", _seed001),
    "safetensors/seed001_transformer_lm.safetensors": ("transformer-lm", _seed001),
    "safetensors/sharded/model.safetensors.index.json": ("transformer-lm", _seed001),
    "torch/tied_bn_module.pt": ("prefix", _fvcore_depth1),
    "torch/dtype_zoo.pt": ("prefix", _fvcore_depth1),
    "safetensors/dtype_zoo.safetensors": ("prefix", _fvcore_depth1),
}


def _truth_tensors(path: Path) -> dict:
    truth = load_truth(Path(f"{path}.truth.json"))
    if isinstance(truth["tensors"], dict):  # sharded index truth: name -> record
        truth["tensors"] = [{"stored_name": k, **v} for k, v in truth["tensors"].items()]
    for t in truth["tensors"]:
        t.setdefault("numel", math.prod(t["shape"]))
    return truth


@pytest.mark.parametrize("rel", sorted(TORCH))
def test_torch_fixture_scheme_and_group_counts(rel):
    scheme, classify = TORCH[rel]
    path = FIXTURES / rel
    truth = _truth_tensors(path)
    tied = truth.get("tied") or []
    if isinstance(tied, str):
        tied = json.loads(tied)
    report, got = _listing_groups(path)
    assert report["scheme"]["name"] == scheme
    assert "other" not in got
    expected = _truth_counts(truth, classify, tied)
    assert {g: n for g, n in got.items() if n} == {g: n for g, n in expected.items() if n}


def test_torch_rnn_layer_and_direction_subtotals():
    path = FIXTURES / "torch/lstm_bidir.pt"
    hp = load_truth(Path(f"{path}.truth.json"))["hyperparameters"]
    h, i = hp["hidden_size"], hp["input_size"]
    (g,) = inspector.listing(inspector.load(path))["groups"]
    got = {(r["layer"], r["direction"]): r["parameters"] for r in g["layers"]}
    # nn.LSTM: 4h x in + 4h x h + two 4h biases per layer and direction; layer 1 sees 2h inputs
    per = {0: 4 * h * i + 4 * h * h + 8 * h, 1: 4 * h * 2 * h + 4 * h * h + 8 * h}
    assert got == {(str(k), d): v for k, v in per.items() for d in (None, "reverse")}


# -- MXNet: format fixtures without a model; their own scheme is prefix --

MXNET = sorted(p for p in (FIXTURES / "mxnet").rglob("*.truth.json"))


@pytest.mark.parametrize("truth_file", MXNET, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_mxnet_fixtures_group_by_prefix(truth_file):
    path = Path(str(truth_file)[: -len(".truth.json")])
    truth = load_truth(truth_file)
    report, got = _listing_groups(path)
    assert report["scheme"]["name"] == "prefix"
    assert "other" not in got
    assert sum(got.values()) == sum(t["numel"] for t in truth["tensors"])


# -- Keras: built against the truth's variable paths (the Keras adapter's canonical names) --

KERAS = sorted((FIXTURES / "keras").glob("*.truth.json"))


def _keras_name(w: dict) -> str:
    # a model reloaded where it was built (TF 1.x scopes lstm_1_1/): the name it was built with
    name = w.get("path") or w.get("name_as_built") or w["name"]
    return name[:-2] if name.endswith(":0") else name


def _keras_expected(truth: dict) -> tuple[list[tuple[str, int]], dict[str, int]]:
    """(name, numel) items and the expected group counts: one group per layer with weights, in
    the layer list's order; a nested model's layers as ``model/layer``; optimizer variables."""
    items, expected = [], {}
    for layer in truth["layers"]:
        parts = [layer]
        if layer["class_name"] in ("Sequential", "Functional", "Model") and layer.get("sublayers"):
            parts = layer["sublayers"]
        for part in parts:
            if not part["weights"]:
                continue
            first = _keras_name(part["weights"][0])
            if part["name"] + "/" not in first:
                # a nested model whose truth records no sublayers (tf.keras 2): its weights are
                # named after its own layers ("proj/kernel:0" inside model "feature")
                for w in part["weights"]:
                    head = _keras_name(w).split("/", 1)[0]
                    expected[head] = expected.get(head, 0) + math.prod(w["shape"])
                    items.append((_keras_name(w), math.prod(w["shape"])))
                continue
            head = first[: first.index(part["name"] + "/") + len(part["name"])]
            expected[head] = part["count_params"]
            items += [(_keras_name(w), math.prod(w["shape"])) for w in part["weights"]]
    opt = [(_keras_name(w), math.prod(w["shape"])) for w in truth.get("optimizer_variables") or []]
    if opt:
        items += opt
        expected["optimizer"] = sum(n for _, n in opt)
    return items, expected


@pytest.mark.parametrize("truth_file", KERAS, ids=lambda p: p.name)
def test_keras_truth_paths_group_by_layer(truth_file):
    items, expected = _keras_expected(load_truth(truth_file))
    s = grouping.choose_scheme([n for n, _ in items])
    assert s.name == "keras"
    got = grouping.group_counts(s, items)
    assert "other" not in got
    assert got == expected
    assert list(got) == list(expected)  # the layer list's order, optimizer last


@pytest.mark.parametrize("truth_file", KERAS, ids=lambda p: p.name)
def test_keras_real_listing(truth_file):
    pytest.importorskip("inspector.adapters.keras")
    path = Path(str(truth_file)[: -len(".truth.json")])
    _, expected = _keras_expected(load_truth(truth_file))
    report, got = _listing_groups(path)
    assert report["scheme"]["name"] == "keras"
    assert "other" not in got
    assert {g: n for g, n in got.items() if g != "optimizer"} == {
        g: n for g, n in expected.items() if g != "optimizer"}
