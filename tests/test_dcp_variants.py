"""torch Distributed Checkpoint variants (issue 28) against what their producers read back.

* ``fixtures/dcp/hf_sharded``, ``hf_consolidated``: torch 2.13's ``HuggingFaceStorageWriter``
  (safetensors shards placed by ``DCP_SHARDING_INFO``); truth from torch's own
  ``HuggingFaceStorageReader`` and ``dcp.load`` (``make_dcp_variants.py``).
* ``fixtures/dcp/accelerate_fsdp``: Accelerate 1.15's ``save_fsdp_model`` /
  ``save_fsdp_optimizer`` / ``save_accelerator_state``; truth from torch's ``FileSystemReader``
  and ``dcp_to_torch_save``.
* ``fixtures/dcp/megatron_dist``: Megatron-core 0.16.1's ``dist_checkpointing.save``
  (``torch_dist``); truth from Megatron-core's ``load_tensors_metadata`` /
  ``load_common_state_dict`` and torch's consolidation (``make_megatron_dist.py``).

Hostile variants are built here from copies.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from inspector import value_stats as stats
from inspector.adapters.registry import detect, load
from inspector.adapters.security.scan import scan_file

from conftest import FIXTURES, load_truth, run_cli
from hostile import assert_clean_error

DCP = FIXTURES / "dcp"


def _stats_equal(ckpt, want: dict[str, dict], rel: float = 1e-6) -> None:
    rep = stats.report(stats.file_stats(ckpt, chunk=5))
    got = {row["name"]: row["stats"] for row in rep["tensors"]}
    for stored, w in want.items():
        name = ckpt[stored].name
        g = got[name]
        for k in ("min", "max", "mean", "l2"):
            assert g[k] == pytest.approx(w[k], rel=rel, abs=1e-9), (name, k)


# ---------------------------------------------------------------------------------------------
# HuggingFaceStorageWriter (SerializationFormat.SAFETENSORS)


@pytest.mark.parametrize("name", ["hf_sharded", "hf_consolidated/sharded"])
def test_safetensors_shards_are_one_checkpoint_with_global_shapes(name):
    truth = load_truth(DCP / "hf_sharded.truth.json") if name == "hf_sharded" else None
    d = DCP / name
    assert detect(d)[1] == "safetensors"
    ckpt = load(d)
    assert ckpt.format == "dcp"
    if truth is None:  # the consolidated checkpoint's own shapes: torch's consolidation
        whole = load_truth(DCP / "hf_consolidated.truth.json")
        want = {t["stored_name"]: t for t in whole["tensors"]}
        assert {t.name: (list(t.shape), t.dtype) for t in ckpt.tensors} == {
            k: (w["shape"], w["dtype"]) for k, w in want.items()}
        return
    items = {it["fqn"]: it for it in truth["items"]}
    assert sorted(t.name for t in ckpt.tensors) == sorted(items)
    for t in ckpt.tensors:
        it = items[t.name]
        assert (list(t.shape), t.dtype) == (it["shape"], it["dtype"]), t.name
        assert t.extra["chunks"] == len(it["chunks"]), t.name
        assert "chunk_elements" not in t.extra
    assert sorted(ckpt.metadata["files"]) == truth["files"]


def test_safetensors_shard_values_are_torchs():
    truth = load_truth(DCP / "hf_sharded.truth.json")
    _stats_equal(load(DCP / "hf_sharded"), {t["stored_name"]: t for t in truth["tensors"]})


def test_safetensors_shards_diff_equal_to_torchs_consolidation():
    proc = run_cli("diff", "--values", "--format", "json", str(DCP / "hf_consolidated" / "sharded"),
                   str(DCP / "hf_consolidated"))
    out = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out["summary"]["unchanged"] == 3 and not out["different"]
    assert out["values_changed"] == 0 and out["values_not_compared"] == 0


def _rewrite_header(path: Path, change) -> None:
    """A safetensors file with its header JSON changed by ``change(header)``, data kept."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    change(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def _hf_copy(tmp_path: Path) -> Path:
    d = tmp_path / "hf"
    shutil.copytree(DCP / "hf_sharded", d)
    return d


def _set_info(info):
    def change(header):
        header["__metadata__"]["DCP_SHARDING_INFO"] = info
    return change


