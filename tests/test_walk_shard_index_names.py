"""A shard index is a file its producer names as one (``model.safetensors.index.json``,
``pytorch_model.bin.index.json``, any prefix): the one rule the directory adapter, ``show``,
``scan`` and the walk of ``lineage`` / ``inventory`` share. The fixtures' truth files copy an
index's ``weight_map`` into JSON of another name; they are no checkpoints."""

from __future__ import annotations

from inspector.adapters.registry import claim, load
from inspector.adapters.source import as_source
from inspector.fleet import expand

from conftest import FIXTURES, run_cli

DIRS = FIXTURES / "dirs"
TRUTHS = [DIRS / f"{n}.truth.json" for n in
          ("hf_gpt2_bin_sharded", "hf_llama_safetensors_sharded", "keras_sharded")]


def test_truth_files_mentioning_a_weight_map_are_not_indexes():
    for t in TRUTHS:
        assert b'"weight_map"' in t.read_bytes()
        assert claim(as_source(str(t))) is None, t
        r = run_cli("show", str(t))
        assert r.returncode != 0 and "not a checkpoint" in r.stderr and "Traceback" not in r.stderr


def test_the_walk_lists_sharded_directories_once_and_no_truth_file():
    labels = [t.label for t in expand([str(DIRS)])]
    assert not [x for x in labels if x.endswith(".json")]
    for d in ("hf_gpt2_bin_sharded", "hf_llama_safetensors_sharded", "keras_sharded"):
        assert labels.count(str(DIRS / d)) == 1


def test_an_index_named_by_its_producer_is_still_read():
    index = FIXTURES / "safetensors" / "sharded" / "model.safetensors.index.json"
    found = claim(as_source(str(index)))
    assert found is not None and found[1] == "index"
    truth = FIXTURES / "safetensors" / "sharded" / "model.safetensors.index.json.truth.json"
    assert claim(as_source(str(truth))) is None
    assert len(load(index).tensors) > 0


def test_a_torch_shard_index_opened_alone_reads_its_torch_shards():
    """transformers' ``pytorch_model.bin.index.json`` (WEIGHTS_INDEX_NAME) lists torch shards:
    opened on its own it is the same checkpoint as its model directory."""
    d = DIRS / "hf_gpt2_bin_sharded"
    alone, whole = load(d / "pytorch_model.bin.index.json"), load(d)
    assert {t.name: tuple(t.shape) for t in alone.tensors} == \
        {t.name: tuple(t.shape) for t in whole.tensors}
    assert len({t.file for t in alone.tensors}) == 3
