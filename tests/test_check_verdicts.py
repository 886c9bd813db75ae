"""``inspector check``'s three verdicts on real fixtures and on byte-level modified copies.

verified (exit 0): every stored tensor predicted with its shape, every predicted one found;
mismatch (exit 1): wrong hyperparameters, a swapped config, a reshaped block or optimizer moment;
incomplete (exit 3, ``--strict`` 1): parts not modelled (a lone shard), or no architecture and a
consistent structure. The modified files are real producer-written fixtures with one shape
changed in their own bytes (a safetensors header, a torch pickle), never the tool's output.
"""

from __future__ import annotations

import json
import pickletools
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

from inspector import compare
from inspector.adapters.registry import load
from inspector.formulas.check import check
from tests.conftest import FIXTURES, load_truth, run_cli

SOCKEYE = FIXTURES / "sockeye"
MLP = SOCKEYE / "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp"
FF48 = FIXTURES / "diff" / "hparam_ff" / "ff48.safetensors"
ADAM = FIXTURES / "torch" / "train_checkpoint.pt"
SHARD = FIXTURES / "dirs" / "hf_gpt2_bin_sharded" / "pytorch_model-00001-of-00003.bin"

# Every real fixture an architecture models: each must verify (no false mismatch).
VERIFIED = sorted(
    [*SOCKEYE.glob("sockeye*"),
     *(p for p in (FIXTURES / "torch").glob("*.pt")
       if p.name not in ("dtype_zoo.pt", "tied_bn_module.pt")),
     FIXTURES / "torch" / "hf_model" / "pytorch_model.bin",
     *(FIXTURES / "keras").glob("*.keras"),
     *(FIXTURES / "keras").glob("*.legacy.h5"),
     *(p for p in (FIXTURES / "keras").glob("*keras*_*.h5")
       if "_weights" not in p.name and "seq2seq_states" not in p.name
       and not p.name.startswith("layers_")),
     *(FIXTURES / "hf").rglob("*.safetensors"), *(FIXTURES / "hf").rglob("*.bin"),
     FIXTURES / "safetensors" / "seed001_transformer_lm.safetensors",
     FIXTURES / "safetensors" / "sharded",
     *(FIXTURES / "rau").glob("*/parameters.pt"),
     *(FIXTURES / "diff" / "keras_h5_vs_keras").glob("model.*"),
     *(FIXTURES / "diff" / "sockeye1_consecutive").glob("params.0000*")],
    key=str)


