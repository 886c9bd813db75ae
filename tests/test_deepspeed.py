"""DeepSpeed ZeRO checkpoints (``fixtures/deepspeed``) against what DeepSpeed itself reads.

The fixtures and ``*.truth.json`` were written by deepspeed 0.19.8 on 2 CPU ranks
(``fixtures/deepspeed/make_deepspeed_fixtures.py``): ``zero_to_fp32.
get_fp32_state_dict_from_zero_checkpoint`` for the parameters and buffers, ``ds_to_universal.py``
for the optimizer moments per parameter, the model's own parameter count. Damaged and hostile
variants are made here from copies of them.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from inspector.adapters.errors import InspectorError
from inspector.adapters.registry import detect, load
from inspector.adapters.security.scan import scan_file
from inspector.formulas.check import check
from inspector.values import iter_values

from conftest import FIXTURES, load_truth, run_cli
from hostile import assert_clean_error

DS = FIXTURES / "deepspeed"
NAMES = ("mlp-z1", "llama-z1", "gpt2-z2", "llama-z3", "mlp-z3", "gpt2-z2-universal")
DS_PY = Path("/work/venvs/pickle-deepspeed/bin/python")


def _truth(name: str) -> dict:
    return load_truth(DS / f"{name}.truth.json")


def _open(name: str) -> Path:
    return DS / _truth(name)["open"]


def _copy(tmp_path: Path, name: str) -> Path:
    """A copy of a fixture's checkpoint directory (the HF Trainer layout's checkpoint-3/)."""
    dst = tmp_path / name
    shutil.copytree(_open(name), dst)
    return dst


# ---------------------------------------------------------------------------------------------
# listing


@pytest.mark.parametrize("name", NAMES)
def test_listing_is_deepspeeds_assembly(name):
    truth = _truth(name)
    ckpt = load(_open(name))
    assert ckpt.format == "deepspeed"
    got = {t.stored_name: t for t in ckpt.tensors}
    want = {t["stored_name"]: t for t in truth["tensors"]}
    assert sorted(got) == sorted(want)
    for n, w in want.items():
        t = got[n]
        assert (list(t.shape), t.dtype, t.role.value) == (w["shape"], w["dtype"], w["role"]), n
    # zero_to_fp32's order for the model (buffers, frozen, trainable, shared aliases)
    model = [t["stored_name"] for t in truth["tensors"] if t["role"] != "optimizer"]
    if not truth.get("universal"):
        assert [t.stored_name for t in ckpt.tensors if t.role.value != "optimizer"] == model
    totals = ckpt.totals()
    assert totals["parameters"] == truth["parameter_count"]  # the model's own count, tied once
    assert totals["buffers"] == truth["buffer_count"]
    if not truth.get("universal"):
        assert ckpt.metadata["zero_stage"] == truth["zero_stage"]
        assert ckpt.metadata["world_size"] == truth["world_size"]
    assert ckpt.hyperparameters["ds_version"] == truth["ds_version"]
    for alias, target in truth["shared_params"].items():
        assert ckpt.shared_with()[target] == (alias,)


def test_a_tag_directory_opens_alone_with_the_config_above_it():
    step = DS / "llama-z3/checkpoint-3/global_step3"
    adapter, variant = detect(step)
    assert (adapter.name, variant) == ("deepspeed", "step")
    ckpt = load(step)
    whole = load(DS / "llama-z3/checkpoint-3")
    assert [(t.name, t.shape) for t in ckpt.tensors] == [(t.name, t.shape) for t in whole.tensors]
    assert ckpt.metadata["config_file"] == "config.json"


def test_a_custom_tag_without_the_recovery_script(tmp_path):
    """``save_checkpoint(dir, tag="best")`` and no zero_to_fp32.py (older DeepSpeed)."""
    d = _copy(tmp_path, "mlp-z1")
    (d / "global_step3").rename(d / "best")
    (d / "zero_to_fp32.py").unlink()
    _latest(d, "best")
    assert detect(d)[0].name == "deepspeed"
    ckpt = load(d)
    assert ckpt.metadata["tag"] == "best" and len(ckpt.tensors) == len(_truth("mlp-z1")["tensors"])


def test_listing_reads_no_tensor_bytes(monkeypatch):
    """Metadata only: the listing never reads a partition's bytes (only pickles and headers)."""
    from inspector.adapters import source as source_module

    reads: list[tuple[str, int, int]] = []
    real = source_module.LocalSource.read

    def spy(self, offset, n):
        reads.append((self.name, offset, n))
        return real(self, offset, n)

    monkeypatch.setattr(source_module.LocalSource, "read", spy)
    ckpt = load(_open("llama-z3"))
    located = {t.stored_name: ckpt.reader(t) for t in ckpt.tensors if t.role.value == "parameter"}
    assert located
    # no read covers any element of a partition (the 2600-element fp32 groups)
    big = [r for r in reads if r[2] >= 2600 * 4]
    assert not big, big


