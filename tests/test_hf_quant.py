"""Quantized Hugging Face checkpoints (fixtures/hf_quant/, written on CPU by bitsandbytes,
gptqmodel and llm-compressor): ``check`` predicts what each quantizer stores from config.json's
``quantization_config``; ``show`` and ``totals()`` report the model's own parameter count (the
producer's ``num_parameters()`` of the unquantized model, from the truth files) beside the
stored elements."""

from __future__ import annotations

import json
import shutil

import pytest

import inspector
from inspector.adapters.registry import load
from inspector.cli import main
from inspector.formulas.check import INCOMPLETE, MISMATCH, VERIFIED, check
from inspector.reports.listing import listing

from conftest import FIXTURES

QUANT = FIXTURES / "hf_quant"
DIRS = sorted(p.parent for p in QUANT.glob("*/model.safetensors.truth.json"))


def _truth(d):
    return json.loads((d / "model.safetensors.truth.json").read_text())


def _with_config(tmp_path, name, change):
    """A copy of fixture ``name`` whose quantization_config ``change`` edits in place."""
    src, dst = QUANT / name, tmp_path / name
    dst.mkdir()
    shutil.copy(src / "model.safetensors", dst)
    cfg = json.loads((src / "config.json").read_text())
    change(cfg["quantization_config"])
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_fixtures_cover_every_quantizer():
    methods = {_truth(d)["quantization_config"]["quant_method"] for d in DIRS}
    assert {"bitsandbytes", "gptq", "compressed-tensors"} <= methods, methods


@pytest.mark.parametrize("d", DIRS, ids=lambda d: d.name)
def test_every_fixture_is_verified(d):
    r = check(load(d))
    assert r.verdict == VERIFIED, [(i.name, i.status, i.expected, i.found) for i in r.issues] \
        + [f.message for f in r.findings]
    # the architecture's prediction of the unquantized model is the producer's num_parameters()
    want = _truth(d)["unquantized_num_parameters"]
    assert any("quantized by" in n and f"unquantized model: {want:,} parameters" in n
               for n in r.notes), r.notes


@pytest.mark.parametrize("d", DIRS, ids=lambda d: d.name)
def test_model_parameters_are_the_producers(d):
    truth = _truth(d)
    want = truth["unquantized_num_parameters"]
    ckpt = load(d)
    report = listing(ckpt)
    assert report["totals"]["model_parameters"] == want
    assert inspector.load(d).totals()["model_parameters"] == want
    # the stored elements are still reported, as the file holds them
    assert report["totals"]["parameters"] == sum(
        t.numel for t in ckpt.unique() if t.role.value == "parameter")
    assert report["quantization"]
    if truth["quantized_num_parameters"] is not None:  # transformers' own count agrees
        assert truth["quantized_num_parameters"] == want


def test_show_text_shows_both_counts(capsys):
    d = QUANT / "bnb_nf4"
    assert main(["show", str(d), "--raw-numbers"]) == 0
    out = capsys.readouterr().out
    want = _truth(d)["unquantized_num_parameters"]
    stored = listing(load(d))["totals"]["parameters"]
    assert stored != want
    line = next(x for x in out.splitlines() if x.startswith("parameters"))
    assert str(want) in line and "bitsandbytes nf4" in line
    assert any(x.strip().startswith("stored") and str(stored) in x for x in out.splitlines())


