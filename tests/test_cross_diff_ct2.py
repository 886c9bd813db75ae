"""``inspector diff`` of a source checkpoint against its CTranslate2 conversion, paired by the
maps ``ct2-onmt-py`` / ``ct2-fairseq`` (built from ``inspector.adapters.ctranslate2_names``).

Truths: the converted variables and roles CTranslate2's own spec recorded
(``fixtures/ctranslate2/*.truth.json``), and per variable the NumPy error that CTranslate2's own
``OpenNMTPyConverter`` gives between its float32 variables and its quantized ones (run in the
producer venv by ``tests/ct2_producer.py``), which also converts a redrawn checkpoint of the
same shapes for the "another checkpoint" case.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import yaml

from inspector.adapters.errors import UsageError
from inspector.ct2_layout_maps import MAP_DIR, SPECS, build
from inspector.diffing import diff, layout_findings, layout_summary
from inspector.layout_map import parse

from conftest import FIXTURES, load_truth, run_cli

CT2 = FIXTURES / "ctranslate2"
ONMT = FIXTURES / "onmt" / "transformer.pt"
FAIRSEQ = FIXTURES / "fairseq" / "transformer.pt"
PRODUCER = Path("/work/venvs/counts-onmt/bin/python")
SCRIPT = Path(__file__).resolve().parent / "ct2_producer.py"
SOURCES = {"onmt": (ONMT, "ct2-onmt-py"), "fairseq": (FAIRSEQ, "ct2-fairseq")}
needs_producer = pytest.mark.skipif(not PRODUCER.exists(), reason="no OpenNMT-py + CT2 venv")


def _converted(truth: dict) -> set[str]:
    """CTranslate2's variables that came from the source: every parameter and buffer but the
    quantization scales (attributes are ``other``)."""
    return {t["stored_name"] for t in truth["tensors"]
            if t["role"] in ("parameter", "buffer") and not t["stored_name"].endswith("_scale")}


def _producer(*args: str) -> dict:
    proc = subprocess.run([str(PRODUCER), str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("framework", ["onmt", "fairseq"])
@pytest.mark.parametrize("swap", [False, True])
def test_float32_conversion_pairs_every_tensor_with_equal_values(framework, swap):
    source, name = SOURCES[framework]
    conv = CT2 / f"{framework}_transformer_none"
    truth = load_truth(CT2 / f"{framework}_transformer_none.truth.json")
    res = diff(conv, source, values=True) if swap else diff(source, conv, values=True)
    assert res.layout["map"] == name and res.layout["swapped"] is swap
    src_of = (lambda r: r.b) if swap else (lambda r: r.a)
    ct2_of = (lambda r: r.a) if swap else (lambda r: r.b)
    paired = [r for r in res.records if src_of(r) is not None and ct2_of(r) is not None]
    rest = [r for r in res.records if r not in paired]
    # the only CT2 tensors without a source one are the ones the converter generates
    assert all(r.how.startswith("generated") for r in rest), [(r.name, r.op) for r in rest]
    generated = {ct2_of(r).name for r in rest}
    assert {ct2_of(r).name for r in paired} | generated == _converted(truth)
    if framework == "fairseq":  # fairseq stores no sinusoidal table
        assert generated == {"encoder/position_encodings/encodings",
                             "decoder/position_encodings/encodings"}
    else:
        assert generated == set()
    # every source parameter went into exactly one pair (fused ones into one together)
    src = load_truth(Path(f"{source}.truth.json"))
    members = [m for r in paired for m in (src_of(r).extra.get("concat") or [src_of(r).name])]
    assert len(members) == len(set(members))
    # the producer's pickle paths: the state dict under "model" (OpenNMT-py's generator apart)
    params = {t["stored_name"].removeprefix("model.") for t in src["tensors"]
              if t["role"] == "parameter"}
    assert params <= set(members), sorted(params - set(members))
    for r in paired:
        assert r.op == "unchanged" and r.values.identical and r.values.max_abs == 0.0, r.name
    assert not res.different and not layout_findings(res)
    # fused: self-attention q/k/v into linear_0, context attention k/v into linear_1
    fused = {ct2_of(r).name for r in paired if "concatenated" in r.how}
    assert fused == {n for n in _converted(truth)
                     if "self_attention/linear_0/" in n or "/attention/linear_1/" in n}


@needs_producer
@pytest.mark.parametrize("quant", ["int8", "int16", "float16", "bfloat16", "int8_float16"])
def test_quantized_errors_are_the_converters_numbers(quant):
    want = _producer(str(ONMT), quant)
    truth = load_truth(CT2 / f"onmt_transformer_{quant}.truth.json")
    for n, w in want.items():  # the producer's conversion is the committed one
        got = truth["values"][n].get("dequantized", truth["values"][n])["sum"]
        assert w["sum"] == pytest.approx(got, rel=1e-6, abs=1e-6), n
    res = diff(ONMT, CT2 / f"onmt_transformer_{quant}", values=True)
    assert not res.structural
    seen = set()
    by_group: dict[str, list[float]] = {}
    sch = __import__("inspector.compare", fromlist=["x"]).choose_scheme(res.scheme, [])
    for r in res.records:
        if r.b is None or r.b.name not in want:
            continue
        w = want[r.b.name]
        seen.add(r.b.name)
        assert r.b.dtype == w["dtype"], r.name
        assert r.values.max_abs == pytest.approx(w["max_abs"], rel=1e-6, abs=1e-12), r.name
        rel = math.sqrt(w["ss_d"] / w["ss_a"])
        assert r.values.rel_l2 == pytest.approx(rel, rel=1e-6, abs=1e-12), r.name
        g = by_group.setdefault(f"{sch.assign(r.name).group}\0{w['dtype']}", [0.0, 0.0, 0.0])
        g[0] += w["ss_a"]
        g[1] += w["ss_d"]
        g[2] = max(g[2], w["max_abs"])
    assert seen == set(want)  # every variable the producer measured was paired
    summary = {f"{s['group']}\0{s['dtype']}": s for s in layout_summary(res)}
    assert set(summary) == set(by_group)
    for k, (ss_a, ss_d, mx) in by_group.items():
        assert summary[k]["rel_l2"] == pytest.approx(math.sqrt(ss_d / ss_a), rel=1e-6, abs=1e-12)
        assert summary[k]["max_abs"] == pytest.approx(mx, rel=1e-6, abs=1e-12)
    if quant.startswith("int8"):
        assert res.values_changed and not layout_findings(res)
        assert max(s["rel_l2"] for s in summary.values()) < 0.05


def test_fairseq_int8_every_weight_paired_and_close():
    res = diff(FAIRSEQ, CT2 / "fairseq_transformer_int8", values=True)
    truth = load_truth(CT2 / "fairseq_transformer_int8.truth.json")
    assert not res.structural and not layout_findings(res)
    int8 = {t["stored_name"] for t in truth["tensors"] if t["dtype"] == "int8"
            and t["role"] == "parameter"}
    got = {r.b.name: r for r in res.records if r.b is not None and r.a is not None}
    assert int8 <= set(got)
    for n in int8:
        v = got[n].values
        assert v.changed and 0 < v.rel_l2 < 0.01 and v.cosine > 0.9999, n


@needs_producer
def test_a_conversion_of_another_checkpoint_is_reported_different(tmp_path):
    other = tmp_path / "other"
    _producer(str(ONMT), "none", str(other), "7")  # same shapes, redrawn weights
    res = diff(ONMT, other, values=True)
    assert not res.structural and res.different
    findings = layout_findings(res)
    assert findings and "not a conversion of the same weights" in findings[0]["message"]
    r = run_cli("diff", str(ONMT), str(other), "--values")
    assert r.returncode == 1 and "not a conversion of the same weights" in r.stdout


def test_another_architecture_is_not_silently_paired():
    # OpenNMT-py with shared embeddings and relative positions against another model's CT2
    res = diff(FIXTURES / "onmt" / "transformer_shared.pt", CT2 / "onmt_transformer_none",
               values=True)
    assert res.layout["map"] == "ct2-onmt-py" and res.structural
    assert res.counts()["reshaped"] > 0 and res.counts()["removed"] > 0
    # CTranslate2's names are the same whatever the source: a fairseq conversion (d=16)
    # paired with the OpenNMT-py source (d=8) by name is reshaped everywhere, never equal
    res = diff(ONMT, CT2 / "fairseq_transformer_none", values=True)
    assert res.structural and res.different
    assert res.counts()["reshaped"] >= 20


def test_json_report_is_strict_json():
    r = run_cli("diff", str(FAIRSEQ), str(CT2 / "fairseq_transformer_int8"), "--values",
                "--format", "json", "--all")
    assert r.returncode == 1, r.stderr  # int8 values differ (no tolerance given)

    def no_constant(x):
        raise AssertionError(f"non-standard JSON constant {x}")

    rep = json.loads(r.stdout, parse_constant=no_constant)
    lay = rep["layout"]
    assert lay["map"] == "ct2-fairseq" and rep["structural_difference"] is False
    assert lay["left_out"] == {"a": {"buffer": 2, "other": 8, "optimizer": 90},
                               "b": {"other": 16}}
    assert all(math.isfinite(g["rel_l2"]) for g in lay["summary"])
    fused = [t for t in rep["tensors"] if "concatenated" in (t.get("how") or "")]
    assert {t["b"]["name"] for t in fused} == {
        "encoder/layer_0/self_attention/linear_0/weight",
        "encoder/layer_0/self_attention/linear_0/bias",
        "decoder/layer_0/self_attention/linear_0/weight",
        "decoder/layer_0/self_attention/linear_0/bias",
        "decoder/layer_0/attention/linear_1/weight", "decoder/layer_0/attention/linear_1/bias"}
    r = run_cli("diff", str(FAIRSEQ), str(CT2 / "fairseq_transformer_int8"), "--values",
                "--atol", "0.004")
    assert r.returncode == 0 and "conversion error by group" in r.stdout, r.stdout
    assert "left out (roles the conversion does not carry)" in r.stdout


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_yaml_maps_are_the_name_modules_data(name):
    data = yaml.safe_load((MAP_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    assert data == build(name)
    parse(data, name)


@pytest.mark.parametrize(("rule", "message"), [
    ({"a": "x.q", "b": "y", "concat": 0}, "a list of a templates"),
    ({"a": ["x.q", "x.k"], "b": "y"}, "a list of a templates"),
    ({"a": ["x.{i}.q", "x.k"], "b": "y.{i}", "concat": 0}, "share their variables"),
    ({"a": "x", "b": "y", "squeeze": -1}, "axis"),
    ({"a": "x", "b": "y", "drop_rows": "pad"}, "params does not define"),
    ({"a": "x", "b": "y", "transpose": "yes"}, "transpose is true or false"),
    ({"a": "x", "b": "y", "reverse": True}, "unknown rule keys"),
])
def test_bad_rules_are_refused(rule, message):
    with pytest.raises(UsageError, match=message):
        parse({"name": "x", "tensors": [rule]}, "m.yaml")


def test_cli_bad_map_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nb: {formats: [ctranslate2]}\ntensors:\n"
                   "  - {a: ['encoder.layers.{i}.q', k], b: 'encoder/layer_{i}/q', concat: 0}\n")
    r = run_cli("diff", str(FAIRSEQ), str(CT2 / "fairseq_transformer_none"), "--layout",
                str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "share their variables" in r.stderr
    bad.write_text("name: x\ntensors: [{a: [p, q], b: r, concat: 1}]\na: {roles: parameter}\n")
    r = run_cli("diff", str(FAIRSEQ), str(CT2 / "fairseq_transformer_none"), "--layout",
                str(bad))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "roles" in r.stderr
    r = run_cli("diff", str(FAIRSEQ), str(CT2 / "fairseq_transformer_none"), "--layout",
                "ct2-onmt-py")  # fairseq names: not an OpenNMT-py checkpoint
    assert r.returncode == 2 and "does not fit" in r.stderr and "Traceback" not in r.stderr


def test_each_transform_on_arrays_numpy_wrote(tmp_path):
    """Every value transform, on .npz files NumPy wrote: B is A as NumPy transforms it."""
    import numpy as np

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    pe, w, emb = (rng.standard_normal((6, 1, 3)), rng.standard_normal((5, 2)),
                  rng.standard_normal((7, 3)))
    np.savez(tmp_path / "a.npz", **{"l.0.q": q, "l.0.k": k, "pe": pe, "w": w, "emb": emb})
    b = {"l_0_qk": np.concatenate([q, k], 0), "pe_b": pe[:, 0], "w_b": w.T,
         "emb_b": emb[2:]}
    np.savez(tmp_path / "b.npz", **b)
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump({"name": "t", "tensors": [
        {"a": ["l.{i}.q", "l.{i}.k"], "b": "l_{i}_qk", "concat": 0},
        {"a": "pe", "b": "pe_b", "squeeze": 1},
        {"a": "w", "b": "w_b", "transpose": True},
        {"a": "emb", "b": "emb_b", "drop_rows": 2}]}))
    res = diff(tmp_path / "a.npz", tmp_path / "b.npz", values=True, layout=str(m))
    assert {r.op for r in res.records} == {"unchanged"} and not res.different
    assert all(r.values.max_abs == 0 for r in res.records)
    assert {r.name for r in res.records} == {"l.0.{q,k}", "pe", "w", "emb"}
    # a rule that leaves a step out does not pair equal values
    m.write_text(yaml.safe_dump({"name": "t", "tensors": [
        {"a": ["l.{i}.k", "l.{i}.q"], "b": "l_{i}_qk", "concat": 0},
        {"a": "pe", "b": "pe_b", "squeeze": 0},
        {"a": "w", "b": "w_b"},
        {"a": "emb", "b": "emb_b", "drop_rows": 3}]}))
    res = diff(tmp_path / "a.npz", tmp_path / "b.npz", values=True, layout=str(m))
    ops = {r.name: r.op for r in res.records}
    assert ops == {"l.0.{k,q}": "changed", "pe": "reshaped", "w": "reshaped",
                   "emb": "reshaped"}, ops
    assert res.different
