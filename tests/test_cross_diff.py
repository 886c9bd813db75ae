"""``inspector diff`` across layouts: a Hugging Face model against the GGUF files llama.cpp's
own ``convert_hf_to_gguf.py`` made of it (fixtures/gguf/converted/make_converted.py), and a DCP
directory against its plain state dict (fixtures/dcp_prefixed/make_prefixed.py).

The truths are the producers' facts: the converter's tensor list (gguf-py's ``GGUFReader``), each
HF tensor's GGUF name by gguf-py's ``TensorNameMap``, and per GGUF tensor the NumPy error between
the HF weights (permuted by the converter's ``LlamaModel.permute``, experts stacked as it stacks
them) and ``GGUFReader``'s data dequantized by gguf-py.
"""

from __future__ import annotations

import json
import math

import pytest

from inspector.adapters.errors import UsageError
from inspector.diffing import diff, layout_summary, report
from inspector.layout_map import parse, unpermute_rows

from conftest import FIXTURES, load_truth, run_cli

CONV = FIXTURES / "gguf" / "converted"
PREFIXED = FIXTURES / "dcp_prefixed"
MODELS = ("llama", "mixtral")
GGML_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "Q8_0": "q8_0"}


def _truth(model: str) -> dict:
    return load_truth(CONV / f"{model}_hf.truth.json")


def _b_names(model: str) -> dict[str, str]:
    """HF name (a stack: its members' names joined) -> the GGUF name the converter gave it."""
    out: dict[str, list] = {}
    for hf, (g, xid) in _truth(model)["pairs"].items():
        out.setdefault(g, []).append((xid, hf))
    return {g: [hf for _, hf in sorted(v, key=lambda x: x[0] or 0)] for g, v in out.items()}


def _pairs(res) -> dict[str, list[str]]:
    """GGUF name -> the HF tensors the diff paired with it (a stack: its members in order)."""
    return {r.b.name: list(r.a.extra.get("stack") or [r.a.name]) for r in res.records
            if r.a is not None and r.b is not None}


@pytest.mark.parametrize("model", MODELS)
def test_f32_conversion_pairs_every_tensor_as_the_converter_named_it(model):
    truth = _truth(model)
    res = diff(CONV / f"{model}_hf", CONV / f"{model}.f32.gguf", values=True)
    assert res.layout["map"] == "hf-gguf-llama" and not res.layout["swapped"]
    assert {r.op for r in res.records} == {"unchanged"}, [r for r in res.records
                                                          if r.op != "unchanged"]
    assert _pairs(res) == _b_names(model)
    assert sorted(_pairs(res)) == sorted(t["name"] for t in truth["outputs"]["f32"]["tensors"])
    # values equal after the q/k rows are un-permuted and the experts unstacked
    for r in res.records:
        assert r.values.identical and r.values.max_abs == 0.0, r.name
    assert not res.different
    # the converter's shapes: GGUF ne reversed is the (stacked) HF shape
    ne = {t["name"]: t["ne"] for t in truth["outputs"]["f32"]["tensors"]}
    for r in res.records:
        assert list(r.b.shape) == ne[r.b.name][::-1] == list(r.a.shape)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("outtype", ["f16", "bf16", "q8_0"])
def test_converted_errors_are_the_producers_numbers(model, outtype):
    out = _truth(model)["outputs"][outtype]
    res = diff(CONV / f"{model}_hf", CONV / out["file"], values=True)
    assert not res.structural
    types = {t["name"]: GGML_DTYPE[t["type"]] for t in out["tensors"]}
    seen = set()
    for r in res.records:
        want = out["errors"][r.b.name]
        assert r.b.dtype == types[r.b.name]
        assert r.values.max_abs == pytest.approx(want["max_abs"], rel=1e-12, abs=0), r.name
        assert r.values.rel_l2 == pytest.approx(want["rel_l2"], rel=1e-9, abs=1e-15), r.name
        assert r.op == ("unchanged" if want["max_abs"] == 0 else "changed")
        seen.add(r.b.name)
    assert seen == set(out["errors"])
    quantized = [r for r in res.records if r.b.dtype != "float32"]
    assert quantized and all(0 < r.values.rel_l2 < 0.02 for r in quantized)
    # the summary: per group and stored type, the largest error and a relative L2 no larger
    # than the group's largest one
    rows = layout_summary(res)
    assert sum(g["tensors"] for g in rows) == len(res.records)
    for g in rows:
        members = [r for r in res.records if r.b.dtype == g["dtype"]
                   and res.sums.get(r.name) is not None]
        assert g["max_abs"] <= max(out["errors"][r.b.name]["max_abs"] for r in members)
    assert max(g["max_abs"] for g in rows) == max(e["max_abs"] for e in out["errors"].values())


def test_gguf_first_is_the_same_pairing_flipped():
    res = diff(CONV / "mixtral.q8_0.gguf", CONV / "mixtral_hf", values=True)
    assert res.layout["swapped"] and not res.structural
    assert {r.a.name: list(r.b.extra.get("stack") or [r.b.name]) for r in res.records} \
        == _b_names("mixtral")
    errors = _truth("mixtral")["outputs"]["q8_0"]["errors"]
    for r in res.records:  # the same differences; relative to A (the GGUF) now
        assert r.values.max_abs == pytest.approx(errors[r.a.name]["max_abs"], rel=1e-12)


