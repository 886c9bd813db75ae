"""Quantized layers dequantized for ``inspector lineage``:

* inspector's NumPy dequantization of every fixtures/hf_quant folder equals the producers' own
  (bitsandbytes ``dequantize_4bit`` / ``int8_vectorwise_dequant``, gptqmodel's
  ``TorchQuantLinear.dequantize_weight`` and AWQ ``dequantize_gemm``, compressed-tensors'
  compressors' ``decompress``), as fixtures/lineage/make_dequant_truth.py recorded it;
* a quantized copy's packed weights are compared with its source's within the scheme's noise,
  and a quantized copy of a fine-tune confined to quantized layers is linked to the fine-tune,
  not to the base (fixtures/lineage/make_quant_finetune.py, its truth from bitsandbytes).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from inspector.adapters.registry import load
from inspector.fingerprint import Cache, fingerprint_cached
from inspector.lineage import run
from inspector.quant_values import layers

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DEQUANT = json.loads((FIXTURES / "lineage" / "dequant.truth.json").read_text())
QUANT_TRUTH = json.loads((FIXTURES / "lineage" / "quant_sources.truth.json").read_text())
FT_TRUTH = json.loads((FIXTURES / "lineage" / "quant_ft.truth.json").read_text())


def rel(path: str) -> str:
    return str(Path(path).resolve().relative_to(FIXTURES.resolve()))


@pytest.mark.parametrize("folder", sorted(DEQUANT["folders"]))
def test_dequantization_equals_the_producers(folder):
    truth = DEQUANT["folders"][folder]["modules"]
    got, aside = layers(load(str(FIXTURES / "hf_quant" / folder)))
    assert not aside and set(got) == set(truth)
    for module, t in truth.items():
        layer = got[module]
        assert list(layer.shape) == t["shape"]
        o, i = layer.shape
        values, noise = layer.values(np.arange(o * i))
        points = values[:: t["stride"]][: len(t["points"])]
        assert points.tolist() == t["points"], module  # bit for bit, in the producer's dtype
        assert values.sum() == pytest.approx(t["sum"], rel=1e-9, abs=1e-9)
        assert (values ** 2).sum() == pytest.approx(t["sum_sq"], rel=1e-12)
        assert np.abs(values).max() == t["max_abs"]
        assert np.all(np.isfinite(noise)) and np.all(noise >= 0)


@pytest.fixture(scope="module")
def quant_store(tmp_path_factory):
    forest, _ = run([str(FIXTURES / "hf_quant"), str(FIXTURES / "lineage" / "quant_sources")],
                    cache_dir=str(tmp_path_factory.mktemp("fp")))
    return forest


def test_quantized_copies_compare_their_packed_values(quant_store):
    """Every quantized copy is a re-save of its source whose evidence counts the packed weights
    compared, each within the scheme's noise; AWQ's rescaled weights are named, not compared."""
    got = {(rel(e.parent), rel(e.child), e.kind) for e in quant_store.edges}
    assert got == {(e["parent"], e["child"], e["kind"]) for e in QUANT_TRUTH["edges"]}
    for e in quant_store.edges:
        folder = rel(e.child).split("/")[-1]
        modules = DEQUANT["folders"][folder]["modules"]
        packed = e.evidence["packed"]
        if folder == "awq_gemm":
            assert packed["compared"] == 0
            assert set(packed["not_compared"]) == set(modules)
            assert all("AWQ scales each input channel" in why
                       for why in packed["not_compared"].values())
            continue
        assert packed["compared"] == packed["within_noise"] == len(modules), folder
        assert 0 < packed["max_noise_ratio"] <= 1.0
        assert "packed weights dequantized and compared" in " ".join(e.evidence["changes"])


def test_quantized_fine_tune_is_linked_to_the_fine_tune(tmp_path):
    """The base, its fine-tune confined to q_proj / v_proj, the fine-tune's nf4, int8 and GPTQ
    copies and three quantizations of the base: each copy is a re-save of the model it quantizes, and
    the fine-tune's changed tensors are the trained ones."""
    base = "lineage/quant_sources/llama"
    copies = ["hf_quant/bnb_nf4", "hf_quant/bnb_int8", "hf_quant/gptq_4bit_g32"]
    forest, _ = run([str(FIXTURES / base), str(FIXTURES / "lineage" / "quant_ft"),
                     *(str(FIXTURES / c) for c in copies)], cache_dir=str(tmp_path))
    assert not forest.errors
    # which of the base and the fine-tune came first nothing here records (no step, no
    # declared base): the fine-tune edge is compared as a pair, the re-saves with direction
    def pairs(edges: set) -> set:
        return {(frozenset((p, c)), k) if k == "fine-tune" else (p, c, k) for p, c, k in edges}

    got = {(rel(e.parent), rel(e.child), e.kind) for e in forest.edges}
    want = {(e["parent"], e["child"], e["kind"]) for e in FT_TRUTH["edges"]}
    want |= {(base, c, "re-save") for c in copies}
    assert pairs(got) == pairs(want)
    (ft,) = [e for e in forest.edges if e.kind == "fine-tune"]
    trained = {re.sub(r"\.\d+\.", ".#.", n) for n in FT_TRUTH["trained"]}
    assert {n.split(" ")[0] for n in ft.evidence["changed_tensors"]} == trained


