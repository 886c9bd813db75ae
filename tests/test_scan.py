"""``inspector scan``: real benign files come out safe or foreign; hostile inputs end quickly.

The benign files are the repository's fixtures, written by their producers (torch, numpy,
joblib, lightning, keras, mxnet, safetensors); ``fixtures/security/*.truth.json`` record what the
producers' own readers saw in them (the stdlib unpickler's globals, torch's weights_only view).
"""

from __future__ import annotations

import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest

from inspector.adapters.security.scan import scan_file

from conftest import FIXTURES, load_truth, run_cli, run_measured
from test_torch_adapter import dict_of, floats, pkl, tensor, write_zip

SECURITY = FIXTURES / "security"
SECURITY_FILES = sorted(p for p in SECURITY.iterdir() if p.suffix not in (".json", ".py", ".md"))


# Real Keras 2 models with a Lambda layer: Keras 2 stores its function as code (func_dump),
# which it runs on load: rightly dangerous. Keras 3 stores a named function as a
# builtins.function reference, which it only looks up (layers_seq_attention.keras: foreign).
KERAS_LAMBDA = sorted(p for p in (FIXTURES / "keras").glob("*")
                      if ("seq2seq_states" in p.name or "keras2_layers_seq_attention" in p.name)
                      and not p.name.endswith((".json", "_weights.h5", ".weights.h5")))


# Whole pickled models of a user's own class (torch.save(model)): the loader runs that class's
# code with the file's data, and no list can vet a user's code. torch.load refuses them by
# default too (weights_only); the user vouches for the class with --trust.
USER_CLASSES = {FIXTURES / "security" / "whole_module_legacy.pt": "__main__.TinyLM",
                FIXTURES / "torch" / "tied_bn_module.pt": "fixture_models.TiedBNLM"}
TRUST_USER_CLASSES = [w for name in sorted(USER_CLASSES.values()) for w in ("--trust", name)]

# Fixtures built to carry code in their configuration (fixtures/code_config): their truths
# record the real loader running the payload.
CODE_CONFIG = FIXTURES / "code_config"
CODE_CONFIG_DANGEROUS = sorted(
    p.with_name(p.name[: -len(".truth.json")]) for p in CODE_CONFIG.rglob("*.truth.json")
    if load_truth(p).get("verdict") == "dangerous")


def test_scan_of_all_fixtures_exits_0():
    """Every fixture is safe or foreign but the Keras 2 Lambda files and the code-carrying
    configurations built to be dangerous. The generator scripts (``make_*.py``) are code that
    runs processes and removes folders: scan reads them as such, and they are left out here."""
    proc = run_cli("scan", str(FIXTURES))
    lines = proc.stdout.splitlines()
    flagged = [x for x in lines if x.startswith(("dangerous", "error"))
               and not x.split()[1].endswith(".py")]
    want = sorted(str(p) for p in [*KERAS_LAMBDA, *CODE_CONFIG_DANGEROUS, *USER_CLASSES])
    assert sorted(x.split()[1] for x in flagged) == want, proc.stdout[-2000:]
    assert all("Lambda layer" in x and "bytecode" in x for x in flagged
               if x.split()[1] in {str(p) for p in KERAS_LAMBDA})
    assert all(f"{USER_CLASSES[p]} (constructed: not vetted" in x
               for p in USER_CLASSES for x in flagged if x.split()[1] == str(p))
    assert lines[-1].startswith("scanned ") and " 0 error" in lines[-1]
    scripts = [x.split()[1] for x in lines if x.split()[1:2] and x.split()[1].endswith(".py")]
    assert all(Path(s).is_relative_to(FIXTURES) for s in scripts)
    # the user vouches for their own classes: then those files are safe
    assert run_cli("scan", *TRUST_USER_CLASSES, *map(str, USER_CLASSES)).returncode == 0


