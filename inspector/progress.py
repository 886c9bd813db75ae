"""A progress bar for value passes: bytes done of the total, rate and ETA, on stderr.

>>> with progress(total_bytes, "stats") as bar:  # doctest: +SKIP
...     bar.advance(nbytes)  # from any thread

The bar appears only when the stream is a terminal and the pass has lasted longer than
:data:`DELAY` seconds; tqdm is imported then, and only then (``pip install
'ckpt-inspector[progress]'``). Without a terminal, or without tqdm, nothing is shown and nothing
fails. ``INSPECTOR_PROGRESS=0`` turns it off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TextIO

DELAY = 1.0  # seconds before a bar appears: short passes print nothing


class Progress:
    """Counts bytes from any thread; shows a tqdm bar once the pass is slow enough to need one."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None,
                 delay: float = DELAY) -> None:
        self.total, self.label, self.delay = total, label, delay
        self.stream = sys.stderr if stream is None else stream
        self.done = 0
        self.bar: Any = None
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._enabled = _wanted(self.stream)

    def advance(self, n: int) -> None:
        """``n`` more bytes done."""
        with self._lock:
            self.done += n
            if not self._enabled:
                return
            if self.bar is None:
                if time.monotonic() - self._start < self.delay:
                    return
                self.bar = _bar(self.total, self.done, self.label, self.stream)
                if self.bar is None:
                    self._enabled = False
                return
            self.bar.update(n)

    def close(self) -> None:
        with self._lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None
            self._enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(total: int, label: str = "", stream: TextIO | None = None,
             delay: float = DELAY) -> Progress:
    return Progress(total, label, stream, delay)


def _wanted(stream: TextIO) -> bool:
    if os.environ.get("INSPECTOR_PROGRESS", "") == "0":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


def _bar(total: int, done: int, label: str, stream: TextIO) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # the optional extra is not installed: no bar
        return None
    return tqdm(total=total, initial=done, desc=label or None, unit="B", unit_scale=True,
                unit_divisor=1024, file=stream, leave=False, dynamic_ncols=True)
