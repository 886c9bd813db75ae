"""One tensor stored under 20,000 and 100,000 names: every output stays linear.

Before ties were a group id, each alias's ``shared_with`` listed all the others: 20,000 aliases
took 43 s and 10.8 GB in ``inspector show`` (24 GB for ``--format json``). The file here is the
shape torch.save writes for ``{name_i: t for i in range(n)}``: the tensor pickled once and
memoized, every other name a BINGET of it.
"""

from __future__ import annotations

import json
import resource
import struct
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from test_torch_adapter import EMPTY_DICT, MARK, SETITEMS, floats, pkl, s, tensor, write_zip

LIMIT = 16


def _aliases(path, n: int):
    put, get = b"r" + struct.pack("<I", 10**6), b"j" + struct.pack("<I", 10**6)
    body = EMPTY_DICT + MARK + s("layer.0.weight") + tensor("0", 4, (4,)) + put
    body += b"".join(s(f"layer.{i}.weight") + get for i in range(1, n))
    return write_zip(path, pkl(body + SETITEMS), {"0": floats(4)})


def _run(*args: str) -> tuple[subprocess.CompletedProcess, float, int]:
    """(process, seconds, peak RSS in bytes) of one ``python -m inspector`` run."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    out, err = proc.communicate(timeout=120)
    elapsed = time.monotonic() - start
    # the largest child so far: an upper bound for this one
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), elapsed, rss


@pytest.mark.parametrize("n", [20_000, 100_000])
def test_aliases_are_linear(tmp_path, n):
    path = _aliases(tmp_path / f"alias{n}.pt", n)
    proc, seconds, rss = _run("show", "--format", "json", str(path))
    assert proc.returncode == 0, proc.stderr
    # generous bounds for a shared 2-core machine; the quadratic version needed 43 s / 10.8 GB
    # for 20,000 and would need ~25x that for 100,000
    assert seconds < 30, seconds
    assert rss < 1.5 * 2**30, rss
    doc = json.loads(proc.stdout)
    rows = doc["tensors"]
    assert len(rows) == n
    assert doc["totals"]["all"] == 4  # one tensor, counted once
    assert doc["totals"]["tied_aliases"] == n - 1
    head = "layer.0.weight"
    assert all(r["tied_to"] == head and r["tie_size"] == n for r in rows)
    assert all(len(r["shared_with"]) == LIMIT for r in rows)
    assert all(r["shared_with_omitted"] == n - 1 - LIMIT for r in rows)
    assert rows[0]["shared_with"][:2] == ["layer.1.weight", "layer.2.weight"]
    assert head in rows[5]["shared_with"]  # an alias names the name it points to
    assert len(proc.stdout) < 1000 * n  # bytes per row bounded


def test_alias_table_names_the_group_once(tmp_path):
    path = _aliases(tmp_path / "alias.pt", 20_000)
    proc, seconds, _ = _run("show", str(path))
    assert proc.returncode == 0, proc.stderr
    assert seconds < 30
    lines = proc.stdout.splitlines()
    first = next(line for line in lines if line.startswith("layer.0.weight "))
    assert "and 19,983 more" in first
    assert sum("= layer.0.weight (not counted)" in line for line in lines) == 19_999
    assert max(map(len, lines)) < 2000
