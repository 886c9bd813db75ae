"""Value passes on a Dask cluster (``stats --dask``, ``diff --values --dask``).

>>> with connect("local:2") as c:  # doctest: +SKIP
...     run = stats.run_stats(paths, tensor_pass=c.stats_pass())

The client has read the checkpoints' metadata; the values are read where the tasks run. A task
is one shard of a checkpoint (the file its tensors' ``file`` names) or, for a file larger than
``task_bytes``, a range of its tensors. It is sent as addresses (an absolute local path or the
URL as given; credentials from the client's environment are never sent: a worker uses its own)
and tensor names, opens its own
:class:`~inspector.adapters.source.Source`, reduces each tensor whole (``stats``: a
:class:`~inspector.partial.Partial` and the squared change from the previous checkpoint;
``diff``: a :class:`~inspector.values.ValueStats`) and returns those small records. The client
merges them in the order of the single-process pass, so the results are the same numbers.

Dask (``distributed``) is an optional extra, imported only here and only with ``--dask``. A task
that fails is one line naming its shard (exit 2); a scheduler that cannot be reached within
``INSPECTOR_DASK_TIMEOUT`` seconds (default 10) is one line too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from inspector.adapters.errors import InspectorError, UsageError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.adapters.source import Source

TASK_BYTES = 64 << 20  # a file's tensors are split into tasks of about this many bytes
TIMEOUT = 10.0  # seconds to reach a scheduler (INSPECTOR_DASK_TIMEOUT)


class DaskError(InspectorError):
    """The cluster could not be used, or a task on it failed."""


# ---------------------------------------------------------------------------------------------
# What a task is sent


@dataclass(frozen=True, slots=True)
class Ref:
    """One tensor as the client listed it: where its checkpoint is, its position in the
    listing, and what must still hold when a worker opens it (else the file changed)."""

    index: int  # position in the checkpoint's tensors
    stored_name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int | None
    file: str | None


@dataclass(frozen=True, slots=True)
class Opener:
    """How a worker opens a checkpoint: its address and format, and the one shard file that
    holds the task's tensors (opened alone when it lists them at the same offsets)."""

    address: str
    input_format: str | None
    shard: str | None = None
    allow_unsafe: bool = False  # --allow-unsafe: the worker loads what the client loaded
    trust: tuple[str, ...] = ()  # --trust and the client's trust configuration


@dataclass(frozen=True, slots=True)
class Task:
    """A unit of work: ``items`` are (result slot, refs...) for one side or two."""

    label: str  # the shard (or file and tensor range) named in an error
    openers: tuple[Opener, ...]
    items: tuple[tuple[Any, ...], ...]
    nbytes: int


def address(src: Source) -> str:
    """What a worker opens: the full URL (redacted only when shown) or an absolute path."""
    url = getattr(src, "url", None)
    if url is not None:
        return str(url)
    local = src.local_path
    return str(local.resolve()) if local is not None else src.where


def _ref(index: int, entry: TensorEntry) -> Ref:
    return Ref(index, entry.stored_name, entry.dtype, tuple(entry.shape), entry.offset,
               entry.file)


def _shard(ckpt: Checkpoint, file: str | None, cache: dict[str | None, str | None]
           ) -> str | None:
    """The address of the shard file ``file`` of a checkpoint (None: the checkpoint itself)."""
    if file not in cache:
        src = ckpt.source
        shard = None
        if file and src is not None:
            try:
                shard = address(src.child(file) if src.is_dir() else src.sibling(file))
            except InspectorError:
                shard = None
        cache[file] = shard
    return cache[file]


def _indexer(ckpt: Checkpoint) -> dict[int, int]:
    return {id(t): i for i, t in enumerate(ckpt.tensors)}


def _split(items: list[tuple[int, Any]], task_bytes: int) -> Iterator[list[tuple[int, Any]]]:
    """Consecutive runs of ``(nbytes, item)`` of about ``task_bytes`` each (a tensor is never
    split: its partial is reduced whole, as in the single-process pass)."""
    run: list[tuple[int, Any]] = []
    size = 0
    for n, item in items:
        if run and size + n > task_bytes:
            yield run
            run, size = [], 0
        run.append((n, item))
        size += n
    if run:
        yield run


