"""``inspector lineage`` against zoos written by the real producers, with their true edges:

* fixtures/lineage/zoo (transformers Trainer steps, a partial fine-tune, a peft LoRA adapter and
  its ``merge_and_unload``, bf16 / sharded / torch.save re-saves, ``resize_token_embeddings``,
  a pruned layer, and an unrelated same-architecture family from another seed), truth written by
  fixtures/lineage/make_lineage.py;
* fixtures/gguf/converted (llama.cpp's own convert_hf_to_gguf.py at f32, f16, bf16 and q8_0,
  and a GGUF of another seed), truth from fixtures/gguf/converted/make_converted.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inspector.lineage import run

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "fixtures" / "lineage" / "zoo"
TRUTH = json.loads((ROOT / "fixtures" / "lineage" / "zoo.truth.json").read_text())
CONVERTED = ROOT / "fixtures" / "gguf" / "converted"


def rel(path: str, root: Path) -> str:
    return str(Path(path).resolve().relative_to(root.resolve()))


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    cache = tmp_path_factory.mktemp("fp")
    forest, counts = run([str(ZOO)], cache_dir=str(cache))
    return forest, counts, cache


def test_zoo_recovers_exactly_the_true_edges(zoo):
    forest, counts, _ = zoo
    assert not forest.errors
    got = {(rel(e.parent, ZOO), rel(e.child, ZOO), e.kind) for e in forest.edges}
    want = {(e["parent"], e["child"], e["kind"]) for e in TRUTH["edges"]}
    assert got == want
    assert counts["checkpoints"] == len(TRUTH["num_parameters"]) + 2  # + adapter, + .pt


def test_unrelated_seed_stays_apart(zoo):
    forest, _, _ = zoo
    family = {"other", "other_bf16"}
    for e in forest.edges:
        a, b = rel(e.parent, ZOO), rel(e.child, ZOO)
        assert (a in family) == (b in family), (a, b, e.kind)


def test_lora_rank_and_targets_are_the_adapters(zoo):
    forest, _, _ = zoo
    (edge,) = [e for e in forest.edges if e.kind == "lora-merge"]
    assert edge.evidence["rank"] == TRUTH["lora"]["r"]
    assert edge.evidence["target_modules"] == TRUTH["lora"]["targets"]
    (adapter,) = [e for e in forest.edges if e.kind == "adapter-of"]
    assert rel(adapter.evidence["merged_copy"], ZOO) == TRUTH["lora"]["checkpoint"]
    assert adapter.evidence["declaration"] == "agrees"


def test_partial_fine_tune_names_the_changed_tensors(zoo):
    forest, _, _ = zoo
    (edge,) = [e for e in forest.edges if rel(e.child, ZOO) == "ft_mlp"]
    assert edge.evidence["partial"] is True
    changed = set(edge.evidence["changed_tensors"])
    assert changed == set(TRUTH["ft_mlp_changed"])


def test_second_run_reads_no_tensor_bytes(zoo, monkeypatch):
    _, _, cache = zoo
    import inspector.values as values

    def refuse(*a, **k):
        raise AssertionError("a tensor's bytes were read on a cached run")

    monkeypatch.setattr(values, "iter_values", refuse)
    forest, counts = run([str(ZOO)], cache_dir=str(cache))
    assert counts["fingerprinted"] == 0 and counts["tensor_reads"] == 0
    assert counts["cached"] == counts["checkpoints"]
    assert {(e.parent, e.child, e.kind) for e in forest.edges} == \
        {(e.parent, e.child, e.kind) for e in zoo[0].edges}


def test_conversions_hold_for_every_gguf_type_and_not_another_seed(tmp_path):
    forest, _ = run([str(CONVERTED)], cache_dir=str(tmp_path))
    got = {(rel(e.parent, CONVERTED), rel(e.child, CONVERTED), e.kind) for e in forest.edges}
    want = {(f"{m}_hf", f"{m}.{t}.gguf", "conversion")
            for m in ("llama", "mixtral") for t in ("f32", "f16", "bf16", "q8_0")}
    assert got == want
    for e in forest.edges:  # within the format's own noise
        assert e.evidence["rel_l2"] < (0.02 if "q8_0" in e.child else 0.01)


def test_cli_json_and_table(tmp_path):
    cmd = [sys.executable, "-m", "inspector", "lineage", str(ZOO), "--cache", str(tmp_path)]
    doc = json.loads(subprocess.run(cmd + ["--format", "json"], capture_output=True,
                                    text=True, check=True).stdout)
    assert doc["schema"] == "inspector.lineage/1"
    assert {e["kind"] for e in doc["edges"]} == {e["kind"] for e in TRUTH["edges"]}
    table = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "lora-merge" in table and "rank 4" in table


def test_report_draws_the_forest_as_html(tmp_path):
    """The HTML tree, parsed as a browser parses it (html5lib): one list item per edge under its
    parent, and the embedded JSON equal to ``lineage --format json``'s edges."""
    import html5lib

    out = tmp_path / "lineage.html"
    r = subprocess.run([sys.executable, "-m", "inspector", "report", "--lineage", str(ZOO),
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = html5lib.parse(out.read_text(), namespaceHTMLElements=False)
    kinds = [s.text for s in doc.iter("span") if "kind" in (s.get("class") or "").split()]
    assert sorted(kinds) == sorted(e["kind"] for e in TRUTH["edges"])
    data = json.loads(next(s for s in doc.iter("script") if s.get("id") == "report-data").text)
    got = {(rel(e["parent"], ZOO), rel(e["child"], ZOO), e["kind"]) for e in data["edges"]}
    assert got == {(e["parent"], e["child"], e["kind"]) for e in TRUTH["edges"]}


QUANT_TRUTH = json.loads((ROOT / "fixtures" / "lineage" / "quant_sources.truth.json").read_text())
FIXTURES = ROOT / "fixtures"


def test_quantizations_are_re_saves_of_their_source(tmp_path):
    """Every folder of fixtures/hf_quant (bitsandbytes, llm-compressor, gptqmodel) against the
    unquantized models they quantized (re-made by fixtures/lineage/make_quant_sources.py): each
    quantized copy is a re-save of its own source, never a fine-tune of another quantization,
    and the three sources (two Llamas of different shapes and a GPT-2) stay apart."""
    forest, _ = run([str(FIXTURES / "hf_quant"), str(FIXTURES / "lineage" / "quant_sources")],
                    cache_dir=str(tmp_path))
    assert not forest.errors
    got = {(rel(e.parent, FIXTURES), rel(e.child, FIXTURES), e.kind) for e in forest.edges}
    want = {(e["parent"], e["child"], e["kind"]) for e in QUANT_TRUTH["edges"]}
    assert got == want
    for e in forest.edges:
        assert "modules stored another way" in " ".join(e.evidence["changes"])


def test_quantizations_without_their_source_are_re_saves_of_each_other(tmp_path):
    """No source held: the quantizations of one model form one cluster of re-saves (whichever
    is its representative), those of another model another, and nothing joins them."""
    forest, _ = run([str(FIXTURES / "hf_quant")], cache_dir=str(tmp_path))
    source = {e["child"]: e["parent"] for e in QUANT_TRUTH["edges"]}
    for e in forest.edges:
        a, b = rel(e.parent, FIXTURES), rel(e.child, FIXTURES)
        assert e.kind == "re-save" and source[a] == source[b], (a, b, e.kind)
    families = {s: sum(1 for v in source.values() if v == s) for s in set(source.values())}
    # a tree per source family: every member but its representative is someone's child
    assert len(forest.edges) == sum(n - 1 for n in families.values())


ZOO2 = ROOT / "fixtures" / "lineage" / "zoo2"
TRUTH2 = json.loads((ROOT / "fixtures" / "lineage" / "zoo2.truth.json").read_text())


def test_second_zoo_held_out(tmp_path):
    """fixtures/lineage/zoo2 (tiny GPT-2s: Conv1D weights, a tied head; written by
    fixtures/lineage/make_zoo2.py, never used to tune lineage): exactly the true edges and kinds,
    the LoRA rank the adapter's r, its fan_in_fan_out adapter matched to its base, and the two
    unrelated seeds apart."""
    forest, _ = run([str(ZOO2)], cache_dir=str(tmp_path))
    assert not forest.errors and not forest.unresolved
    got = {(rel(e.parent, ZOO2), rel(e.child, ZOO2), e.kind) for e in forest.edges}
    assert got == {(e["parent"], e["child"], e["kind"]) for e in TRUTH2["edges"]}
    (merge,) = [e for e in forest.edges if e.kind == "lora-merge"]
    assert merge.evidence["rank"] == TRUTH2["lora"]["r"]
    assert merge.evidence["target_modules"] == TRUTH2["lora"]["targets"]
    (partial,) = [e for e in forest.edges if rel(e.child, ZOO2) == "attn0"]
    assert set(partial.evidence["changed_tensors"]) <= set(TRUTH2["attn0_changed"])
    families = [{"gpt"}, {"seed8", "seed8_ft"}, {"seed9"}]
    for e in forest.edges:
        a, b = rel(e.parent, ZOO2), rel(e.child, ZOO2)
        assert [a in f for f in families] == [b in f for f in families] or \
            not any(a in f or b in f for f in families[1:])


def test_models_without_informative_tensors_are_nobodys_copies(tmp_path):
    """MXNet's empty dict and empty list (mxnet 1.9.1 ``nd.save``), a CSR array and a
    row-sparse one: no informative tensor, so nothing to relate them by: no edge."""
    d = FIXTURES / "mxnet" / "mxnet-1.9.1"
    forest, _ = run([str(d / n) for n in ("empty_dict.params", "empty_list.params",
                                          "csr.params", "row_sparse.params")],
                    cache_dir=str(tmp_path))
    assert forest.edges == []


def test_separate_runs_of_other_configurations_are_no_edge(tmp_path):
    """Two Sockeye 1 runs from one seed (``--seed 1``, fixtures/diff/make_fixtures.py and
    fixtures/sockeye/make_fixtures.py): an RNN and a transformer-RNN model, each with parameters
    the other lacks and the shared ones trained apart. No derivation kind explains the pair:
    no edge, one unresolved shared-values pair."""
    a = FIXTURES / "diff" / "sockeye1_consecutive" / "params.00001"
    b = FIXTURES / "sockeye" / "sockeye1_transformer-rnn_l1-1_m16_h2_ff32_e16-8_h16_mlp"
    forest, _ = run([str(a), str(b)], cache_dir=str(tmp_path))
    assert forest.edges == []
    (u,) = forest.unresolved
    assert u["kind"] == "shared-values" and u["only_here"] and u["only_there"]


def test_separate_runs_whose_layers_differ_in_shape_are_no_edge(tmp_path):
    """Two Sockeye 1 runs from one seed (both args.yaml: ``seed: 1``): a GRU and an LSTM model
    whose parameters carry the same names, some in another shape (a GRU gate block is 3
    hidden sizes, an LSTM's 4), none of the values carried over. A fine-tune keeps the shapes,
    a resize the other values: no edge, one unresolved shared-values pair."""
    d = FIXTURES / "sockeye"
    pair = ("sockeye1_rnn_gru_l1-1_e8-16_h16_mlp_tied-trg-softmax",
            "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_sf1-concat4")
    for name in pair:
        assert "seed: 1" in (d / name / "args.yaml").read_text()
    forest, _ = run([str(d / n) for n in pair], cache_dir=str(tmp_path))
    assert forest.edges == []
    (u,) = forest.unresolved
    assert u["kind"] == "shared-values"


def test_runs_recorded_as_trained_from_their_seed_are_no_edge(tmp_path):
    """Sockeye runs of one seed that differ in a setting that keeps every shape (an LSTM with
    and without layer normalisation, with coverage, with weight normalisation): from the bytes
    they look like short fine-tunes of each other, but each args.yaml (written by
    sockeye.train) records ``params: null``, initialised from the seed and not from another
    model: no edge, unresolved shared-values pairs."""
    d = FIXTURES / "sockeye"
    runs = ("sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp", "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_layernorm",
            "sockeye1_rnn_lstm_l1-1_e8-8_h16_coverage-fertility",
            "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp_wn")
    for name in runs:
        args = (d / name / "args.yaml").read_text()
        assert "\nparams: null\n" in args and "\nseed: 1\n" in args
    forest, _ = run([str(d / n) for n in runs], cache_dir=str(tmp_path))
    assert forest.edges == []
    assert forest.unresolved and all(u["kind"] == "shared-values" for u in forest.unresolved)


def test_sockeye_checkpoints_of_one_run_are_continued_training(tmp_path):
    """fixtures/diff/sockeye1_consecutive: "the first two checkpoints of one Sockeye 1 training
    run" (its pair.truth.json, written by sockeye.train): ordered by Sockeye's own checkpoint
    numbering (params.00001, params.00002)."""
    d = FIXTURES / "diff" / "sockeye1_consecutive"
    truth = json.loads((d / "pair.truth.json").read_text())
    assert "one Sockeye 1 training run" in truth["description"]
    forest, _ = run([str(d)], cache_dir=str(tmp_path))
    got = [(rel(e.parent, d), rel(e.child, d), e.kind) for e in forest.edges]
    assert got == [(truth["a"], truth["b"], "continued-training")]
