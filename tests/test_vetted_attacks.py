"""Hostile pickles that name nothing on any known-dangerous list, yet a real loader runs their
code with the file's data: an unvetted class constructed, given state, collected, or called with
one plain value. Each is checked to run under the real loader (``pickle.load`` in a child with
the payload module importable, a marker file as the only effect), then to be ``dangerous`` in
``scan`` (exit 1), refused by ``show`` and by ``inspector.load``, with nothing run by the tool.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import inspector
from inspector.adapters.errors import UnsafeContentError
from inspector.adapters.security.scan import scan_file

from conftest import run_cli

PAYLOADS = Path(__file__).resolve().parent / "corpus" / "pickle" / "vetted"


def _in_child(code: str, marker: Path, python: str = sys.executable
              ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PAYLOADS), "PAYLOAD_MARKER": str(marker)}
    return subprocess.run([python, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)


def _write(path: Path, marker: Path, kind: str, protocol: int, torch_legacy: bool | None = None,
           python: str = sys.executable) -> None:
    """The attack file, written by the real pickler (or ``torch.save``, given ``torch_legacy``)
    from real instances, in a child: the payload module never enters the test process."""
    make = {
        "del": "o = C.Cleanup(MARKER)",
        "eval": "o = C.Expression.__new__(C.Expression); "
                "o.text = 'open(' + repr(MARKER) + ', \"w\").write(\"eval ran\")'",
        "setstate": "o = C.Restored(MARKER)",
        "newobj": "o = C.Eager()",
    }[kind]
    dump = (f"open({str(path)!r}, 'wb').write(pickle.dumps({{'config': o}}, protocol={protocol}))"
            if torch_legacy is None else
            f"import torch\ntorch.save({{'w': torch.ones(2), 'config': o}}, {str(path)!r}, "
            f"_use_new_zipfile_serialization={not torch_legacy})")
    code = (f"import os, pickle, payload_classes as C\nMARKER = {str(marker)!r}\n"
            f"os.environ.pop('PAYLOAD_MARKER', None)\n{make}\n{dump}\n")
    env = {**os.environ, "PYTHONPATH": str(PAYLOADS)}
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr


KINDS = ("del", "eval", "setstate", "newobj")


def _ran(kind: str, marker: Path) -> bool:
    """Whether the payload's effect is there: the marker deleted (``__del__``) or written."""
    return not marker.exists() if kind == "del" else marker.exists()


def _arm(kind: str, marker: Path) -> None:
    if kind == "del":
        marker.write_text("still here")
    elif marker.exists():
        marker.unlink()


@pytest.mark.parametrize("protocol", [0, 2, 5])
@pytest.mark.parametrize("kind", KINDS)
def test_a_real_loader_runs_it_and_every_verb_calls_it_dangerous(tmp_path, kind, protocol):
    if kind == "newobj" and protocol < 2:
        pytest.skip("protocols 0-1 build it with object.__new__ (copyreg._reconstructor)")
    path, marker = tmp_path / f"{kind}.pkl", tmp_path / "marker"
    _write(path, marker, kind, protocol)
    # the real loader runs it
    _arm(kind, marker)
    proc = _in_child(f"import pickle, gc\nobj = pickle.load(open({str(path)!r}, 'rb'))\n"
                     "del obj\ngc.collect()\n", marker)
    assert _ran(kind, marker), (kind, proc.stderr)
    # the tool calls it dangerous and runs nothing
    _arm(kind, marker)
    r = scan_file(path)
    assert r.verdict == "dangerous", r.to_dict()
    named = {g["name"]: g for g in r.globals}
    bad = [g for g in named.values() if g["verdict"] == "dangerous"]
    assert bad and all(g["name"].startswith("payload_classes.") for g in bad)
    assert all("not vetted" in g["why"] for g in bad)
    scan = run_cli("scan", str(path))
    assert scan.returncode == 1 and scan.stdout.startswith("dangerous"), scan.stdout
    show = run_cli("show", str(path))
    assert show.returncode == 2 and "refused" in show.stderr, show.stderr
    with pytest.raises(UnsafeContentError):
        inspector.load(path)
    assert not _ran(kind, marker)


def test_one_plain_value_is_no_enum_whatever_the_name(tmp_path):
    """``Expression('...')`` pickles exactly as an Enum member does, ``(cls, (value,))``: no
    shape of the name or of the value makes it inert."""
    path, marker = tmp_path / "eval.pkl", tmp_path / "marker"
    _write(path, marker, "eval", 2)
    g = next(g for g in scan_file(path).globals if g["name"] == "payload_classes.Expression")
    assert g["verdict"] == "dangerous" and g["use"] == "called"
    assert "nothing proves it an Enum" in g["why"]


