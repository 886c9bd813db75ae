"""The error contract of every verb: one line ``inspector: PATH: problem`` on stderr, exit 2,
no traceback; a usage line when no verb is given; the exit codes that ``inspector --help``
lists are the ones each verb returns (each run here); ``--debug`` on a local file prints no
remote request statistics."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

GRU = str(FIXTURES / "torch" / "gru.pt")
NAN_STATS = str(FIXTURES / "stats" / "torch" / "lm_nan_zero.pt")
# A protocol-2 pickle calling os.system("true"), built byte by byte (never loaded here).
UNSAFE = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85q\x01Rq\x02."


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "COLUMNS": "80", **(env or {})})


@pytest.fixture
def run_here(capsys):
    """``inspector ARGS`` in this process (the CLI's own main): exit code, stdout, stderr."""
    from inspector import cli as main_module

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        code = main_module.main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)
    return run


def one_line(proc: subprocess.CompletedProcess[str], path: str, problem: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [f"inspector: {path}: {problem}"], proc.stderr


def test_no_verb_prints_usage() -> None:
    for args in ((), ("--debug",), ("--color", "never")):
        proc = cli(*args)
        assert proc.returncode == 2
        assert proc.stderr.startswith("usage: inspector "), proc.stderr
        assert proc.stderr.rstrip().endswith("a verb is required (inspector --help lists them)")


def test_report_output_that_cannot_be_written(tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "dir" / "x.html")
    one_line(cli("report", GRU, "-o", missing), missing,
             f"cannot write: no such directory {tmp_path / 'no' / 'dir'}")
    one_line(cli("report", GRU, "-o", str(tmp_path)), str(tmp_path),
             "is a directory (give a file name to write)")
    assert not any(tmp_path.iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_report_output_in_a_read_only_directory(tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        target = str(d / "x.html")
        one_line(cli("report", GRU, "-o", target), target, "cannot write (Permission denied)")
    finally:
        d.chmod(0o700)


@pytest.mark.parametrize("args", [
    ("show", "{missing}"), ("check", "{missing}"), ("diff", "{missing}", GRU),
    ("stats", "{missing}"), ("report", "{missing}", "-o", "{out}"), ("show", "--globals",
                                                                      "{missing}"),
])
def test_missing_path_message_shape(args: tuple[str, ...], tmp_path: Path, run_here) -> None:
    missing = str(tmp_path / "nope.pt")
    filled = [a.format(missing=missing, out=tmp_path / "r.html") for a in args]
    one_line(run_here(*filled), missing, "no such file or directory")


def _exit_table() -> dict[str, str]:
    text = cli("--help").stdout
    section = text.split("exit codes:\n", 1)[1].split("\n\n", 1)[0]
    table: dict[str, str] = {}
    verb = ""
    for line in section.splitlines():
        m = re.match(r"  (\w+)\s+(.*)", line)
        if m and not line.startswith("   "):
            verb = m.group(1)
            table[verb] = m.group(2)
        else:
            table[verb] += " " + line.strip()
    return table


def test_exit_code_table_is_what_each_verb_returns(tmp_path: Path, run_here) -> None:
    unsafe = tmp_path / "unsafe.pkl"
    unsafe.write_bytes(UNSAFE)
    other = FIXTURES / "torch" / "lstm_bidir_legacy.pt"
    runs = {
        "show": [((GRU,), 0), ((str(unsafe),), 2), (("--globals", str(unsafe)), 1)],
        "check": [((str(FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp"),), 0),
                  ((str(unsafe),), 2), ((str(unsafe), "--allow-unsafe"), 1)],
        "diff": [((GRU, GRU), 0), ((GRU, str(other)), 1), ((str(unsafe), GRU), 2)],
        "stats": [((GRU,), 0), ((NAN_STATS,), 1), ((str(unsafe),), 2)],
        "scan": [((GRU,), 0), ((str(unsafe),), 1)],
        "report": [((GRU, "-o", str(tmp_path / "r.html")), 0),
                   ((str(unsafe), "-o", str(tmp_path / "u.html")), 2)],
        "predict": [(("--arch", "sockeye-rnn"), 0), (("--arch", "no-such-arch"), 2)],
        "formats": [((), 0)], "archs": [((), 0)], "schemes": [((), 0)],
        "budget": [(("--arch", "rau-lstm", "--set", "vocab_size=64", "--set", "num_layers=3",
                     "--target", "103360", "--solve", "hidden_units"), 0)],
        "lineage": [((GRU, str(other), "--no-cache"), 0),
                    ((str(unsafe), GRU, "--no-cache"), 2)],
        "inventory": [((GRU, "-o", str(tmp_path / "i.duckdb")), 0),
                      ((str(unsafe), GRU, "-o", str(tmp_path / "u.duckdb")), 2)],
    }
    table = _exit_table()
    assert sorted(table) == sorted(runs)
    for verb, cases in runs.items():
        for args, code in cases:
            proc = run_here(verb, *args)
            assert proc.returncode == code, (verb, args, proc.stderr)
            assert re.search(rf"(^|, ){code} ", table[verb]), (verb, code, table[verb])
            if code == 2:
                assert "Traceback" not in proc.stderr
                assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_debug_on_a_local_file_prints_no_remote_statistics() -> None:
    for args in (("show", GRU), ("diff", GRU, GRU, "--values")):
        proc = cli("--debug", *args)
        assert proc.returncode == 0, proc.stderr
        assert "request(s)" not in proc.stderr and "remote total" not in proc.stderr, args


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_under_stdout_is_one_line() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "inspector", "show", GRU], stdout=full,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["inspector: No space left on device (errno 28)"]
