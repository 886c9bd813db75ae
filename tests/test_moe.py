"""Mixtral and Qwen2-MoE (routed experts, a shared expert and its gate, dense layers in
``mlp_only_layers``) checked against the real models transformers 4.57 and 5.24 wrote
(fixtures/hf/make_moe_fixtures.py). transformers 4.57's files also run the whole family suite of
tests/test_formulas_hf.py; here: both releases' files, transformers 5's in-memory state dict
(experts fused), and a config.json whose expert sizes disagree with the weights."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from inspector.adapters.registry import load
from inspector.formulas.check import check

from conftest import FIXTURES, load_truth, run_cli

HF = FIXTURES / "hf"
ARCH = {"mixtral_tiny": "mixtral", "qwen2_moe_tiny": "qwen2_moe"}
SAVED = [f"{v}/{n}" for v in ("v4_57", "v5_24") for n in ARCH]


def _truth(path: str) -> dict:
    return load_truth(HF / path / "model.safetensors.truth.json")


@pytest.mark.parametrize("path", SAVED)
def test_save_pretrained_files_verify(path):
    """Every stored tensor predicted with its shape; the total is transformers'
    num_parameters() (nothing tied, nothing unsaved in these models)."""
    truth = _truth(path)
    res = check(load(HF / path))
    assert res.arch == ARCH[path.split("/")[1]]
    assert res.ok and not res.issues and res.verdict == "verified"
    assert res.found_total == res.predicted_total == truth["parameter_count"]
    assert res.hparams["architecture"] == truth["model_class"]


@pytest.mark.parametrize("name", sorted(ARCH))
def test_transformers_5_fused_state_dict_verifies(name):
    """torch.save(model.state_dict()) of the transformers 5 model: experts fused in 3D
    gate_up_proj / down_proj, Mixtral's router under mlp.gate."""
    folder = HF / "v5_24" / f"{name}_state_dict"
    truth = load_truth(folder / "model.pt.truth.json")
    assert any(t["stored_name"].endswith("experts.gate_up_proj") for t in truth["tensors"])
    res = check(load(folder / "model.pt"))
    assert res.arch == ARCH[name] and res.verdict == "verified", res.to_dict()["tensors"]
    assert res.hparams["saved_fused_experts"] is True
    assert res.found_total == res.predicted_total == truth["parameter_count"]


def _issues_for_config(tmp_path, path: str, changes: dict) -> tuple[object, set[str]]:
    """check of the real weights beside their config.json with ``changes`` written into it."""
    cfg = json.loads((HF / path / "config.json").read_text())
    cfg.update(changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shutil.copy(HF / path / "model.safetensors", tmp_path / "model.safetensors")
    res = check(load(tmp_path / "model.safetensors"))
    return res, {i.name for i in res.issues}


KEYS = {"mixtral_tiny": ("num_local_experts", "intermediate_size"),
        "qwen2_moe_tiny": ("num_experts", "moe_intermediate_size",
                           "shared_expert_intermediate_size", "mlp_only_layers",
                           "decoder_sparse_step")}


@pytest.mark.parametrize("path", SAVED)
def test_expert_config_changed_is_a_mismatch_on_exactly_its_tensors(tmp_path, path):
    """config.json changed to one variant's key: MISMATCH, and the tensors named are exactly
    those whose stored shape or presence differs from what that variant's own save_pretrained
    writes (transformers' record, not the tool's)."""
    truth = _truth(path)
    name = path.split("/")[1]
    stored = {t["stored_name"]: tuple(t["shape"]) for t in truth["tensors"]}
    seen = set()
    for v in truth["variants"]:
        (key, value), = v["set"].items()
        if key not in KEYS[name]:
            continue
        seen.add(key)
        saved = {n: tuple(s) for n, s in v["saved"].items()}
        differ = {n for n in set(stored) | set(saved) if stored.get(n) != saved.get(n)}
        res, issues = _issues_for_config(tmp_path, path, {key: value})
        assert differ and res.verdict == "mismatch", key
        assert issues == differ, key
    assert seen == set(KEYS[name])


def test_qwen2_moe_dense_layer_is_the_one_in_mlp_only_layers():
    truth = _truth("v5_24/qwen2_moe_tiny")
    assert truth["config_kwargs"]["mlp_only_layers"] == [1]
    names = {t["stored_name"] for t in truth["tensors"]}
    assert "model.layers.1.mlp.gate_proj.weight" in names
    assert not any(re.match(r"model\.layers\.1\.mlp\.(experts|shared_expert)", n) for n in names)
    res = check(load(HF / "v5_24" / "qwen2_moe_tiny"), None, {"mlp_only_layers": "0,1"})
    assert res.verdict == "mismatch"
    assert any(i.name.startswith("model.layers.0.mlp.experts.") for i in res.issues)


def test_cli_verifies_and_exits_one_on_a_mismatch():
    r = run_cli("check", str(HF / "v5_24" / "mixtral_tiny"))
    assert r.returncode == 0 and "VERIFIED" in r.stdout, r.stdout + r.stderr
    r = run_cli("check", str(HF / "v4_57" / "qwen2_moe_tiny"), "--set",
                "shared_expert_intermediate_size=24")
    assert r.returncode == 1 and "MISMATCH" in r.stdout
