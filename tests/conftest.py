"""Shared test helpers: where the fixtures are, how to run the CLI as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def truth_files() -> list[Path]:
    """Every ground-truth JSON written by a real producer next to its fixture (``X.truth.json``
    describes file ``X``; a diff pair's ``pair.truth.json`` describes two files and is read by
    the diff tests)."""
    return sorted(p for p in FIXTURES.rglob("*.truth.json") if p.name != "pair.truth.json")


def load_truth(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m inspector`` in a fresh process, as a user's shell would."""
    return subprocess.run(
        [sys.executable, "-m", "inspector", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=60,
    )


@pytest.fixture
def cli():
    return run_cli