def test_listing_does_not_depend_on_tensor_bytes(tmp_path):
    """Every storage record of every states file overwritten with 0xFF: the same listing."""
    d = _copy(tmp_path, "llama-z3")
    for f in (d / "global_step3").glob("*.pt"):
        data = bytearray(f.read_bytes())
        with zipfile.ZipFile(f) as z:
            for info in z.infolist():
                if "/data/" not in info.filename:
                    continue
                n, m = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
                start = info.header_offset + 30 + n + m
                data[start:start + info.file_size] = b"\xff" * info.file_size
        f.write_bytes(bytes(data))
    a, b = load(_open("llama-z3")), load(d)
    assert [(t.name, t.shape, t.dtype, t.role) for t in a.tensors] == [
        (t.name, t.shape, t.dtype, t.role) for t in b.tensors]


def test_tensor_parallel_files_are_refused_by_name(tmp_path):
    d = _copy(tmp_path, "mlp-z1")
    f = d / "global_step3" / "mp_rank_00_model_states.pt"
    shutil.copy(f, d / "global_step3" / "mp_rank_01_model_states.pt")
    _one_line(d, "mp_rank_01_model_states.pt", "tensor/pipeline-parallel")


# ---------------------------------------------------------------------------------------------
# values


@pytest.mark.parametrize("name", NAMES)
def test_values_are_zero_to_fp32s(name):
    truth = _truth(name)
    ckpt = load(_open(name))
    for w in truth["tensors"]:
        t = ckpt[w["stored_name"]]
        v = np.concatenate([np.asarray(a).reshape(-1) for a in iter_values(ckpt, t)] or
                           [np.zeros(0)]).astype(np.float64)
        assert v.size == w["numel"], w["stored_name"]
        assert v[:len(w["first"])].tolist() == w["first"], w["stored_name"]
        assert v.sum() == pytest.approx(w["sum"], rel=1e-6, abs=1e-9), w["stored_name"]
        assert (v * v).sum() == pytest.approx(w["sumsq"], rel=1e-6, abs=1e-12), w["stored_name"]


def test_stats_and_diff_values_run_over_the_partitions():
    d = str(_open("mlp-z3"))
    proc = run_cli("stats", "--format", "json", d)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["complete"]
    truth = {t["stored_name"]: t for t in _truth("mlp-z3")["tensors"]}
    for t in rep["tensors"]:
        assert t["stats"]["count"] == truth[t["stored_name"]]["numel"]
    proc = run_cli("diff", "--values", "--format", "json", d, d)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["values_changed"] == 0 and report["values_not_compared"] == 0


def test_universal_fp32_equals_the_assembled_master_weights():
    """ds_to_universal's own per-parameter fp32.pt and the flat partitions it came from hold the
    same values, read by two different paths of the adapter."""
    uni = load(_open("gpt2-z2-universal"))
    flat = load(_open("gpt2-z2"))
    for t in flat.tensors:
        if t.stored_name == "lm_head.weight" or ".group" in t.stored_name:
            continue  # universal keeps the module's bf16 copy of the tied name, steps per param
        a = np.concatenate(list(iter_values(flat, t)))
        b = np.concatenate(list(iter_values(uni, uni[t.stored_name])))
        assert np.array_equal(a, b), t.stored_name


# ---------------------------------------------------------------------------------------------
# check


@pytest.mark.parametrize("name", ["gpt2-z2", "llama-z3"])
def test_check_verifies_with_the_trainers_config(name):
    result = check(load(_open(name)))
    assert result.verdict == "verified", result.notes


