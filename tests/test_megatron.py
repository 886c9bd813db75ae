"""Megatron-LM legacy checkpoints (``fixtures/megatron``) against what their producer built.

The fixtures were written by ``fixtures/megatron/make_megatron.py`` with Megatron-LM's own
``parse_args``/``validate_args`` namespace and checkpoint naming: the truth is the consolidated
global state dict built before it was sharded over tensor- and pipeline-parallel ranks (names,
shapes, statistics computed by torch), and ``X.consolidated.pt`` is that state dict saved
whole. Hostile variants are made here from copies.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from inspector import value_stats as stats
from inspector.adapters.registry import detect, load
from inspector.adapters.security.scan import scan_file
from inspector.formulas.megatron import padded_vocab

from conftest import FIXTURES, load_truth, run_cli
from hostile import assert_clean_error

MEG = FIXTURES / "megatron"
MERGED = ("gpt_tp2_pp2", "gpt_tp1", "legacy_tp2_pp2")
ARG_KEYS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
            "num_query_groups", "swiglu", "padded_vocab_size", "tensor_model_parallel_size",
            "pipeline_model_parallel_size", "untie_embeddings_and_output_weights",
            "normalization", "position_embedding_type")


def _truth(name: str) -> dict:
    return load_truth(MEG / f"{name}.truth.json")


# ---------------------------------------------------------------------------------------------
# listing


@pytest.mark.parametrize("name", MERGED)
def test_merged_listing_is_the_global_state_dict(name):
    truth = _truth(name)
    ckpt = load(MEG / name)
    assert ckpt.format == "megatron"
    want = [(t["stored_name"], tuple(t["shape"]), t["dtype"]) for t in truth["tensors"]]
    assert [(t.name, t.shape, t.dtype) for t in ckpt.tensors] == want
    assert sum(t.numel for t in ckpt.tensors) == truth["parameter_count"]
    assert {t.role.value for t in ckpt.tensors} == {"parameter"}
    ranks = sorted({f.split("/")[1] for f in truth["files"]})
    assert ckpt.metadata["ranks"] == ranks or sorted(ckpt.metadata["ranks"]) == ranks
    tp, pp = truth["args"]["tensor_model_parallel_size"], truth["args"]["pipeline_model_parallel_size"]
    assert (ckpt.metadata["tensor_parallel"], ckpt.metadata["pipeline_parallel"]) == (tp, pp)


@pytest.mark.parametrize("name", MERGED)
def test_args_are_the_hyperparameters(name):
    truth = _truth(name)
    ckpt = load(MEG / name)
    args = ckpt.hyperparameters["args"]
    assert len(args) > 600  # Megatron's whole namespace, not a rendered summary
    for k in ARG_KEYS:
        assert args[k] == truth["args"][k], k
    assert args["params_dtype"] == "float32"
    assert ckpt.hyperparameters["iteration"] == 10


def test_tracker_iteration_and_rank_directories_are_one_checkpoint():
    whole = load(MEG / "gpt_tp2_pp2")
    assert detect(MEG / "gpt_tp2_pp2")[1] == "tracker"
    assert whole.metadata["tracker"] == "10" and whole.metadata["iteration_dir"] == "iter_0000010"
    inner = load(MEG / "gpt_tp2_pp2" / "iter_0000010")
    assert detect(MEG / "gpt_tp2_pp2" / "iter_0000010")[1] == "ranks"
    assert [(t.name, t.shape) for t in inner.tensors] == [(t.name, t.shape) for t in whole.tensors]
    release = load(MEG / "gpt_tp1")
    assert release.metadata["iteration_dir"] == "release"
    proc = run_cli("show", str(MEG / "gpt_tp2_pp2"))
    assert proc.returncode == 0 and "checkpoints here" not in proc.stderr, proc.stderr
    assert "decoder.layers.3.mlp.linear_fc1.weight" in proc.stdout  # stage 1's layer 1


def test_pipeline_stages_are_renumbered_and_pieces_concatenated():
    ckpt = load(MEG / "gpt_tp2_pp2")
    fc1 = ckpt["decoder.layers.2.mlp.linear_fc1.weight"]  # stage 1, local layer 0
    assert fc1.shape == (80, 16) and fc1.extra == {"tp_pieces": 2, "split_dim": 0}
    assert ckpt["decoder.layers.2.self_attention.linear_proj.weight"].extra["split_dim"] == 1
    assert ckpt["decoder.layers.2.input_layernorm.weight"].extra == {"tp_pieces": 1}
    assert any("not merged" in f.message for f in ckpt.findings)  # rng states stay per rank


def test_a_rank_file_alone_is_a_torch_checkpoint():
    one = load(MEG / "gpt_tp2_pp2" / "iter_0000010" / "mp_rank_01_001" / "model_optim_rng.pt")
    assert one.format != "megatron"
    assert one["decoder.layers.0.mlp.linear_fc1.weight"].shape == (40, 16)  # one piece


# ---------------------------------------------------------------------------------------------
# values


@pytest.mark.parametrize("name", ("gpt_tp2_pp2", "legacy_tp2_pp2"))
def test_merged_values_are_the_consolidated_tensors(name):
    truth = {t["stored_name"]: t for t in _truth(name)["tensors"]}
    rep = stats.report(stats.file_stats(load(MEG / name), chunk=7))
    assert len(rep["tensors"]) == len(truth)
    for row in rep["tensors"]:
        want, got = truth[row["name"]], row["stats"]
        for k in ("min", "max", "mean", "l2"):
            assert got[k] == pytest.approx(want[k], rel=1e-6, abs=1e-9), (row["name"], k)


@pytest.mark.parametrize("name", ("gpt_tp2_pp2", "legacy_tp2_pp2"))
def test_diff_values_against_the_consolidated_state_dict(name):
    """Element order too: SwiGLU's gate/up interleave, row-parallel columns, vocab rows."""
    proc = run_cli("diff", "--values", "--format", "json", str(MEG / name),
                   str(MEG / f"{name}.consolidated.pt"))
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout)
    n = len(load_truth(MEG / f"{name}.truth.json")["tensors"])
    copy = name == "legacy_tp2_pp2"  # the last stage's head copy: on the merged side only
    assert out["summary"]["unchanged"] == n - copy and out["summary"]["removed"] == copy
    assert out["values"] and out["values_changed"] == 0 and out["values_not_compared"] == 0