CHANGES = {
    "gptq bits 4 -> 8": ("gptq_4bit_g32", lambda q: q.update(bits=8)),
    "gptq group_size 32 -> 64": ("gptq_4bit_g32", lambda q: q.update(group_size=64)),
    "awq group_size 32 -> 64": ("awq_gemm", lambda q: q.update(group_size=64)),
    "ct bits 4 -> 8": ("ct_w4a16_group",
                       lambda q: q["config_groups"]["group_0"]["weights"].update(num_bits=8)),
    "ct group_size 32 -> 64": ("ct_w4a16_group", lambda q: q["config_groups"]["group_0"][
        "weights"].update(group_size=64)),
    "ct fp8 block 128 -> 32": ("ct_fp8_block", lambda q: q["config_groups"]["group_0"][
        "weights"].update(block_structure=[32, 32])),
    "bnb nf4 -> fp4": ("bnb_nf4", lambda q: q.update(bnb_4bit_quant_type="fp4")),
    "bnb double quant": ("bnb_nf4", lambda q: q.update(bnb_4bit_use_double_quant=True)),
    "bnb storage uint8 -> int8 (dtype)": ("bnb_nf4",
                                          lambda q: q.update(bnb_4bit_quant_storage="int8")),
    "bnb 4-bit -> 8-bit": ("bnb_nf4", lambda q: q.update(load_in_4bit=False, _load_in_4bit=False,
                                                        load_in_8bit=True, _load_in_8bit=True)),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_changed_quantization_config_is_a_mismatch(tmp_path, change):
    name, edit = CHANGES[change]
    if not (QUANT / name).is_dir():
        pytest.skip(f"fixture {name} not generated")
    r = check(load(_with_config(tmp_path, name, edit)))
    assert r.verdict == MISMATCH


@pytest.mark.parametrize("edit,named", [
    (lambda q: q.update(quant_method="hqq"), "hqq"),
    (lambda q: q.update(bnb_4bit_quant_type="int4"), "int4"),
    (lambda q: q.pop("quant_method"), "without quant_method"),
    (lambda q: q.update(quant_method="fp8", weight_block_size=[128, 128]), "fp8"),
], ids=["unknown method", "unknown option", "no method", "transformers fp8 (no CPU writer)"])
def test_unknown_quantization_is_incomplete_and_named(tmp_path, edit, named):
    d = _with_config(tmp_path, "bnb_nf4", edit)
    r = check(load(d))
    assert r.verdict == INCOMPLETE
    assert any(named in p.name for p in r.parts), [p.name for p in r.parts]
    assert not any(i.mismatch for i in r.issues)
    report = listing(load(d))
    assert "not modelled" in report["quantization"] and named in report["quantization"]
    assert "model_parameters" not in report["totals"]
    assert "model_parameters" not in inspector.load(d).totals()


@pytest.mark.parametrize("name,edit,named", [
    ("gptq_4bit_g32", lambda q: q.update(checkpoint_format="marlin"), "marlin"),
    ("gptq_4bit_g32", lambda q: q.update(dynamic={"-:.*down_proj": {}}), "dynamic"),
    ("awq_gemm", lambda q: q.update(version="exllama"), "exllama"),
    ("ct_fp8_static", lambda q: q.update(kv_cache_scheme={"num_bits": 8, "type": "float"}),
     "kv_cache_scheme"),
], ids=["gptq marlin", "gptq dynamic", "awq exllama", "ct kv cache"])
def test_unknown_option_is_incomplete(tmp_path, name, edit, named):
    if not (QUANT / name).is_dir():
        pytest.skip(f"fixture {name} not generated")
    r = check(load(_with_config(tmp_path, name, edit)))
    assert r.verdict == INCOMPLETE and any(named in p.name for p in r.parts)


def test_skipped_modules_stay_unquantized():
    """llm_int8_skip_modules=["lm_head", "o_proj"]: those layers keep their float weights."""
    ckpt = load(QUANT / "bnb_int8_skip")
    assert ckpt["model.layers.0.self_attn.o_proj.weight"].dtype == "float32"
    assert "model.layers.0.self_attn.o_proj.SCB" not in ckpt
    assert check(ckpt).verdict == VERIFIED


@pytest.mark.parametrize("name,edit", [
    ("ct_w4a16_group", lambda q: q["config_groups"]["group_0"]["weights"].update(group_size=0)),
    ("ct_fp8_block", lambda q: q["config_groups"]["group_0"]["weights"].update(
        block_structure=[0, "x"])),
    ("ct_w4a16_group", lambda q: q.update(config_groups=["not", "a", "mapping"])),
    ("ct_w4a16_group", lambda q: q["config_groups"]["group_0"].update(targets=["re:("])),
    ("gptq_4bit_g32", lambda q: q.update(bits="four", group_size=None)),
    ("bnb_nf4", lambda q: q.update(llm_int8_skip_modules=[["nested"]], bnb_4bit_quant_storage=7)),
], ids=["ct group 0", "ct block [0, x]", "ct groups list", "ct bad regex", "gptq bits text",
        "bnb odd types"])
def test_malformed_quantization_config_is_named_never_a_crash(tmp_path, name, edit, capsys):
    if not (QUANT / name).is_dir():
        pytest.skip(f"fixture {name} not generated")
    d = _with_config(tmp_path, name, edit)
    r = check(load(d))
    assert r.verdict == INCOMPLETE
    assert any(p.name.startswith("quantization (") for p in r.parts)
    assert main(["show", str(d)]) == 0
    assert main(["check", str(d)]) == 3
    capsys.readouterr()


def test_lone_safetensors_reads_the_config_beside_it(tmp_path):
    d = QUANT / "gptq_4bit_g32"
    if not d.is_dir():
        pytest.skip("gptq fixtures not generated")
    want = _truth(d)["unquantized_num_parameters"]
    assert listing(load(d / "model.safetensors"))["totals"]["model_parameters"] == want
    assert inspector.load(d / "model.safetensors").totals()["model_parameters"] == want
    assert check(load(d / "model.safetensors")).verdict == VERIFIED
    # a sibling config.json that is not JSON is no quantization config: listed as stored
    shutil.copy(d / "model.safetensors", tmp_path)
    (tmp_path / "config.json").write_bytes(b"{\x00not json")
    report = listing(load(tmp_path / "model.safetensors"))
    assert "quantization" not in report and "model_parameters" not in report["totals"]