def test_check_without_config_is_incomplete_naming_it(tmp_path):
    d = _copy(tmp_path, "llama-z3")
    (d / "config.json").unlink()
    result = check(load(d))
    assert result.verdict == "incomplete"
    text = " ".join(result.notes)
    assert "config.json" in text and "num_key_value_heads" in text
    for f in sorted((d / "global_step3").glob("*_model_states.pt")):
        result = check(load(f))
        assert result.verdict == "incomplete", f
    proc = run_cli("check", str(d))
    assert proc.returncode == 3 and "INCOMPLETE" in proc.stdout and "Traceback" not in proc.stderr


def test_zero1_gqa_without_config_is_incomplete_never_mismatch(tmp_path):
    """The reported case: a GQA Llama's ZeRO-1 model states, no config.json: the head counts
    are not in the checkpoint, so check says incomplete, naming them; given the model's
    config.json beside the checkpoint (as HF Trainer writes it), it verifies."""
    d = _open("llama-z1")
    for target in (d, d / "global_step3" / "mp_rank_00_model_states.pt"):
        proc = run_cli("check", str(target))
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "INCOMPLETE" in proc.stdout and "MISMATCH" not in proc.stdout
        assert "num_key_value_heads" in proc.stdout and "config.json" in proc.stdout
    c = _copy(tmp_path, "llama-z1")
    shutil.copy(_open("llama-z3") / "config.json", c / "config.json")  # the same model config
    assert check(load(c)).verdict == "verified"
    assert check(load(c / "global_step3" / "mp_rank_00_model_states.pt")).verdict == "verified"


# ---------------------------------------------------------------------------------------------
# each states file on its own


@pytest.mark.parametrize("name", ["mlp-z1", "llama-z1", "gpt2-z2", "llama-z3", "mlp-z3"])
def test_each_states_file_opens_alone(name):
    step = _open(name) / "global_step3"
    truth = _truth(name)
    shapes = {t["stored_name"]: t["shape"] for t in truth["tensors"] if t["role"] != "optimizer"}
    for f in sorted(step.glob("*_states.pt")):
        ckpt = load(f)
        assert ckpt.format.startswith("deepspeed-"), f
        if f.name.endswith("_model_states.pt"):
            got = {t.name: list(t.shape) for t in ckpt.tensors}
            # stage 3: full shapes from param_shapes, never the empty placeholders
            assert {n: s for n, s in got.items() if n in shapes} == shapes, f.name
            assert not any(0 in s for s in got.values())
            roles = {t.name: t.role.value for t in ckpt.tensors}
            assert all(roles[b] == "buffer" for b in truth["buffer_names"])
        assert check(ckpt).verdict != "mismatch", f


@pytest.mark.parametrize("verb", ["show", "check"])
def test_zero3_model_states_cli_has_no_traceback(verb):
    """The reported case: ``check`` on a ZeRO-3 model states file raised ``ValueError: not
    enough values to unpack`` (placeholders of shape [0])."""
    f = _open("llama-z3") / "global_step3" / "zero_pp_rank_0_mp_rank_00_model_states.pt"
    proc = run_cli(verb, str(f))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "MISMATCH" not in proc.stdout
    if verb == "check":
        assert "VERIFIED" in proc.stdout  # config.json two levels up (HF Trainer layout)


# ---------------------------------------------------------------------------------------------
# damaged directories: one clear line, non-zero exit


def _latest(d: Path, text: str) -> Path:
    (d / "latest").write_text(text)
    return d


DAMAGE = {
    "missing rank file": lambda d: next((d / "global_step3").glob("*rank_1*optim*")).unlink(),
    "latest outside": lambda d: _latest(d, "../../etc"),
    "latest missing dir": lambda d: _latest(d, "global_step9"),
    "latest traversal": lambda d: _latest(d, "../.."),
    "latest absolute": lambda d: _latest(d, "/tmp"),
    "latest empty": lambda d: _latest(d, "\n"),
    "latest symlink out": lambda d: (d / "global_step7").symlink_to("/tmp")
    or _latest(d, "global_step7"),
}
NEEDLES = {
    "missing rank file": "rank", "latest outside": "refused", "latest missing dir":
    "global_step9", "latest traversal": "refused", "latest absolute": "refused",
    "latest empty": "empty", "latest symlink out": "global_step7",
}


