"""A cap on this process's address space while a block runs: the guard around readers that
trust sizes written in the file (the C unpickler's memo, libhdf5's heaps). Kept apart from the
pickle reader so that the HDF5 child does not import it."""

from __future__ import annotations

import contextlib
import os
import threading

try:  # imported here, not in the block: a forked child must not need the import system
    import resource
except ImportError:  # not a POSIX system: no cap
    resource = None  # type: ignore[assignment]

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Iterator


def _vm_size() -> int | None:
    """This process's virtual memory size in bytes (Linux), None where unknown."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# The limit is process-wide, and threads (scan --jobs, the library in a notebook) enter the block
# at once: the first entrant saves the limit, later ones may only raise the cap to their own
# need (never above the saved one), and the last one out restores it. Without this, two
# overlapping blocks could restore each other's cap and leave the process capped for good.
_LOCK = threading.Lock()
_STATE: dict[str, object] = {"active": 0, "saved": None}


def _after_fork_in_child() -> None:
    """A child forked while another thread held the lock (the isolated HDF5 examination forks
    from scan's threads) would wait for it forever: the child starts with a free lock and no
    open block (it keeps whatever limit it was forked under)."""
    global _LOCK
    _LOCK = threading.Lock()
    _STATE["active"], _STATE["saved"] = 0, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def address_space_capped(extra: int) -> Iterator[None]:
    """Cap the address space at its current size + ``extra`` bytes while the block runs.

    CPython's C unpickler (before 3.14) sizes its memo table from the largest index a
    LONG_BINPUT/PUT names: a 60-byte pickle asking for index 2**28 makes it allocate and zero
    4 GiB; libhdf5 trusts sizes inside the file. Under the cap such an allocation fails
    (MemoryError) instead. The limit is process-wide while any block holds, restored when the
    last one exits, and never loosens an existing tighter one.
    """
    if resource is None:
        yield
        return
    with _LOCK:
        if _STATE["active"] == 0:
            _STATE["saved"] = resource.getrlimit(resource.RLIMIT_AS)
        soft, hard = _STATE["saved"]  # type: ignore[misc]
        vm = _vm_size()
        cap = None if vm is None else vm + extra
        if cap is not None and hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if cap is not None and (soft == resource.RLIM_INFINITY or soft > cap):
            current = resource.getrlimit(resource.RLIMIT_AS)[0]
            if _STATE["active"] and current != resource.RLIM_INFINITY:
                cap = max(cap, current)  # another block's room is kept
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        _STATE["active"] = int(_STATE["active"]) + 1  # type: ignore[call-overload]
    try:
        yield
    finally:
        with _LOCK:
            _STATE["active"] = int(_STATE["active"]) - 1  # type: ignore[call-overload]
            if _STATE["active"] == 0:
                resource.setrlimit(resource.RLIMIT_AS, _STATE["saved"])  # type: ignore[arg-type]
                _STATE["saved"] = None