# ---------------------------------------------------------------------------------------------
# What a task runs (on a worker)


def _open(opener: Opener, refs: Sequence[Ref]) -> list[tuple[Checkpoint, TensorEntry]]:
    """The checkpoint and entry of each ref: from the shard alone when it lists every ref's
    tensor at the same place, else from the whole checkpoint."""
    from inspector.adapters.registry import load

    if opener.shard is not None and opener.input_format is None:
        try:
            shard = load(opener.shard, allow_unsafe=opener.allow_unsafe, trust=opener.trust)
        except InspectorError:
            shard = None
        if shard is not None:
            by_name: dict[str, TensorEntry] = {}
            for t in shard.tensors:
                by_name.setdefault(t.stored_name, t)
            found = [by_name.get(r.stored_name) for r in refs]
            if all(t is not None and _same(r, t, shard=True)
                   for r, t in zip(refs, found, strict=True)):
                return [(shard, t) for t in found]  # type: ignore[misc]
    ckpt = load(opener.address, opener.input_format, allow_unsafe=opener.allow_unsafe,
                trust=opener.trust)
    out = []
    for r in refs:
        t = ckpt.tensors[r.index] if r.index < len(ckpt.tensors) else None
        if t is None or not _same(r, t, shard=False):
            raise InspectorError(f"tensor {r.stored_name!r} is not where it was listed "
                                 "(the checkpoint changed during the pass?)", ckpt.path)
        out.append((ckpt, t))
    return out


def _same(r: Ref, t: TensorEntry, shard: bool) -> bool:
    return (t.stored_name == r.stored_name and t.dtype == r.dtype
            and tuple(t.shape) == r.shape and t.offset == r.offset
            and (shard or t.file == r.file))


def run_stats_task(task: Task, chunk: int) -> tuple[str, Any]:
    """A ``stats`` task: ``("ok", [(slot, partial, delta_ss, note), ...])`` or
    ``("error", message)`` (never an exception: one line, whatever failed)."""
    try:
        with _fresh():
            return "ok", _stats_items(task, chunk)
    except Exception as e:  # noqa: BLE001 - returned as one line, named by the client
        return "error", _message(e)


def _stats_items(task: Task, chunk: int) -> list[tuple[Any, ...]]:
    from inspector import value_stats as stats

    cur = _open(task.openers[0], [it[1] for it in task.items])
    prev_refs = [it[2] for it in task.items if it[2] is not None]
    prevs = iter(_open(task.openers[1], prev_refs) if prev_refs else [])
    out = []
    for (slot, _, pref), (ckpt, entry) in zip(task.items, cur, strict=True):
        pair = next(prevs) if pref is not None else None
        out.append((slot, *stats.tensor_result(ckpt, entry, chunk, None, pair)))
    return out


def run_diff_task(task: Task, atol: float, rtol: float, chunk: int | None) -> tuple[str, Any]:
    """A ``diff --values`` task: ``("ok", [(slot, value_stats, note), ...])`` or
    ``("error", message)``."""
    try:
        with _fresh():
            return "ok", _diff_items(task, atol, rtol, chunk)
    except Exception as e:  # noqa: BLE001 - returned as one line, named by the client
        return "error", _message(e)


def _diff_items(task: Task, atol: float, rtol: float, chunk: int | None
                ) -> list[tuple[Any, ...]]:
    from inspector import values

    kw: dict[str, Any] = {} if chunk is None else {"chunk": chunk}
    side_a = _open(task.openers[0], [it[1] for it in task.items])
    side_b = _open(task.openers[1], [it[2] for it in task.items])
    out = []
    for (slot, _, _), (ca, a), (cb, b) in zip(task.items, side_a, side_b, strict=True):
        try:
            out.append((slot, values.compare(ca, a, cb, b, atol, rtol, **kw), None))
        except values.ValuesUnavailable as e:
            out.append((slot, None, e.why))
    return out


@contextmanager
def _fresh() -> Iterator[None]:
    """A task reads its files afresh and keeps none of their bytes in the worker after it."""
    import sys

    remote = sys.modules.get("inspector.adapters.remote")
    if remote is not None:
        remote.forget()
    try:
        yield
    finally:
        remote = sys.modules.get("inspector.adapters.remote")
        if remote is not None:
            remote.forget()


