"""Sockeye architectures against real Sockeye models (fixtures/sockeye, truth from the producer)
and against seed 000's hand calculation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from inspector.adapters.errors import UsageError
from inspector.adapters.registry import load
from inspector.formulas import get
from inspector.formulas.check import check, detect_arch
from tests.conftest import FIXTURES, load_truth, sockeye_true_count

SOCKEYE = FIXTURES / "sockeye"
MODELS = sorted(p for p in SOCKEYE.iterdir() if p.is_dir() and "_cnn_" not in p.name)
BIG = Path("/work/big/sockeye_seed000/model")

# Seed 000, section 2: every parameter of the lstm 512:512, hidden 512, 2:2 model.
SEED000 = {
    "decoder_rnn_enc2decinit_0_bias": (512,), "decoder_rnn_enc2decinit_0_weight": (512, 512),
    "decoder_rnn_enc2decinit_1_bias": (512,), "decoder_rnn_enc2decinit_1_weight": (512, 512),
    "decoder_rnn_enc2decinit_2_bias": (512,), "decoder_rnn_enc2decinit_2_weight": (512, 512),
    "decoder_rnn_enc2decinit_3_bias": (512,), "decoder_rnn_enc2decinit_3_weight": (512, 512),
    "decoder_rnn_hidden_bias": (512,), "decoder_rnn_hidden_weight": (512, 1024),
    "decoder_rnn_l0_h2h_bias": (2048,), "decoder_rnn_l0_h2h_weight": (2048, 512),
    "decoder_rnn_l0_i2h_bias": (2048,), "decoder_rnn_l0_i2h_weight": (2048, 1024),
    "decoder_rnn_l1_h2h_bias": (2048,), "decoder_rnn_l1_h2h_weight": (2048, 512),
    "decoder_rnn_l1_i2h_bias": (2048,), "decoder_rnn_l1_i2h_weight": (2048, 512),
    "encoder_birnn_forward_l0_h2h_bias": (1024,),
    "encoder_birnn_forward_l0_h2h_weight": (1024, 256),
    "encoder_birnn_forward_l0_i2h_bias": (1024,),
    "encoder_birnn_forward_l0_i2h_weight": (1024, 512),
    "encoder_birnn_reverse_l0_h2h_bias": (1024,),
    "encoder_birnn_reverse_l0_h2h_weight": (1024, 256),
    "encoder_birnn_reverse_l0_i2h_bias": (1024,),
    "encoder_birnn_reverse_l0_i2h_weight": (1024, 512),
    "encoder_rnn_l0_h2h_bias": (2048,), "encoder_rnn_l0_h2h_weight": (2048, 512),
    "encoder_rnn_l0_i2h_bias": (2048,), "encoder_rnn_l0_i2h_weight": (2048, 512),
    "source_embed_weight": (49410, 512), "target_embed_weight": (42767, 512),
    "target_output_bias": (42767,), "target_output_weight": (42767, 512),
}
SEED000_SETTINGS = {"rnn_cell_type": "lstm", "num_layers": "2:2", "num_embed": "512:512",
                    "rnn_num_hidden": 512, "rnn_attention_type": "dot",
                    "source_vocab_size": 49410, "target_vocab_size": 42767}


def _truth_shapes(model: Path) -> dict[str, tuple[int, ...]]:
    truth = load_truth(model / "params.best.truth.json")
    return {t["stored_name"].removeprefix("arg:"): tuple(t["shape"]) for t in truth["tensors"]}


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_fixture_checks_with_its_own_hyperparameters(model):
    truth = load_truth(model / "params.best.truth.json")
    result = check(load(str(model)))
    assert result.ok, result.to_dict()
    # only what args.yaml leaves open (e.g. rnn_attention_num_hidden: null) comes from shapes
    args = load(str(model)).hyperparameters["args"]
    assert all(args.get(k) is None for k in result.inferred())
    assert result.predicted_total == sockeye_true_count(truth)
    arch = get(result.arch)
    pred = arch.predict(result.hparams)
    assert pred.shapes() == _truth_shapes(model)


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_fixture_checks_from_shapes_alone(model):
    ckpt = load(str(model))
    ckpt.hyperparameters = {}
    result = check(ckpt)
    assert result.ok, result.to_dict()
    assert result.inferred()
    truth = load_truth(model / "params.best.truth.json")
    assert result.predicted_total == sockeye_true_count(truth)


def test_archs_are_recognised_by_family():
    assert detect_arch(load(str(SOCKEYE / "sockeye1_rnn_gru_l2-2_e8-6_h16_dot"))).name \
        == "sockeye-rnn"
    assert detect_arch(load(str(SOCKEYE / "sockeye3_transformer_l1-1_m16_h2_ff32"))).name \
        == "sockeye-transformer"


# One hyperparameter changed -> exactly the groups that depend on it fail (hand-derived from
# Sockeye's code: the source embedding size only reaches the embedding table and the bi-RNN's
# input, the coverage width only the coverage network and the attention's c2h, ...).
ONE_CHANGE = [
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage", {"num_embed": "12:8"}, {"io", "birnn"}),
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage", {"num_embed": "8:12"}, {"io", "decoder_lx"}),
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage", {"rnn_attention_coverage_num_hidden": 3},
     {"attention", "coverage"}),
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage", {"target_vocab_size": 23}, {"io"}),
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage", {"num_layers": "3:2"}, {"encoder_lx"}),
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage", {"num_layers": "2:3"},
     {"decoder_lx", "enc2decinit"}),
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage", {"rnn_decoder_state_init": "zero"},
     {"enc2decinit"}),
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage", {"rnn_attention_num_hidden": 8},
     {"attention"}),
    ("sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp", {"rnn_context_gating": "true"},
     {"hidden", "context_gating"}),
    ("sockeye1_rnn_gru_l1-1_e6-8_h32_location_init-zero", {"max_seq_len": "20:20"},
     {"attention"}),
    ("sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp", {"rnn_cell_type": "gru"},
     {"birnn", "decoder_lx", "enc2decinit"}),
    ("sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp", {"rnn_residual_connections": "true"}, set()),
    ("sockeye1_transformer_l2-2_m16_h2_ff32", {"transformer_feed_forward_num_hidden": "64:32"},
     {"encoder_feed_forward"}),
    ("sockeye3_transformer_l1-1_m16_h2_ff32", {"transformer_preprocess": "n:"},
     {"layer_norms"}),
    # the issue-15 options: each reaches exactly the groups Sockeye's code gives it
    ("sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_wn", {"weight_normalization": "false"}, {"io"}),
    ("sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_lt-ratio", {"length_task_layers": 2},
     {"length_ratio"}),
    ("sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_sf1-concat4", {"source_factors_num_embed": "6"},
     {"io", "birnn"}),
    ("sockeye1_rnn_gru_l1-1_e8-8_h16_dot_sf2-sum", {"source_factors_combine": "concat",
                                                    "source_factors_num_embed": "8,8"},
     {"birnn"}),
    ("sockeye1_rnnconv_l1-1_e8-8_h16_mlp_w2-f3-5_s2_hw2_out10_pos",
     {"conv_embed_num_highway_layers": 1}, {"conv_embed"}),
    ("sockeye1_rnn_lstm_l2-2_e8-8_h16_mlp_lhuc-all", {"lhuc": "encoder,decoder"},
     {"enc2decinit"}),
    ("sockeye1_transformer-rnn_l1-1_m16_h2_ff32_e16-8_h16_mlp",
     {"transformer_feed_forward_num_hidden": "64:64"}, {"encoder_transformer"}),
    ("sockeye1_transformer_l1-1_m16_h2_ff32_lhuc-all", {"lhuc": "decoder"}, {"lhuc"}),
    ("sockeye2_transformer_l1-1_m16_h2_ff32_glu", {"transformer_feed_forward_use_glu": "false"},
     {"encoder_feed_forward", "decoder_feed_forward"}),
    ("sockeye2_transformer-ssru_l1-1_m16_h2_ff32", {"decoder": "transformer"},
     {"decoder_self_attention"}),
    ("sockeye3_transformer_l1-1_m16_h2_ff32_lt-length-l2", {"length_task_layers": 1},
     {"length_ratio"}),
    ("sockeye3_transformer_l1-1_m16_h2_ff32_nvs-logit-max", {"neural_vocab_selection": None},
     {"vocab_selection"}),
    ("sockeye3_transformer_l1-1_m16_h2_ff32_e16-12_tf1-concat4",
     {"target_factors_num_embed": "2"}, {"embeddings"}),
]


@pytest.mark.parametrize("model,change,failing", ONE_CHANGE)
def test_one_changed_hyperparameter_fails_exactly_its_groups(model, change, failing):
    result = check(load(str(SOCKEYE / model)), overrides=change)
    assert {g.name for g in result.groups if g.status != "ok"} == failing
    assert result.ok == (not failing)


def test_seed000_shapes_and_total():
    pred = get("sockeye-rnn").predict(SEED000_SETTINGS)
    assert pred.shapes() == SEED000
    assert pred.total() == 79_638_799  # seed 000 and Sockeye's own log


def test_seed000_question_marks():
    """The widths seed 000 leaves as '?': decoder l0 i2h reads te + h, the bi-RNN i2h reads se."""
    arch = get("sockeye-rnn")
    shapes = arch.predict({**SEED000_SETTINGS, "num_embed": "300:200",
                           "rnn_num_hidden": 64}).shapes()
    assert shapes["decoder_rnn_l0_i2h_weight"] == (4 * 64, 200 + 64)
    assert shapes["encoder_birnn_forward_l0_i2h_weight"] == (4 * 32, 300)
    gru = arch.predict({**SEED000_SETTINGS, "rnn_cell_type": "gru"}).shapes()
    assert gru["encoder_birnn_reverse_l0_h2h_weight"] == (3 * 256, 256)
    assert sum(n.startswith("decoder_rnn_enc2decinit_") for n in gru) == 2 * 2


@pytest.mark.skipif(not BIG.is_dir(), reason="the seed-000-sized model is not committed")
def test_real_seed000_model():
    result = check(load(str(BIG)))
    assert result.ok and result.found_total == 79_638_799


def test_inconsistent_hyperparameters_are_usage_errors():
    arch = get("sockeye-rnn")
    with pytest.raises(UsageError, match="even"):
        arch.predict({"rnn_num_hidden": 15})
    with pytest.raises(UsageError, match="src_trg"):
        arch.predict({"weight_tying": True, "weight_tying_type": "src_trg",
                      "source_vocab_size": 10, "target_vocab_size": 11})
    with pytest.raises(UsageError, match="lhuc"):
        arch.predict({"lhuc": "everything"})


def test_lhuc_and_layer_norm_cells_from_source():
    pred = get("sockeye-rnn").predict({**SEED000_SETTINGS, "lhuc": "all",
                                       "rnn_cell_type": "lnlstm", "layer_normalization": True})
    shapes = pred.shapes()
    assert shapes["decoder_rnn_l0_lhuc"] == (512,)
    assert shapes["encoder_birnn_forward_l0_i2h_scale"] == (4 * 256,)
    assert shapes["decoder_rnn_hidden_norm_gamma"] == (512,)
    assert replace(pred, notes=[]).notes == []
