"""Hostile HDF5: data from other files, signatures behind user blocks, libhdf5 crashes.

Every file is built here with h5py (the tool's own dependency, and the reader Keras' legacy
``.h5`` loader uses). h5py itself shows the attack works: reading the dataset returns the bytes
of a "secret" file elsewhere (external raw storage), or another HDF5 file's values (external
link, virtual dataset). The tool must say so in ``scan`` (dangerous when the target is absolute
or climbs out), refuse it in every verb, and never read those values in any value path (CLI and
the Python API), even with ``--allow-unsafe``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from inspector.adapters.errors import InspectorError, UnsafeContentError
from inspector.adapters.registry import load
from inspector.adapters.security.examination import LEVELS
from inspector.adapters.security.scan import scan_file

from conftest import FIXTURES, ROOT, run_cli

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

SECRET = b"SECRET-token-0123456789abcdef\n" * 4
CORPUS = ROOT / "tests" / "corpus"
VERBS = (("show",), ("stats",), ("check",), ("report", "-o", "{out}"))


@pytest.fixture()
def secret(tmp_path: Path) -> Path:
    """A file outside the model's directory that a hostile model points at."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    path = outside / "secret.txt"
    path.write_bytes(SECRET)
    return path


def _model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    return d


def _keras2_layout(f, kernel_kwargs: dict) -> None:
    """A Keras 2 legacy layout (``model_weights`` / ``layer_names`` / ``weight_names``) whose
    Dense kernel is created with ``kernel_kwargs``."""
    g = f.create_group("model_weights")
    g.attrs["layer_names"] = np.array([b"dense"])
    layer = g.create_group("dense")
    layer.attrs["weight_names"] = np.array([b"dense/kernel:0", b"dense/bias:0"])
    inner = layer.create_group("dense")
    inner.create_dataset("kernel:0", **kernel_kwargs)
    inner["bias:0"] = np.zeros(2, "f4")
    f.attrs["keras_version"] = "2.3.1"
    f.attrs["backend"] = "tensorflow"


def external_storage(tmp_path: Path, secret: Path, how: str) -> tuple[Path, str]:
    """A file whose dataset's raw data is ``secret``'s bytes, referred to ``how``."""
    d = _model_dir(tmp_path)
    target = {
        "absolute": str(secret),
        "climbing": "../elsewhere/secret.txt",
        "beside": "secret.bin",
    }[how]
    if how == "beside":
        (d / "secret.bin").write_bytes(SECRET)
    path = d / f"ext_{how}.h5"
    n = len(SECRET) // 4
    with h5py.File(path, "w") as f:
        f["plain"] = np.arange(3, dtype="f4")
        pieces = [(target, 0, n * 4)]
        if how == "absolute":
            _keras2_layout(f, {"shape": (n,), "dtype": "f4", "external": pieces})
        else:
            f.create_dataset(f"deep/{how}", (n,), "f4", external=pieces)
    return path, target


