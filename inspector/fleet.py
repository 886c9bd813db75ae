"""Many checkpoints in one command: paths and prefixes (``s3://bucket/runs/``, a local tree)
expanded into the checkpoints below them, and a function run over them with bounded
concurrency, results in input order, a failure in one never stopping the rest."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass
from typing import TypeVar

from inspector.adapters.errors import InspectorError, NotFoundError, UnknownFormatError
from inspector.adapters.source import Source, as_source

T = TypeVar("T")
R = TypeVar("R")
MAX_CHECKPOINTS = 100_000
MAX_DEPTH = 32


@dataclass
class Target:
    """One checkpoint to read, or the error that stopped one path from being read."""

    label: str
    source: Source | None
    error: InspectorError | None = None


def expand(paths: Iterable[str]) -> Iterator[Target]:
    """The checkpoints named by ``paths``: a file as is; a model directory (HF, Sockeye, rau,
    sharded Keras) as one; any other directory expanded into the checkpoints below it (each
    sub-directory likewise, and the files that a format claims)."""
    count = 0
    for arg in paths:
        try:
            src = as_source(arg)
            if not src.exists():
                raise NotFoundError("no such file or directory", src.where)
            found = [src] if not src.is_dir() else list(_below(src, 0))
        except InspectorError as e:
            yield Target(arg, None, e)
            continue
        if not found:
            yield Target(arg, None, UnknownFormatError("no checkpoint found below", src.where))
        for s in found:
            count += 1
            if count > MAX_CHECKPOINTS:
                yield Target(arg, None, InspectorError(f"more than {MAX_CHECKPOINTS} checkpoints"))
                return
            yield Target(s.where, s)


def _below(d: Source, depth: int) -> Iterator[Source]:
    from inspector.adapters.registry import detect, sniff_file

    try:
        adapter, _ = detect(d)
        if adapter.name != "directory":  # a model directory; a loose file is listed as itself
            yield d
            return
    except UnknownFormatError:
        pass
    if depth >= MAX_DEPTH:
        return
    for name in d.list():
        child = d.child(name)
        if child.is_dir():
            yield from _below(child, depth + 1)
        elif sniff_file(child) is not None:
            yield child


def run_ordered(
    items: Iterable[T], fn: Callable[[T], R], jobs: int
) -> Iterator[tuple[T, R | Exception]]:
    """``(item, fn(item) or its exception)`` in input order, at most ``jobs`` running at once
    and at most ``2 * jobs`` results held."""
    jobs = max(1, jobs)
    if jobs == 1:
        for item in items:
            yield item, _call(fn, item)
        return
    pending: deque[tuple[T, Future[R | Exception]]] = deque()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for item in items:
            # each task in a copy of the caller's context: what it set (the user's --trust)
            # holds in the pool's threads too
            pending.append((item, pool.submit(copy_context().run, _call, fn, item)))
            while len(pending) >= 2 * jobs:
                first, fut = pending.popleft()
                yield first, fut.result()
        while pending:
            first, fut = pending.popleft()
            yield first, fut.result()


def _call(fn: Callable[[T], R], item: T) -> R | Exception:
    try:
        return fn(item)
    except Exception as e:  # noqa: BLE001 - one failure is that item's result, not the fleet's
        return e