def _one_line(path: Path, *needles: str) -> str:
    with pytest.raises(InspectorError) as e:
        load(path)
    text = str(e.value)
    assert "\n" not in text.strip() and str(path) in text, text
    for n in needles:
        assert n in text, (n, text)
    return text


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("name", ["mlp-z1", "llama-z3"])
def test_damaged_directory_is_one_clear_line(tmp_path, name, damage):
    d = _copy(tmp_path, name)
    DAMAGE[damage](d)
    _one_line(d, NEEDLES[damage])


@pytest.mark.parametrize("damage", ["latest traversal", "missing rank file"])
def test_damaged_directory_cli(tmp_path, damage):
    d = _copy(tmp_path, "mlp-z3")
    DAMAGE[damage](d)
    assert_clean_error(run_cli("show", str(d)), str(d), NEEDLES[damage])


@pytest.mark.parametrize("name", ["mlp-z1", "llama-z1", "gpt2-z2", "llama-z3", "mlp-z3"])
@pytest.mark.parametrize("cut", [0.3, 0.7, 0.97])
def test_truncated_partition_is_one_clear_line(tmp_path, name, cut):
    d = _copy(tmp_path, name)
    for pattern in ("*rank_1*optim*", "*model_states.pt"):
        f = next((d / "global_step3").glob(pattern))
        data = f.read_bytes()
        f.write_bytes(data[: int(len(data) * cut)])
        _one_line(d)
        f.write_bytes(data)


def test_partition_shorter_than_param_shapes_is_refused(tmp_path):
    """Model states of another run (other parameters than the partitions hold), and a rank
    file of a stage 3 run among stage 1 ones: named, never sliced wrongly."""
    d = _copy(tmp_path, "mlp-z1")
    shutil.copy(_open("llama-z1") / "global_step3" / "mp_rank_00_model_states.pt",
                d / "global_step3" / "mp_rank_00_model_states.pt")
    _one_line(d, "param_alignment_paddings")
    d = _copy(tmp_path / "z3", "mlp-z3")
    for f in (_open("llama-z3") / "global_step3").glob("*_model_states.pt"):
        shutil.copy(f, d / "global_step3" / f.name)
    _one_line(d, "fp32_flat_groups")
    d = _copy(tmp_path / "b", "mlp-z1")
    shutil.copy(next((_open("mlp-z3") / "global_step3").glob("*rank_1*optim*")),
                next((d / "global_step3").glob("*rank_1*optim*")))
    _one_line(d, "every rank")


# ---------------------------------------------------------------------------------------------
# security


@pytest.mark.parametrize("name", ["mlp-z1", "llama-z1", "gpt2-z2", "llama-z3", "mlp-z3"])
def test_scan_of_the_directories_says_nothing_dangerous(name):
    from inspector.adapters.security.scan import scan

    pts = 0
    for res in scan([str(DS / name)]):
        if res.path.endswith(".py"):  # zero_to_fp32.py: code, run only when executed
            assert res.verdict == "foreign", res.path
            continue
        assert res.verdict == "safe", (res.path, res.items)
        if res.path.endswith(".pt"):  # every pickle, through the adapter's examine hook
            assert res.kind == "deepspeed-states", res.path
            pts += 1
    assert pts == sum(1 for _ in (DS / name).rglob("*.pt"))