def _message(e: BaseException) -> str:
    if isinstance(e, InspectorError):
        return str(e)
    return f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------------------------------------
# The client


class Cluster:
    """A connected Dask client and the passes that run on it."""

    def __init__(self, client: Any, task_bytes: int = TASK_BYTES,
                 input_format: str | None = None, allow_unsafe: bool = False) -> None:
        self.client = client
        self.task_bytes = task_bytes
        self.input_format = input_format  # --input-format: workers read every file as this
        self.allow_unsafe = allow_unsafe  # --allow-unsafe: as the client's own load
        from inspector.adapters.security.trust import everything_trusted

        self.trust = everything_trusted()  # what the client trusts, for the workers' loads

    def run(self, fn: Any, tasks: Sequence[Task], *args: Any, progress: Any = None) -> list[Any]:
        """Every task's results, in task order; the first failure ends the pass as one line
        naming the task's shard."""
        from distributed import as_completed

        futures = [self.client.submit(fn, t, *args, pure=False) for t in tasks]
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[Any] = [None] * len(tasks)
        try:
            for fut in as_completed(futures):
                i = index[fut.key]
                try:
                    status, got = fut.result()
                except Exception as e:  # noqa: BLE001 - a lost worker, a cancelled task
                    status, got = "error", _message(e)
                if status != "ok":
                    raise DaskError(f"the task reading {tasks[i].label} failed: {got}")
                out[i] = got
                if progress is not None:
                    progress.advance(tasks[i].nbytes)
        finally:
            self.client.cancel([f for f in futures if not f.done()])
        return out

    # -- stats -------------------------------------------------------------------------------

    def stats_pass(self, progress: Any = None, chunk: int | None = None) -> Any:
        """A :data:`inspector.value_stats.TensorPass` that runs on this cluster (``progress`` gets
        ``advance(nbytes)`` as tasks finish)."""
        from inspector import value_stats as stats

        def tensor_pass(jobs: list[tuple[Checkpoint, list[TensorEntry], Checkpoint | None]]
                        ) -> list[list[Any]]:
            tasks = []
            for k, (ckpt, entries, prev) in enumerate(jobs):
                tasks.extend(self._stats_tasks(k, ckpt, entries, prev))
            done = self.run(run_stats_task, tasks, chunk or stats.CHUNK, progress=progress)
            results: list[list[Any]] = [[None] * len(entries) for _, entries, _ in jobs]
            for part in done:
                for (k, i), partial, delta, note in part:
                    results[k][i] = (partial, delta, note)
            return results

        return tensor_pass

    def _stats_tasks(self, k: int, ckpt: Checkpoint, entries: list[TensorEntry],
                     prev: Checkpoint | None) -> list[Task]:
        from inspector import value_stats as stats

        pos, ppos = _indexer(ckpt), _indexer(prev) if prev is not None else {}
        shards: dict[str | None, str | None] = {}
        groups: dict[tuple, list[tuple[int, Any]]] = {}
        for i, t in enumerate(entries):
            before = stats.previous(prev, t)
            ref = _ref(pos[id(t)], t)
            pref = None if before is None else _ref(ppos[id(before)], before)
            key = (t.file, before.file if before is not None else None)
            groups.setdefault(key, []).append((t.nbytes or 0, ((k, i), ref, pref)))
        prev_shards: dict[str | None, str | None] = {}
        tasks = []
        for (file, pfile), items in groups.items():
            openers = [Opener(address(ckpt.source), self.input_format,
                              _shard(ckpt, file, shards), self.allow_unsafe, self.trust)]
            if prev is not None:
                openers.append(Opener(address(prev.source), self.input_format,
                                      _shard(prev, pfile, prev_shards), self.allow_unsafe,
                                      self.trust))
            tasks.extend(self._tasks(ckpt.path, file, openers, items))
        return tasks

    # -- diff --values -----------------------------------------------------------------------

    def diff_pass(self) -> Any:
        """A replacement for :func:`inspector.diffing.compare_values` that runs on this cluster."""
        from inspector import diffing as diff

        def values_pass(ckpt_a: Checkpoint, ckpt_b: Checkpoint, records: Sequence[Any],
                        atol: float = 0.0, rtol: float = 0.0, chunk: int | None = None,
                        progress: Any = None) -> list[Any]:
            if atol < 0 or rtol < 0:
                raise UsageError("--atol and --rtol must be >= 0")
            pa, pb = _indexer(ckpt_a), _indexer(ckpt_b)
            groups: dict[tuple, list[tuple[int, Any]]] = {}
            out = list(records)
            for i, r in enumerate(records):
                if not diff.comparable(r):
                    continue
                ra, rb = _ref(pa[id(r.a)], r.a), _ref(pb[id(r.b)], r.b)
                size = (r.a.nbytes or 0) + (r.b.nbytes or 0)
                groups.setdefault((r.a.file, r.b.file), []).append((size, (i, ra, rb)))
            shards_a: dict[str | None, str | None] = {}
            shards_b: dict[str | None, str | None] = {}
            tasks = []
            for (fa, fb), items in groups.items():
                openers = [Opener(address(ckpt_a.source), self.input_format,
                                  _shard(ckpt_a, fa, shards_a), self.allow_unsafe, self.trust),
                           Opener(address(ckpt_b.source), self.input_format,
                                  _shard(ckpt_b, fb, shards_b), self.allow_unsafe, self.trust)]
                tasks.extend(self._tasks(ckpt_a.path, fa, openers, items))
            for part in self.run(run_diff_task, tasks, atol, rtol, chunk, progress=progress):
                for i, stats, note in part:
                    out[i] = diff.with_values(out[i], stats, note)
            return out

        return values_pass

    def _tasks(self, path: str, file: str | None, openers: list[Opener],
               items: list[tuple[int, Any]]) -> Iterator[Task]:
        """One task per shard, split into tensor ranges of about ``task_bytes``."""
        where = f"{path.rstrip('/')}/{file}" if file else path
        runs = list(_split(items, self.task_bytes))
        for n, run in enumerate(runs):
            label = where if len(runs) == 1 else f"{where} (tensor range {n + 1} of {len(runs)})"
            yield Task(label, tuple(openers), tuple(it for _, it in run),
                       sum(size for size, _ in run))


