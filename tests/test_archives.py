"""Archives people unpack, serving bundles and graphs, examined by ``scan`` and refused by the
verbs and the API.

The files are made by the real tools (``tests/corpus/archives/make_archives.py``: ``tar``, ``7z``,
``py7zr``, ``tarfile``, ``zipfile``; ``tests/corpus/serving/make_mars.py``:
``torch-model-archiver``; ``tests/corpus/serving/make_savedmodels.py``: TensorFlow), each with
the producer's truth: the members its own reader lists, whether unpacking and loading ran the
payload, the ops TensorFlow's own protobuf classes find in the graph.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from inspector.adapters.errors import InspectorError, UnsafeContentError
from inspector.adapters.registry import load
from inspector.adapters.security import archives
from inspector.adapters.security.scan import scan_file

from conftest import ROOT, run_cli

ARCHIVES = ROOT / "tests" / "corpus" / "archives"
SERVING = ROOT / "tests" / "corpus" / "serving"
ARCHIVE_TRUTH = json.loads((ARCHIVES / "archives.truth.json").read_text())["files"]
MAR_TRUTH = json.loads((SERVING / "mars.truth.json").read_text())["files"]
GRAPH_TRUTH = json.loads((SERVING / "savedmodels.truth.json").read_text())["files"]
PAYLOAD = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R."


def _verdicts(path: Path) -> tuple[int, dict]:
    proc = run_cli("scan", "--format", "json", str(path))
    doc = json.loads(proc.stdout)
    return proc.returncode, {Path(f["path"]).name: f for f in doc["files"]}


# ---------------------------------------------------------------- archives, made by the tools


def test_every_archive_the_loader_runs_is_dangerous_and_its_benign_twin_safe():
    code, files = _verdicts(ARCHIVES)
    assert code == 1
    for name, truth in ARCHIVE_TRUTH.items():
        f = files[name]
        if truth.get("payload_ran_after_unpacking"):
            assert f["verdict"] == "dangerous", f
            # named by its nested path, down to the pickle
            assert any(i["text"].startswith(name + "!") and "payload.pkl" in i["text"]
                       and "system" in i["text"] for i in f["findings"]), f
        elif name.startswith("benign"):
            assert f["verdict"] == "safe", f
    assert files["payload_nested.tar.gz"]["findings"][0]["where"].startswith(
        "mid.zip!deep.tar!payload.pkl")


@pytest.mark.parametrize("name, words", [
    ("slip_absolute.tar", "absolute path"), ("slip_dotdot.tar", "climbs out"),
    ("slip_dotdot.zip", "climbs out"), ("link_out.tar", "symbolic link to '/etc/passwd'"),
    ("hardlink_out.tar", "hard link to '../../etc/passwd'"), ("device.tar", "device file"),
])
def test_what_leaves_the_folder_on_unpacking_is_dangerous(name, words):
    r = scan_file(ARCHIVES / name)
    assert r.verdict == "dangerous" and any(words in i.text for i in r.items), r.to_dict()


def test_a_link_that_stays_inside_is_no_finding():
    truth = dict(map(tuple, ARCHIVE_TRUTH["benign_link_inside.tar"]["members"]))
    assert truth["snapshots/abc/weights.pt"] == "symlink"
    assert scan_file(ARCHIVES / "benign_link_inside.tar").verdict == "safe"


def _examined(path: Path, monkeypatch) -> list[str]:
    """The members the scan walk hands to the loose-file walk, by their nested names."""
    seen: list[str] = []
    real = archives.examine_member

    def spy(member, name, res, examine, *a):
        if "!" not in res.path:
            seen.append(name)
        return real(member, name, res, examine, *a)

    monkeypatch.setattr(archives, "examine_member", spy)
    scan_file(path)
    return seen


@pytest.mark.parametrize("name", sorted(n for n in ARCHIVE_TRUTH
                                        if n.endswith((".tar", ".gz", ".bz2", ".xz", ".7z"))))
def test_every_regular_member_the_reader_lists_is_examined(name, monkeypatch):
    """The producer's reader (tarfile, py7zr) lists the members; scan examines each regular one
    exactly once, in any compression."""
    listed = [m for m, kind in ARCHIVE_TRUTH[name]["members"] if kind == "file"]
    if name.endswith(".7z"):
        pytest.importorskip("py7zr")
    examined = _examined(ARCHIVES / name, monkeypatch)
    assert sorted(examined) == sorted(listed)


def test_7z_without_py7zr_is_an_error_never_passed(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "py7zr", None)
    for name in ("benign.7z", "payload.7z"):
        r = scan_file(ARCHIVES / name)
        assert r.verdict == "error" and "ckpt-inspector[7z]" in r.items[0].text


def test_archive_verbs_refuse(tmp_path):
    for name in ("payload.tar.gz", "payload.7z", "payload_zip_in_zip.zip"):
        proc = run_cli("show", str(ARCHIVES / name))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1
        with pytest.raises(InspectorError):
            load(ARCHIVES / name)


# ---------------------------------------------------------------- bounds


def _zip(members: dict[str, bytes]) -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return b.getvalue()


def test_nesting_depth_is_bounded(tmp_path):
    data = PAYLOAD
    name = "data.pkl"
    for i in range(archives.MAX_DEPTH + 2):
        data, name = _zip({name: data}), f"level{i}.zip"
    path = tmp_path / name
    path.write_bytes(data)
    r = scan_file(path)
    assert r.verdict == "error"
    assert any(f"nested deeper than {archives.MAX_DEPTH}" in i.text for i in r.items)


def test_member_count_and_bytes_are_bounded(tmp_path, monkeypatch):
    path = tmp_path / "many.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        for i in range(20):
            info = tarfile.TarInfo(f"m{i}.bin")
            info.size = 1000
            t.addfile(info, io.BytesIO(b"\0" * 1000))
    monkeypatch.setattr(archives, "MAX_MEMBERS", 5)
    r = scan_file(path)
    assert r.verdict == "error" and any("more than 5 archive members" in i.text
                                        for i in r.items)
    monkeypatch.setattr(archives, "MAX_MEMBERS", 10_000)
    monkeypatch.setattr(archives, "MAX_TOTAL_BYTES", 5000)
    r = scan_file(path)
    assert r.verdict == "error" and any("decompresses past" in i.text for i in r.items)


def test_a_huge_pax_header_is_refused_not_read(tmp_path, monkeypatch):
    path = tmp_path / "pax.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo("data.pkl")
        info.size = len(PAYLOAD)
        info.pax_headers = {"comment": "x" * 5000}
        t.addfile(info, io.BytesIO(PAYLOAD))
    assert scan_file(path).verdict == "dangerous"
    monkeypatch.setattr(archives, "MAX_HEADER_BYTES", 4096)
    r = scan_file(path)
    assert r.verdict == "error" and any("tar header record" in i.text for i in r.items)


# ---------------------------------------------------------------- zip methods, one place


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED,
                                    zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_every_method_zipfile_reads_is_read_by_scan_and_the_verbs(tmp_path, method):
    np = pytest.importorskip("numpy")
    path = tmp_path / "obj.npz"
    with zipfile.ZipFile(path, "w", method) as z:
        z.writestr("a.npy", _object_npy(np, PAYLOAD))
        z.writestr("data.pkl", PAYLOAD)
    r = scan_file(path)
    assert r.verdict == "dangerous", r.to_dict()
    assert not [i for i in r.items if i.level == "error"]
    proc = run_cli("show", str(path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def _object_npy(np, pickle_bytes: bytes) -> bytes:
    header = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + pickle_bytes


def test_a_method_zipfile_cannot_read_says_the_same_everywhere(tmp_path):
    np = pytest.importorskip("numpy")
    b = io.BytesIO()
    np.save(b, np.arange(3))
    data = bytearray(_zip({"a.npy": b.getvalue()}))
    for magic, at in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        i = data.find(magic)
        data[i + at : i + at + 2] = struct.pack("<H", 9)  # deflate64
    path = tmp_path / "d64.npz"
    path.write_bytes(bytes(data))
    sentence = "zip compression method 9 (deflate64), which Python's zipfile"
    r = scan_file(path)
    assert r.verdict == "error" and sentence in r.items[0].text
    proc = run_cli("show", str(path))
    assert proc.returncode == 2 and sentence in proc.stderr
    with pytest.raises(InspectorError, match="deflate64"):
        load(path)


def _zip_containers() -> list[Path]:
    out = []
    for top in (ROOT / "fixtures", ROOT / "tests" / "corpus"):
        for p in sorted(top.rglob("*")):
            if p.is_file() and p.stat().st_size < (8 << 20) and zipfile.is_zipfile(p) \
                    and p.read_bytes()[:4] == b"PK\x03\x04":
                out.append(p)
    return out


@pytest.mark.parametrize("path", _zip_containers(), ids=lambda p: str(p.relative_to(ROOT)))
def test_scan_and_the_listing_walk_read_the_same_members(path, monkeypatch):
    """Every zip of the corpora: the members the listing reads (through zipfile or the zip
    container walk) are among those scan reads; for the archives scan walks member by member
    (npz, plain zips, TorchServe) every member zipfile lists is read. A torch zip's storages
    are raw tensor bytes: neither walk reads them."""
    import inspector.adapters.keras
    import inspector.adapters.marian
    import inspector.adapters.numpy_npy
    import inspector.adapters.security.examination
    import inspector.adapters.torch.zip_archive
    import inspector.adapters.torch.zip_members  # noqa: F401 - their names are spied on
    from inspector.adapters import zip_container

    read: list[str] = []
    real_read, real_open = zip_container.read_member, zip_container.open_member

    def spy_read(mm, size, m, where, limit):
        read.append(m.name)
        return real_read(mm, size, m, where, limit)

    def spy_open(z, member, where=""):
        read.append(member if isinstance(member, str) else member.filename)
        return real_open(z, member, where)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("inspector.adapters"):
            if getattr(mod, "read_member", None) is real_read:
                monkeypatch.setattr(mod, "read_member", spy_read)
            if getattr(mod, "open_member", None) is real_open:
                monkeypatch.setattr(mod, "open_member", spy_open)
    monkeypatch.setattr(zip_container, "read_member", spy_read)
    monkeypatch.setattr(zip_container, "open_member", spy_open)
    r = scan_file(path)
    scanned = set(read)
    with zipfile.ZipFile(path) as z:
        members = {i.filename for i in z.infolist() if not i.is_dir()}
    if r.kind in ("npz", "zip", "torchserve-mar"):
        assert members <= scanned | _not_read(r), (r.kind, members - scanned)
    read.clear()
    try:
        load(path, allow_unsafe=True)
    except InspectorError:
        return  # not a checkpoint: nothing listed
    from inspector.adapters.torch.constants import TEXT_RECORDS

    # torch's one-line text records (byteorder, version) are read as metadata, not as streams
    text = tuple("/" + record for _, record in TEXT_RECORDS)
    streams = {n for n in read if not n.endswith(text)}
    assert streams <= scanned, streams - scanned


def _not_read(r) -> set[str]:
    return {i.where for i in r.items if i.where and "not examined" in i.text}


# ---------------------------------------------------------------- TorchServe


def test_torchserve_archives():
    code, files = _verdicts(SERVING)
    assert MAR_TRUTH["pickle_system.mar"]["payload_ran_under_torch_load"] is True
    assert files["pickle_system.mar"]["verdict"] == "dangerous"
    for name in ("handler_system.mar", "handler_system.tar.gz"):
        f = files[name]
        assert f["verdict"] in ("foreign", "dangerous"), f  # code a server runs: never safe
        assert any("handler.py" in i["text"] for i in f["findings"])
    for name in ("handler_system.mar", "handler_system.tar.gz"):  # zip or --archive-format tgz
        handler = [i["text"] for i in files[name]["findings"] if i["text"].startswith("handler ")]
        assert handler and "TorchServe imports and runs" in handler[0]
    assert files["benign.mar"]["verdict"] != "dangerous"
    assert files["eager.mar"]["verdict"] == "foreign" and any(
        "modelFile model.py" in i["text"] for i in files["eager.mar"]["findings"])
    for name in MAR_TRUTH:
        assert files[name]["kind"] in ("torchserve-mar", "torchserve-tar.gzip")
        with pytest.raises(InspectorError):
            load(SERVING / name)


# ---------------------------------------------------------------- SavedModel graphs


@pytest.mark.parametrize("name", sorted(GRAPH_TRUTH))
def test_savedmodel_ops_are_tensorflows_own(name):
    from inspector.adapters.security.tf_graph import graph_ops

    nodes, functions = graph_ops((SERVING / name).read_bytes(), name)
    truth = GRAPH_TRUTH[name]
    assert {op for f, _, op in nodes if not f} == set(truth["graph_ops"])
    assert {op for f, _, op in nodes if f} == set(truth["function_ops"])


def test_savedmodel_verdicts_and_refusals(tmp_path):
    assert GRAPH_TRUTH["writes_file/saved_model.pb"]["marker_written"] is True
    expected = {"benign": "safe", "writes_file": "dangerous", "reads_file": "dangerous",
                "calls_python": "dangerous"}
    for d, verdict in expected.items():
        r = scan_file(SERVING / d / "saved_model.pb")
        assert r.verdict == verdict, r.to_dict()
        if d == "benign":
            ckpt = load(SERVING / d)
            assert ckpt.tensors
            continue
        with pytest.raises(UnsafeContentError):
            load(SERVING / d)
        proc = run_cli("show", str(SERVING / d))
        assert proc.returncode == 2 and "refused" in proc.stderr


def test_an_unknown_op_is_named_never_safe(tmp_path):
    data = bytearray((SERVING / "benign" / "saved_model.pb").read_bytes())
    at = data.find(b"\x12\x04Relu")  # NodeDef.op = "Relu" in the serving function
    assert at > 0
    data[at + 2 : at + 6] = b"Rulu"
    d = tmp_path / "m"
    shutil.copytree(SERVING / "benign", d)
    (d / "saved_model.pb").write_bytes(bytes(data))
    r = scan_file(d / "saved_model.pb")
    assert r.verdict == "foreign" and "Rulu" in r.items[0].text


@pytest.mark.parametrize("cut", [600, 3000, 5000])
def test_a_cut_archive_is_an_error_never_safe(tmp_path, cut):
    """Cut inside a header or a member: tarfile's walk ends quietly there; scan says error
    (or dangerous when the payload was already read)."""
    data = (ARCHIVES / "payload.tar").read_bytes()[:cut]
    path = tmp_path / "cut.tar"
    path.write_bytes(data)
    assert scan_file(path).verdict in ("error", "dangerous")
    gz = (ARCHIVES / "payload.tar.gz").read_bytes()
    path = tmp_path / "cut.tar.gz"
    path.write_bytes(gz[: len(gz) * cut // 6000])
    assert scan_file(path).verdict in ("error", "dangerous")
