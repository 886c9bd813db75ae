"""Per-thread scratch buffers of the value passes.

One NumPy buffer per name and thread, grown to the largest size asked and then reused, so that a
pass over a large file reads and widens its chunks into a few buffers per thread instead of new
arrays per chunk (a fresh array of a few MiB is fresh pages: page faults on every chunk). A
buffer stays valid until the same thread asks for the same name again: nothing a pass returns
may hold one.
"""

from __future__ import annotations

import threading
from typing import Any

_LOCAL = threading.local()


def buffer(name: str, n: int, dtype: Any) -> Any:
    """A 1-d array of ``n`` elements of ``dtype`` (contents undefined), this thread's ``name``."""
    import numpy as np

    dt = np.dtype(dtype)
    store: dict[str, Any] | None = getattr(_LOCAL, "buffers", None)
    if store is None:
        store = _LOCAL.buffers = {}
    need = max(1, n * dt.itemsize)
    raw = store.get(name)
    if raw is None or raw.nbytes < need:
        raw = store[name] = np.empty(need, dtype=np.uint8)
    return raw[: n * dt.itemsize].view(dt)


def release() -> None:
    """Drop this thread's buffers (the calling thread keeps none after a pass)."""
    _LOCAL.__dict__.pop("buffers", None)
