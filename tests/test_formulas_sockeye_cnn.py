"""``sockeye-cnn`` against the real Sockeye 1 ConvS2S model (fixtures/sockeye, truth recorded by
the producer) and, where the Sockeye 1 venv exists, against the shapes MXNet infers for Sockeye's
own encoder/decoder/output-layer classes in configurations no fixture covers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from inspector.adapters.errors import UsageError
from inspector.adapters.registry import load
from inspector.formulas import get
from inspector.formulas.check import check, detect_arch
from tests.conftest import FIXTURES, load_truth, run_cli

MODEL = FIXTURES / "sockeye" / "sockeye1_cnn_l2-2_e16_h16_k3"
TRUTH = load_truth(MODEL / "params.best.truth.json")
SOCKEYE1 = Path("/opt/venvs/sockeye1/bin/python")
SETTINGS = ["source_vocab_size=24", "target_vocab_size=22", "num_layers=2:2",
            "num_embed=16:16", "cnn_num_hidden=16", "cnn_kernel_width=3:3", "max_seq_len=10:10"]


def _truth_shapes() -> dict[str, tuple[int, ...]]:
    return {t["stored_name"].removeprefix("arg:"): tuple(t["shape"]) for t in TRUTH["tensors"]}


def test_cli_check_passes_with_args_yaml():
    r = run_cli("check", str(MODEL), "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["status"] == "ok" and rep["arch"] == "sockeye-cnn"
    assert rep["totals"]["predicted"] == TRUTH["sockeye_logged_parameter_count"] == 8246
    assert rep["hyperparameters"]["cnn_kernel_width"] == {"value": "3:3", "source": "checkpoint", "used": True}


def test_prediction_is_the_stored_tensor_list():
    ckpt = load(str(MODEL))
    assert detect_arch(ckpt).name == "sockeye-cnn"
    result = check(ckpt)
    assert result.ok and not result.inferred()
    assert get("sockeye-cnn").predict(result.hparams).shapes() == _truth_shapes()


def test_checks_from_shapes_alone():
    ckpt = load(str(MODEL))
    ckpt.hyperparameters = {}
    result = check(ckpt)
    assert result.ok, result.to_dict()
    assert result.arch == "sockeye-cnn" and "cnn_kernel_width" in result.inferred()
    assert result.predicted_total == TRUTH["sockeye_logged_parameter_count"]


# One hyperparameter changed -> exactly the tensors that depend on it (read off Sockeye's code).
CONVS = {f"{s}_cnn_{i}_conv_{leaf}" for s in ("encoder", "decoder") for i in (0, 1)
         for leaf in ("weight", "bias")}
ONE_CHANGE = [
    ({"cnn_kernel_width": "3:5"}, {"decoder_cnn_0_conv_weight", "decoder_cnn_1_conv_weight"}),
    ({"cnn_kernel_width": "5:3"}, {"encoder_cnn_0_conv_weight", "encoder_cnn_1_conv_weight"}),
    ({"cnn_num_hidden": 8}, CONVS | {"encoder_cnn_i2h_weight", "decoder_cnn_i2h_weight",
                                     "target_output_weight"}),
    ({"cnn_activation_type": "relu"}, CONVS),
    ({"num_embed": "12:16"}, {"source_embed_weight", "source_pos_embed_weight",
                              "encoder_cnn_i2h_weight"}),
    ({"max_seq_len": "10:20"}, {"target_pos_embed_weight"}),
    ({"cnn_positional_embedding_type": "fixed"}, {"source_pos_embed_weight",
                                                  "target_pos_embed_weight"}),
    ({"num_layers": "3:2"}, {"encoder_cnn_2_conv_weight", "encoder_cnn_2_conv_bias"}),
    ({"cnn_project_qkv": "true"}, {f"decoder_cnn_{i}_dense{j}_{leaf}" for i in (0, 1)
                                   for j in (0, 1) for leaf in ("weight", "bias")}),
    ({"cnn_hidden_dropout": 0.5}, set()),
]


@pytest.mark.parametrize("change,failing", ONE_CHANGE, ids=[str(c) for c, _ in ONE_CHANGE])
def test_one_changed_hyperparameter_fails_exactly_its_tensors(change, failing):
    result = check(load(str(MODEL)), overrides=change)
    assert {i.name for i in result.issues} == failing
    assert result.ok == (not failing)


def test_cli_mismatch_names_the_group():
    r = run_cli("check", str(MODEL), "--set", "cnn_kernel_width=3:5", "--format", "json")
    assert r.returncode == 1
    rep = json.loads(r.stdout)
    assert {g["name"] for g in rep["groups"] if g["status"] == "mismatch"} == {"decoder_cnn"}


def test_predict_without_a_file():
    r = run_cli("predict", "--arch", "sockeye-cnn",
                *[a for s in SETTINGS for a in ("--set", s)], "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["total"] == TRUTH["sockeye_logged_parameter_count"]
    assert {t["name"]: tuple(t["shape"]) for t in rep["tensors"]} == _truth_shapes()


def test_inconsistent_hyperparameters_are_usage_errors():
    arch = get("sockeye-cnn")
    with pytest.raises(UsageError, match="odd"):
        arch.predict({"cnn_kernel_width": "4:4"})
    with pytest.raises(UsageError, match="softmax"):
        arch.predict({"weight_tying": True, "num_embed": "512:256"})
    r = run_cli("predict", "--arch", "sockeye-cnn", "--set", "cnn_activation_type=gelu")
    assert r.returncode == 2 and "glu" in r.stderr


# Builds Sockeye 1's encoder, decoder and output layer the way model.py does (prefix "") and
# prints the parameter shapes MXNet infers: ground truth for options the fixture does not use.
PROBE = """
import json, sys, mxnet as mx
from sockeye import convolution, decoder, encoder, layers
c = json.loads(sys.argv[1])
def conv(k):
    return convolution.ConvolutionConfig(kernel_width=k, num_hidden=c["h"], act_type=c["act"],
                                         weight_normalization=c["wn"])