def test_scan_cli_of_a_directory():
    proc = run_cli("scan", "--format", "json", str(DS / "llama-z3"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["summary"]["dangerous"] == 0


def _evil_states(marker: Path) -> bytes:
    """A torch.save-shaped zip whose data.pkl builds {"optimizer_state_dict": os.system(...),
    "ds_version": "0.19.8"}: DeepSpeed's key at its end, a payload in the middle."""
    cmd = f"touch {marker}".encode()
    payload = (b"\x80\x02}q\x00(X\x14\x00\x00\x00optimizer_state_dictq\x01cos\nsystem\nq\x02"
               + b"X" + struct.pack("<I", len(cmd)) + cmd + b"\x85Rq\x03"
               + b"X\n\x00\x00\x00ds_versionq\x04X\x06\x00\x00\x000.19.8q\x05u.")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def _with_payload(path: Path, marker: Path) -> None:
    """The real states file with ``os.system(...)`` called and its result popped just before
    the pickle's STOP: the object torch.load returns is unchanged, its layout still valid."""
    cmd = f"touch {marker}".encode()
    call = b"cos\nsystem\nX" + struct.pack("<I", len(cmd)) + cmd + b"\x85R0"
    with zipfile.ZipFile(path) as z:
        members = [(i.filename, z.read(i)) for i in z.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members:
            if name.endswith("/data.pkl"):
                assert data.endswith(b".")
                data = data[:-1] + call + b"."
            z.writestr(name, data)
    path.write_bytes(buf.getvalue())


def test_a_payload_in_a_well_formed_rank_file_is_refused(tmp_path):
    marker = tmp_path / "ran"
    d = _copy(tmp_path, "llama-z3")
    f = next((d / "global_step3").glob("*rank_1*optim*"))
    _with_payload(f, marker)
    _one_line(d, "os.system")
    assert load(d, allow_unsafe=True).tensors  # the layout itself is intact
    res = scan_file(f)
    assert res.verdict == "dangerous" and res.kind == "deepspeed-states"
    assert not marker.exists()


def test_a_payload_in_a_broken_rank_file_is_still_named(tmp_path):
    """A pickle that calls os.system and then breaks off: refused as unsafe, not merely as
    unreadable (torch.load would have run the call before failing)."""
    marker = tmp_path / "ran"
    d = _copy(tmp_path, "mlp-z1")
    f = next((d / "global_step3").glob("*rank_1*optim*"))
    data = _evil_states(marker)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        pkl = z.read("archive/data.pkl")
    cut = pkl.index(b"\x85R") + 2  # the call, then the pickle ends without STOP
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl[:cut] + b"X\x0a\x00\x00\x00ds_version")
        z.writestr("archive/version", "3\n")
    f.write_bytes(buf.getvalue())
    err = assert_clean_error(run_cli("show", str(d)), str(d), "os.system")
    assert "refused" in err
    assert scan_file(f).verdict == "dangerous"
    assert not marker.exists()


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "ran"
    d = _copy(tmp_path, "mlp-z1")
    f = next((d / "global_step3").glob("*rank_1*optim*"))
    f.write_bytes(_evil_states(marker))
    for verb in ("show", "stats", "check"):
        err = assert_clean_error(run_cli(verb, str(d)), str(d), "os.system")
        assert "refused" in err
    assert scan_file(f).verdict == "dangerous"
    assert scan_file(f).kind == "deepspeed-states"
    proc = run_cli("scan", str(d))
    assert proc.returncode != 0 and "dangerous" in proc.stdout
    assert not marker.exists()
    return d, marker


def test_a_hostile_pickle_in_one_rank_file_is_dangerous(tmp_path):
    _planted(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not DS_PY.exists(), reason="no deepspeed producer venv")
def test_zero_to_fp32_runs_the_planted_payload(tmp_path):
    """DeepSpeed's own loader runs it: zero_to_fp32 torch.loads every optim states file with
    weights_only=False (~30 s: deepspeed import)."""
    d, marker = _planted(tmp_path)
    proc = subprocess.run(
        [str(DS_PY), "-c", "import sys; from deepspeed.utils.zero_to_fp32 import "
         "get_fp32_state_dict_from_zero_checkpoint as g; g(sys.argv[1])", str(d)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "DS_ACCELERATOR": "cpu"})
    assert marker.exists(), proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(not DS_PY.exists(), reason="no deepspeed producer venv")
def test_zero_to_fp32_runs_the_payload_of_a_well_formed_rank_file(tmp_path):
    """The same with the layout intact: zero_to_fp32 runs the payload and assembles the
    weights as if nothing happened."""
    marker = tmp_path / "ran"
    d = _copy(tmp_path, "llama-z3")
    _with_payload(next((d / "global_step3").glob("*rank_1*optim*")), marker)
    proc = subprocess.run(
        [str(DS_PY), "-c", "import sys; from deepspeed.utils.zero_to_fp32 import "
         "get_fp32_state_dict_from_zero_checkpoint as g; print(len(g(sys.argv[1])))", str(d)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "DS_ACCELERATOR": "cpu"})
    assert marker.exists(), proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "21"