@pytest.mark.parametrize("how", ["absolute", "climbing", "beside"])
def test_external_raw_storage_is_never_read(tmp_path, secret, how, monkeypatch):
    path, target = external_storage(tmp_path, secret, how)
    # the real reader discloses the file: h5py returns its bytes as the dataset's values
    # (libhdf5 resolves a relative external file name from the working directory)
    monkeypatch.chdir(path.parent)
    with h5py.File(path) as f:
        name = "model_weights/dense/dense/kernel:0" if how == "absolute" else f"deep/{how}"
        assert f[name][()].tobytes() == SECRET
    r = scan_file(path)
    level = "foreign" if how == "beside" else "dangerous"
    assert r.verdict == level, r.to_dict()
    assert any(target in i.text and "external file" in i.text for i in r.items)
    scan = run_cli("scan", str(path))
    assert scan.returncode == (1 if level == "dangerous" else 0)
    out = tmp_path / "r.html"
    for verb in VERBS:
        args = [a.format(out=out) for a in verb]
        proc = run_cli(args[0], str(path), *args[1:])
        if level == "dangerous":
            assert proc.returncode == 2, (verb, proc.stdout, proc.stderr)
            assert proc.stderr.count("\n") == 1 and target in proc.stderr
            assert "refused" in proc.stderr
        assert SECRET[:20].decode() not in proc.stdout + proc.stderr
    # with --allow-unsafe every value path says "not read", naming the file, never its bytes
    stats = run_cli("stats", str(path), "--format", "json", "--allow-unsafe")
    assert stats.returncode == 0, stats.stderr
    doc = json.loads(stats.stdout)
    notes = [t.get("note", "") for t in doc["tensors"] if t["stats"] is None]
    assert len(notes) == 1 and "not read" in notes[0] and target in notes[0]
    assert SECRET[:20].decode() not in stats.stdout
    diff = run_cli("diff", "--values", str(path), str(path), "--allow-unsafe")
    assert SECRET[:20].decode() not in diff.stdout + diff.stderr and "not compared" in diff.stdout
    report = run_cli("report", "--values", str(path), "--allow-unsafe", "-o", str(out))
    assert report.returncode == 0, report.stderr
    assert SECRET[:20].decode() not in out.read_text()
    # the Python API: listing works, reading values raises, naming the file
    ckpt = load(path, allow_unsafe=True)
    entry = next(e for e in ckpt.tensors if e.shape == (len(SECRET) // 4,))
    with pytest.raises(InspectorError, match="not read"):
        ckpt.reader(entry)


def test_every_external_piece_and_source_is_examined(tmp_path, secret, monkeypatch):
    """No cap: the dangerous target is the 100th external piece, the 100th virtual source, the
    100th external link."""
    d = _model_dir(tmp_path)
    for i in range(99):
        (d / f"part{i}.bin").write_bytes(b"\0" * 4)
    pieces = [(f"part{i}.bin", 0, 4) for i in range(99)] + [(str(secret), 0, 4)]
    path = d / "many.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("ext", (100,), "f4", external=pieces)
        layout = h5py.VirtualLayout(shape=(100,), dtype="f4")
        for i in range(99):
            layout[i] = h5py.VirtualSource(f"near{i}.h5", "x", shape=(1,))
        layout[99] = h5py.VirtualSource("/abs/far.h5", "x", shape=(1,))
        f.create_virtual_dataset("vds", layout)
        for i in range(99):
            f[f"links/l{i}"] = h5py.ExternalLink(f"near{i}.h5", "/x")
        f["links/l99"] = h5py.ExternalLink("../../far.h5", "/x")
    monkeypatch.chdir(d)
    with h5py.File(path) as f:
        assert f["ext"][()][-1:].tobytes() == SECRET[:4]  # the 100th piece is read
    r = scan_file(path)
    dangerous = [i.text for i in r.items if i.level == "dangerous"]
    assert any(str(secret) in t for t in dangerous)
    assert any("/abs/far.h5" in t for t in dangerous)
    assert any("../../far.h5" in t for t in dangerous)
    assert sum("external link" in i.text for i in r.items) == 100
    ckpt = load(path, allow_unsafe=True)
    assert {f.severity for f in ckpt.findings} >= {"danger", "warning"}
    assert run_cli("show", str(path)).returncode == 2


def test_virtual_dataset_and_external_link_values(tmp_path, secret):
    """A virtual dataset mapping another HDF5 file outside, read by h5py; an external link to
    it: both dangerous, never read by the tool."""
    outside = secret.parent / "weights.h5"
    with h5py.File(outside, "w") as f:
        f["w"] = np.arange(6, dtype="f4") + 40
    path = _model_dir(tmp_path) / "vds.h5"
    with h5py.File(path, "w") as f:
        layout = h5py.VirtualLayout(shape=(6,), dtype="f4")
        layout[:] = h5py.VirtualSource(str(outside), "w", shape=(6,))
        f.create_virtual_dataset("v", layout)
        f["linked"] = h5py.ExternalLink(str(outside), "/w")
    with h5py.File(path) as f:
        assert f["v"][()].tolist() == f["linked"][()].tolist() == list(range(40, 46))
    r = scan_file(path)
    assert r.verdict == "dangerous"
    assert {i.text.split(" (")[0].split(":")[0] for i in r.items} == {
        f"virtual dataset /v reads {outside}", f"external link /linked -> {outside}"}
    ckpt = load(path, allow_unsafe=True)
    v = ckpt["v"]
    with pytest.raises(InspectorError, match="not read: a virtual dataset"):
        ckpt.reader(v)
    proc = run_cli("stats", str(path), "--format", "json", "--allow-unsafe")
    doc = json.loads(proc.stdout)
    assert [t["stats"] for t in doc["tensors"]] == [None]
    assert "40.0" not in proc.stdout


@pytest.mark.parametrize("userblock", [512, 1024, 2048, 4096, 8192, 65536])
def test_signature_behind_any_user_block(tmp_path, secret, userblock):
    """Text in the user block (4 KiB and more) must not make the file `text`: libhdf5 finds
    the superblock at any power-of-two offset from 512, and reads the external data."""
    path = _model_dir(tmp_path) / f"ub{userblock}.h5"
    with h5py.File(path, "w", userblock_size=userblock) as f:
        f.create_dataset("w", (4,), "f4", external=[(str(secret), 0, 16)])
    with open(path, "r+b") as f:
        f.write((b"just some notes\n" * (userblock // 16))[:userblock])
    with h5py.File(path) as f:
        assert f["w"][()].tobytes() == SECRET[:16]
    r = scan_file(path)
    assert r.kind == "hdf5" and r.verdict == "dangerous", r.to_dict()
    assert run_cli("show", str(path)).returncode == 2


def test_libhdf5_crash_is_an_error_and_the_scan_goes_on(tmp_path):
    """``hdf5_segfault.h5.crash`` (a Keras legacy .h5 with bytes changed, found by fuzzing;
    named so that the tests walking every corpus .h5 in their own process skip it)
    makes libhdf5 segfault on reading the root attributes: the examination runs in a child,
    so the file is `error` and the dangerous pickle after it is still reported."""
    crash = CORPUS / "hdf5_segfault.h5.crash"
    proc = subprocess.run(
        [sys.executable, "-c", "import h5py, sys; dict(h5py.File(sys.argv[1]).attrs)",
         str(crash)], capture_output=True, timeout=60)
    assert proc.returncode < 0  # killed by a signal: SIGSEGV
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.h5").write_bytes(crash.read_bytes())
    (tree / "b.pkl").write_bytes(b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R.")
    scan = run_cli("scan", str(tree))
    lines = scan.stdout.splitlines()
    assert lines[0].startswith("error ") and "crashed" in lines[0]
    assert lines[1].startswith("dangerous ") and "os.system" in lines[1]
    assert scan.returncode == 1
    show = run_cli("show", str(tree / "a.h5"))
    assert show.returncode == 2 and show.stderr.count("\n") == 1


# ---------------------------------------------------------------- mutation fuzz under scan

SEEDS = [FIXTURES / "keras" / n for n in (
    "lstm.weights.h5", "batch_norm.legacy.h5", "keras231_rnn.h5", "conv1d.keras",
)]


def _fuzz(tmp_path: Path, count: int, seed: int) -> None:
    rng = random.Random(seed)
    external = tmp_path / "seed_ext.h5"
    with h5py.File(external, "w") as f:
        f.create_dataset("w", (4,), "f4", external=[("/etc/hostname", 0, 16)])
        f["l"] = h5py.ExternalLink("/x/y.h5", "/z")
    seeds = [p.read_bytes() for p in SEEDS if p.exists()] + [external.read_bytes()]
    for i in range(count):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.choice((1, 2, 4, 8, 32))):
            end = min(len(data), 8192) if rng.random() < 0.7 else len(data)
            data[rng.randrange(end)] = rng.randrange(256)
        path = tmp_path / f"m{i}.h5"
        path.write_bytes(bytes(data))
        r = scan_file(path)  # in this process: a libhdf5 crash here would end the test run
        assert r.verdict in LEVELS
        path.unlink()


def test_mutated_hdf5_scan_short(tmp_path):
    _fuzz(tmp_path, 40, 7)


@pytest.mark.slow
def test_mutated_hdf5_scan_long(tmp_path):
    _fuzz(tmp_path, 2000, 11)


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_external_storage_inside_a_keras_archive(tmp_path, secret, compression):
    """The weights member of a Keras-written .keras replaced by one whose kernel's raw data is
    the secret file (stored as Keras writes it, and deflated): found in the member, refused,
    never read."""
    weights = tmp_path / "w.h5"
    with zipfile.ZipFile(FIXTURES / "keras" / "batch_norm.keras") as z:
        weights.write_bytes(z.read("model.weights.h5"))
        members = {i.filename: z.read(i) for i in z.infolist()}
    with h5py.File(weights, "r+") as f:
        kernel = "layers/dense/vars/0"
        shape, dtype = f[kernel].shape, f[kernel].dtype
        del f[kernel]
        f.create_dataset(kernel, shape, dtype, external=[(str(secret), 0, 96)])
    members["model.weights.h5"] = weights.read_bytes()
    path = tmp_path / "m.keras"
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    r = scan_file(path)
    assert r.kind == "keras" and r.verdict == "dangerous", r.to_dict()
    assert [(i.where, str(secret) in i.text) for i in r.items if i.level == "dangerous"] == [
        ("model.weights.h5", True)]
    with pytest.raises(UnsafeContentError, match="external file"):
        load(path, None, allow_unsafe=False)
    ckpt = load(path, None, allow_unsafe=True)
    entry = next(e for e in ckpt.tensors if e.stored_name == "/" + kernel)
    with pytest.raises(InspectorError, match="not read"):
        ckpt.reader(entry)


def test_libhdf5_hang_is_an_error_and_the_scan_goes_on(tmp_path, monkeypatch):
    """``hdf5_hang.h5.hang``: a Keras legacy .h5 whose global heap's free-space size is 0;
    h5py reading its ``model_config`` loops in C (the truth file records it still running
    after 60 s). The examination's child is stopped at its time budget (2 s here): the file is
    `error` and the scan reaches the next file."""
    from inspector.adapters.security import hdf5 as hdf5_examination
    from inspector.adapters.security.scan import scan

    truth = json.loads((CORPUS / "hdf5_hang.truth.json").read_text())
    assert truth["reader_finished_within_60_s"] is False
    monkeypatch.setattr(hdf5_examination, "SECONDS", 2.0)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.h5").write_bytes((CORPUS / "hdf5_hang.h5.hang").read_bytes())
    (tree / "b.pkl").write_bytes(b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R.")
    first, second = scan([str(tree)])
    assert first.verdict == "error" and "did not finish" in first.items[0].text
    assert second.verdict == "dangerous"