def test_trust_makes_it_safe_and_says_so(tmp_path):
    path, marker = tmp_path / "setstate.pkl", tmp_path / "marker"
    _write(path, marker, "setstate", 2)
    proc = run_cli("scan", "--trust", "payload_classes.Restored", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stdout
    assert '"why": "trusted by the user (--trust or trust=)"' in proc.stdout
    ckpt = inspector.load(path, trust=["payload_classes.Restored"])
    assert ckpt.metadata["pickle_globals"]
    assert not marker.exists()


def test_trust_never_overrides_a_known_dangerous_name(tmp_path):
    path = tmp_path / "system.pkl"
    path.write_bytes(b"cos\nsystem\n(S'true'\ntR.")
    proc = run_cli("scan", "--trust", "os.system", str(path), "--format", "json")
    assert proc.returncode == 1
    assert "trust does not override a known-dangerous name" in proc.stdout
    with pytest.raises(UnsafeContentError):
        inspector.load(path, trust=["os.system"])


def test_named_only_stays_foreign(tmp_path):
    """An unvetted class only referenced (a type kept as data) is invoked by nobody."""
    path = tmp_path / "named.pkl"
    path.write_bytes(b"\x80\x02}X\x04\x00\x00\x00kindcpayload_classes\nCleanup\ns.")
    r = scan_file(path)
    assert r.verdict == "foreign"
    g = r.globals[0]
    assert g["verdict"] == "foreign" and "never invoked" in g["why"]


@pytest.mark.parametrize("where", ["env", "pyproject", "user"])
def test_trust_from_configuration(tmp_path, where):
    path, marker = tmp_path / "setstate.pkl", tmp_path / "marker"
    _write(path, marker, "setstate", 2)
    work = tmp_path / "project" / "sub"
    work.mkdir(parents=True)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    if where == "env":
        env["INSPECTOR_TRUST"] = "argparse.Namespace, payload_classes.Restored"
    elif where == "pyproject":
        (tmp_path / "project" / "pyproject.toml").write_text(
            '[project]\nname = "x"\n\n[tool.inspector]\ntrust = ["payload_classes.Restored"]\n')
    else:
        (tmp_path / "config" / "inspector").mkdir(parents=True)
        (tmp_path / "config" / "inspector" / "config.toml").write_text(
            'trust = ["payload_classes.Restored"]\n')
    proc = run_cli("scan", str(path), cwd=work, env=env)
    assert proc.returncode == 0 and proc.stdout.startswith("safe"), proc.stdout
    # without it: fail closed
    bare = run_cli("scan", str(path), cwd=work, env={"XDG_CONFIG_HOME": str(tmp_path / "none")}
                   ) if where != "pyproject" else None
    if bare is not None:
        assert bare.returncode == 1


def test_a_broken_trust_configuration_is_one_line(tmp_path):
    path, marker = tmp_path / "setstate.pkl", tmp_path / "marker"
    _write(path, marker, "setstate", 2)
    (tmp_path / "pyproject.toml").write_text('[tool.inspector]\ntrust = "payload_classes.X"\n')
    proc = run_cli("show", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "trust must be a list" in proc.stderr and "Traceback" not in proc.stderr


PRODUCER = Path("/work/venvs/vetted/bin/python")  # torch 2.13.0 (fixtures/security/make_vetted_...)


@pytest.mark.slow
@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_torch_load_runs_it_and_every_verb_calls_it_dangerous(tmp_path, kind, legacy):
    """The same payloads in a torch.save file, run by torch.load(weights_only=False)."""
    if not PRODUCER.exists():
        pytest.skip(f"no producer venv at {PRODUCER}")
    path, marker = tmp_path / f"{kind}.pt", tmp_path / "marker"
    _write(path, marker, kind, 2, torch_legacy=legacy, python=str(PRODUCER))
    _arm(kind, marker)
    load = f"import gc, torch\nx = torch.load({str(path)!r}, weights_only=False)\ndel x\ngc.collect()"
    _in_child(load, marker, python=str(PRODUCER))
    assert _ran(kind, marker), kind
    _arm(kind, marker)
    assert scan_file(path).verdict == "dangerous"
    assert run_cli("scan", str(path)).returncode == 1
    show = run_cli("show", str(path))
    assert show.returncode == 2 and "refused" in show.stderr
    with pytest.raises(UnsafeContentError):
        inspector.load(path)
    assert not _ran(kind, marker)


def test_trust_before_and_after_the_verb_add_up(tmp_path):
    path, marker = tmp_path / "setstate.pkl", tmp_path / "marker"
    _write(path, marker, "setstate", 2)
    for argv in (["--trust", "a.b", "scan", str(path), "--trust", "payload_classes.Restored"],
                 ["--trust", "payload_classes.Restored", "scan", str(path), "--trust", "a.b"]):
        proc = run_cli(*argv)
        assert proc.returncode == 0 and proc.stdout.startswith("safe"), (argv, proc.stdout)
