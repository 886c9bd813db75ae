"""``check`` for the NMT toolkits from their stored configuration: fairseq (``cfg.model`` /
``args``), OpenNMT-py (``opt``), JoeyNMT (``config.yaml`` attached by its adapter).

Every real fixture is VERIFIED with the producer's own logged parameter count; a wrong
hyperparameter and a configuration swapped between two models are MISMATCH; an option the
formulas do not model is named and INCOMPLETE. The edited checkpoints are written by torch
itself (the producer venv, one subprocess): the configuration inside the pickle is changed and
the file saved again, tensors untouched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from inspector.adapters.registry import load
from inspector.formulas.check import INCOMPLETE, MISMATCH, VERIFIED, check
from inspector.formulas.structure import optimizer_state

from conftest import FIXTURES, load_truth, run_cli
from hostile import assert_clean_error

TORCH_PY = Path("/work/venvs/torch/bin/python")
FAIRSEQ = sorted((FIXTURES / "fairseq").glob("*.pt"))
ONMT = sorted((FIXTURES / "onmt").glob("*.pt"))
JOEY = sorted(p.parent for p in (FIXTURES / "joeynmt").glob("*/best.ckpt"))
ARCH = {"lstm": "fairseq-lstm", "lstm_bidir": "fairseq-lstm",
        "transformer_lm": "fairseq-transformer-lm"}


def _truth(path: Path) -> dict:
    return load_truth(path.with_name(path.name + ".truth.json"))


@pytest.mark.parametrize("path", FAIRSEQ, ids=lambda p: p.stem)
def test_fairseq_fixture_verified_with_the_logged_count(path):
    result = check(load(path))
    assert result.arch == ARCH.get(path.stem, "fairseq-transformer")
    assert result.verdict == VERIFIED, result.to_dict()["tensors"]
    assert result.found_total == result.predicted_total == _truth(path)["parameter_count"]
    assert result.provenance["encoder_layers" if "lm" not in path.stem
                             else "decoder_layers"] == "checkpoint"


@pytest.mark.parametrize("path", ONMT, ids=lambda p: p.stem)
def test_onmt_fixture_verified_with_the_logged_count(path):
    result = check(load(path))
    truth = _truth(path)
    assert result.arch == ("onmt-rnn" if path.stem.startswith("rnn") else "onmt-transformer")
    assert result.verdict == VERIFIED, result.to_dict()["tensors"]
    assert result.found_total == result.predicted_total == truth["parameter_count"]


@pytest.mark.parametrize("path", ONMT, ids=lambda p: p.stem)
def test_onmt_optimizer_state_aligned_across_model_and_generator(path):
    """OpenNMT-py keeps the generator beside the model; Adam's param_groups number the model's
    parameters then the generator's: every slot has its parameter's shape."""
    ckpt = load(path)
    truth = _truth(path)
    findings, _notes, looked = optimizer_state(ckpt)
    assert findings == []
    # Adam keeps state only for parameters that got a gradient (copy attention: not all)
    assert looked == len(truth["optimizer_state_keys"])
    generator = [n for n in truth["optimizer_parameters"] if n.startswith("generator.")]
    shared = [n for n in generator if ckpt[n].storage in
              {t.storage for t in ckpt.tensors if t.name.startswith("decoder.")}]
    assert generator and not shared  # the generator's own parameters are in the groups


@pytest.mark.parametrize("model_dir", JOEY, ids=lambda p: p.name)
def test_joeynmt_fixture_verified_with_the_logged_count(model_dir):
    truth = load_truth(model_dir / "best.ckpt.truth.json")
    for target in (model_dir, model_dir / "best.ckpt"):  # the directory, or the file
        ckpt = load(target)
        assert ckpt.hyperparameters["joeynmt_config"]["model"]
        result = check(ckpt)
        assert result.arch == "joeynmt"
        assert result.verdict == VERIFIED, result.to_dict()["tensors"]
        assert result.found_total == truth["parameter_count"]
        buffers = [t for t in ckpt.tensors if t.name.endswith("pe.pe")]
        assert all(t.role.value == "buffer" for t in buffers)


def test_joeynmt_checkpoint_without_its_config_is_not_claimed(tmp_path):
    src = JOEY[0] / "best.ckpt"
    shutil.copyfile(src, tmp_path / "best.ckpt")
    ckpt = load(tmp_path / "best.ckpt")
    assert "joeynmt_config" not in ckpt.hyperparameters
    assert check(ckpt).arch != "joeynmt"


# ---------------------------------------------------------------------------------------------
# edited copies: a wrong value, a swapped configuration, an option not modelled

EDITS = {
    # name: (fixture, python statement on the loaded dict `c` (and `other`), verdict, part)
    "fairseq_ffn": ("fairseq/transformer.pt", "c['cfg']['model'].encoder_ffn_embed_dim = 32",
                    MISMATCH, None),
    "fairseq_lstm_hidden": ("fairseq/lstm.pt", "c['cfg']['model'].decoder_hidden_size = 20",
                            MISMATCH, None),
    "fairseq_swap": ("fairseq/transformer.pt", "c['cfg'] = other('fairseq/transformer_shared.pt')"
                     "['cfg']", MISMATCH, None),
    "fairseq_lm_learned": ("fairseq/transformer_lm.pt",
                           "c['cfg']['model']['decoder_learned_pos'] = False", MISMATCH, None),
    "fairseq_adaptive": ("fairseq/transformer.pt",
                         "c['cfg']['model'].adaptive_softmax_cutoff = '10,20'", INCOMPLETE,
                         "adaptive_softmax_cutoff='10,20'"),
    # fairseq 0.9/0.10 kept the Namespace as `args` (no `cfg`)
    "fairseq_legacy_args": ("fairseq/transformer_shared.pt",
                            "c['args'] = c['cfg']['model']; c['cfg'] = None", VERIFIED, None),
    # the dataclass TransformerConfig nests encoder/decoder settings (encoder.embed_dim)
    "fairseq_nested_cfg": ("fairseq/transformer_prenorm.pt",
                           "m = vars(c['cfg']['model']); n = {k: v for k, v in m.items() if not "
                           "k.startswith(('encoder_', 'decoder_'))}; n.update({s: {k[len(s) + 1:]: "
                           "v for k, v in m.items() if k.startswith(s + '_')} for s in ('encoder',"
                           " 'decoder')}); c['cfg']['model'] = n", VERIFIED, None),
    "onmt_ff": ("onmt/transformer.pt", "c['opt'].transformer_ff = 32", MISMATCH, None),
    "onmt_attention": ("onmt/rnn.pt", "c['opt'].global_attention = 'mlp'", MISMATCH, None),
    "onmt_swap": ("onmt/transformer.pt", "c['opt'] = other('onmt/transformer_shared.pt')['opt']",
                  MISMATCH, None),
    "onmt_2x_names": ("onmt/rnn.pt", "o = c['opt']; [delattr(o, k) for k in ('hidden_size', "
                      "'enc_hid_size', 'dec_hid_size')]; o.rnn_size = 16; o.enc_rnn_size = 16; "
                      "o.dec_rnn_size = 16", VERIFIED, None),
    # 2.x's generator was nn.Sequential(Linear, Cast, LogSoftmax): generator.0.weight
    "onmt_2x_generator": ("onmt/rnn.pt", "c['generator'] = {'0.' + k: v for k, v in "
                          "c['generator'].items()}", VERIFIED, None),
    # 2.x always had attention and feed-forward biases: without 3.x's options they are expected
    "onmt_2x_biases": ("onmt/transformer.pt", "del c['opt'].add_qkvbias, c['opt'].add_ffnbias",
                       MISMATCH, None),
    "onmt_context_gate": ("onmt/rnn.pt", "c['opt'].context_gate = 'both'", INCOMPLETE,
                          "context_gate='both'"),
    "onmt_moe": ("onmt/transformer.pt", "c['opt'].num_experts = 4", INCOMPLETE,
                 "num_experts=4"),
}


@pytest.fixture(scope="module")
def edited(tmp_path_factory) -> dict[str, Path]:
    if not TORCH_PY.exists():
        pytest.skip(f"{TORCH_PY} (torch, to write the edited checkpoints) is not installed")
    out = tmp_path_factory.mktemp("edited")
    jobs = {name: (str(FIXTURES / f), stmt, str(out / f"{name}.pt"))
            for name, (f, stmt, _v, _p) in EDITS.items()}
    script = textwrap.dedent(f"""
        import json, sys, torch
        F = {str(FIXTURES)!r}
        def other(rel):
            return torch.load(F + '/' + rel, map_location='cpu', weights_only=False)
        for name, (src, stmt, dest) in json.loads(sys.argv[1]).items():
            c = torch.load(src, map_location='cpu', weights_only=False)
            exec(stmt)
            torch.save(c, dest)
    """)
    subprocess.run([str(TORCH_PY), "-c", script, json.dumps(jobs)], check=True,
                   capture_output=True, timeout=300)
    return {name: Path(dest) for name, (_s, _t, dest) in jobs.items()}


@pytest.mark.parametrize("name", list(EDITS))
def test_edited_configuration(edited, name):
    _f, _stmt, verdict, part = EDITS[name]
    result = check(load(edited[name]))
    assert result.verdict == verdict, result.to_dict()
    if part is not None:
        assert part in [p.name for p in result.parts]
        assert not any(i.mismatch for i in result.issues)
    if verdict == MISMATCH:
        assert any(i.mismatch for i in result.issues)


def _joey_copy(tmp_path: Path, model: str, edit) -> Path:
    dest = tmp_path / model
    shutil.copytree(FIXTURES / "joeynmt" / model, dest)
    cfg = dest / "config.yaml"
    cfg.write_text(edit(cfg.read_text()))
    return dest


def test_joeynmt_wrong_value_is_a_mismatch(tmp_path):
    d = _joey_copy(tmp_path, "transformer", lambda t: t.replace("ff_size: 12", "ff_size: 14"))
    result = check(load(d))
    assert result.verdict == MISMATCH
    assert {i.name for i in result.issues if i.mismatch} >= {
        "encoder.layers.0.feed_forward.pwff_layer.0.weight"}


def test_joeynmt_swapped_config_is_a_mismatch(tmp_path):
    other = (FIXTURES / "joeynmt" / "rnn_luong" / "config.yaml").read_text()
    d = _joey_copy(tmp_path, "rnn", lambda _t: other)
    assert check(load(d)).verdict == MISMATCH


def test_joeynmt_unknown_option_is_named_and_incomplete(tmp_path):
    d = _joey_copy(tmp_path, "rnn", lambda t: t.replace("    encoder:\n",
                                                        "    encoder:\n        highway: 2\n"))
    result = check(load(d))
    assert result.verdict == INCOMPLETE
    assert "model.encoder.highway" in [p.name for p in result.parts]


# ---------------------------------------------------------------------------------------------
# the JoeyNMT adapter on damaged input: one clear line, or the file read as plain torch


def test_joeynmt_truncated_checkpoint_is_one_clear_line(tmp_path):
    d = _joey_copy(tmp_path, "rnn", lambda t: t)
    data = (d / "best.ckpt").read_bytes()
    (d / "best.ckpt").write_bytes(data[: len(data) // 2])
    for target in (d, d / "best.ckpt"):
        proc = run_cli("show", str(target))
        assert_clean_error(proc, "best.ckpt")


@pytest.mark.parametrize("text", ["model: [1, 2", "- just\n- a list\n", "\x00\x01binary",
                                  "a: &a [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" * 3,
                                  "model:\n  encoder: {}\n"])
def test_joeynmt_broken_config_is_not_claimed(tmp_path, text):
    """A config.yaml that is not JoeyNMT's (or not YAML) attaches nothing: the checkpoint is
    read as the torch file it is, the directory as any folder of one checkpoint."""
    d = _joey_copy(tmp_path, "rnn", lambda _t: text)
    for target in (d, d / "best.ckpt"):
        ckpt = load(target)
        assert "joeynmt_config" not in ckpt.hyperparameters
        assert len(ckpt.tensors) > 0


def test_joeynmt_scan_is_the_torch_files_verdict(tmp_path):
    from inspector.adapters.security.scan import scan_file

    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copyfile(JOEY[0] / "best.ckpt", plain / "best.ckpt")
    joey = scan_file(JOEY[0] / "best.ckpt")
    bare = scan_file(plain / "best.ckpt")
    assert joey.verdict == bare.verdict and joey.kind == bare.kind
    assert [(i.level, i.text) for i in joey.items] == [(i.level, i.text) for i in bare.items]


# ---------------------------------------------------------------------------------------------
# OpenNMT-tf: the model description attached by its adapter, parsed and never run

ONMT_TF = sorted(p.parent for p in (FIXTURES / "onmt_tf").glob("*/model_description.py"))


@pytest.mark.parametrize("model_dir", ONMT_TF, ids=lambda p: p.name)
def test_onmt_tf_fixture_verified_with_the_producers_count(model_dir):
    truth = load_truth(next(model_dir.glob("*.index.truth.json")))
    result = check(load(model_dir))
    assert result.arch == "onmt-tf-transformer"
    assert result.verdict == VERIFIED, result.to_dict()["tensors"]
    assert result.found_total == result.predicted_total == truth["parameter_count"]
    trainable = {n.removesuffix("/.ATTRIBUTES/VARIABLE_VALUE") for n in truth["model_variables"]}
    assert {t.name for t in load(model_dir).tensors if t.role.value == "parameter"} == trainable


def _tf_copy(tmp_path: Path, edit, model: str = "transformer") -> Path:
    dest = tmp_path / model
    shutil.copytree(FIXTURES / "onmt_tf" / model, dest)
    desc = dest / "model_description.py"
    desc.write_text(edit(desc.read_text()))
    return dest


def test_onmt_tf_wrong_value_is_a_mismatch(tmp_path):
    d = _tf_copy(tmp_path, lambda t: t.replace("ffn_inner_dim=12", "ffn_inner_dim=14"))
    result = check(load(d))
    assert result.verdict == MISMATCH
    assert "model/encoder/layers/0/ffn/layer/inner/kernel" in {
        i.name for i in result.issues if i.mismatch}


def test_onmt_tf_catalog_description_is_read_as_data(tmp_path):
    """``--model_type TransformerTiny`` writes a catalog call: its arguments are data here (64
    units), so this tiny 8-unit checkpoint is a mismatch, not an unknown."""
    text = ('from opennmt import models\n'
            'model = lambda: models.get_model_from_catalog("TransformerTiny")\n')
    result = check(load(_tf_copy(tmp_path, lambda _t: text)))
    assert result.hparams["num_units"] == 64 and result.verdict == MISMATCH


@pytest.mark.parametrize("text,part", [
    ("import opennmt\n\ndef model():\n    return opennmt.models.Transformer(num_layers=2, "
     "num_units=8, num_heads=2, ffn_inner_dim=12, share_encoders=True)\n",
     "share_encoders=True"),
    ("import opennmt\n\ndef model():\n    return opennmt.models.SequenceToSequence(None, None, "
     "None, None)\n", "model description"),
    ("import os\nos.system('touch /tmp/never')\n", "model description"),
    ("\x00\x01 not python", "model description"),
])
def test_onmt_tf_unknown_description_is_named_and_incomplete(tmp_path, text, part):
    result = check(load(_tf_copy(tmp_path, lambda _t: text)))
    assert result.verdict == INCOMPLETE, result.to_dict()["tensors"]
    assert part in [p.name for p in result.parts]


def test_onmt_tf_swapped_description_is_a_mismatch(tmp_path):
    other = (FIXTURES / "onmt_tf" / "transformer_shared" / "model_description.py").read_text()
    assert check(load(_tf_copy(tmp_path, lambda _t: other))).verdict == MISMATCH


def test_joeynmt_show_counts_what_joeynmt_logs():
    """``show`` on the model directory: JoeyNMT's "Total params", the pe.pe tables as buffers."""
    model_dir = FIXTURES / "joeynmt" / "transformer"
    truth = load_truth(model_dir / "best.ckpt.truth.json")
    shown = json.loads(run_cli("show", str(model_dir), "--format", "json").stdout)
    assert shown["totals"]["parameters"] == truth["parameter_count"]
    assert shown["totals"]["buffers"] == truth["buffer_count"] > 0


def test_a_config_claiming_a_billion_layers_is_refused_quickly(tmp_path):
    """A damaged or hostile configuration never makes a prediction of millions of tensors: the
    check says it cannot predict the model, and audits the structure."""
    d = _joey_copy(tmp_path, "rnn", lambda t: t.replace("num_layers: 2", "num_layers: 1000000000"))
    result = check(load(d))
    assert result.verdict == INCOMPLETE and result.audit == "structure"
    assert any("num_layers=1000000000" in n for n in result.notes)


def test_joeynmt_frozen_parts_are_said_not_hidden(tmp_path):
    d = _joey_copy(tmp_path, "rnn", lambda t: t.replace("    encoder:\n",
                                                        "    encoder:\n        freeze: True\n"))
    result = check(load(d))
    assert result.verdict == VERIFIED
    assert any(n.startswith("frozen (encoder)") for n in result.notes)