@pytest.mark.parametrize("info,needle", [
    ("{not json", "is not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"w": {"saved_offsets": [0, -3]}}), "no valid saved_offsets"),
    (json.dumps({"w": {"saved_offsets": [0]}}), "no valid saved_offsets"),
    (json.dumps({}), "no valid saved_offsets"),
])
def test_a_hostile_sharding_info_is_one_line(tmp_path, info, needle):
    d = _hf_copy(tmp_path)
    f = d / "shard-00002-model-00001-of-00001.safetensors"
    _rewrite_header(f, _set_info(info))
    assert_clean_error(run_cli("show", str(d)), str(d), needle)


def test_a_shard_without_sharding_info_is_one_line(tmp_path):
    d = _hf_copy(tmp_path)
    f = d / "shard-00002-model-00001-of-00001.safetensors"
    _rewrite_header(f, lambda h: h["__metadata__"].pop("DCP_SHARDING_INFO"))
    assert_clean_error(run_cli("show", str(d)), str(d), "no DCP_SHARDING_INFO")


def test_chunks_that_leave_a_gap_fail_at_value_time_only_for_that_tensor(tmp_path):
    """A chunk moved past the end of its peer: the global shape grows as torch's reader makes
    it, the listing says the chunks do not cover it, values say where the hole is."""
    d = _hf_copy(tmp_path)
    f = d / "shard-00002-model-00001-of-00001.safetensors"

    def move(header):
        info = json.loads(header["__metadata__"]["DCP_SHARDING_INFO"])
        info["w"]["saved_offsets"] = [0, 5]
        header["__metadata__"]["DCP_SHARDING_INFO"] = json.dumps(info)
    _rewrite_header(f, move)
    ckpt = load(d)
    w = ckpt["w"]
    assert w.shape == (4, 8) and w.extra["chunk_elements"] == 24
    proc = run_cli("stats", str(d))
    assert "Traceback" not in proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("w "))
    assert "chunks hold 24 elements of its 32: they overlap or leave a gap" in row, row


@pytest.mark.parametrize("cut", [8, 200, -5])
def test_a_truncated_shard_is_one_line(tmp_path, cut):
    d = _hf_copy(tmp_path)
    f = d / "shard-00001-model-00001-of-00001.safetensors"
    f.write_bytes(f.read_bytes()[:cut])
    proc = run_cli("stats", str(d))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# ---------------------------------------------------------------------------------------------
# Accelerate FSDP (SHARDED_STATE_DICT)


def test_accelerate_directory_is_the_model_and_its_optimizer():
    truth = load_truth(DCP / "accelerate_fsdp.layout.json")
    assert detect(DCP / "accelerate_fsdp")[1] == "accelerate"
    ckpt = load(DCP / "accelerate_fsdp")
    model = {t["stored_name"]: t for t in truth["parts"]["pytorch_model_fsdp_0"]["tensors"]}
    optim = {t["stored_name"]: t for t in truth["parts"]["optimizer_0"]["tensors"]}
    got = {t.stored_name: t for t in ckpt.tensors}
    assert set(got) == set(model) | set(optim)
    for name, w in {**model, **optim}.items():
        assert (list(got[name].shape), got[name].dtype) == (w["shape"], w["dtype"]), name
    assert {got[n].role.value for n in model} == {"parameter"}
    assert {got[n].role.value for n in optim} == {"optimizer"}
    assert got["model.0.weight"].name == "0.weight"
    assert ckpt.metadata["dcp_dirs"] == ["pytorch_model_fsdp_0", "optimizer_0"]
    assert ckpt.metadata["other_files"] == ["random_states_0.pkl", "random_states_1.pkl"]
    assert set(truth["files"]) == {"optimizer_0", "pytorch_model_fsdp_0", "random_states_0.pkl",
                                   "random_states_1.pkl"}
    _stats_equal(ckpt, {**model, **optim})


def test_accelerate_scan_is_safe():
    proc = run_cli("scan", str(DCP / "accelerate_fsdp"))
    assert proc.returncode == 0, proc.stdout
    assert "0 dangerous" in proc.stdout and "0 error" in proc.stdout


