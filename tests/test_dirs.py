"""Model directories (issue 14) against what their real producers wrote and recorded.

``fixtures/dirs/*.truth.json`` were written by transformers 5.23 / 4.57, peft 0.21 and Keras 3.15
at generation time (``fixtures/dirs/make_fixtures.py``); ``fixtures/rau/*`` by rau's own saver.
Nothing here is computed by the tool.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from inspector.adapters.registry import load
from inspector.formulas.check import check
from inspector.reports.listing import listing

from conftest import FIXTURES, load_truth
from hostile import assert_clean_error

DIRS = FIXTURES / "dirs"
RAU = FIXTURES / "rau"
HF_DIRS = ("hf_gpt2_safetensors", "hf_llama_bin", "hf_gpt2_bin_sharded",
           "hf_llama_safetensors_sharded", "hf_gpt2_both", "peft_lora_safetensors",
           "peft_lora_bin")


def _rows(report: dict) -> dict[str, dict]:
    return {t["stored_name"]: t for t in report["tensors"]}


@pytest.mark.parametrize("name", HF_DIRS)
def test_hf_directory_lists_what_transformers_wrote(name):
    truth = load_truth(DIRS / f"{name}.truth.json")
    ckpt = load(DIRS / name)
    report = listing(ckpt)
    assert ckpt.format == truth["format"]
    got = _rows(report)
    want = {t["stored_name"]: t for t in truth["tensors"]}
    assert sorted(got) == sorted(want)
    for n, w in want.items():
        g = got[n]
        assert (g["shape"], g["dtype"], g["role"], g["numel"]) == (
            w["shape"], w["dtype"], w["role"], w["numel"]), n
        assert g["file"] == w.get("file", truth.get("weights_file")), n
    assert report["totals"]["tensors"] == truth["tensor_count"]
    # num_parameters() / get_nb_trainable_parameters(): tied weights once
    assert report["totals"]["parameters"] == truth["parameter_count"]
    assert report["totals"]["buffers"] == truth["buffer_count"]
    stored_tied = [g for g in truth.get("tied", []) if all(n in want for n in g)]
    tied = {frozenset([r["stored_name"], *r["shared_with"]])
            for r in report["tensors"] if r.get("shared_with")}
    assert tied == {frozenset(g) for g in stored_tied}


def test_hf_directory_config_is_the_hyperparameters():
    ckpt = load(DIRS / "hf_llama_bin")
    cfg = json.loads((DIRS / "hf_llama_bin" / "config.json").read_text())
    assert ckpt.hyperparameters["config"] == cfg
    truth = load_truth(DIRS / "hf_llama_bin.truth.json")
    for k, v in truth["config_kwargs"].items():
        assert ckpt.hyperparameters["summary"].get(k, v) == v
    peft = load(DIRS / "peft_lora_bin")
    assert peft.hyperparameters["config"]["r"] == load_truth(
        DIRS / "peft_lora_bin.truth.json")["lora_config"]["r"]


def test_both_copies_lists_the_one_transformers_loads_and_says_why():
    truth = load_truth(DIRS / "hf_gpt2_both.truth.json")
    ckpt = load(DIRS / "hf_gpt2_both")
    assert ckpt.metadata["weights_file"] == truth["loader_choice"]["file"] == "model.safetensors"
    info = [f for f in ckpt.findings if f.subject == "model.safetensors"]
    assert len(info) == 1
    assert "pytorch_model.bin" in info[0].message and "from_pretrained" in info[0].message
    # the .bin copy, named by path, lists what torch.load read from it
    bin_rows = _rows(listing(load(DIRS / "hf_gpt2_both" / "pytorch_model.bin")))
    want = {t["stored_name"]: t["shape"] for t in truth["tensors_by_file"]["pytorch_model.bin"]}
    assert {n: r["shape"] for n, r in bin_rows.items()} == want


@pytest.mark.parametrize("name,arch", [
    ("hf_gpt2_safetensors", "gpt2"), ("hf_llama_bin", "llama"), ("hf_gpt2_bin_sharded", "gpt2"),
    ("hf_llama_safetensors_sharded", "llama"), ("hf_gpt2_both", "gpt2"),
])
def test_check_on_hf_directories(name, arch):
    truth = load_truth(DIRS / f"{name}.truth.json")
    res = check(load(DIRS / name))
    assert res.arch == arch and res.ok, res.to_dict()
    assert res.found_total == res.predicted_total == truth["parameter_count"]
    for k in truth["config_kwargs"]:
        if k in res.provenance:
            assert res.provenance[k] == "checkpoint", k


RAU_DIRS = sorted(p for p in RAU.iterdir() if (p / "kwargs.json").is_file())


@pytest.mark.parametrize("directory", RAU_DIRS, ids=lambda p: p.name)
def test_rau_directory_both_layouts(directory):
    inner = next(p for p in (directory / "parameters.pt", directory / "parameters" / "main.pt")
                 if p.is_file())
    truth = load_truth(inner.with_name(inner.name + ".truth.json"))
    ckpt = load(directory)
    assert ckpt.format == "rau-directory"
    assert ckpt.metadata["parameters_file"] == str(inner.relative_to(directory))
    assert ckpt.hyperparameters["kwargs"] == json.loads((directory / "kwargs.json").read_text())
    report = listing(ckpt)
    got = _rows(report)
    assert list(got) == [t["stored_name"] for t in truth["tensors"]]
    for t in truth["tensors"]:
        assert (got[t["stored_name"]]["shape"], got[t["stored_name"]]["dtype"]) == (
            t["shape"], t["dtype"])
    assert report["totals"]["parameters"] == truth["parameter_count"]
    res = check(ckpt)
    assert res.ok, res.to_dict()
    assert res.found_total == truth["parameter_count"]


def test_keras_sharded_weights():
    truth = load_truth(DIRS / "keras_sharded.truth.json")
    for target in (DIRS / "keras_sharded", DIRS / "keras_sharded" / "model.weights.json"):
        ckpt = load(target)
        assert ckpt.format == truth["format"]
        report = listing(ckpt)
        got = _rows(report)
        want = {t["stored_name"]: t for t in truth["tensors"]}
        assert sorted(got) == sorted(want)
        for n, w in want.items():
            g = got[n]
            assert (g["name"], g["shape"], g["dtype"], g["role"], g["file"]) == (
                w["variable_path"], w["shape"], w["dtype"], w["role"], w["file"]), n
        assert report["totals"]["parameters"] == truth["parameter_count"]
        assert report["totals"]["buffers"] == truth["buffer_count"]
        assert report["totals"]["all"] == truth["count_params"]


def test_values_read_through_directories():
    """Value reads follow the directory to the right file (HF .bin shards, Keras shards)."""
    from inspector.diffing import diff

    for d in ("hf_gpt2_bin_sharded", "keras_sharded", "peft_lora_bin"):
        res = diff(load(DIRS / d), load(DIRS / d), values=True)
        assert res.values_changed == 0 and not res.different, d


# --- refusals: one line, exit 2, fast --------------------------------------------------------

def _timed(cli, path: Path | str):
    start = time.perf_counter()
    proc = cli("show", str(path))
    return proc, time.perf_counter() - start


def test_several_checkpoints_names_the_candidates(cli):
    truth = load_truth(DIRS / "several_checkpoints.truth.json")
    proc, _ = _timed(cli, DIRS / "several_checkpoints")
    err = assert_clean_error(proc, "several_checkpoints", *truth["candidates"], "pick one")
    assert "supported" not in err


@pytest.mark.parametrize("target,what", [
    ("lookalikes/pytorch_model.bin", "HTML page"),
    ("lookalikes/empty.pt", "empty"),
    ("no_checkpoint", "README.txt"),
])
def test_lookalikes_say_what_they_are_in_one_short_line(cli, target, what):
    proc, _ = _timed(cli, f"fixtures/dirs/{target}")
    more = ("not a checkpoint", "inspector formats") if what != "empty" else ()
    err = assert_clean_error(proc, target, what, *more)
    assert len(err) < 200, (len(err), err)


def test_bad_directories(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "inner").symlink_to("../self")
    many = tmp_path / "many"
    many.mkdir()
    for i in range(10_000):
        (many / f"f{i}.bin").touch()
    cases = {"empty": "an empty directory", "loop": "symlink", "a": "symlink",
             "self": "a directory of inner", "many": "10,000 entries"}
    for name, needle in cases.items():
        proc, took = _timed(cli, tmp_path / name)
        assert_clean_error(proc, name, needle)
        assert took < 30, (name, took)  # a hang guard, not a timing (bench/ measures speed)


def test_config_or_shard_pointing_outside_is_refused(cli, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    esc = tmp_path / "esc"
    esc.mkdir()
    os.symlink(DIRS / "hf_gpt2_safetensors" / "model.safetensors", esc / "model.safetensors")
    (esc / "config.json").symlink_to(outside)
    assert_clean_error(cli("show", str(esc)), "esc", "config.json", "outside")
    shard = tmp_path / "shard"
    shard.mkdir()
    for f in (DIRS / "hf_gpt2_bin_sharded").iterdir():
        (shard / f.name).write_bytes(f.read_bytes())
    index = shard / "pytorch_model.bin.index.json"
    doc = json.loads(index.read_text())
    doc["weight_map"] = {k: "../x.bin" if v.endswith("3.bin") else v
                         for k, v in doc["weight_map"].items()}
    index.write_text(json.dumps(doc))
    assert_clean_error(cli("show", str(shard)), "pytorch_model.bin.index.json", "'../x.bin'",
                       "outside")
    kw = tmp_path / "rau"
    kw.mkdir()
    (kw / "kwargs.json").symlink_to(outside)
    (kw / "parameters.pt").write_bytes((RAU / "stack_rnn_h32_s20" / "parameters.pt").read_bytes())
    assert_clean_error(cli("show", str(kw)), "rau", "kwargs.json", "outside")


def test_readme_example_runs(cli):
    proc = cli("show", "fixtures/dirs/hf_gpt2_safetensors")
    assert proc.returncode == 0, proc.stderr
    assert "hf-directory" in proc.stdout and "9,152" in proc.stdout


def test_bin_shards_without_config_open_as_one_checkpoint(tmp_path):
    truth = load_truth(DIRS / "hf_gpt2_bin_sharded.truth.json")
    for f in (DIRS / "hf_gpt2_bin_sharded").glob("pytorch_model*"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    ckpt = load(tmp_path)
    assert ckpt.hyperparameters["config"] == {}
    assert sorted(t.stored_name for t in ckpt.tensors) == sorted(
        t["stored_name"] for t in truth["tensors"])
    assert ckpt.totals()["parameters"] == truth["parameter_count"]


def test_a_savedmodel_lists_its_variables_bundle():
    """A SavedModel keeps its variables as a tensor bundle (variables/variables.index): listed
    as the variables TensorFlow saved (the truth: tf.saved_model.save's own variables)."""
    from inspector.adapters.registry import load

    truth = json.loads((FIXTURES / "dirs" / "tf_savedmodel.truth.json").read_text())
    ckpt = load(FIXTURES / "dirs" / "tf_savedmodel")
    params = {t.name: list(t.shape) for t in ckpt.tensors if t.role == "parameter"}
    assert params == {v["name"].removesuffix(":0"): v["shape"] for v in truth["variables"]}
    assert ckpt.metadata["saved_model"] is True
