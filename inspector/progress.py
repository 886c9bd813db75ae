"""A progress bar on stderr: bytes done of the total (value passes) or items done (fleets:
checkpoints, files), with rate and ETA.

>>> with progress(total_bytes, "stats") as bar:  # doctest: +SKIP
...     bar.advance(nbytes)  # from any thread
>>> with progress(len(targets), "show", unit="checkpoint") as bar:  # doctest: +SKIP
...     with bar.paused():  # a line of output above the bar
...         print(line)
...     bar.advance(1)

The bar appears only when the stream is a terminal and the pass has lasted longer than
:data:`DELAY` seconds (``INSPECTOR_PROGRESS_DELAY``); tqdm is imported then, and only then
(``pip install 'ckpt-inspector[progress]'``). Without a terminal (piped), or without tqdm,
nothing is shown and nothing fails. ``INSPECTOR_PROGRESS=0`` turns it off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

DELAY = 1.0  # seconds before a bar appears: short passes print nothing


class Progress:
    """Counts bytes (or items: ``unit``) from any thread; shows a tqdm bar once the pass is slow
    enough to need one."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None,
                 delay: float | None = None, unit: str = "B") -> None:
        self.total, self.label, self.unit = total, label, unit
        self.delay = _delay() if delay is None else delay
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
                self.bar = _bar(self.total, self.done, self.label, self.stream, self.unit)
                if self.bar is None:
                    self._enabled = False
                return
            self.bar.update(n)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Write other output to the terminal: the bar is cleared first and drawn again after."""
        with self._lock:
            if self.bar is not None:
                self.bar.clear()
            try:
                yield
            finally:
                if self.bar is not None:
                    self.bar.refresh()

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
             delay: float | None = None, unit: str = "B") -> Progress:
    """A :class:`Progress` of ``total`` bytes (``unit="B"``) or items (any other unit name)."""
    return Progress(total, label, stream, delay, unit)


def _delay() -> float:
    try:
        return float(os.environ.get("INSPECTOR_PROGRESS_DELAY", DELAY))
    except ValueError:
        return DELAY


def _wanted(stream: TextIO) -> bool:
    if os.environ.get("INSPECTOR_PROGRESS", "") == "0":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


def _bar(total: int, done: int, label: str, stream: TextIO, unit: str = "B") -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # the optional extra is not installed: no bar
        return None
    if unit != "B":  # a count: checkpoints or files done of the total
        return tqdm(total=total, initial=done, desc=label or None, unit=unit,
                    file=stream, leave=False, dynamic_ncols=True)
    return tqdm(total=total, initial=done, desc=label or None, unit="B", unit_scale=True,
                unit_divisor=1024, file=stream, leave=False, dynamic_ncols=True)