def test_another_models_gguf_is_reported_different():
    """A GGUF of another Llama (same config, another seed): paired by name, and every
    projection's values far beyond any quantization error, named in a finding."""
    res = diff(CONV / "llama_hf", CONV / "llama_other.f32.gguf", values=True)
    assert res.different and res.values_changed == 16
    rep = report(res)
    assert any("not a conversion of the same weights" in f["message"] for f in rep["findings"])
    # a GGUF of another architecture: the structure differs (dense MLP vs stacked experts)
    res = diff(CONV / "llama_hf", CONV / "mixtral.f32.gguf")
    ops = {(r.op, (r.a or r.b).name) for r in res.records}
    assert res.structural and ("removed", "model.layers.0.mlp.gate_proj.weight") in ops
    assert ("added", "blk.0.ffn_gate_exps.weight") in ops
    r = run_cli("diff", str(CONV / "llama_hf"), str(CONV / "llama_other.f32.gguf"), "--values")
    assert r.returncode == 1 and "not a conversion" in r.stdout


def test_config_disagreeing_with_the_gguf_metadata_is_named(tmp_path):
    src = CONV / "llama_hf"
    for f in src.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((src / "config.json").read_text())
    cfg["num_key_value_heads"] = 4
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    res = diff(tmp_path, CONV / "llama.f32.gguf")
    assert res.layout["params"] == {"n_head": 4, "n_head_kv": 2}  # the GGUF's own metadata
    msgs = [f["message"] for f in report(res)["findings"]]
    assert any("n_head_kv" in m and "says 2" in m and "says 4" in m for m in msgs)


def test_json_report_is_strict_json():
    r = run_cli("diff", str(CONV / "mixtral_hf"), str(CONV / "mixtral.q8_0.gguf"), "--values",
                "--format", "json")
    assert r.returncode == 1, r.stderr  # q8_0 values differ (no tolerance given)

    def no_constant(x):
        raise AssertionError(f"non-standard JSON constant {x}")

    rep = json.loads(r.stdout, parse_constant=no_constant)
    assert rep["schema"] == "inspector.diff/1" and rep["layout"]["map"] == "hf-gguf-llama"
    assert rep["summary"]["removed"] == rep["summary"]["added"] == 0
    stacked = [t for t in rep["tensors"] if "stacked" in (t.get("how") or "")]
    assert len(stacked) == 6 and all(t["b"]["shape"][0] == 4 for t in stacked)
    assert all(math.isfinite(g["rel_l2"]) for g in rep["layout"]["summary"])
    r = run_cli("diff", str(CONV / "llama_hf"), str(CONV / "llama.q8_0.gguf"), "--values",
                "--rtol", "0.05", "--atol", "0.001")
    assert r.returncode == 0 and "conversion error by group" in r.stdout, r.stdout


def test_layout_none_keeps_the_plain_name_diff():
    res = diff(CONV / "llama_hf", CONV / "llama.f32.gguf", layout="none")
    assert res.layout is None and {r.op for r in res.records} == {"removed", "added"}


def test_unpermute_inverts_the_converters_permutation():
    """The converter's permute (reshape (n, 2, rows/n/2), swap) written out on indices; the
    fixtures' max |a-b| = 0 on q and k is the check against the real converter."""
    import numpy as np

    rows, n = 16, 2
    x = np.arange(rows * 3).reshape(rows, 3)
    permuted = x.reshape(n, 2, rows // n // 2, 3).swapaxes(1, 2).reshape(x.shape)
    assert (unpermute_rows(permuted, 4, n) == x).all()
    with pytest.raises(ValueError, match="rotary pairs"):
        unpermute_rows(np.zeros((6, 2)), 4, 4)


def test_dcp_against_its_state_dict_strips_the_prefix_it_finds():
    truth = load_truth(PREFIXED / "app.truth.json")
    assert all(t["stored_name"].startswith("app.model.") for t in truth["tensors"])
    res = diff(PREFIXED / "app", PREFIXED / "model.pt", values=True)
    assert res.layout["map"] == "dcp-torch"
    assert res.layout["names"] == ["prefix A 'app.model.' stripped"]
    assert {r.op for r in res.records} == {"unchanged"} and len(res.records) == 6
    assert all(r.values.identical for r in res.records)
    other = diff(PREFIXED / "app", PREFIXED / "other.pt", values=True)
    assert other.different and not other.structural


def test_a_layout_map_file_is_validated(tmp_path):
    with pytest.raises(UsageError, match="share their variables"):
        parse({"name": "x", "tensors": [{"a": "l.{i}.w", "b": "blk.w"}]}, "m.yaml")
    with pytest.raises(UsageError, match="params does not define"):
        parse({"name": "x", "tensors": [{"a": "q", "b": "q", "permute_rows": ["h", "h"]}]},
              "m.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    r = run_cli("diff", str(CONV / "llama_hf"), str(CONV / "llama.f32.gguf"), "--layout",
                str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "layout map" in r.stderr
    # a user's map: the GGUF's output norm and embedding only; everything else is unmapped
    own = tmp_path / "own.yaml"
    own.write_text("name: mine\nb: {formats: [gguf]}\ntensors:\n"
                   "  - {a: model.embed_tokens.weight, b: token_embd.weight}\n"
                   "  - {a: model.norm.weight, b: output_norm.weight}\n")
    with pytest.raises(UsageError, match="does not fit"):
        diff(CONV / "llama_hf", CONV / "llama.f32.gguf", layout=str(own))


@pytest.mark.parametrize("path", ["llama_hf", "mixtral_hf", "llama.q8_0.gguf",
                                  "mixtral.bf16.gguf"])
def test_both_sides_of_the_conversion_verify(path):
    """The formulas agree with the converter: the HF input (hf families) and its GGUF output
    (gguf-llama, experts included) both verify against their own hyperparameters."""
    from inspector.adapters.registry import load
    from inspector.formulas.check import check

    res = check(load(CONV / path))
    assert res.verdict == "verified", res.to_dict()["tensors"]
