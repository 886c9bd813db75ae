"""Assertions shared by the bad-input tests: one clean line, exit code 2, no traceback."""

from __future__ import annotations

import subprocess


def assert_clean_error(proc: subprocess.CompletedProcess[str], path: str, *needles: str) -> str:
    """The CLI refused the file the way users are promised it will."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith("inspector: "), err
    assert path in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err
