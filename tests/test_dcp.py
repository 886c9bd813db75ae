"""torch Distributed Checkpoints (``fixtures/dcp``) against what torch itself reads from them.

The fixtures and ``*.truth.json`` were written by torch 2.13 (``fixtures/dcp/make_dcp.py``):
``FileSystemReader.read_metadata()`` for names, sizes, dtypes, chunks and byte ranges, and
``format_utils.dcp_to_torch_save`` + ``torch.load`` for the consolidated tensors' statistics.
The hostile metadata files are built here from scratch, opcode by opcode.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

from inspector import value_stats as stats
from inspector.adapters.errors import FormatError, InspectorError
from inspector.adapters.registry import detect, load
from inspector.adapters.security.scan import scan_file
from inspector.values import iter_values

from conftest import FIXTURES, load_truth, run_cli
from hostile import assert_clean_error

DCP = FIXTURES / "dcp"
WHOLE = ("single", "fsdp2", "dtensor_cols")
TORCH_PY = Path("/work/venvs/torch/bin/python")


def _tensors(truth: dict) -> dict[str, dict]:
    return {it["fqn"]: it for it in truth["items"] if it["kind"] == "tensor"}


# ---------------------------------------------------------------------------------------------
# listing


@pytest.mark.parametrize("name", WHOLE)
def test_listing_is_torchs_metadata(name):
    truth = load_truth(DCP / f"{name}.truth.json")
    ckpt = load(DCP / name)
    assert ckpt.format == "dcp"
    want = _tensors(truth)
    got = {t.stored_name: t for t in ckpt.tensors}
    assert list(got) == list(want)  # state_dict_metadata's order
    for fqn, w in want.items():
        t = got[fqn]
        assert list(t.shape) == w["shape"], fqn
        assert t.dtype == w["dtype"], fqn
        assert t.extra["chunks"] == len(w["chunks"]), fqn
        assert "chunk_elements" not in t.extra, fqn  # the chunks cover the tensor exactly
        files = {c["file"] for c in w["chunks"]}
        assert t.file == (files.pop() if len(w["chunks"]) == 1 else None), fqn
    want_bytes = [(it["fqn"], it["file"], it["offset"], it["length"])
                  for it in truth["items"] if it["kind"] == "bytes"]
    assert [(b["name"], b["file"], b["offset"], b["length"])
            for b in ckpt.metadata.get("bytes", [])] == want_bytes
    assert ckpt.metadata["dcp_version"] == truth["version"]
    assert ckpt.metadata["chunks"] == sum(len(w["chunks"]) for w in want.values())


def test_names_and_roles_follow_the_training_dict():
    ckpt = load(DCP / "fsdp2")
    model = [t for t in ckpt.tensors if t.stored_name.startswith("model.")]
    assert [t.name for t in model] == [t.stored_name[len("model."):] for t in model]
    assert {t.role.value for t in model} == {"parameter"}
    optim = [t for t in ckpt.tensors if t.stored_name.startswith("optim.")]
    assert optim and {t.role.value for t in optim} == {"optimizer"}


def test_bytes_items_are_read_as_values():
    truth = load_truth(DCP / "single.truth.json")
    ckpt = load(DCP / "single")
    for fqn, value in truth["plain_values"].items():
        got = ckpt.hyperparameters[fqn]
        assert got == value, fqn
    assert ckpt.hyperparameters["step"] == 7 and ckpt.hyperparameters["note"] == "tiny"


def test_per_rank_metadata_files_merge_into_one_checkpoint():
    ranks = [json.loads((DCP / f"per_rank.rank{r}.json").read_text()) for r in (0, 1)]
    ckpt = load(DCP / "per_rank")
    assert ckpt.metadata["metadata_files"] == ["__0.metadata", "__1.metadata"]
    got = {t.stored_name: t for t in ckpt.tensors}
    for rank in ranks:
        for fqn, w in _tensors(rank).items():
            assert list(got[fqn].shape) == w["shape"] and got[fqn].dtype == w["dtype"]
    # each rank's chunks, a replicated chunk (saved by both ranks) once
    chunks = {fqn: {tuple(c["offsets"]) for r in ranks for c in _tensors(r)[fqn]["chunks"]}
              for fqn in got}
    assert {fqn: t.extra["chunks"] for fqn, t in got.items()} == {
        fqn: len(c) for fqn, c in chunks.items()}
    one = load(DCP / "per_rank" / "__1.metadata")  # one rank's file alone: its own view
    assert {t.stored_name: t.extra["chunks"] for t in one.tensors} == {
        fqn: len(w["chunks"]) for fqn, w in _tensors(ranks[1]).items()}


def test_the_directory_is_one_checkpoint_not_three():
    adapter, variant = detect(DCP / "fsdp2")
    assert (adapter.name, variant) == ("dcp", "dir")
    proc = run_cli("show", "--allow-unsafe", str(DCP / "fsdp2"))
    assert proc.returncode == 0, proc.stderr
    assert "checkpoints here" not in proc.stderr
    assert "model.0.weight" in proc.stdout


def test_metadata_file_alone_is_the_whole_checkpoint():
    whole = load(DCP / "fsdp2")
    alone = load(DCP / "fsdp2" / ".metadata")
    assert [(t.stored_name, t.shape) for t in alone.tensors] == [
        (t.stored_name, t.shape) for t in whole.tensors]


@pytest.mark.parametrize("shard", ["__0_0.distcp", "__1_0.distcp"])
def test_a_distcp_file_alone_lists_its_chunks(shard):
    truth = load_truth(DCP / "fsdp2.truth.json")
    ckpt = load(DCP / "fsdp2" / shard)
    assert ckpt.metadata["part_of"].endswith("fsdp2")
    want = {}
    for fqn, w in _tensors(truth).items():
        for c in w["chunks"]:
            if c["file"] == shard:
                tag = fqn if len(w["chunks"]) == 1 else f"{fqn}[{','.join(map(str, c['offsets']))}]"
                want[tag] = (c["sizes"], w["shape"])
    got = {t.stored_name: (list(t.shape), list(t.extra["global_shape"])) for t in ckpt.tensors}
    assert got == want
    assert any("one file of the distributed checkpoint" in f.message for f in ckpt.findings)


# ---------------------------------------------------------------------------------------------
# values


@pytest.mark.parametrize("name", WHOLE + ("per_rank",))
@pytest.mark.parametrize("chunk", [3, stats.CHUNK])
def test_values_are_torchs_consolidated_tensors(name, chunk):
    truth = load_truth(DCP / f"{('dtensor_cols' if name == 'per_rank' else name)}.truth.json")
    ckpt = load(DCP / name)
    rep = stats.report(stats.file_stats(ckpt, chunk=chunk))
    assert rep["complete"]
    got = {t["stored_name"]: t for t in rep["tensors"]}
    assert sorted(got) == sorted(truth["consolidated"])
    for fqn, w in truth["consolidated"].items():
        g = got[fqn]
        assert (g["shape"], g["dtype"]) == (w["shape"], w["dtype"]), fqn
        for k in ("count", "min", "max", "mean", "std", "l2"):
            assert g["stats"][k] == pytest.approx(w[k], rel=1e-6, abs=1e-12), (fqn, k)


@pytest.mark.parametrize("name", ["fsdp2", "dtensor_cols"])
def test_diff_values_against_torchs_consolidation_is_identical(name):
    proc = run_cli("diff", "--values", "--allow-unsafe", "--format", "json",
                   str(DCP / name), str(DCP / f"{name}.consolidated.pt"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    n = len(_tensors(load_truth(DCP / f"{name}.truth.json")))
    assert report["summary"]["unchanged"] == n  # every element equal (atol = rtol = 0)
    assert report["values_changed"] == 0 and report["values_not_compared"] == 0
    assert not report["different"]


def test_chunk_of_a_distcp_file_reads_its_own_values():
    """A chunk listed from its .distcp alone holds the slice of the global tensor it says."""
    import numpy as np

    whole = load(DCP / "dtensor_cols")
    part = load(DCP / "dtensor_cols" / "__1_0.distcp")
    full = np.concatenate(list(iter_values(whole, whole["e"]))).reshape(3, 5, 4)
    entry = part["e[0,3,0]"]
    got = np.concatenate(list(iter_values(part, entry))).reshape(entry.shape)
    assert np.array_equal(got, full[:, 3:5, :])


# ---------------------------------------------------------------------------------------------
# hostile metadata, built here opcode by opcode


class Glob:
    """A global alone (STACK_GLOBAL): a dtype."""

    def __init__(self, dotted: str) -> None:
        self.dotted = dotted


class New:
    """``cls()`` by NEWOBJ, then BUILD ``state``."""

    def __init__(self, cls: str, state) -> None:
        self.cls, self.state = cls, state


class Call:
    """``func(*args)`` by REDUCE."""

    def __init__(self, func: str, *args) -> None:
        self.func, self.args = func, args


class Many:
    """A list of ``count`` references to one memoized object (BINGET)."""

    def __init__(self, obj, count: int) -> None:
        self.obj, self.count = obj, count


def _pickle(obj) -> bytes:
    """Protocol 4 opcodes for ``obj`` (plain values and the nodes above), written by hand."""
    out = bytearray(b"\x80\x04")
    memo = [0]

    def s(text: str) -> None:
        raw = text.encode()
        out.extend(b"\x8c" + bytes([len(raw)]) + raw if len(raw) < 256
                   else b"X" + struct.pack("<I", len(raw)) + raw)

    def glob(dotted: str) -> None:
        module, _, name = dotted.rpartition(".")
        s(module)
        s(name)
        out.extend(b"\x93")

    def emit(v) -> None:
        if v is None:
            out.extend(b"N")
        elif v is True or v is False:
            out.extend(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            out.extend(b"J" + struct.pack("<i", v) if -2**31 <= v < 2**31
                       else b"\x8a\x08" + struct.pack("<q", v))
        elif isinstance(v, str):
            s(v)
        elif isinstance(v, tuple):
            out.extend(b"(")
            for x in v:
                emit(x)
            out.extend(b"t")
        elif isinstance(v, list):
            out.extend(b"](")
            for x in v:
                emit(x)
            out.extend(b"e")
        elif isinstance(v, dict):
            out.extend(b"}(")
            for k, x in v.items():
                emit(k)
                emit(x)
            out.extend(b"u")
        elif isinstance(v, Glob):
            glob(v.dotted)
        elif isinstance(v, New):
            glob(v.cls)
            out.extend(b")\x81")
            emit(v.state)
            out.extend(b"b")
        elif isinstance(v, Call):
            glob(v.func)
            emit(tuple(v.args))
            out.extend(b"R")
        elif isinstance(v, Many):
            out.extend(b"](")
            emit(v.obj)
            out.extend(b"\x94")
            index = memo[0]
            memo[0] += 1
            for i in range(1, v.count):
                out.extend(b"j" + struct.pack("<I", index))
                if i % 1000 == 0:
                    out.extend(b"e(")
            out.extend(b"e")
        else:
            raise TypeError(type(v))

    emit(obj)
    out.extend(b".")
    return bytes(out)


M = "torch.distributed.checkpoint.metadata."
INFO = "torch.distributed.checkpoint.filesystem._StorageInfo"


def _chunk(offsets: tuple, sizes: tuple) -> New:
    return New(M + "ChunkStorageMetadata",
               {"offsets": Call("torch.Size", offsets), "sizes": Call("torch.Size", sizes)})


def _tensor(shape: tuple, chunks, dtype: str = "float32") -> New:
    props = New(M + "TensorProperties", (
        Glob("torch." + dtype), Call("torch.serialization._get_layout", "torch.strided"), False,
        Call(M + "_MEM_FORMAT_ENCODING", 0), False))
    return New(M + "TensorStorageMetadata",
               {"properties": props, "size": Call("torch.Size", shape), "chunks": chunks})


def _metadata(sdm: dict, storage: dict, planner=None) -> bytes:
    """``.metadata`` as torch pickles it; ``storage``: (fqn, offsets) -> (path, offset, length)."""
    return _pickle(New(M + "Metadata", {
        "state_dict_metadata": sdm,
        "planner_data": planner,
        "storage_data": {
            New(M + "MetadataIndex", {
                "fqn": fqn, "offset": Call("torch.Size", off) if off is not None else None,
                "index": None}): New(INFO, {"relative_path": path, "offset": o, "length": n})
            for (fqn, off), (path, o, n) in storage.items()},
        "storage_meta": None,
        "version": "1.0.0",
    }))


def _real(tmp_path: Path, sdm_storage=None) -> Path:
    """A copy of the single-process fixture (its real ``__0_0.distcp``), metadata replaced by
    one tensor ``w`` of shape [16, 8] at the first chunk torch wrote for model.0.weight."""
    truth = load_truth(DCP / "single.truth.json")
    c = _tensors(truth)["model.0.weight"]["chunks"][0]
    d = tmp_path / "ckpt"
    shutil.copytree(DCP / "single", d)
    sdm, storage = sdm_storage or (
        {"w": _tensor((16, 8), [_chunk((0, 0), (16, 8))])},
        {("w", (0, 0)): (c["file"], c["offset"], c["length"])})
    (d / ".metadata").write_bytes(_metadata(sdm, storage))
    return d


def test_the_hand_written_metadata_reads_like_torchs(tmp_path):
    """The emitter is faithful: a rebuilt .metadata of one real chunk lists and reads it."""
    d = _real(tmp_path)
    ckpt = load(d)
    assert [(t.stored_name, t.shape, t.dtype) for t in ckpt.tensors] == [("w", (16, 8), "float32")]
    want = load_truth(DCP / "single.truth.json")["consolidated"]["model.0.weight"]
    rep = stats.report(stats.file_stats(ckpt))
    assert rep["tensors"][0]["stats"]["l2"] == pytest.approx(want["l2"], rel=1e-9)


@pytest.mark.parametrize("path,needle", [
    ("../outside.distcp", "leaves the directory"),
    ("/etc/hostname", "not a plain relative name"),
    ("sub/../../x.distcp", "leaves the directory"),
])
def test_a_storage_path_out_of_the_directory_is_refused(tmp_path, path, needle):
    d = _real(tmp_path, (
        {"w": _tensor((16, 8), [_chunk((0, 0), (16, 8))])}, {("w", (0, 0)): (path, 0, 100)}))
    (tmp_path / "outside.distcp").write_bytes(b"PK\x03\x04" + b"\0" * 200)
    assert_clean_error(run_cli("show", "--allow-unsafe", str(d)), str(d), needle)


@pytest.mark.parametrize("offset,length", [(10**12, 100), (0, 10**9), (2**62, 2**62)])
def test_a_byte_range_past_the_file_end_is_refused(tmp_path, offset, length):
    d = _real(tmp_path, ({"w": _tensor((16, 8), [_chunk((0, 0), (16, 8))])},
                         {("w", (0, 0)): ("__0_0.distcp", offset, length)}))
    assert_clean_error(run_cli("show", "--allow-unsafe", str(d)), str(d), "past the end")


def test_a_missing_file_is_refused(tmp_path):
    d = _real(tmp_path, ({"w": _tensor((16, 8), [_chunk((0, 0), (16, 8))])},
                         {("w", (0, 0)): ("__9_0.distcp", 0, 100)}))
    assert_clean_error(run_cli("show", "--allow-unsafe", str(d)), str(d), "missing")


def test_chunks_outside_their_tensor_are_refused(tmp_path):
    d = _real(tmp_path, ({"w": _tensor((16, 8), [_chunk((8, 0), (16, 8))])},
                         {("w", (8, 0)): ("__0_0.distcp", 0, 100)}))
    assert_clean_error(run_cli("show", "--allow-unsafe", str(d)), str(d), "does not fit")


def test_a_hundred_thousand_chunk_references_stay_bounded(tmp_path):
    """One chunk referenced 100,000 times (5 bytes each): listed in linear time, and a value
    read says the chunks overlap instead of reading them."""
    c = load_truth(DCP / "single.truth.json")
    c = _tensors(c)["model.0.weight"]["chunks"][0]
    d = _real(tmp_path, ({"w": _tensor((16, 8), Many(_chunk((0, 0), (16, 8)), 100_000))},
                         {("w", (0, 0)): (c["file"], c["offset"], c["length"])}))
    ckpt = load(d)
    entry = ckpt["w"]
    assert entry.extra["chunks"] == 100_000 and entry.extra["chunk_elements"] == 12_800_000
    with pytest.raises(FormatError, match="overlap"):
        list(iter_values(ckpt, entry))


def test_metadata_naming_os_system_is_refused_and_never_run(tmp_path):
    _metadata_payload_refused(tmp_path)


def _metadata_payload_refused(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "ran"
    planner = {"w": Call("os.system", f"touch {marker}")}
    d = _real(tmp_path)
    c = _tensors(load_truth(DCP / "single.truth.json"))["model.0.weight"]["chunks"][0]
    (d / ".metadata").write_bytes(_pickle(New(M + "Metadata", {
        "state_dict_metadata": {"w": _tensor((16, 8), [_chunk((0, 0), (16, 8))])},
        "planner_data": planner,
        "storage_data": {New(M + "MetadataIndex", {"fqn": "w", "offset": Call(
            "torch.Size", (0, 0))}): New(INFO, {"relative_path": c["file"],
                                                "offset": c["offset"], "length": c["length"]})},
        "version": "1.0.0"})))
    for verb in ("show", "stats"):
        err = assert_clean_error(run_cli(verb, str(d)), str(d), "os.system")
        assert "refused" in err
    assert scan_file(d / ".metadata").verdict == "dangerous"
    assert not marker.exists()
    return d, marker


@pytest.mark.slow
@pytest.mark.skipif(not TORCH_PY.exists(), reason="no torch producer venv")
def test_torch_runs_the_metadata_payload(tmp_path):
    """The real loader runs it: torch's own FileSystemReader.read_metadata (~20 s: torch)."""
    d, marker = _metadata_payload_refused(tmp_path)
    proc = subprocess.run(
        [str(TORCH_PY), "-c", "import sys; from torch.distributed.checkpoint import "
         "FileSystemReader; FileSystemReader(sys.argv[1]).read_metadata()", str(d)],
        capture_output=True, text=True, timeout=300)
    assert marker.exists(), proc.stderr[-2000:]