@pytest.mark.parametrize("copy", ["finetune_nf4", "finetune_int8", "finetune_gptq"])
def test_copy_of_a_fine_tune_is_no_re_save_of_the_base(tmp_path, copy):
    """Without the fine-tune in the store, its quantized copy is a fine-tune of the base whose
    changed tensors are the packed weights the training moved (beyond the scheme's noise)."""
    forest, _ = run([str(FIXTURES / "lineage" / "quant_sources" / "llama"),
                     str(FIXTURES / "lineage" / "quant_ft" / copy)],
                    cache_dir=str(tmp_path))
    (edge,) = forest.edges
    assert edge.kind == "fine-tune"
    assert set(edge.evidence["changed_tensors"]) == {"model.layers.#.self_attn.q_proj.weight (x2)",
                                                     "model.layers.#.self_attn.v_proj.weight (x2)"}
    packed = edge.evidence["packed"]
    assert packed["compared"] == 14 and packed["within_noise"] == 10
    assert packed["max_noise_ratio"] > 1.0


def test_dequantized_fingerprints_survive_the_cache(tmp_path):
    ckpt = load(str(FIXTURES / "hf_quant" / "gptq_3bit_g32"))
    cache = Cache(tmp_path)
    first = fingerprint_cached(ckpt, cache)
    again = fingerprint_cached(ckpt, cache)
    assert cache.hits == 1 and set(again.dequantized) == set(first.dequantized)
    assert len(first.dequantized) == len(DEQUANT["folders"]["gptq_3bit_g32"]["modules"])
    for name, t in first.dequantized.items():
        u = again.dequantized[name]
        assert u.shape == t.shape and u.spread and t.spread
        assert np.array_equal(u.samples, t.samples) and np.array_equal(u.noise, t.noise)


def test_unreadable_packing_is_set_aside_and_named(tmp_path):
    """A GPTQ checkpoint whose g_idx points past its groups (a corrupt file): the module's
    packed values are not compared, the reason is named, and nothing raises."""
    src = FIXTURES / "hf_quant" / "gptq_4bit_g32"
    bad = tmp_path / "gptq_bad"
    bad.mkdir()
    shutil.copy(src / "config.json", bad / "config.json")
    data = bytearray((src / "model.safetensors").read_bytes())
    n = int.from_bytes(data[:8], "little")
    begin, end = json.loads(data[8:8 + n])["model.layers.0.self_attn.q_proj.g_idx"][
        "data_offsets"]
    at = 8 + n + begin
    data[at:8 + n + end] = np.full((end - begin) // 4, 10_000, "<i4").tobytes()
    (bad / "model.safetensors").write_bytes(bytes(data))
    forest, _ = run([str(FIXTURES / "lineage" / "quant_sources" / "llama"), str(bad)],
                    cache_dir=str(tmp_path / "fp"))
    (edge,) = forest.edges
    why = edge.evidence["packed"]["not_compared"]["model.layers.0.self_attn.q_proj"]
    assert "could not be read" in why
    assert edge.evidence["packed"]["compared"] == 13


def test_inventory_keeps_the_dequantized_prints(tmp_path):
    """The inventory's lineage (from its own tables, no tensor bytes read again) links the
    quantized copies as ``inspector lineage`` does, the packed values compared."""
    pytest.importorskip("duckdb")
    import duckdb

    from inspector.inventory import build

    tree = tmp_path / "store"
    shutil.copytree(FIXTURES / "lineage" / "quant_ft", tree / "quant_ft")
    shutil.copytree(FIXTURES / "lineage" / "quant_sources" / "llama", tree / "llama")
    db = tmp_path / "store.duckdb"
    build([str(tree)], db)
    build([str(tree)], db)  # the second run: every row unchanged, lineage from the tables
    con = duckdb.connect(str(db), read_only=True)
    try:
        edges = con.execute("SELECT parent, child, kind, evidence FROM edges").fetchall()
    finally:
        con.close()
    got = {(Path(p).name, Path(c).name, k) for p, c, k, _ in edges}
    forest, _ = run([str(tree)], use_cache=False)
    assert got == {(Path(e.parent).name, Path(e.child).name, e.kind) for e in forest.edges}
    # which of base and fine-tune came first, nothing in this store tells (no step, no
    # declaration): the pair and the copies' parent are what the bytes say
    assert {frozenset((p, c)) for p, c, k in got if k == "fine-tune"} == {
        frozenset(("llama", "finetune"))}
    assert {(p, c) for p, c, k in got if k == "re-save"} == {
        ("finetune", "finetune_nf4"), ("finetune", "finetune_int8"), ("finetune", "finetune_gptq")}
    for _, child, kind, evidence in edges:
        if kind == "re-save":
            packed = json.loads(evidence)["packed"]
            assert packed["compared"] == packed["within_noise"] == 14, child
