"""A cap on this process's address space while a block runs: the guard around readers that
trust sizes written in the file (the C unpickler's memo, libhdf5's heaps). Kept apart from the
pickle reader so that the HDF5 child does not import it."""

from __future__ import annotations

import contextlib

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


@contextlib.contextmanager
def address_space_capped(extra: int) -> Iterator[None]:
    """Cap the address space at its current size + ``extra`` bytes while the block runs.

    CPython's C unpickler (before 3.14) sizes its memo table from the largest index a
    LONG_BINPUT/PUT names: a 60-byte pickle asking for index 2**28 makes it allocate and zero
    4 GiB; libhdf5 trusts sizes inside the file. Under the cap such an allocation fails
    (MemoryError) instead. The limit is process-wide while it holds, restored on exit, and never
    loosens an existing tighter one.
    """
    if resource is None:
        yield
        return
    vm = _vm_size()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = None if vm is None else vm + extra
    if cap is not None and hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if cap is None or (soft != resource.RLIM_INFINITY and soft <= cap):
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
