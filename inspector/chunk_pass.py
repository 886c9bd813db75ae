"""Chunk-parallel value passes: every core at work, also inside one large tensor.

A tensor whose values are a plain contiguous byte range of a local file (safetensors, a stored
torch zip member, .npy, GGUF, ...) is cut into chunks of a fixed number of elements. Each chunk
is a unit of work: read with a positioned read into a buffer of the thread that takes it
(:mod:`inspector.scratch`) and reduced there. A tensor stored any other way (a compressed or
remote file, a strided view, an HDF5 dataset) is one unit, read from start to end by
:mod:`inspector.values`.

Units run on a thread pool (NumPy releases the GIL) and their results come back in unit order,
which is the order one thread reading each tensor from its start would fold them: the numbers do
not depend on how many threads ran. At most ``2 * threads`` units are in flight, each holding a
chunk per side in its thread's buffers, so peak memory does not grow with the file.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, TypeVar

from inspector.adapters.dtypes import BLOCKS, NUMPY_STORAGE
from inspector.adapters.errors import FormatError
from inspector.adapters.model import ByteRange, Checkpoint, TensorEntry, c_strides
from inspector.adapters.source import Source

T = TypeVar("T")
R = TypeVar("R")


class Span:
    """A tensor's elements as a contiguous byte range of a local file."""

    __slots__ = ("big_endian", "entry", "itemsize", "offset", "size", "source")

    def __init__(self, entry: TensorEntry, source: Source, offset: int, big_endian: bool,
                 itemsize: int, size: int) -> None:
        self.entry, self.source, self.offset = entry, source, offset
        self.big_endian, self.itemsize, self.size = big_endian, itemsize, size


def locate(ckpt: Checkpoint | None, entry: TensorEntry | None) -> Span | None:
    """The tensor's :class:`Span` when its chunks can be read in any order, else None (then
    :mod:`inspector.values` reads it in order, and says why when it cannot)."""
    import numpy as np

    if ckpt is None or entry is None or ckpt.reader is None or entry.numel == 0:
        return None
    extra = entry.extra
    if extra.get("stype") or entry.stored_numel is not None or extra.get("indices"):
        return None
    if entry.dtype in BLOCKS or entry.dtype not in NUMPY_STORAGE:
        return None
    try:
        loc = ckpt.reader(entry)
    except FormatError:
        return None
    if not isinstance(loc, ByteRange) or loc.source.local_path is None:
        return None
    if loc.stride is not None and loc.stride != c_strides(entry.shape):
        return None
    itemsize = np.dtype(NUMPY_STORAGE[entry.dtype]).itemsize
    try:
        size = loc.source.size
    except FormatError:
        return None
    if loc.offset < 0 or loc.offset + entry.numel * itemsize > size:
        return None  # read in order: the error names the problem
    return Span(entry, loc.source, loc.offset, loc.big_endian, itemsize, size)


