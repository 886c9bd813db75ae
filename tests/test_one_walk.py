"""One container walk per format, shared by ``scan``, every verb and ``inspector.load``.

Hostile files built from scratch (``one_walk_attacks.py``): a torch zip under any root name
(``data`` included) and names in other cases, the zip's own disagreements (local vs central
names, stray end records, trailing bytes, deflated members), torch's pre-0.4 tar (payload in
each of its pickles, PAX text), NumPy object dtypes in every descr form, compressed streams,
pickles appended after a STOP, a zip behind prepended bytes, and duplicated ``data.pkl`` members.
The real loaders (torch.load(weights_only=False), np.load(allow_pickle=True), joblib.load,
pickle.load, zipfile) run each payload in the producer venv; the tool calls each dangerous,
``scan`` exits 1, every verb refuses it, ``inspector.load`` raises, and no marker appears while
the tool runs. For duplicates, the member torch reads is the one miniz's sorted lookup answers
with: the model is checked against torch itself on every variant.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import zipfile
from pathlib import Path

import pytest
from one_walk_attacks import ATTACKS, LOADER_SCRIPT, build, marker

import inspector
from inspector.adapters.errors import UnsafeContentError
from inspector.adapters.security.scan import scan_file
from inspector.adapters.zip_container import read_directory
from inspector.cli import main

from conftest import FIXTURES, run_cli

TORCH_PY = Path("/work/venvs/torch/bin/python")
needs_producer = pytest.mark.skipif(not TORCH_PY.exists(), reason="producer venv missing")


@pytest.fixture(scope="module")
def attacks(tmp_path_factory) -> tuple[Path, list[Path], dict]:
    """The attack files, the tool's scan of them (before any loader ran), and then which
    payloads the real loaders ran."""
    d = tmp_path_factory.mktemp("attacks")
    files = build(d)
    proc = run_cli("scan", "--format", "json", str(d))
    assert not any(marker(p).exists() for p in files)  # the tool ran nothing
    report = json.loads(proc.stdout)
    report["exit"] = proc.returncode
    return d, files, report


@pytest.fixture(scope="module")
def ran(attacks) -> dict[str, bool]:
    if not TORCH_PY.exists():
        pytest.skip("producer venv missing")
    d, files, _ = attacks
    jobs = json.dumps([[str(p), ATTACKS[p.name][1]] for p in files])
    out = subprocess.run([str(TORCH_PY), "-c", LOADER_SCRIPT, jobs], capture_output=True,
                         text=True, timeout=300, check=True)
    return json.loads(out.stdout)


def test_scan_calls_every_attack_dangerous_and_exits_1(attacks):
    d, files, report = attacks
    verdicts = {Path(f["path"]).name: f["verdict"] for f in report["files"]}
    assert report["exit"] == 1
    assert {p.name: verdicts[p.name] for p in files} == {p.name: "dangerous" for p in files}
    for f in report["files"]:  # and says why: the payload's global, where it sits
        assert any(g["resolved"] == "posix.system" or g["name"] == "os.system"
                   for g in f["globals"]), f


@needs_producer
def test_the_real_loaders_run_every_attack(ran):
    sure = {n for n, (_, how) in ATTACKS.items() if not how.endswith("?")}
    assert {n: ran[n] for n in sure} == {n: True for n in sure}


@needs_producer
def test_duplicates_resolved_as_torchs_miniz_resolves_them(attacks, ran):
    """Which of several ``archive/data.pkl`` torch reads depends on miniz's heap sort of the
    whole directory (not "the first"): the model names torch's choice on every variant."""
    d, files, _ = attacks
    dups = [p for p in files if p.name.startswith("dup")]
    assert len(dups) == 30
    predicted = {}
    for p in dups:
        data = p.read_bytes()
        directory = read_directory(data, len(data), str(p))
        chosen = directory.find("archive/data.pkl")
        copies = [m for m in directory.members if m.name == "archive/data.pkl"]
        bad = int(p.name.split("_bad")[1].split("_")[0])
        predicted[p.name] = copies.index(chosen) == bad
    assert predicted == {p.name: ran[p.name] for p in dups}
    assert 0 < sum(predicted.values()) < len(dups)  # both outcomes occur: first is not the rule


def _listed_attacks(files: list[Path]) -> list[Path]:
    """The attacks a listing adapter claims (the others are not a checkpoint to any verb: a
    zip of no known layout, a pickle whose first opcode is longer than any sniff reads)."""
    return [p for p in files if p.suffix not in (".zip", ".dat")]