enc = encoder.get_encoder(encoder.ConvolutionalEncoderConfig(
    num_embed=c["se"], max_seq_len_source=c["ls"] + 1, cnn_config=conv(c["ks"]),
    num_layers=c["sn"], positional_embedding_type=c["pos"]), prefix="")
dec = decoder.get_decoder(decoder.ConvolutionalDecoderConfig(
    cnn_config=conv(c["kt"]), max_seq_len_target=c["lt"] + 1, num_embed=c["te"],
    encoder_num_hidden=c["h"], num_layers=c["tn"], positional_embedding_type=c["pos"],
    project_qkv=c["qkv"], hidden_dropout=0.2), prefix="")
out = layers.OutputLayer(hidden_size=c["h"], vocab_size=c["vt"], weight=None,
                         weight_normalization=c["wn"], prefix="target_output_")
v = mx.sym.Variable
s, sl, n = enc.encode(v("src"), v("sl"), 10)
hidden, _ = dec.decode_sequence(s, sl, n, v("trg"), v("tl"), 10)
sym = out(mx.sym.reshape(hidden, shape=(-3, -1)))
shapes, _, _ = sym.infer_shape(src=(2, 10, c["se"]), sl=(2,), trg=(2, 10, c["te"]), tl=(2,))
print(json.dumps({k: s for k, s in zip(sym.list_arguments(), shapes)
                  if k not in ("src", "sl", "trg", "tl")}))
"""
PROBES = [
    {"act": "glu", "wn": False, "qkv": False, "pos": "learned", "ks": 3, "kt": 5, "sn": 2,
     "tn": 3, "se": 8, "te": 12, "h": 16, "ls": 10, "lt": 12, "vt": 22},
    {"act": "relu", "wn": True, "qkv": True, "pos": "fixed", "ks": 5, "kt": 2, "sn": 1,
     "tn": 2, "se": 8, "te": 12, "h": 16, "ls": 10, "lt": 12, "vt": 22},
    {"act": "tanh", "wn": False, "qkv": True, "pos": "none", "ks": 1, "kt": 4, "sn": 3,
     "tn": 1, "se": 6, "te": 6, "h": 10, "ls": 7, "lt": 7, "vt": 9},
]


@pytest.mark.skipif(not SOCKEYE1.exists(), reason="the Sockeye 1 venv is not installed")
@pytest.mark.parametrize("c", PROBES, ids=["glu-learned", "relu-wn-qkv-fixed", "tanh-qkv-none"])
def test_shapes_match_sockeye1_source_classes(c):
    r = subprocess.run([str(SOCKEYE1), "-c", PROBE, json.dumps(c)], capture_output=True,
                       text=True, timeout=300, check=True)
    real = {k: tuple(v) for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}
    pred = get("sockeye-cnn").predict({
        "cnn_activation_type": c["act"], "weight_normalization": c["wn"],
        "cnn_project_qkv": c["qkv"], "cnn_positional_embedding_type": c["pos"],
        "cnn_kernel_width": f"{c['ks']}:{c['kt']}", "num_layers": f"{c['sn']}:{c['tn']}",
        "num_embed": f"{c['se']}:{c['te']}", "cnn_num_hidden": c["h"],
        "max_seq_len": f"{c['ls']}:{c['lt']}", "target_vocab_size": c["vt"]}).shapes()
    # the probe builds no embedding tables (model.py's, shared with the other Sockeye archs)
    del pred["source_embed_weight"], pred["target_embed_weight"]
    assert pred == real
