"""Side configurations (``Checkpoint.side_configs``): the producers' config files beside the
weights are the adapters' to read. A model directory gives the one it read; every other
checkpoint gets the ``config.json`` / ``kwargs.json`` beside it, read only when a formula asks
(a listing never reads it). The expected values are the files themselves, parsed by ``json``."""

from __future__ import annotations

import json
import shutil

from inspector.adapters.registry import load
from inspector.adapters.side_files import HF_CONFIG, RAU_KWARGS, SOCKEYE_CONFIG
from inspector.formulas.core import side_config

from conftest import FIXTURES, run_cli

HF = FIXTURES / "dirs" / "hf_gpt2_safetensors"
RAU_FILE = FIXTURES / "rau" / "stack_transformer_mixed"  # kwargs.json beside parameters.pt
RAU_SUBDIR = FIXTURES / "rau" / "rnn_h24"  # kwargs.json above parameters/main.pt


def _json(path):
    return json.loads(path.read_text())


def test_a_model_directory_gives_the_config_it_read():
    ckpt = load(HF)
    assert side_config(ckpt, HF_CONFIG) == _json(HF / "config.json")
    assert side_config(ckpt, RAU_KWARGS) == {}


def test_a_peft_directory_has_no_hf_config():
    # adapter_config.json is the PEFT adapter's config, not the model's config.json
    assert side_config(load(FIXTURES / "dirs" / "peft_lora_safetensors"), HF_CONFIG) == {}


def test_a_weights_file_gets_the_config_beside_it():
    ckpt = load(HF / "model.safetensors")
    assert side_config(ckpt, HF_CONFIG) == _json(HF / "config.json")


def test_rau_kwargs_beside_and_above_the_parameters_file():
    assert side_config(load(RAU_FILE), RAU_KWARGS) == _json(RAU_FILE / "kwargs.json")
    beside = load(RAU_FILE / "parameters.pt")
    assert side_config(beside, RAU_KWARGS) == _json(RAU_FILE / "kwargs.json")
    above = load(RAU_SUBDIR / "parameters" / "main.pt")
    assert side_config(above, RAU_KWARGS) == _json(RAU_SUBDIR / "kwargs.json")


def test_sockeye_directory_gives_its_config():
    d = next(p for p in sorted((FIXTURES / "sockeye").iterdir()) if (p / "config").is_file())
    # Sockeye's config carries !tags PyYAML's safe loader refuses: the contract checked here
    # is that the side config is the very config the directory adapter read
    ckpt = load(d)
    assert side_config(ckpt, SOCKEYE_CONFIG) is ckpt.hyperparameters["config"]
    assert side_config(ckpt, SOCKEYE_CONFIG)


def test_a_malformed_config_beside_is_read_only_when_a_formula_asks(tmp_path):
    shutil.copy(HF / "model.safetensors", tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text("{not json")
    listing = run_cli("show", "--format", "json", str(tmp_path / "model.safetensors"))
    assert listing.returncode == 0, listing.stderr
    assert "config.json" not in listing.stdout
    checked = run_cli("check", str(tmp_path / "model.safetensors"))
    assert checked.returncode == 2 and "config.json" in checked.stderr
    assert "Traceback" not in checked.stderr


def test_no_config_beside_is_no_side_config(tmp_path):
    shutil.copy(HF / "model.safetensors", tmp_path / "model.safetensors")
    ckpt = load(tmp_path / "model.safetensors")
    assert side_config(ckpt, HF_CONFIG) == {} and side_config(ckpt, RAU_KWARGS) == {}