def test_inspector_load_raises_and_records_what_scan_reports(attacks):
    d, files, report = attacks
    by_name = {Path(f["path"]).name: f for f in report["files"]}
    for p in _listed_attacks(files):
        with pytest.raises(UnsafeContentError, match="refused"):
            inspector.load(p)
        if p.suffix == ".tar" or p.name.startswith("tar_"):
            continue  # torch's tar is refused, never listed
        ckpt = inspector.load(p, allow_unsafe=True)
        danger = {f.message for f in ckpt.findings if f.severity == "danger"}
        assert danger, p.name
        scanned = {g["name"] for g in by_name[p.name]["globals"] if g["verdict"] == "dangerous"}
        assert {g["name"] for g in ckpt.metadata["pickle_globals"]
                if g.get("verdict") == "dangerous"} | {
            m.split(" ", 1)[0] for m in danger} >= scanned


VERBS = (["show"], ["check"], ["stats"], ["report", "-o", os.devnull],
         ["diff", None])


@pytest.mark.parametrize("name", ["root_data.pt", "member_upper.pt", "dup2_bad0_x0.pt",
                                  "local_name_differs.pt", "stray_eocd.pt", "tar_pax_text.pt",
                                  "obj_1.npy", "obj_member.npz", "compressed.zlib.pkl",
                                  "appended_p0.pkl"])
def test_every_verb_refuses(attacks, name, capsys, tmp_path):
    d, _, _ = attacks
    copy = tmp_path / name  # built afresh: the loader proof may have run the original
    copy.write_bytes(ATTACKS[name][0](copy))
    p = str(copy)
    benign = str(FIXTURES / "torch" / "seed001_model1.pt")
    for verb in VERBS:
        argv = [verb[0], p, benign] if verb[-1] is None else [*verb, p]
        assert main(argv) == 2, (verb, name)
        err = capsys.readouterr().err
        assert "refused" in err and "os.system" in err, (verb, name, err)
    assert not marker(copy).exists()


def test_show_globals_and_scan_report_the_same_globals(attacks, capsys):
    """A second pickle after the first STOP: both name it."""
    d, _, report = attacks
    for n in (0, 2, 5):
        p = d / f"appended_p{n}.pkl"
        assert main(["show", "--globals", "--format", "json", str(p)]) == 1
        shown = {g["name"] for g in json.loads(capsys.readouterr().out)["globals"]}
        scanned = {g["name"] for f in report["files"] if Path(f["path"]) == p
                   for g in f["globals"]}
        assert shown == scanned == {"os.system"}


# ---------------------------------------------------------------------------------------------
# no false alarm on the benign forms


@needs_producer
def test_torch_save_to_data_pt_is_safe_and_listed(tmp_path):
    """``torch.save(obj, "data.pt")`` writes ``data/data.pkl`` and ``data/data/0``."""
    p = tmp_path / "data.pt"
    subprocess.run([str(TORCH_PY), "-c", "import sys, torch; torch.save({'w': torch.zeros(2, 3)},"
                    " sys.argv[1])", str(p)], check=True, timeout=120)
    assert zipfile.ZipFile(p).namelist()[0] == "data/data.pkl"
    r = scan_file(p)
    assert (r.verdict, r.kind) == ("safe", "torch-zip"), r.items
    ckpt = inspector.load(p)
    assert [(t.name, t.shape) for t in ckpt.tensors] == [("w", (2, 3))]


def test_benign_appended_pickle_and_structured_dtype_are_not_dangerous(tmp_path):
    import pickle

    from one_walk_attacks import npy

    p = tmp_path / "two.pkl"
    p.write_bytes(pickle.dumps({"a": 1}, protocol=2) + pickle.dumps([1, 2], protocol=2))
    assert scan_file(p).verdict == "safe"
    q = tmp_path / "rec.npy"
    q.write_bytes(npy("[('x', '<f4'), ('y', '<i4')]", b"\0" * 8))
    assert scan_file(q).verdict == "safe"


# ---------------------------------------------------------------------------------------------
# scan's exit codes, messages and width


def test_scan_exit_2_when_a_file_cannot_be_examined(tmp_path):
    (tmp_path / "broken.pkl").write_bytes(b"\x80\x02}q\x00(X\x01\x00\x00\x00a")  # cut short
    (tmp_path / "ok.txt").write_text("hello\n")
    proc = run_cli("scan", str(tmp_path))
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout.splitlines()[0].startswith("error")