def _evil_blob(marker: Path) -> bytes:
    """A torch.save-shaped zip (written by zipfile) whose data.pkl calls os.system."""
    payload = (b"\x80\x02cos\nsystem\nq\x00X" + struct.pack("<I", len(f"touch {marker}"))
               + f"touch {marker}".encode() + b"\x85R.")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def test_a_bytes_item_running_os_system_is_refused_and_never_run(tmp_path):
    _bytes_item_payload_refused(tmp_path)


def _bytes_item_payload_refused(tmp_path: Path) -> tuple[Path, Path]:
    """torch's default load planner reads a bytes item with torch.load(weights_only=False): a
    pickle in one runs under dcp.load (shown live), and the tool refuses the checkpoint."""
    marker = tmp_path / "ran"
    d = _real(tmp_path)
    shard = d / "__0_0.distcp"
    offset = shard.stat().st_size
    blob = _evil_blob(marker)
    with shard.open("ab") as f:
        f.write(blob)
    c = _tensors(load_truth(DCP / "single.truth.json"))["model.0.weight"]["chunks"][0]
    (d / ".metadata").write_bytes(_metadata(
        {"w": _tensor((16, 8), [_chunk((0, 0), (16, 8))]), "note": New(
            M + "BytesStorageMetadata", {})},
        {("w", (0, 0)): (c["file"], c["offset"], c["length"]),
         ("note", None): ("__0_0.distcp", offset, len(blob))}))
    for verb in ("show", "stats"):
        err = assert_clean_error(run_cli(verb, str(d)), str(d), "system")
        assert "refused" in err
    assert scan_file(shard).verdict == "dangerous"
    assert scan_file(d / ".metadata").verdict == "safe"  # the metadata itself is benign
    assert not marker.exists()
    return d, marker