# ---------------------------------------------------------------------------------------------
# Connecting


def timeout() -> float:
    try:
        return float(os.environ.get("INSPECTOR_DASK_TIMEOUT", TIMEOUT))
    except ValueError:
        return TIMEOUT


@contextmanager
def connect(spec: str, task_bytes: int = TASK_BYTES, input_format: str | None = None,
            allow_unsafe: bool = False) -> Iterator[Cluster]:
    """A :class:`Cluster` on ``spec``: ``local`` (a ``LocalCluster`` of worker processes, one
    per core), ``local:N`` (N workers) or a scheduler address (``tcp://host:8786``)."""
    try:
        import dask
        import distributed
    except ImportError:
        raise UsageError("--dask needs Dask: pip install 'ckpt-inspector[dask]'") from None
    import logging
    import warnings

    # a second scheduler's status HTTP server moves off a taken port 8787: not the user's concern
    warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    dask.config.set({"distributed.logging.distributed": "critical",
                     "distributed.admin.tick.limit": "1h"})
    cluster = None
    wait = timeout()
    local = spec == "local" or spec.startswith("local:")
    n = _local_workers(spec) if local else 0
    try:
        if local:
            cluster = distributed.LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address=None, silence_logs=logging.CRITICAL)
            client = distributed.Client(cluster, timeout=wait)
        else:
            client = distributed.Client(spec, timeout=wait)
    except (OSError, TimeoutError) as e:
        if cluster is not None:
            cluster.close()
        raise DaskError(f"cannot reach the Dask scheduler at {spec} within {wait:g} s "
                        f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                        ) from None
    except ValueError as e:
        raise UsageError(f"--dask {spec}: {e}") from None
    try:
        try:
            client.wait_for_workers(1, timeout=wait)
        except (OSError, TimeoutError):
            raise DaskError(f"the Dask scheduler at {spec} has no worker (waited {wait:g} s)"
                            ) from None
        yield Cluster(client, task_bytes, input_format, allow_unsafe)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _local_workers(spec: str) -> int:
    if spec == "local":
        return max(1, os.cpu_count() or 1)
    text = spec.partition(":")[2]
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"--dask {spec}: expected local, local:N (N >= 1) or tcp://host:port")
    return int(text)