def count(entry: TensorEntry, chunk: int) -> int:
    """How many chunks of ``chunk`` elements the tensor has."""
    return -(-entry.numel // max(1, chunk))


# Bytes one unit of work reads at once, all sides together (a tensor, or a tensor and the same
# tensor of another file): consecutive chunks of a tensor are read with one positioned read per
# side and reduced one by one, so that a thread hands back a unit (a future, the pool's locks,
# a wake-up of the thread that folds the results) every few MiB, not every chunk. A constant:
# the chunks and their order, so the numbers, do not depend on it.
RUN_BYTES = 4 << 20


def runs(entry: TensorEntry, chunk: int, itemsize: int) -> Iterator[tuple[int, int]]:
    """The tensor's chunks as units of work: ``(first chunk, number of chunks)``, each unit at
    most :data:`RUN_BYTES` (at least one chunk); ``itemsize``: the bytes an element costs on
    all sides together."""
    chunk = max(1, chunk)
    per = max(1, RUN_BYTES // max(1, chunk * itemsize))
    total = count(entry, chunk)
    for k in range(0, total, per):
        yield k, min(per, total - k)


class Files:
    """The local files of one pass, each opened once and shared by the pass's threads; closing
    checks that none changed size since it was listed (a file rewritten during the pass is an
    error, not a result)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[BinaryIO, threading.Lock, int]] = {}

    def __enter__(self) -> Files:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(check=exc[0] is None)

    def _file(self, span: Span) -> tuple[BinaryIO, threading.Lock]:
        key = span.source.where
        with self._lock:
            got = self._open.get(key)
            if got is None:
                got = self._open[key] = (span.source.open(), threading.Lock(), span.size)
        return got[0], got[1]

    def read(self, span: Span, k: int, chunk: int, slot: str, chunks: int = 1) -> Any:
        """Chunk ``k`` of the tensor (``chunks`` chunks from ``k`` on, read at once), in its
        stored dtype, in this thread's buffer ``slot``."""
        import numpy as np

        from inspector import scratch, values

        entry = span.entry
        first = k * chunk
        n = min(chunk * max(1, chunks), entry.numel - first)
        nbytes = n * span.itemsize
        offset = span.offset + first * span.itemsize
        buf = scratch.buffer(slot, nbytes, np.uint8)
        f, lock = self._file(span)
        got = _read_at(f, lock, memoryview(buf), offset)
        if got != nbytes:
            raise FormatError(f"tensor {entry.stored_name!r}: data at offset {offset}: expected "
                              f"{nbytes} bytes, the file ends after {got}", span.source.where)
        return values.decode(buf, entry.dtype, span.big_endian)

    def check(self, span: Span) -> None:
        """After a tensor's last chunk: its file still has the size it had when listed."""
        key = span.source.where
        with self._lock:
            got = self._open.get(key)
        if got is None:
            return
        now = _size(got[0], got[2])
        if now != got[2]:
            raise FormatError(f"tensor {span.entry.stored_name!r}: the file changed size during "
                              f"the pass ({got[2]} -> {now} bytes)", key)

    def close(self, check: bool = True) -> None:
        with self._lock:
            files, self._open = self._open, {}
        changed = None
        for where, (f, _, size) in files.items():
            now = _size(f, size)
            if now != size and changed is None:
                changed = FormatError(
                    f"the file changed size during the pass ({size} -> {now} bytes)", where)
            f.close()
        if check and changed is not None:
            raise changed


def _size(f: BinaryIO, listed: int) -> int:
    try:
        return os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):  # not a local file: nothing to ask
        return listed


def _read_at(f: BinaryIO, lock: threading.Lock, view: memoryview, offset: int) -> int:
    """Fill ``view`` from ``offset``: ``os.preadv`` where there is one (threads share the file
    without a lock), else seek and read under the file's lock. Returns the bytes read."""
    done, n = 0, len(view)
    preadv = getattr(os, "preadv", None)
    fileno = None
    if preadv is not None:
        try:
            fileno = f.fileno()
        except (AttributeError, OSError, ValueError):
            fileno = None
    if fileno is not None:
        while done < n:
            got = preadv(fileno, [view[done:]], offset + done)
            if got <= 0:
                break
            done += got
        return done
    with lock:
        f.seek(offset + done)
        while done < n:
            got = f.readinto(view[done:])  # type: ignore[attr-defined]
            if not got:
                break
            done += got
    return done


def ordered(fn: Callable[[T], R], items: Iterable[T], threads: int) -> Iterator[tuple[T, R]]:
    """``(item, fn(item))`` in the order of ``items``, computed on ``threads`` threads with at
    most ``2 * threads`` in flight; the first exception ends the pass (work not started is
    cancelled)."""
    if threads <= 1:
        for item in items:
            yield item, fn(item)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(threads, thread_name_prefix="inspector-values")
    pending: deque[tuple[T, Any]] = deque()
    try:
        for item in items:
            pending.append((item, pool.submit(fn, item)))
            if len(pending) >= 2 * threads:
                head, fut = pending.popleft()
                yield head, fut.result()
        while pending:
            head, fut = pending.popleft()
            yield head, fut.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