@pytest.mark.slow
@pytest.mark.skipif(not TORCH_PY.exists(), reason="no torch producer venv")
def test_torch_runs_the_bytes_item_payload(tmp_path):
    """dcp.load reads the bytes item with torch.load(weights_only=False): it runs (~20 s)."""
    d, marker = _bytes_item_payload_refused(tmp_path)
    proc = subprocess.run(
        [str(TORCH_PY), "-c", "import sys, torch.distributed.checkpoint as dcp; "
         "dcp.load({'note': None}, checkpoint_id=sys.argv[1])", str(d)],
        capture_output=True, text=True, timeout=300)
    assert marker.exists(), proc.stderr[-2000:]


def test_a_planted_setstate_is_judged_as_called(tmp_path):
    """A BUILD state planting ``__setstate__`` (a loader calls it on the next BUILD): the global
    is judged as called, as for any pickle, though the metadata is otherwise well formed."""
    c = _tensors(load_truth(DCP / "single.truth.json"))["model.0.weight"]["chunks"][0]
    d = _real(tmp_path)
    (d / ".metadata").write_bytes(_pickle(New(M + "Metadata", {
        "state_dict_metadata": {"w": _tensor((16, 8), [_chunk((0, 0), (16, 8))])},
        "storage_data": {New(M + "MetadataIndex", {"fqn": "w", "offset": Call(
            "torch.Size", (0, 0))}): New(INFO, {"relative_path": c["file"],
                                                "offset": c["offset"], "length": c["length"]})},
        "storage_meta": New(M + "StorageMeta", {"__setstate__": Glob("helpers.run_it")}),
        "version": "1.0.0"})))
    err = assert_clean_error(run_cli("show", str(d)), str(d), "helpers.run_it")
    assert "refused" in err and "planted __setstate__" in err


