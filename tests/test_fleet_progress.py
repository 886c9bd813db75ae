"""The fleet progress bar (issue 21): ``show`` over many checkpoints and ``scan`` draw a bar on
stderr (done / total, rate, ETA) when stderr is a terminal, and never when it is piped; the
output lines are the same either way."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from conftest import FIXTURES, ROOT, drain_pty

pytest.importorskip("tqdm")

FLEET = [str(FIXTURES / p) for p in (
    "torch/gru.pt", "safetensors/dtype_zoo.safetensors", "keras/batch_norm.keras",
    "dirs/hf_llama_safetensors_sharded", "stats/torch/lm_nan_zero.pt",
    "stats/sockeye1_run/params.00001")]


def on_terminal(*args: str) -> tuple[str, str]:
    """stdout (a pipe) and what the terminal on stderr received."""
    master, slave = pty.openpty()
    # a fresh pty is 0 x 0, where tqdm draws nothing: give it a real terminal's size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {**os.environ, "INSPECTOR_PROGRESS_DELAY": "0", "TERM": "xterm", "COLUMNS": "100"}
    env.pop("INSPECTOR_PROGRESS", None)
    proc = subprocess.Popen([sys.executable, "-m", "inspector", *args], stdout=subprocess.PIPE,
                            stderr=slave, cwd=ROOT, env=env, text=True)
    os.close(slave)
    data = drain_pty(master)
    out = proc.stdout.read() if proc.stdout else ""
    proc.wait(timeout=120)
    os.close(master)
    return out, data.decode(errors="replace")


def piped(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "INSPECTOR_PROGRESS_DELAY": "0"}
    env.pop("INSPECTOR_PROGRESS", None)
    return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)


def test_show_fleet_bar_on_a_terminal_never_piped() -> None:
    out, tty = on_terminal("show", *FLEET, "--format", "jsonl", "--jobs", "2")
    assert f"/{len(FLEET)}" in tty and "checkpoint" in tty  # done / total, counted
    assert "show" in tty
    proc = piped("show", *FLEET, "--format", "jsonl", "--jobs", "2")
    assert proc.returncode == 0 and proc.stderr == ""
    assert out == proc.stdout and len(out.splitlines()) == len(FLEET)


def test_scan_bar_on_a_terminal_never_piped() -> None:
    out, tty = on_terminal("scan", *FLEET)
    assert "file" in tty and "scan" in tty and "/" in tty
    assert "scanning" not in tty  # the old hand-written progress line is gone
    proc = piped("scan", *FLEET)
    assert proc.stderr == ""
    # the same verdicts and summary; on a terminal the lines are fitted to its width
    shown, piped_lines = out.splitlines(), proc.stdout.splitlines()
    assert [x.split()[0] for x in shown] == [x.split()[0] for x in piped_lines]
    assert shown[-1] == piped_lines[-1] and shown[-1].startswith("scanned ")
