"""A Marian model and its CTranslate2 conversions: paired by the ``ct2-marian`` layout map
(built from ``inspector.adapters.ctranslate2_names``, the converter's own name and layout
correspondences) and linked by ``inspector lineage`` as conversions.

Truths: fixtures/ctranslate2/marian_transformer_{none,int8} were written by CTranslate2 4.8.5's
own ``MarianConverter`` from fixtures/marian/transformer.npz (``make_ct2_fixtures.py marian``);
their ``.truth.json`` lists the variables CTranslate2's spec saved, which of them are tied
(aliases of one variable) and per variable the sum of its dequantized values. The other Marian
models (pre-norm, untied) were trained separately by Marian (fixtures/marian/make_marian_fixtures.py)
and converted by nobody.
"""

from __future__ import annotations

import math

import pytest

from inspector.diffing import diff, layout_findings
from inspector.lineage import run

from conftest import FIXTURES, load_truth

CT2 = FIXTURES / "ctranslate2"
MARIAN = FIXTURES / "marian"
SOURCE = MARIAN / "transformer.npz"


def _converted(truth: dict) -> set[str]:
    return {t["stored_name"] for t in truth["tensors"]
            if t["role"] in ("parameter", "buffer") and not t["stored_name"].endswith("_scale")}


def test_every_converted_variable_pairs_with_its_marian_source_exactly():
    truth = load_truth(CT2 / "marian_transformer_none.truth.json")
    res = diff(SOURCE, CT2 / "marian_transformer_none", values=True)
    assert res.layout["map"] == "ct2-marian" and res.layout["swapped"] is False
    paired = [r for r in res.records if r.a is not None and r.b is not None]
    rest = [r for r in res.records if r not in paired]
    # only the sinusoidal tables (Marian stores no Wpos here) have no source
    assert {r.b.name for r in rest} == {"encoder/position_encodings/encodings",
                                        "decoder/position_encodings/encodings"}
    assert all(r.how.startswith("generated") for r in rest)
    assert {r.b.name for r in paired} | {r.b.name for r in rest} == _converted(truth)
    for r in paired:
        assert r.values.identical and r.values.max_abs == 0.0, r.name
    # every Marian parameter went into the conversion (its own parameter list)
    src = load_truth(MARIAN / "transformer.npz.truth.json")
    members = {m for r in paired for m in (r.a.extra.get("concat") or [r.a.name])}
    params = {t["stored_name"] for t in src["tensors"] if t["role"] == "parameter"}
    assert params <= members, sorted(params - members)
    # the one shared embedding table went to every variable CTranslate2 ties to it
    tied = next(g for g in truth["tied"] if "decoder/embeddings/weight" in g)
    assert {r.b.name for r in paired if r.a.name == "Wemb"} == set(tied)
    # fused: self-attention q/k/v, context-attention k/v (each transposed, then concatenated)
    fused = {r.b.name for r in paired if "concatenated" in r.how}
    assert fused == {n for n in _converted(truth)
                     if "self_attention/linear_0/" in n or "/attention/linear_1/" in n}
    assert not res.different and not layout_findings(res)


def test_int8_conversion_within_the_quantizers_rounding():
    truth = load_truth(CT2 / "marian_transformer_int8.truth.json")
    res = diff(SOURCE, CT2 / "marian_transformer_int8", values=True)
    assert res.layout["map"] == "ct2-marian"
    paired = [r for r in res.records if r.a is not None and r.b is not None]
    dtypes = {t["stored_name"]: t["dtype"] for t in truth["tensors"]}
    for r in paired:
        if dtypes[r.b.name] == "int8":
            # ModelSpec._quantize: each value rounded to max|row| / 127 steps
            assert 0 < r.values.rel_l2 < 0.02, r.name
        else:
            assert r.values.identical, r.name


def test_another_marian_model_is_not_paired_as_a_conversion():
    for other in ("transformer_prenorm.npz", "transformer_untied.npz"):
        res = diff(MARIAN / other, CT2 / "marian_transformer_none", values=True)
        assert res.different


@pytest.fixture(scope="module")
def forest(tmp_path_factory):
    cache = tmp_path_factory.mktemp("fp")
    got, _ = run([str(MARIAN), str(CT2 / "marian_transformer_none"),
                  str(CT2 / "marian_transformer_int8")], cache_dir=str(cache))
    return got


def test_lineage_draws_the_two_conversions_and_nothing_else(forest):
    def name(p: str) -> str:
        return p.rstrip("/").split("/fixtures/")[-1]

    edges = {(name(e.parent), name(e.child), e.kind) for e in forest.edges}
    assert edges == {
        ("marian/transformer.npz", "ctranslate2/marian_transformer_none/model.bin", "conversion"),
        ("marian/transformer.npz", "ctranslate2/marian_transformer_int8/model.bin", "conversion"),
    }
    for e in forest.edges:
        assert e.evidence["map"] == "ct2-marian" and e.evidence["tensors"] == 48
        assert math.isfinite(e.evidence["rel_l2"]) and e.evidence["rel_l2"] < 0.02
    none = next(e for e in forest.edges if "none" in e.child)
    assert none.evidence["rel_l2"] == 0.0