# ---------------------------------------------------------------------------------------------
# check


@pytest.mark.parametrize("name", MERGED)
def test_check_verifies_the_gpt_fixtures(name):
    proc = run_cli("check", "--format", "json", str(MEG / name))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "verified" and out["arch"] == "megatron-gpt"
    assert out["totals"]["found"] == _truth(name)["parameter_count"]


def test_a_wrong_ffn_hidden_size_in_args_is_a_mismatch():
    proc = run_cli("check", str(MEG / "gpt_wrong_ffn"))
    assert proc.returncode == 1, proc.stdout
    assert "MISMATCH" in proc.stdout and "linear_fc1" in proc.stdout


def test_no_args_is_incomplete_not_a_mismatch():
    proc = run_cli("check", str(MEG / "gpt_no_args"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "INCOMPLETE" in proc.stdout and "MISMATCH" not in proc.stdout


def test_padded_vocab_is_megatrons_rule():
    truth = _truth("gpt_tp2_pp2")["args"]  # _vocab_size_with_padding's own result
    hp = {"padded_vocab_size": None, "vocab_size": 100,
          "make_vocab_size_divisible_by": 8, "tensor_model_parallel_size": 2}
    assert padded_vocab(hp) == truth["padded_vocab_size"] == 112
    assert padded_vocab({**hp, "tensor_model_parallel_size": 1}) == \
        _truth("gpt_tp1")["args"]["padded_vocab_size"] == 104


# ---------------------------------------------------------------------------------------------
# scan


@pytest.mark.parametrize("name", MERGED)
def test_scan_finds_nothing_dangerous(name):
    proc = run_cli("scan", str(MEG / name))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 dangerous, 0 error" in proc.stdout, proc.stdout


def test_megatrons_own_pickle_globals_are_never_dangerous():
    """signal.Signals (args.exit_signal) and AttnBackend, vetted as Enum classes (checked to be
    Enums in the producer), and argparse.Namespace (constructed, its __dict__ filled; vetted
    against its source): every global is safe."""
    truth = _truth("gpt_tp2_pp2")
    res = scan_file(MEG / "gpt_tp2_pp2" / truth["files"][0])
    verdicts = {g["name"]: g["verdict"] for g in res.globals}
    assert set(verdicts) == set(truth["pickle_globals"])
    assert res.verdict == "safe" and set(verdicts.values()) == {"safe"}
    assert truth["pickle_globals"]["signal.Signals"] == "Enum"
    assert truth["pickle_globals"]["megatron.core.transformer.enums.AttnBackend"] == "Enum"


# ---------------------------------------------------------------------------------------------
# hostile


def _copy(tmp_path: Path, name: str = "gpt_tp2_pp2") -> Path:
    d = tmp_path / name
    shutil.copytree(MEG / name, d)
    return d


@pytest.mark.parametrize("text,needle", [
    ("../gpt_tp1/release", "not an iteration number"),
    ("../../etc", "not an iteration number"),
    ("12", "iter_0000012, which is not a directory"),
    ("", "not an iteration number"),
    ("1" * 100, "over the 64-byte limit"),
])
def test_a_hostile_tracker_file_is_one_line(tmp_path, text, needle):
    d = _copy(tmp_path)
    (d / "latest_checkpointed_iteration.txt").write_text(text)
    assert_clean_error(run_cli("show", str(d)), str(d), needle)


def test_a_missing_rank_is_one_line(tmp_path):
    d = _copy(tmp_path)
    shutil.rmtree(d / "iter_0000010" / "mp_rank_01_001")
    assert_clean_error(run_cli("show", str(d)), str(d), "mp_rank_01_001 is missing")


def test_a_rank_without_its_file_is_one_line(tmp_path):
    d = _copy(tmp_path)
    (d / "iter_0000010" / "mp_rank_00_001" / "model_optim_rng.pt").unlink()
    assert_clean_error(run_cli("show", str(d)), str(d), "mp_rank_00_001 has no")


@pytest.mark.parametrize("cut", [0, 100, 5000, -30])
def test_a_truncated_rank_file_is_one_line(tmp_path, cut):
    d = _copy(tmp_path)
    f = d / "iter_0000010" / "mp_rank_01_000" / "model_optim_rng.pt"
    f.write_bytes(f.read_bytes()[:cut])
    assert_clean_error(run_cli("show", str(d)), str(d), "mp_rank_01_000/model_optim_rng.pt")


def test_ranks_of_two_layouts_mixed_are_refused(tmp_path):
    d = _copy(tmp_path)
    shutil.copytree(MEG / "gpt_tp1" / "release" / "mp_rank_00", d / "iter_0000010" / "mp_rank_00")
    assert_clean_error(run_cli("show", str(d)), str(d), "two checkpoints mixed")


def test_a_rank_of_another_checkpoint_is_refused(tmp_path):
    """A stage-1 piece replaced by gpt_tp1's rank file: its names are not those of its peer."""
    d = _copy(tmp_path)
    shutil.copy(MEG / "gpt_tp1" / "release" / "mp_rank_00" / "model_optim_rng.pt",
                d / "iter_0000010" / "mp_rank_01_001" / "model_optim_rng.pt")
    proc = run_cli("show", str(d))
    assert_clean_error(proc, str(d))


# ---------------------------------------------------------------------------------------------
# structured fuzzing: only the project's own one-line errors come out, nothing hangs


def _open_and_read(d: Path) -> None:
    """detect + open without the registry's catch-all, then every tensor's values."""
    from inspector.adapters.source import LocalSource
    from inspector.values import iter_values

    source = LocalSource(d)
    adapter, variant = detect(source)
    ckpt = adapter.open(source, variant)
    for t in ckpt.tensors:
        for _ in iter_values(ckpt, t):
            pass


def test_fuzz_rank_file_flips_and_cuts(tmp_path):
    import random

    from inspector.adapters.errors import InspectorError

    d = _copy(tmp_path)
    f = d / "iter_0000010" / "mp_rank_01_001" / "model_optim_rng.pt"
    data = f.read_bytes()
    rng = random.Random(28)
    for _ in range(60):
        raw = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        f.write_bytes(bytes(raw[: rng.choice([len(raw), rng.randrange(len(raw))])]))
        try:
            _open_and_read(d)
        except InspectorError as e:
            assert "\n" not in str(e).strip(), str(e)