@pytest.mark.parametrize("path", SECURITY_FILES, ids=lambda p: p.name)
def test_benign_security_fixture(path):
    from inspector.adapters.security.trust import trusting
    from inspector.adapters.security.vetted import ENUM, VETTED

    truth = load_truth(path.with_name(path.name + ".truth.json"))
    trust = [USER_CLASSES[path]] if path in USER_CLASSES else []
    if trust:
        assert scan_file(path).verdict == "dangerous"
    with trusting(trust):
        r = scan_file(path)
    assert r.verdict in ("safe", "foreign"), r.to_dict()
    # the globals the stdlib's (joblib's) own unpickler resolved at generation time
    assert sorted({g["name"] for g in r.globals}) == truth["pickle_globals"]
    unsafe = {g["name"] for g in r.globals if g["verdict"] != "safe"}
    if "torch_unsafe_globals" in truth:
        # everything torch's weights_only loader rejects is reported, unless it is vetted (or
        # trusted here); a class vetted as an Enum was checked to be one by the generator
        assert set(truth["torch_unsafe_globals"]) - set(VETTED) - set(trust) <= unsafe
        assert {n for n in truth["torch_unsafe_globals"]
                if n in VETTED and VETTED[n][1] == ENUM} <= set(truth.get("enum_classes", ()))
    if truth.get("torch_weights_only_loads"):
        assert r.verdict == "safe"
    if path.suffix != ".joblib":  # listed by default, never refused
        proc = run_cli("show", str(path), *[w for n in trust for w in ("--trust", n)])
        assert proc.returncode == 0, proc.stderr
    if truth.get("loads"):  # written by make_vetted_fixtures.py: every class in it is vetted
        assert r.verdict == "safe", r.to_dict()


def test_every_pickle_fixture_is_listed_by_default():
    """Every fixture the tool opens is listed without --allow-unsafe (nothing is dangerous; a
    user's own pickled class once the user trusts it)."""
    from inspector.adapters.errors import InspectorError, UnsafeContentError
    from inspector.adapters.registry import load
    from inspector.adapters.security.policy import dangerous

    opened = 0
    for p in sorted(FIXTURES.rglob("*")):
        if p.suffix in (".pt", ".ckpt", ".pkl", ".npy", ".npz", ".bin") and p.is_file():
            try:
                ckpt = load(p, trust=[USER_CLASSES[p]] if p in USER_CLASSES else None)
            except UnsafeContentError:
                raise
            except InspectorError:
                continue  # a look-alike or broken fixture: refused for what it is, not unsafe
            opened += 1
            assert dangerous(ckpt) == [], p
    assert opened > 80


# ---------------------------------------------------------------------------------------------
# hostile inputs: a verdict or an error within seconds, bounded memory, and the scan goes on


