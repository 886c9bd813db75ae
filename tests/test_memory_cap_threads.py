"""The address-space cap is process-wide, and scan's threads (and a notebook calling
``inspector.scan``) enter it at once: overlapping blocks must leave the limit as they found it,
or every later allocation, mmap and child process of the interpreter is starved."""

from __future__ import annotations

import random
import threading

import pytest

resource = pytest.importorskip("resource")

from inspector.adapters.memory_cap import address_space_capped  # noqa: E402


def test_overlapping_caps_restore_the_limit():
    before = resource.getrlimit(resource.RLIMIT_AS)
    seen_capped = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(300):
            with address_space_capped(rng.randint(1 << 28, 1 << 30)):
                # a large allocation grows the process (mmap): the next entrant's cap differs
                held = bytearray(rng.randint(1 << 20, 1 << 24))
                seen_capped.append(resource.getrlimit(resource.RLIMIT_AS)[0])
                del held

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert seen_capped and all(c != resource.RLIM_INFINITY for c in seen_capped)