def test_scan_error_keeps_the_payload_found_before_it(tmp_path):
    from one_walk_attacks import touch

    p = tmp_path / "cut.pkl"
    p.write_bytes(touch(p) + b"\x80\x02}q\x00(X\x01")  # a payload, then a broken pickle
    r = scan_file(p)
    assert r.verdict == "dangerous"
    assert {i.level for i in r.items} >= {"dangerous", "error"}
    assert run_cli("scan", str(p)).returncode == 1


def test_scan_of_a_missing_path_says_so_like_the_other_verbs(tmp_path):
    missing = tmp_path / "nope.pt"
    for verb in ("scan", "show"):
        proc = run_cli(verb, str(missing))
        assert proc.returncode == 2
        assert proc.stderr.strip() == f"inspector: {missing}: no such file or directory"


def test_scan_lines_fit_the_terminal_width(attacks):
    d, _, _ = attacks
    proc = run_cli("scan", str(d), env={"COLUMNS": "72"})
    lines = proc.stdout.splitlines()
    assert lines and all(len(x) <= 72 for x in lines), max(lines, key=len)
    assert any("…" in x for x in lines)


# ---------------------------------------------------------------------------------------------
# mutation fuzz of zips under scan: every file gets a verdict, nothing raises


def _seeds() -> list[bytes]:
    from one_walk_attacks import BENIGN, npy, torch_zip, zip_bytes

    real = [(FIXTURES / "torch" / "seed001_model1.pt").read_bytes(),
            (FIXTURES / "security" / "mixed.npz").read_bytes()]
    made = [torch_zip("archive", BENIGN),
            zip_bytes([("x.npy", npy("'|O'", BENIGN)), ("y.npy", npy("'<f4'", b"\0" * 4))]),
            zip_bytes([("config.json", b'{"class_name": "Sequential"}'),
                       ("metadata.json", b"{}")], stored=False)]
    return real + made


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        kind = rng.randrange(5)
        i = rng.randrange(len(b)) if b else 0
        if kind == 0 and b:
            b[i] = rng.randrange(256)
        elif kind == 1:
            del b[i : i + rng.randint(1, 64)]
        elif kind == 2:
            b[i:i] = rng.randbytes(rng.randint(1, 64))
        elif kind == 3:  # a 32-bit field set to an extreme
            b[i : i + 4] = rng.choice([b"\xff\xff\xff\xff", b"\0\0\0\0", b"\xff\xff\xff\x7f"])
        else:
            b = b[: rng.randrange(len(b) + 1)]
    return bytes(b)


def _fuzz(tmp_path: Path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    seeds = _seeds()
    for n in range(rounds):
        p = tmp_path / f"m{n % 8}.pt"
        p.write_bytes(_mutate(seeds[n % len(seeds)], rng))
        r = scan_file(p)
        assert r.verdict in ("safe", "foreign", "dangerous", "error"), r


def test_zip_mutation_fuzz_under_scan(tmp_path):
    _fuzz(tmp_path, 150, seed=26)


@pytest.mark.slow
def test_zip_mutation_fuzz_under_scan_long(tmp_path):
    _fuzz(tmp_path, 5000, seed=2026)


def test_a_keras_archive_with_a_data_pkl_member_is_not_torchs(tmp_path):
    """torch's reader refuses a zip whose first member is not in a directory (verified:
    "file in archive is not in a subdirectory"), so a ``.keras`` holding ``assets/data.pkl``
    is examined as the Keras zip it is: its config and the extra pickle both."""
    from one_walk_attacks import touch, zip_bytes

    from inspector.adapters.registry import claim
    from inspector.adapters.source import as_source

    p = tmp_path / "model.keras"
    config = {"class_name": "Sequential", "config": {"layers": [{"class_name": "Lambda",
              "config": {"name": "payload", "function": {"class_name": "__lambda__",
                                                         "config": {"code": "4wEAAAA"}}}}]}}
    p.write_bytes(zip_bytes([("metadata.json", b"{}"), ("config.json", json.dumps(config).encode()),
                             ("assets/data.pkl", touch(p))]))
    found = claim(as_source(p))
    assert found is None or found[0].name != "torch"
    r = scan_file(p)
    assert r.verdict == "dangerous"
    texts = " ".join(i.text for i in r.items)
    assert "Lambda layer 'payload'" in texts and "os.system" in texts


def test_a_tar_without_torchs_members_is_not_claimed(tmp_path):
    from one_walk_attacks import _tar

    from inspector.adapters.registry import claim
    from inspector.adapters.source import as_source

    p = tmp_path / "data.tar"
    p.write_bytes(_tar([("README", b"hello\n"), ("weights.bin", b"\0" * 64)]))
    assert claim(as_source(p)) is None
    assert scan_file(p).verdict in ("safe", "foreign")
