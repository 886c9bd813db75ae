"""The public surface (``inspector.__all__``: the package, :mod:`inspector.api`,
:mod:`inspector.results`, the SARIF writer) is clean under ``mypy --strict``, and a user's code
that calls it gets its real types (a wrong argument is an error).

``adapters/`` installs as ``inspector.adapters``; mypy reads the tree through a farm of
symbolic links laid out as installed. Other modules are followed silently (read for their
types, their own errors not reported)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PUBLIC = ["inspector/__init__.py", "inspector/api.py", "inspector/results.py",
          "inspector/reports/sarif.py"]

USER_CODE = '''
import inspector

r = inspector.check("model.pt", set={"num_layers": 2}, strict=True)
code: int = r.exit_code
verdict: str = r.verdict
doc: dict[str, object] = r.to_dict()
s: inspector.ScanResult = inspector.scan(["a", "b"], jobs=2)
sarif: dict[str, object] = s.to_sarif()
d = inspector.diff(inspector.load("a"), "b", values=True, atol=0.1)
different: bool = d.different
t: int = inspector.predict("sockeye-rnn", set=["num_layers=2:2"]).total
b = inspector.budget("rau-lstm", target="150k", solve="hidden_units")
st = inspector.stats(["a", "b"], groups=True)
'''


@pytest.fixture(scope="module")
def farm(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("typed")
    pkg = root / "inspector"
    pkg.mkdir()
    for entry in (ROOT / "inspector").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    (pkg / "adapters").symlink_to(ROOT / "adapters")
    return root


def _mypy(farm: Path, *files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(farm / ".mypy_cache"), "--no-error-summary", *files],
        capture_output=True, text=True, cwd=farm, timeout=600,
        env={**os.environ, "MYPYPATH": str(farm)},
    )


def test_the_public_modules_pass_mypy_strict(farm):
    proc = _mypy(farm, *PUBLIC)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_user_code_gets_the_real_types(farm):
    (farm / "user_ok.py").write_text(USER_CODE)
    proc = _mypy(farm, "user_ok.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (farm / "user_bad.py").write_text(
        'import inspector\n'
        'inspector.check(42)\n'
        'x: str = inspector.scan("a").exit_code\n')
    proc = _mypy(farm, "user_bad.py")
    assert proc.returncode == 1
    assert 'Argument 1 to "check" has incompatible type "int"' in proc.stdout
    assert 'Incompatible types in assignment (expression has type "int"' in proc.stdout
