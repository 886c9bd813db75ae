"""Isolated calls made at once from several threads stay independent.

A child of :func:`call_isolated` must hold no other call's pipe: the parent reads its answer
until end of file, so a write end inherited by a hanging sibling would make a finished call wait
out its budget. The test counts the pipes open in each child while another call hangs.
"""

from __future__ import annotations

import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from inspector.adapters.errors import FormatError
from inspector.adapters.isolated import budget_seconds, call_isolated

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"),
                                reason="needs fork and /proc")


def _pipes() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += stat.S_ISFIFO(os.fstat(int(fd)).st_mode)
        except OSError:
            pass
    return n


def test_no_child_holds_another_calls_pipe():
    before = _pipes()

    def hang() -> None:
        time.sleep(60)

    with ThreadPoolExecutor(8) as pool:
        hanging = pool.submit(call_isolated, hang, 0.5, "hang", "the test call")
        counts = list(pool.map(lambda _: call_isolated(_pipes, 30.0, "q", "the test call"),
                               range(40)))
        with pytest.raises(FormatError, match="did not finish within 3 s .it stopped computing"):
            hanging.result()
    assert counts == [before + 1] * 40  # its own answer pipe only


def test_a_loop_is_stopped_by_its_own_processor_time():
    """The budget is the child's processor time: a loop is stopped at it, whatever the load."""
    def spin() -> None:
        while True:
            pass

    with pytest.raises(FormatError, match="did not finish within 1 s of processor time"):
        call_isolated(spin, 1.0, "spin", "the test call")


def test_a_crash_is_its_own_error():
    with pytest.raises(FormatError, match="crashed"):
        call_isolated(lambda: os._exit(0), 30.0, "x", "the test call")


def test_budget_from_the_environment(monkeypatch):
    assert budget_seconds(10.0, 1 << 20, 1 << 20) == 11.0
    monkeypatch.setenv("INSPECTOR_HDF5_SECONDS", "2")
    assert budget_seconds(10.0, 0, 1 << 20) == 2.0
    monkeypatch.setenv("INSPECTOR_HDF5_SECONDS", "nonsense")
    assert budget_seconds(10.0, 0, 1 << 20) == 10.0
