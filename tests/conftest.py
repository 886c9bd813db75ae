"""Shared test helpers: where the fixtures are, how to run the CLI as a user would."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

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


def sockeye_true_count(truth: dict) -> int:
    """Sockeye's logged ``# of parameters``, corrected where the producer recorded that the log
    undercounts: Sockeye 2 logs the length-task ``Dense`` weights with a deferred (0) input size
    (``sockeye_log_deferred_shapes``). The correction is checked here, not trusted: the file's
    ``length_ratio`` weights must have the logged output sizes, and their elements must be
    exactly the gap between the file's total and the log."""
    logged = int(truth["sockeye_logged_parameter_count"])
    deferred = truth.get("sockeye_log_deferred_shapes")
    if not deferred:
        return logged
    stored = [t for t in truth["tensors"]
              if "length_ratio" in t["stored_name"] and t["stored_name"].endswith("weight")]
    assert [t["shape"][0] for t in stored] == [s[0] for s in deferred.values()]
    assert all(s[1] == 0 for s in deferred.values())
    assert int(truth["parameter_count"]) - logged == sum(t["numel"] for t in stored)
    return int(truth["parameter_count"])


def run_cli(*args: str, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m inspector`` in a fresh process, as a user's shell would, with its output
    piped: no ``COLUMNS`` (full names) unless ``env`` sets it; ``env`` adds variables."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "inspector", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=60,
        env={**base, **(env or {})},
    )


# Runs one command in a fresh parent, so RUSAGE_CHILDREN is that command's own peak (in the
# test process it is the maximum over every earlier child).
_MEASURE = """
import json, resource, subprocess, sys
p = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]))
json.dump([p.returncode, p.stdout, p.stderr,
           resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024], sys.stdout)
"""


def run_measured(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], int]:
    """``python -m inspector *args`` and its own peak RSS in bytes. ``timeout`` is a hang
    guard (the run fails), not a speed measurement: speed is the benchmark's."""
    cmd = [sys.executable, "-m", "inspector", *args]
    probe = subprocess.run([sys.executable, "-c", _MEASURE, str(timeout), *cmd],
                           capture_output=True, text=True, cwd=ROOT, timeout=timeout + 30)
    assert probe.returncode == 0, probe.stderr
    rc, out, err, rss = json.loads(probe.stdout)
    return subprocess.CompletedProcess(cmd, rc, out, err), rss


@pytest.fixture(autouse=True)
def _piped_children():
    """Every CLI a test starts writes to a pipe with no ``COLUMNS``: full names, no fitting to a
    terminal. (ncurses, which the test runner's terminal handling may load, exports ``COLUMNS``
    and ``LINES`` at the C level, where ``os.environ`` does not see them.)"""
    for key in ("COLUMNS", "LINES"):
        os.environ.pop(key, None)
        os.unsetenv(key)
    yield


def drain_pty(master: int) -> bytes:
    """Everything written to a pty until its other side is closed (EIO or end of file)."""
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # Linux: EIO once the writer's side is closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


@pytest.fixture
def cli():
    return run_cli


@contextlib.contextmanager
def moto_bucket(bucket: str, uploads: Iterable[tuple[Path, str]]) -> Iterator[tuple[Any, Any]]:
    """A local moto S3 server (127.0.0.1) holding ``bucket`` with each (file, key) uploaded:
    yields the server (its ``endpoint`` and ``env``) and a boto3 client of it."""
    import boto3
    from remote_servers import MotoS3

    with MotoS3() as m:
        s3 = boto3.client("s3", endpoint_url=m.endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)
        for path, key in uploads:
            s3.upload_file(str(path), bucket, key)
        yield m, s3


@contextlib.contextmanager
def local_cluster(env: dict[str, str], workers: int = 2) -> Iterator[str]:
    """The address of a LocalCluster (127.0.0.1, no dashboard, 768 MiB per worker) whose worker
    processes see ``env`` (a store's endpoint, from the standard variables, as a worker on a
    real cluster would)."""
    from distributed import LocalCluster

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None,
                          memory_limit="768MiB") as cluster:
            yield cluster.scheduler_address
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