@pytest.mark.parametrize("path", VERIFIED, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_modelled_real_fixture_verifies(path: Path):
    result = check(load(str(path), allow_unsafe=True))
    assert result.verdict == "verified", result.to_dict()["tensors"] or result.to_dict()["groups"]
    assert result.ok and result.to_dict()["status"] == "ok"


def test_verified_exit_0_and_sockeye_total_is_its_logged_count():
    r = run_cli("check", str(MLP), "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "verified" and rep["audit"] == "formula"
    truth = load_truth(MLP / "params.best.truth.json")
    assert rep["totals"]["found"] == truth["sockeye_logged_parameter_count"]
    assert rep["totals"]["not_modelled"] == 0


# Wrong hyperparameters, one family at a time: each must be a mismatch (exit 1).
WRONG = [
    (MLP, "rnn_num_hidden=20"),
    (SOCKEYE / "sockeye1_cnn_l2-2_e16_h16_k3", "cnn_num_hidden=32"),
    (SOCKEYE / "sockeye1_transformer_l2-2_m16_h2_ff32", "transformer_feed_forward_num_hidden=64:64"),
    (SOCKEYE / "sockeye2_transformer_l1-1_m16_h2_ff32", "num_layers=2:1"),
    (SOCKEYE / "sockeye3_transformer_l1-1_m16_h2_ff32", "transformer_feed_forward_num_hidden=48"),
    (FIXTURES / "torch" / "seed001_model1.pt", "emb_dim=6"),
    (FIXTURES / "torch" / "nn_gru_bidir.pt", "hidden_size=6"),
    (FIXTURES / "hf" / "gpt2_tiny" / "model.safetensors", "n_inner=64"),
    (FIXTURES / "hf" / "bert_tiny" / "model.safetensors", "intermediate_size=48"),
    (FIXTURES / "hf" / "t5_tiny" / "model.safetensors", "d_ff=48"),
    (FIXTURES / "hf" / "marian_tiny" / "model.safetensors", "encoder_ffn_dim=48"),
    (FIXTURES / "hf" / "llama_gqa" / "model.safetensors", "num_key_value_heads=4"),
    (FIXTURES / "rau" / "stack_rnn_h32_s20" / "parameters.pt", "hidden_units=16"),
    (FIXTURES / "keras" / "lstm.keras", "edit=lstm.units=3"),
]


@pytest.mark.parametrize("path,setting", WRONG, ids=lambda v: getattr(v, "name", v))
def test_wrong_hyperparameters_are_a_mismatch(path: Path, setting: str):
    r = run_cli("check", str(path), "--set", setting, "--format", "json")
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "mismatch" and rep["status"] == "mismatch"
    assert any(t["status"] in ("wrong_shape", "missing", "unexpected") for t in rep["tensors"])
    assert all(t["op"] in compare.OPS for t in rep["tensors"])


def test_sockeye_config_swapped_between_two_models_is_a_mismatch(tmp_path: Path):
    model = tmp_path / "model"
    shutil.copytree(MLP, model)
    other = SOCKEYE / "sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage"
    for side in ("args.yaml", "config"):
        shutil.copy(other / side, model / side)
    r = run_cli("check", str(model))
    assert r.returncode == 1 and "MISMATCH" in r.stdout


def test_hf_config_swapped_between_two_models_is_a_mismatch(tmp_path: Path):
    shutil.copy(FIXTURES / "hf" / "gpt2_tiny" / "model.safetensors", tmp_path)
    shutil.copy(FIXTURES / "dirs" / "hf_gpt2_safetensors" / "config.json", tmp_path)
    r = run_cli("check", str(tmp_path / "model.safetensors"), "--format", "json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["verdict"] == "mismatch"


def test_sockeye_config_names_and_command_line_names_are_accepted():
    truth = load_truth(MLP / "params.best.truth.json")
    assert truth["sockeye_logged_parameter_count"] == 6182
    ok = run_cli("check", str(MLP), "--set", "vocab_source_size=24", "--format", "json")
    assert ok.returncode == 0, ok.stderr
    rep = json.loads(ok.stdout)
    assert rep["hyperparameters"]["source_vocab_size"] == {"value": 24, "source": "set", "used": True}
    bad = run_cli("check", str(MLP), "--set", "vocab_target_size=30")
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout
    assert run_cli("check", str(MLP), "--set", "rnn-num-hidden=16").returncode == 0
    assert run_cli("check", str(MLP), "--set=--rnn-num-hidden=20").returncode == 1
    twice = run_cli("check", str(MLP), "--set", "vocab_source_size=24",
                    "--set", "source_vocab_size=24")
    assert twice.returncode == 2 and "one hyperparameter" in twice.stderr


def test_lone_shard_is_incomplete_not_a_mismatch():
    r = run_cli("check", str(SHARD), "--format", "json")
    assert r.returncode == 3, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "incomplete" and rep["status"] == "incomplete"
    assert [p["name"] for p in rep["parts"]] == ["shard 1 of 3"]
    assert rep["tensors"] and {t["status"] for t in rep["tensors"]} == {"not_modelled"}
    assert all(t["part"] == "shard 1 of 3" and t["op"] == "removed" for t in rep["tensors"])
    assert run_cli("check", str(SHARD), "--strict").returncode == 1
    assert "INCOMPLETE" in run_cli("check", str(SHARD)).stdout


def test_shard_with_a_wrong_hyperparameter_is_still_a_mismatch():
    r = run_cli("check", str(SHARD), "--set", "n_embd=24", "--format", "json")
    assert r.returncode == 1
    assert any(t["status"] == "wrong_shape" for t in json.loads(r.stdout)["tensors"])


# ---------------------------------------------------------------------------------------------
# The structural audit (no architecture applies)


def test_no_architecture_gives_the_structural_audit():
    r = run_cli("check", str(FF48), "--format", "json")
    assert r.returncode == 3, r.stderr
    rep = json.loads(r.stdout)
    assert rep["arch"] is None and rep["audit"] == "structure" and rep["verdict"] == "incomplete"
    assert rep["findings"] == [] and rep["checked"]["block_families"] == 8
    text = run_cli("check", str(FF48))
    assert "INCOMPLETE (structure consistent)" in text.stdout
    assert "no architecture recognised" not in text.stderr
    assert run_cli("check", str(FF48), "--strict").returncode == 1


def _safetensors_with_shape(src: Path, dst: Path, name: str, shape: list[int]) -> None:
    """A copy of ``src`` whose header gives ``name`` another shape (same element count, so
    the byte ranges stay valid); the header keeps its length (padded with spaces)."""
    raw = src.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header[name]["shape"] = shape
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n
    dst.write_bytes(raw[:8] + text.ljust(n, b" ") + raw[8 + n:])


def test_one_block_reshaped_in_a_safetensors_header_is_a_mismatch(tmp_path: Path):
    header = json.loads(FF48.read_bytes()[8:8 + struct.unpack("<Q", FF48.read_bytes()[:8])[0]])
    name = "encoder.layers.2.ff.0.weight"
    rows, cols = header[name]["shape"]
    assert [header[f"encoder.layers.{i}.ff.0.weight"]["shape"] for i in range(4)] == \
        [[rows, cols]] * 4
    bad = tmp_path / "ff48.safetensors"
    _safetensors_with_shape(FF48, bad, name, [cols, rows])
    r = run_cli("check", str(bad), "--format", "json")
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "mismatch"
    assert [(f["kind"], f["name"]) for f in rep["findings"]] == [("repeated_block", name)]
    assert rep["findings"][0]["found"] == [cols, rows]
    assert "blocks 0-1, 3" in rep["findings"][0]["message"]


def test_first_block_differing_is_not_flagged(tmp_path: Path):
    """The first block of a stack may read another width (torch LSTM layer 0)."""
    bad = tmp_path / "ff48.safetensors"
    name = "encoder.layers.0.ff.0.weight"
    header = json.loads(FF48.read_bytes()[8:8 + struct.unpack("<Q", FF48.read_bytes()[:8])[0]])
    rows, cols = header[name]["shape"]
    _safetensors_with_shape(FF48, bad, name, [cols, rows])
    assert run_cli("check", str(bad)).returncode == 3


def _torch_with_size(src: Path, dst: Path, storage_key: str) -> None:
    """A copy of a torch zip checkpoint whose pickle swaps the two sizes of the tensor viewing
    storage ``storage_key`` (same element count)."""
    with zipfile.ZipFile(src) as z:
        pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
        data = bytearray(z.read(pkl))
        ops = list(pickletools.genops(bytes(data)))
        i = next(i for i, (op, arg, _) in enumerate(ops)
                 if op.name == "BINUNICODE" and arg == storage_key)
        j = next(k for k in range(i, len(ops)) if ops[k][0].name == "BINPERSID")
        (_, a, pa), (_, b, pb) = ops[j + 2][:3], ops[j + 3][:3]  # offset at j+1, sizes next
        assert ops[j + 4][0].name == "TUPLE2" and a != b
        data[pa + 1], data[pb + 1] = b, a
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as out:
            for info in z.infolist():
                out.writestr(info, bytes(data) if info.filename == pkl else z.read(info))


def test_optimizer_state_checked_against_its_parameters():
    rep = check(load(str(ADAM))).to_dict()
    assert rep["verdict"] == "verified" and rep["checked"]["optimizer_slots"] == 5
    lightning = check(load(str(FIXTURES / "dirs" / "lightning" / "lightning_1step.ckpt")))
    assert lightning.verdict == "incomplete" and lightning.checked["optimizer_slots"] == 6
    assert not lightning.findings
    keras = check(load(str(FIXTURES / "keras" / "lm_adam.keras")))
    assert keras.verdict == "verified" and keras.checked["optimizer_slots"] == 12
    keras2 = check(load(str(FIXTURES / "keras" / "keras2_lm_adam.h5")))
    assert keras2.verdict == "verified" and keras2.checked["optimizer_slots"] == 12


def test_exp_avg_reshaped_in_the_pickle_is_a_mismatch(tmp_path: Path):
    bad = tmp_path / "train_checkpoint.pt"
    # storage "9" holds optimizer.state.1.exp_avg (16, 5), the moment of model.model.0.weight
    _torch_with_size(ADAM, bad, "9")
    r = run_cli("check", str(bad), "--format", "json")
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "mismatch" and rep["tensors"] == []  # the model itself verifies
    assert [(f["kind"], f["name"], f["expected"], f["found"]) for f in rep["findings"]] == [
        ("optimizer_state", "optimizer.state.1.exp_avg", [16, 5], [5, 16])]
    assert "model.model.0.weight" in rep["findings"][0]["message"]


def test_help_documents_the_verdicts_and_exit_codes():
    out = run_cli("check", "--help").stdout
    for word in ("verified", "mismatch", "incomplete", "--strict", "structure consistent"):
        assert word in out
    assert "0" in out and "3" in out


def test_keras_unknown_layer_is_incomplete_and_the_rest_still_checked(tmp_path: Path):
    """The real stacked-LSTM model checked against its own config with the middle layer's
    class renamed to one inspector does not know."""
    model = FIXTURES / "keras" / "stacked_lstm.keras"
    with zipfile.ZipFile(model) as z:
        config = json.loads(z.read("config.json"))
    layers = config["config"]["layers"]
    assert [layer["class_name"] for layer in layers] == ["InputLayer", "LSTM", "LSTM", "LSTM"]
    layers[2]["class_name"] = "MysteryRNN"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    r = run_cli("check", str(model), "--set", f"config={path}", "--format", "json")
    assert r.returncode == 3, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "incomplete"
    parts = {p["name"]: p for p in rep["parts"]}
    # the LSTM after the unknown layer is still predicted: its input width is read from its
    # stored kernel (a part of its own, with no tensors), everything else is checked
    assert set(parts) == {"layer lstm_1 (MysteryRNN)", "input of layer lstm_2 (LSTM)"}
    assert "does not know this class" in parts["layer lstm_1 (MysteryRNN)"]["reason"]
    assert "read from the stored" in parts["input of layer lstm_2 (LSTM)"]["reason"]
    assert {t["name"].split("/")[1] for t in rep["tensors"]} == {"lstm_1"}
    assert {t["status"] for t in rep["tensors"]} == {"not_modelled"}
    groups = {g["name"]: g["status"] for g in rep["groups"]}
    assert groups["sequential/lstm"] == groups["sequential/lstm_2"] == "ok"
    # the modelled LSTMs before and after it are still checked: a wrong width is a mismatch
    for edit in ("lstm.units=5", "lstm_2.units=3"):
        r = run_cli("check", str(model), "--set", f"config={path}", "--set", f"edit={edit}")
        assert r.returncode == 1 and "MISMATCH" in r.stdout, edit


def test_recognised_but_unpredictable_file_gets_the_structural_audit():
    """A Keras weights file carries no model config: the structure is audited and the note
    says what a full check needs; asking for the architecture explicitly is still an error."""
    weights = FIXTURES / "keras" / "lstm.weights.h5"
    r = run_cli("check", str(weights), "--format", "json")
    assert r.returncode == 3, r.stderr
    rep = json.loads(r.stdout)
    assert rep["audit"] == "structure" and rep["verdict"] == "incomplete"
    assert "config=PATH" in rep["notes"][0]
    assert run_cli("check", str(weights), "--arch", "keras").returncode == 2
    config = FIXTURES / "keras" / "lstm.keras"
    assert run_cli("check", str(weights), "--set", f"config={config}").returncode == 0


def test_weights_without_configuration_are_incomplete_not_mismatch(tmp_path: Path):
    """A grouped-query Llama's weights alone: the head counts are the formula's defaults, not
    the model's, and the key/value projections disagree with them: incomplete, naming them.
    Given the producer's values, it verifies; a wrong value given is a mismatch."""
    src = FIXTURES / "hf" / "llama_gqa"
    config = json.loads((src / "config.json").read_text())
    truth = load_truth(src / "model.safetensors.truth.json")
    bare = tmp_path / "model.safetensors"
    shutil.copy(src / "model.safetensors", bare)
    r = run_cli("check", str(bare), "--format", "json")
    assert r.returncode == 3, r.stdout
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "incomplete" and "num_attention_heads" in doc["assumed"]
    assert any("no configuration" in n for n in doc["notes"])
    heads = ["--set", f"num_attention_heads={config['num_attention_heads']}",
             "--set", f"num_key_value_heads={config['num_key_value_heads']}"]
    r = run_cli("check", str(bare), *heads, "--format", "json")
    assert r.returncode == 0, r.stdout
    assert json.loads(r.stdout)["totals"]["found"] == truth["parameter_count"]
    r = run_cli("check", str(bare), "--set", "num_attention_heads=4",
                "--set", "num_key_value_heads=4", "--format", "json")
    assert r.returncode == 1 and json.loads(r.stdout)["verdict"] == "mismatch"
