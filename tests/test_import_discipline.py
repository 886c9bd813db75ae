"""Listing a checkpoint must not import a framework (or numpy for non-HDF5 formats); the CLI's
startup must stay light. Each probe runs in a fresh interpreter and reports ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT

FRAMEWORKS = ("torch", "mxnet", "keras", "tensorflow", "jax", "safetensors")
# Not on the path of a non-HDF5 listing: numpy and h5py are for Keras HDF5 files only.
HEAVY = (*FRAMEWORKS, "numpy", "h5py")
PROBE = """
import json, sys
from inspector.cli import main
sys.stdout = open('/dev/null', 'w')
try:
    rc = main(sys.argv[2:])
except SystemExit as e:  # --help
    rc = e.code
sys.stdout = sys.__stdout__
watch = set(sys.argv[1].split(','))
print(json.dumps({'rc': rc, 'modules': sorted(m for m in sys.modules
                                             if any(m == w or m.startswith(w + '.') for w in watch))}))
"""


def _probe(watch: tuple[str, ...], *argv: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(watch), *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fixture(relative: str):
    path = FIXTURES / relative
    if not path.exists():
        pytest.skip(f"no fixture {relative}")
    return path


LISTINGS = [
    "torch/seed001_transformer_lm.pt",  # torch zip
    "torch/seed001_model1_legacy.pt",  # torch legacy
    "safetensors/seed001_transformer_lm.safetensors",
    "safetensors/sharded/model.safetensors.index.json",
    "mxnet/mxnet-1.9.1/gluon_save_parameters.params",
]


@pytest.mark.parametrize("relative", LISTINGS)
def test_json_listing_imports_no_framework_numpy_or_tabulate(relative):
    result = _probe((*HEAVY, "tabulate"), "show", "--format", "json", str(_fixture(relative)))
    assert result["rc"] == 0
    assert result["modules"] == [], result["modules"]


@pytest.mark.parametrize("relative", LISTINGS[:1] + LISTINGS[2:3])
def test_table_listing_imports_no_framework_or_numpy(relative):
    result = _probe(HEAVY, "show", str(_fixture(relative)))
    assert result["rc"] == 0
    assert result["modules"] == [], result["modules"]


HELP_ALLOWED = (
    "inspector.adapters",
    "inspector.adapters.errors",
    "inspector.adapters.model",
    "inspector.adapters.registry",
    # the refusal policy (imports only the error types)
    "inspector.adapters.security",
    "inspector.adapters.security.policy",
)


def test_help_imports_no_reader_and_no_third_party_module():
    # Command modules import argparse/stdlib at module level; the rest loads in run().
    watch = (*HEAVY, "tabulate", "yaml", "inspector.adapters")
    result = _probe(watch, "--help")
    assert result["rc"] == 0
    # The package API (inspector.load, the data model, the error types) comes with
    # ``import inspector``; no format reader is needed for --help.
    assert [m for m in result["modules"] if m not in HELP_ALLOWED] == []
