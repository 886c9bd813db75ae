"""``.pre-commit-hooks.yaml``, run by pre-commit itself (``pre-commit try-repo`` on this
repository): in a git repository holding a checkpoint whose pickle calls ``os.system`` and a
benign one from ``fixtures/security``, the staged files are blocked with the scan's line, then
allowed once the dangerous file is removed, and the commit goes through.

pre-commit installs this repository into an environment of its own (pip, from the local
source), so the first run takes minutes: those tests are ``slow``. The manifest is checked with
pre-commit's own schema, and the check hook's entry point runs in-process, in the fast suite."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

SAFE = FIXTURES / "security" / "numpy_state_p2.pkl"


class _Payload:
    def __reduce__(self):
        return (os.system, ("echo never run",))


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def _try_repo(repo: Path, home: Path, hook: str) -> subprocess.CompletedProcess[str]:
    pre_commit = [sys.executable, "-m", "pre_commit"]
    return subprocess.run([*pre_commit, "try-repo", str(ROOT), hook, "--verbose"], cwd=repo,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PRE_COMMIT_HOME": str(home),
                               "PRE_COMMIT_COLOR": "never"})


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.mark.slow
def test_scan_hook_blocks_a_dangerous_checkpoint_then_allows(tmp_path, home):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "evil.pkl").write_bytes(pickle.dumps(_Payload(), protocol=2))
    shutil.copy(SAFE, repo / "state.pkl")
    (repo / "notes.txt").write_text("not a checkpoint\n")
    _git(repo, "add", ".")

    blocked = _try_repo(repo, home, "inspector-scan")
    out = blocked.stdout + blocked.stderr
    assert blocked.returncode == 1, out
    assert "Failed" in out and "exit code: 1" in out, out
    line = next(x for x in out.splitlines() if x.startswith("dangerous"))
    assert "evil.pkl" in line and "system" in line, out
    assert "notes.txt" not in out  # not a checkpoint: the files: pattern leaves it out
    assert not (repo / "never").exists()

    _git(repo, "rm", "-q", "-f", "evil.pkl")
    allowed = _try_repo(repo, home, "inspector-scan")
    out = allowed.stdout + allowed.stderr
    assert allowed.returncode == 0, out
    assert "Passed" in out and "state.pkl" in out, out
    _git(repo, "commit", "-q", "-m", "weights")
    assert "state.pkl" in _git(repo, "ls-files").stdout


@pytest.mark.slow
def test_check_hook_runs_each_file(tmp_path, home):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for name in ("seed001_transformer_lm.pt", "seed001_model1_legacy.pt"):
        shutil.copy(FIXTURES / "torch" / name, repo / name)
    _git(repo, "add", ".")
    ok = _try_repo(repo, home, "inspector-check")
    out = ok.stdout + ok.stderr
    assert ok.returncode == 0, out
    assert out.count("seed001") >= 2 and "Passed" in out, out

    (repo / "evil.pt").write_bytes(pickle.dumps(_Payload(), protocol=2))
    _git(repo, "add", ".")
    blocked = _try_repo(repo, home, "inspector-check")
    out = blocked.stdout + blocked.stderr
    assert blocked.returncode == 1, out
    assert "evil.pt" in out and "system" in out, out


def test_the_manifest_is_valid_for_pre_commit():
    from pre_commit.clientlib import load_manifest

    hooks = {h["id"]: h for h in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    assert set(hooks) == {"inspector-scan", "inspector-check"}

    for hook in hooks.values():
        files = re.compile(hook["files"])
        assert files.search("models/model.safetensors") and files.search("ckpt/step=1.CKPT")
        assert not files.search("README.md") and not files.search("train.py")
    scan = re.compile(hooks["inspector-scan"]["files"])
    assert all(scan.search(f"x.{ext}") for ext in ("pkl", "joblib", "npy", "npz", "h5", "keras",
                                                    "onnx", "gguf", "params", "nemo", "zip"))


def test_the_check_hook_checks_each_file_and_keeps_the_worst(tmp_path, capsys):
    from inspector.hooks import main

    good = [str(FIXTURES / "torch" / n)
            for n in ("seed001_transformer_lm.pt", "seed001_model1_legacy.pt")]
    assert main(["check", *good]) == 0
    out = capsys.readouterr().out
    assert all(p in out for p in good)
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps(_Payload(), protocol=2))
    assert main(["check", good[0], str(evil), good[1]]) == 2  # refused: an error
    captured = capsys.readouterr()
    assert good[1] in captured.out and "evil.pt" in captured.err
    assert main(["check", "--allow-unsafe", str(evil)]) == 1  # read, never verified: unsafe
    assert main(["nothing"]) == 2