def test_a_malicious_random_states_pickle_refuses_the_directory(tmp_path):
    marker = tmp_path / "ran"
    d = tmp_path / "acc"
    shutil.copytree(DCP / "accelerate_fsdp", d)
    cmd = f"touch {marker}".encode()
    (d / "random_states_1.pkl").write_bytes(
        b"\x80\x02cos\nsystem\nq\x00X" + struct.pack("<I", len(cmd)) + cmd + b"\x85R.")
    err = assert_clean_error(run_cli("show", str(d)), str(d), "os.system")
    assert "refused" in err
    assert scan_file(d / "random_states_1.pkl").verdict == "dangerous"
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------
# Megatron-core torch_dist


MEG_DIST = DCP / "megatron_dist"


def test_torch_dist_listing_is_megatron_cores_metadata():
    truth = load_truth(DCP / "megatron_dist.truth.json")
    assert detect(MEG_DIST)[1] == "tracker"
    assert detect(MEG_DIST / "iter_0000010")[1] == "torch_dist"
    ckpt = load(MEG_DIST)
    assert ckpt.format == "megatron" and ckpt.metadata["layout"] == "torch_dist"
    assert ckpt.metadata["sharded_backend"] == "torch_dist"
    got = {t.stored_name: (list(t.shape), t.dtype) for t in ckpt.tensors}
    assert got == {t["stored_name"]: (t["shape"], t["dtype"]) for t in truth["tensors"]}
    assert got["decoder.layers.mlp.linear_fc1.weight"][0][0] == truth["args"]["num_layers"]
    names = {b["name"] for b in ckpt.metadata["bytes"]}
    assert names == set(truth["bytes_items"])


def test_torch_dist_args_come_from_common_pt():
    truth = load_truth(DCP / "megatron_dist.truth.json")
    ckpt = load(MEG_DIST)
    args = ckpt.hyperparameters["args"]
    for k, v in truth["args"].items():
        assert args[k] == v, k
    assert ckpt.hyperparameters["iteration"] == truth["iteration"]


def test_torch_dist_values_and_check():
    truth = load_truth(DCP / "megatron_dist.truth.json")
    _stats_equal(load(MEG_DIST), {t["stored_name"]: t for t in truth["tensors"]})
    proc = run_cli("check", "--format", "json", str(MEG_DIST))
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["verdict"] == "verified", proc.stdout[-1500:]
    assert out["totals"]["found"] == truth["parameter_count"]
    proc = run_cli("diff", "--values", "--format", "json", str(MEG_DIST),
                   str(DCP / "megatron_dist.consolidated.pt"))
    out = json.loads(proc.stdout)
    assert out["summary"]["unchanged"] == len(truth["tensors"])
    assert out["values_changed"] == 0 and out["values_not_compared"] == 0


def test_torch_dist_scan_is_never_dangerous():
    proc = run_cli("scan", str(MEG_DIST))
    assert proc.returncode == 0, proc.stdout  # common.pt's argparse.Namespace: foreign
    assert "0 dangerous" in proc.stdout and "0 error" in proc.stdout


def _dist_copy(tmp_path: Path) -> Path:
    d = tmp_path / "mdist"
    shutil.copytree(MEG_DIST, d)
    return d


def test_an_unknown_sharded_backend_is_one_line(tmp_path):
    d = _dist_copy(tmp_path)
    (d / "iter_0000010" / "metadata.json").write_text('{"sharded_backend": "zarr"}')
    assert_clean_error(run_cli("show", str(d)), str(d), "sharded_backend 'zarr' is not supported")


def test_torch_dist_without_common_state_is_incomplete(tmp_path):
    d = _dist_copy(tmp_path)
    (d / "iter_0000010" / "common.pt").unlink()
    ckpt = load(d)
    assert "args" not in ckpt.hyperparameters
    assert any("args and iteration are unknown" in f.message for f in ckpt.findings)
    proc = run_cli("check", str(d))
    assert proc.returncode == 3 and "MISMATCH" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("text", ["../megatron_dist/iter_0000010", "/etc", "10/../../x"])
def test_a_tracker_leaving_the_directory_is_one_line(tmp_path, text):
    d = _dist_copy(tmp_path)
    (d / "latest_checkpointed_iteration.txt").write_text(text)
    assert_clean_error(run_cli("show", str(d)), str(d), "not an iteration number")


def test_a_missing_distcp_file_is_one_line(tmp_path):
    d = _dist_copy(tmp_path)
    (d / "iter_0000010" / "__2_1.distcp").unlink()
    assert_clean_error(run_cli("show", str(d)), str(d), "__2_1.distcp", "missing")
