"""FIFOs, sockets and device files are never opened for reading: a FIFO named like a
checkpoint (or a side file beside one) would block the reader until a writer comes, a device
would never end. Every verb and ``inspector.load`` say what the file is in one line and exit 2;
``scan`` names them and scans the rest of the tree. Each run has a time limit: a hang fails."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
SAFETENSORS = next(FIXTURES.glob("safetensors/*.safetensors"))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


@pytest.fixture
def specials(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("x.safetensors", "model.pt", "weights.bin"):
        os.mkfifo(tmp_path / name)
        out[name] = tmp_path / name
    sock = socket.socket(socket.AF_UNIX)
    path = tmp_path / "s.safetensors"
    try:
        sock.bind(str(path))
        out["socket"] = path
    except OSError:  # a path too long for AF_UNIX
        pass
    yield out
    sock.close()


@pytest.mark.parametrize("verb", [("show",), ("stats",), ("check",), ("show", "--format", "json")])
def test_every_verb_refuses_a_fifo_or_socket(specials: dict[str, Path], verb: tuple) -> None:
    for name, path in specials.items():
        proc = _run(verb[0], str(path), *verb[1:])
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0], proc.stderr
        assert ("a FIFO (named pipe)" if name != "socket" else "a socket") in lines[0]


def test_a_device_is_refused() -> None:
    if not stat.S_ISCHR(os.stat("/dev/zero").st_mode):
        pytest.skip("no /dev/zero character device")
    proc = _run("show", "/dev/zero")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("inspector: /dev/zero: a character device, not a regular "
                                   "file: not read")


def test_the_api_refuses_a_fifo(specials: dict[str, Path]) -> None:
    code = ("import sys, inspector\n"
            "try:\n    inspector.load(sys.argv[1])\n"
            "except inspector.InspectorError as e:\n    print(type(e).__name__, e)\n")
    for path in specials.values():
        proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)
        assert proc.stdout.startswith("FormatError "), proc.stdout + proc.stderr
        assert "not a regular file" in proc.stdout


def test_a_fifo_beside_the_weights_is_named(tmp_path: Path) -> None:
    """A side file (``config.json``) that is a FIFO: refused by name, never waited on."""
    shutil.copyfile(SAFETENSORS, tmp_path / "model.safetensors")
    os.mkfifo(tmp_path / "config.json")
    proc = _run("show", str(tmp_path))  # the directory's config is part of the model
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.strip().endswith(
        "config.json: a FIFO (named pipe), not a regular file: not read"), proc.stderr
    # the file alone: its listing needs no side config, which is never opened (no hang)
    proc = _run("show", str(tmp_path / "model.safetensors"))
    assert proc.returncode in (0, 2), proc.stderr
    assert proc.returncode == 0 or "config.json: a FIFO" in proc.stderr


def test_scan_names_them_and_goes_on(specials: dict[str, Path], tmp_path: Path) -> None:
    shutil.copyfile(SAFETENSORS, tmp_path / "real.safetensors")
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "sub" / "pytorch_model.bin")
    proc = _run("scan", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"safe       {tmp_path / 'real.safetensors'}" in proc.stdout
    names = [*specials.values(), tmp_path / "sub" / "pytorch_model.bin"]
    for path in names:
        assert f"note: {path}: a " in proc.stdout, proc.stdout
    assert "scanned 1 file: 1 safe" in proc.stdout
    proc = _run("scan", str(specials["model.pt"]))  # given by name: noted too
    assert proc.returncode == 0 and "a FIFO (named pipe)" in proc.stdout