def _zip_bomb(path: Path) -> Path:
    """A torch zip whose data.pkl declares 40 GB uncompressed (zip64 central directory)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00." + b"\0" * 1000)
        z.filelist[0].file_size = 40 * 10**9
    assert zipfile.ZipFile(path).infolist()[0].file_size == 40 * 10**9
    return path


def _huge_memo(path: Path) -> Path:
    """LONG_BINPUT 10**9: CPython sizes its memo table from the largest index (8-16 GB)."""
    path.write_bytes(b"\x80\x02N" + b"r" + (10**9).to_bytes(4, "little") + b".")
    return path


def _deep(path: Path, depth: int = 1_000_000) -> Path:
    path.write_bytes(b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".")
    return path


def _deep_evil(path: Path, depth: int = 100_000) -> Path:
    evil = b"cos\nsystem\n(X\x02\x00\x00\x00idtR"
    path.write_bytes(b"\x80\x02" + b"]" * depth + evil + b"a" * depth + b".")
    return path


def _tree(tmp: Path) -> Path:
    root = tmp / "tree"
    (root / "sub").mkdir(parents=True)
    _zip_bomb(root / "bomb.pt")
    _huge_memo(root / "memo.pkl")
    _deep(root / "deep.pkl")
    _deep_evil(root / "deep_evil.pkl")
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)  # a directory loop
    (root / "self").symlink_to(root / "self")  # a link to itself
    (root / "out").symlink_to("/etc/passwd")  # out of the tree
    (root / "inside").symlink_to(root / "memo.pkl")  # inside: the same file, scanned once
    outside = tmp / "outside.pkl"
    outside.write_bytes(pickle.dumps({"a": 1}))
    (root / "to_outside").symlink_to(outside)
    write_zip(root / "z_benign.pt", pkl(dict_of(("w", tensor("0", 4, (2, 2))))), {"0": floats(4)})
    return root


def test_hostile_tree_is_scanned_quickly_and_carries_on(tmp_path):
    root = _tree(tmp_path)
    proc, rss = run_measured("scan", "--format", "json", str(root))
    assert proc.returncode == 1, proc.stderr  # deep_evil.pkl is dangerous
    assert rss < 2 * 2**30, rss
    doc = json.loads(proc.stdout)
    by_name = {Path(f["path"]).name: f for f in doc["files"]}
    assert set(by_name) == {"bomb.pt", "memo.pkl", "deep.pkl", "deep_evil.pkl", "z_benign.pt"}
    assert by_name["bomb.pt"]["verdict"] == "error"
    assert "40,000,000,000" in json.dumps(by_name["bomb.pt"])
    assert by_name["memo.pkl"]["verdict"] == "error"
    assert "memory" in json.dumps(by_name["memo.pkl"])
    assert by_name["deep.pkl"]["verdict"] == "safe"
    assert by_name["deep_evil.pkl"]["verdict"] == "dangerous"
    assert by_name["z_benign.pt"]["verdict"] == "safe"  # the scan carried on to the end
    notes = " ".join(doc["not_followed"])
    assert "loop" in notes and "self" in notes and "out of the tree" in notes
    assert doc["summary"] == {"files": 5, "safe": 2, "foreign": 0, "dangerous": 1, "error": 2,
                              "not_followed": 4}


@pytest.mark.parametrize("make", [_zip_bomb, _huge_memo])
def test_hostile_file_is_one_line_for_show(tmp_path, make):
    path = make(tmp_path / "x.pt")
    proc = run_cli("show", str(path))  # its timeout is the hang guard
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_progress_only_on_a_terminal(tmp_path):
    for i in range(8):
        (tmp_path / f"{i}.pkl").write_bytes(pickle.dumps(i))
    proc = run_cli("scan", str(tmp_path))
    assert proc.returncode == 0 and proc.stderr == ""
    assert len(proc.stdout.splitlines()) == 9


def test_scan_text_line_format(tmp_path):
    path = tmp_path / "evil.pkl"
    path.write_bytes(b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00id\x85R.")
    proc = run_cli("scan", str(path), str(FIXTURES / "torch" / "gru.pt"))
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1
    assert lines[0].startswith(f"dangerous  {path}  [pickle]  os.system (called: on the ")
    assert lines[1].startswith("safe       ") and "[torch-zip]" in lines[1]
    assert lines[2] == "scanned 2 files: 1 safe, 0 foreign, 1 dangerous, 0 error"
    assert os.path.exists(path)


def test_hdf5_external_data_is_reported(tmp_path):
    import h5py
    import numpy as np

    beside = tmp_path / "beside.h5"
    with h5py.File(beside, "w") as f:
        f["w"] = np.zeros(4, "f4")
    path = tmp_path / "links.h5"
    with h5py.File(path, "w") as f:
        f["local"] = np.ones(2, "f4")
        f["near"] = h5py.ExternalLink("beside.h5", "/w")
        f["far"] = h5py.ExternalLink("/etc/passwd", "/x")
        layout = h5py.VirtualLayout(shape=(4,), dtype="f4")
        layout[:] = h5py.VirtualSource("../up.h5", "w", shape=(4,))
        f.create_virtual_dataset("vds", layout)
        f.create_dataset("ext", (4,), "f4", external=[("/tmp/raw.bin", 0, 16)])
    r = scan_file(path)
    text = {i.text.split(" (data")[0]: i.level for i in r.items}
    assert r.verdict == "dangerous", r.to_dict()
    assert text["external link /near -> beside.h5:/w"] == "foreign"
    assert text["external link /far -> /etc/passwd:/x"] == "dangerous"
    assert text["virtual dataset /vds reads ../up.h5:w"] == "dangerous"
    assert text["dataset /ext stores its data in external file /tmp/raw.bin"] == "dangerous"


def test_safetensors_header_bounds(tmp_path):
    import struct

    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", 2**40) + b'{"a": 1}')
    r = scan_file(path)
    assert r.kind == "safetensors" and r.verdict == "error"
    assert "header length" in r.items[0].text
    good = FIXTURES / "safetensors" / "dtype_zoo.safetensors"
    assert scan_file(good).verdict == "safe"


def test_nested_pickle_depth_is_per_thread():
    """Fleets examine files on several threads: one file's nesting depth never counts against
    another's (a shared counter once called a benign nested torch pickle 'nested too deep')."""
    from concurrent.futures import ThreadPoolExecutor

    path = FIXTURES / "dirs" / "pickles" / "torch_state_dict.p3.pkl"
    alone = scan_file(path).to_dict()
    with ThreadPoolExecutor(8) as pool:
        together = [r.to_dict() for r in pool.map(scan_file, [path] * 64)]
    assert alone["verdict"] == "foreign"
    assert all(r == alone for r in together)
