"""The README stays a front page: at most 250 lines, holding the two commands a newcomer runs
(install and audit a bundled checkpoint; run the tests as CI does), the verb table and the link
to the documentation. The manual lives in docs/ (its examples: tests/test_docs_examples.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_is_short() -> None:
    assert len(README.splitlines()) <= 250


def test_readme_holds_the_two_commands() -> None:
    install = re.search(r"^python3 -m venv \.venv && \.venv/bin/pip install \. && "
                        r"\.venv/bin/inspector check (fixtures/\S+)$", README, re.M)
    assert install and (ROOT / install[1]).is_dir()
    tests = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -n auto"
    assert tests in README.splitlines()
    # CI runs the same command (quietly)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.replace("pip install -e", "pip install -q -e") in ci


def test_readme_lists_every_verb_and_links_the_docs() -> None:
    out = subprocess.run([sys.executable, "-m", "inspector", "--help"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    verbs = re.findall(r"^  (\w+) +\d ", out.split("exit codes:")[1], re.M)
    assert len(verbs) >= 11
    for verb in verbs:
        assert f"`inspector {verb}" in README or f"`{verb}`" in README, verb
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).exists(), link
