"""Listing a checkpoint must not import a framework (or numpy for non-HDF5 formats)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT

HEAVY = ("torch", "mxnet", "keras", "tensorflow", "numpy", "h5py", "safetensors")
PROBE = """
import json, sys
from inspector.cli import main
sys.stdout = open('/dev/null', 'w')
rc = main(['show', '--format', 'json', sys.argv[1]])
sys.stdout = sys.__stdout__
heavy = set(sys.argv[2].split(','))
print(json.dumps({'rc': rc, 'modules': sorted(m for m in sys.modules if m.split('.')[0] in heavy)}))
"""


def _probe(path):
    proc = subprocess.run([sys.executable, "-c", PROBE, str(path), ",".join(HEAVY)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _first(pattern):
    found = sorted(FIXTURES.rglob(pattern))
    if not found:
        pytest.skip(f"no fixture matching {pattern}")
    return found[0]


@pytest.mark.parametrize("pattern", ["*.pt", "*.safetensors", "*.params"])
def test_show_imports_no_framework(pattern):
    result = _probe(_first(pattern))
    assert result["rc"] == 0
    assert result["modules"] == [], result["modules"]
