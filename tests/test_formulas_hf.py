"""``gpt2`` and ``llama`` against real transformers models: ``fixtures/hf/*/`` were written by
``save_pretrained`` and their truth (state_dict shapes, ``num_parameters()``, one-key config
variants) recorded by transformers at generation time."""

from __future__ import annotations

import json

import pytest

from inspector.adapters.errors import FormatError
from inspector.adapters.registry import load
from inspector.formulas import get
from inspector.formulas.check import check
from inspector.formulas.closed_form import closed_form
from inspector.formulas.hf import sidecar_config

from conftest import FIXTURES, load_truth, run_cli

HF = FIXTURES / "hf"
CASES = {"gpt2_tiny": "gpt2", "llama_gqa": "llama", "llama_bias_tied": "llama"}
# save_pretrained drops a tied lm_head.weight (gpt2_tiny, llama_bias_tied); check must count it
# as present through its alias.


def _truth(name: str) -> dict:
    return load_truth(HF / name / "model.safetensors.truth.json")


def _hp(arch: str, kwargs: dict) -> dict:
    known = {h.name for h in get(arch).hparams}
    return {k: v for k, v in kwargs.items() if k in known}


def _predict(arch: str, hp: dict):
    a = get(arch)
    return a.predict(a.resolve(hp))


def _changed(a: dict, b: dict) -> set[str]:
    return {n for n in set(a) | set(b) if a.get(n) != b.get(n)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_prediction_equals_transformers_state_dict(name):
    truth, arch = _truth(name), CASES[name]
    pred = _predict(arch, _hp(arch, truth["config_kwargs"]))
    want = {t["name"]: tuple(t["shape"]) for t in truth["state_dict"]}
    assert list(pred.shapes().items()) == list(want.items())
    assert pred.total() == truth["parameter_count"]  # model.num_parameters(), tied once
    assert {(t.name, t.tied_to) for t in pred.tensors if t.tied_to} == {
        tuple(p) for p in truth["tied_state_dict"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_config_json_beside_the_weights_is_read(name):
    truth, arch = _truth(name), CASES[name]
    ckpt = load(HF / name / "model.safetensors")
    got = get(arch).from_checkpoint(ckpt)
    assert {k: got[k] for k in truth["config_kwargs"] if k in got} == _hp(arch, truth["config_kwargs"])
    pred = _predict(arch, got)
    assert pred.total() == truth["parameter_count"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_config_key_changes_exactly_its_tensors(name):
    truth, arch = _truth(name), CASES[name]
    hp = _hp(arch, truth["config_kwargs"])
    base = _predict(arch, hp).shapes()
    hf_base = {t["name"]: tuple(t["shape"]) for t in truth["state_dict"]}
    for v in truth["variants"]:
        pred = _predict(arch, {**hp, **v["set"]})
        hf_variant = {n: tuple(s) for n, s in v["state_dict"].items()}
        assert pred.shapes() == hf_variant, v["set"]
        assert pred.total() == v["parameter_count"], v["set"]
        assert _changed(base, pred.shapes()) == _changed(hf_base, hf_variant), v["set"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_infer_recovers_what_the_shapes_determine(name):
    arch = CASES[name]
    got = get(arch).infer(load(HF / name / "model.safetensors"))
    cfg = json.loads((HF / name / "config.json").read_text())
    for k, v in got.items():
        if k == "n_inner" and cfg.get(k) is None:
            assert v == 4 * cfg["n_embd"]
        else:
            assert v == cfg[k], k
    assert got.get("tie_word_embeddings") == cfg["tie_word_embeddings"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_passes(name):
    """Also where save_pretrained wrote only one name of the tied embedding/head pair."""
    res = check(load(HF / name / "model.safetensors"))
    assert res.arch == CASES[name] and res.ok, res.to_dict()["tensors"]
    assert res.found_total == _truth(name)["parameter_count"]


def test_wrong_layer_count_flags_exactly_the_extra_layer():
    res = check(load(HF / "llama_gqa" / "model.safetensors"), None, {"num_hidden_layers": 3})
    assert not res.ok
    assert {i.status for i in res.issues} == {"missing"}
    assert {i.name.split(".")[2] for i in res.issues} == {"2"}
    assert len(res.issues) == 9  # 7 linears + 2 RMSNorms, the layer transformers adds


def test_wrong_kv_heads_flags_k_and_v_only():
    res = check(load(HF / "llama_gqa" / "model.safetensors"), None, {"num_key_value_heads": 4})
    assert {i.name.rsplit(".", 2)[-2] for i in res.issues} == {"k_proj", "v_proj"}
    assert {i.status for i in res.issues} == {"wrong_shape"}


def test_gpt2_conv1d_layout_is_in_out():
    pred = _predict("gpt2", {"n_embd": 32, "n_head": 4, "n_layer": 1})
    assert pred.shapes()["transformer.h.0.attn.c_attn.weight"] == (32, 96)
    assert pred.shapes()["transformer.h.0.mlp.c_proj.weight"] == (128, 32)


def test_closed_form_at_the_fixture_point():
    truth = _truth("gpt2_tiny")
    arch = get("gpt2")
    form = closed_form(arch, arch.resolve(_hp("gpt2", truth["config_kwargs"])))
    kw = truth["config_kwargs"]
    assert form(V=kw["vocab_size"], P=kw["n_positions"], d=kw["n_embd"], L=kw["n_layer"]) \
        == truth["parameter_count"]


def test_bad_config_json_is_a_format_error(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "model.safetensors").write_bytes((HF / "llama_gqa" / "model.safetensors").read_bytes())
    ckpt = load(tmp_path / "model.safetensors")
    with pytest.raises(FormatError, match="config.json"):
        sidecar_config(ckpt)
    r = run_cli("check", str(tmp_path / "model.safetensors"))
    assert r.returncode == 2 and "config.json" in r.stderr and "Traceback" not in r.stderr