def test_a_root_that_is_not_metadata_is_one_line(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    # the marker sniffed, but the root object is something else
    (d / ".metadata").write_bytes(_pickle(
        (Glob(M + "Metadata"), Call("builtins.eval", "1+1"))))
    proc = run_cli("show", "--allow-unsafe", str(d))
    assert_clean_error(proc, str(d))


@pytest.mark.parametrize("cut", [20, 200, 2000, -1])
def test_truncated_metadata_is_one_line(tmp_path, cut):
    d = tmp_path / "ckpt"
    shutil.copytree(DCP / "single", d)
    data = (d / ".metadata").read_bytes()
    (d / ".metadata").write_bytes(data[:cut])
    proc = run_cli("show", "--allow-unsafe", str(d))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_corrupt_chunk_blob_is_one_line(tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(DCP / "fsdp2", d)
    raw = bytearray((d / "__0_0.distcp").read_bytes())
    raw[:200] = b"\0" * 200  # the first chunk's zip headers
    (d / "__0_0.distcp").write_bytes(bytes(raw))
    proc = run_cli("stats", "--allow-unsafe", str(d))
    assert "Traceback" not in proc.stderr, proc.stderr
    # the tensor whose chunk is broken is named with the file and why; the others are read
    row = next(line for line in proc.stdout.splitlines() if line.startswith("0.weight "))
    assert "not read: the chunk at __0_0.distcp@0 is not a torch.save blob" in row, row
    assert "INCOMPLETE: the values of 1 tensors were not read" in proc.stdout


# ---------------------------------------------------------------------------------------------
# scan


def test_scan_examines_each_blob_of_a_distcp_file():
    res = scan_file(DCP / "single" / "__0_0.distcp")
    assert res.verdict in ("safe", "foreign"), res.to_dict()
    assert not any(i.level == "error" for i in res.items), res.to_dict()


# ---------------------------------------------------------------------------------------------
# structured fuzzing: only the project's own one-line errors may come out, nothing hangs


def _open_and_read(d: Path) -> None:
    """detect + open without the registry's catch-all, then every tensor's values."""
    from inspector.adapters.source import LocalSource

    source = LocalSource(d)
    adapter, variant = detect(source)
    ckpt = adapter.open(source, variant)
    for t in ckpt.tensors:
        assert all(isinstance(x, int) and x >= 0 for x in t.shape)
        for _ in iter_values(ckpt, t):
            pass


def _must_be_clean(d: Path) -> None:
    try:
        _open_and_read(d)
    except InspectorError as e:
        assert "\n" not in str(e).strip(), str(e)


def test_fuzz_metadata_truncations_and_flips(tmp_path):
    import random

    d = tmp_path / "ckpt"
    shutil.copytree(DCP / "dtensor_cols", d)
    meta = (DCP / "dtensor_cols" / ".metadata").read_bytes()
    rng = random.Random(28)
    cases = [meta[:n] for n in range(0, len(meta), 7)]
    for _ in range(300):
        raw = bytearray(meta)
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        cases.append(bytes(raw))
    for data in cases:
        (d / ".metadata").write_bytes(data)
        _must_be_clean(d)


def test_fuzz_distcp_flips(tmp_path):
    import random

    d = tmp_path / "ckpt"
    shutil.copytree(DCP / "dtensor_cols", d)
    shard = (DCP / "dtensor_cols" / "__1_0.distcp").read_bytes()
    rng = random.Random(29)
    for _ in range(200):
        raw = bytearray(shard)
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        (d / "__1_0.distcp").write_bytes(bytes(raw[: rng.choice([len(raw), rng.randrange(
            len(raw))])]))
        _must_be_clean(d)


@pytest.mark.slow
def test_stats_on_dask_equals_the_single_pass():
    """``stats --dask``: the tasks reopen the directory where they run; same numbers."""
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        for name in ("fsdp2", "dtensor_cols"):
            plain = run_cli("stats", "--format", "json", str(DCP / name))
            dask = run_cli("stats", "--format", "json", "--dask", cluster.scheduler_address,
                           str(DCP / name))
            assert plain.returncode == dask.returncode == 0, dask.stderr
            assert [t["stats"] for t in json.loads(plain.stdout)["tensors"]] == [
                t["stats"] for t in json.loads(dask.stdout)["tensors"]]


@pytest.mark.parametrize("name", ["single", "fsdp2"])
def test_over_http_in_a_few_requests(name: str) -> None:
    """A DCP directory lists over HTTP range reads as it does locally (names, shapes, dtypes,
    chunk files), and its values are the same, in a handful of requests counted by the
    server (the listing: .metadata and the bytes items)."""
    import numpy as np
    from remote_servers import RangeServer

    local = load(DCP / name)
    with RangeServer(DCP) as srv:
        remote = load(f"{srv.url}/{name}/")
        listed = len(srv.log)
        assert [(t.name, t.shape, t.dtype, t.role, t.file) for t in remote.tensors] == [
            (t.name, t.shape, t.dtype, t.role, t.file) for t in local.tensors]
        for t in remote.tensors[:6]:
            got = np.concatenate([np.asarray(c).ravel() for c in iter_values(remote, t)])
            want = np.concatenate([np.asarray(c).ravel()
                                   for c in iter_values(local, local[t.name])])
            assert np.array_equal(got, want, equal_nan=True), t.name
    assert listed <= 4, [r.__dict__ for r in srv.log]
