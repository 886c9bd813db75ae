"""The verbs as functions: :func:`check`, :func:`diff`, :func:`scan`, :func:`stats`,
:func:`predict` and :func:`budget`, exported as ``inspector.check`` and so on.

Each takes what its verb takes (paths, URLs, or checkpoints from :func:`inspector.load`) and the
verb's options under the same names (``--allow-unsafe`` is ``allow_unsafe``), and returns a
typed, immutable result (:mod:`inspector.results`) whose ``to_dict()`` is the verb's JSON
document. The command line calls these functions, so the two cannot disagree. Errors are
:class:`~inspector.adapters.errors.InspectorError` and its subclasses.

>>> import inspector
>>> r = inspector.check("fixtures/sockeye/sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp")  # doctest: +SKIP
>>> r.verdict, r.exit_code  # doctest: +SKIP
('verified', 0)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from inspector.adapters.errors import NotFoundError, UsageError
from inspector.adapters.model import Checkpoint
from inspector.results import (
    BudgetResult,
    CheckResult,
    DiffResult,
    PredictResult,
    ScanResult,
    StatsResult,
)

__all__ = ["budget", "check", "diff", "predict", "scan", "stats"]

PathLike: TypeAlias = "str | os.PathLike[str]"
CheckpointLike: TypeAlias = "str | os.PathLike[str] | Checkpoint"
Sets: TypeAlias = "Mapping[str, Any] | Sequence[str] | None"
"""Hyperparameters: a mapping, or ``"KEY=VALUE"`` strings as ``--set`` takes them."""


def _sets(items: Sets) -> dict[str, Any]:
    if items is None:
        return {}
    if isinstance(items, Mapping):
        return dict(items)
    from inspector.commands.options import parse_sets

    return dict(parse_sets([items] if isinstance(items, str) else list(items)))


def _load(target: CheckpointLike, input_format: str | None, allow_unsafe: bool) -> Checkpoint:
    if isinstance(target, Checkpoint):
        return target
    from inspector.adapters.registry import load

    # a remote run's listing (value_stats.expand) gives sources: loaded as they are
    path = os.fspath(target) if isinstance(target, (str, os.PathLike)) else target
    return load(path, input_format, allow_unsafe=allow_unsafe)


def _words(value: str | Sequence[str]) -> list[str]:
    """``"a,b"`` or ``["a", "b,c"]`` as names (the CLI's comma-separated lists)."""
    items = [value] if isinstance(value, str) else list(value)
    return [w.strip() for item in items for w in item.split(",") if w.strip()]


# ---------------------------------------------------------------------------------------------


def check(path: CheckpointLike, *, arch: str | None = None, set: Sets = None,
          scheme: str | None = None, input_format: str | None = None,
          allow_unsafe: bool = False, strict: bool = False) -> CheckResult:
    """Set a checkpoint next to what its hyperparameters predict (``inspector check``).

    ``arch``: the architecture (default: recognised from the checkpoint); ``set``: hyperparameters
    that override the checkpoint's own; ``scheme``: the grouping scheme; ``allow_unsafe``: read
    a pickle whose globals a loader would run (never verified then: verdict ``unsafe``);
    ``strict``: an ``incomplete`` verdict exits 1 instead of 3 (:attr:`CheckResult.exit_code`).
    """
    from inspector.adapters.security.policy import dangerous
    from inspector.formulas import get
    from inspector.formulas.check import check as run_check
    from inspector.formulas.check_result import report_of

    ckpt = _load(path, input_format, allow_unsafe)
    result = run_check(ckpt, get(arch) if arch else None, _sets(set), scheme)
    return CheckResult(report_of(result, dangerous(ckpt)), strict=strict)


def diff(a: CheckpointLike, b: CheckpointLike, *, all: bool = False, match: str | None = None,
         role: Sequence[str] = (), expand: bool = False, values: bool = False,
         atol: float = 0.0, rtol: float = 0.0, strip_prefix: Sequence[str] = (),
         map: PathLike | None = None, align: str = "names", layout: str = "auto",
         scheme: str | None = None, input_format: str | None = None, dask: str | None = None,
         allow_unsafe: bool = False, progress: bool = False) -> DiffResult:
    """What differs between two checkpoints of any formats (``inspector diff``).

    ``values``: compare contents too (streamed), within ``atol`` / ``rtol``; ``all``: keep the
    tensors that did not change; ``match`` / ``role``: only these tensors; ``expand``: no
    collapsed rows; ``strip_prefix``, ``map`` (a file of regex renames), ``align`` (``names`` or
    ``shapes``), ``layout`` (a layout map name or file, ``auto`` or ``none``) pair the names;
    ``dask``: read the values on a Dask cluster; ``progress``: a bar on a terminal's stderr.
    """
    from inspector import diffing

    if dask and not values:
        raise UsageError("--dask reads values: use it with --values")
    ckpts = [_load(p, input_format, allow_unsafe) for p in (a, b)]
    total = sum(t.nbytes or 0 for c in ckpts for t in c.unique()) if values and progress else 0
    with _progress(progress, total, "diff --values") as bar, \
            _cluster(dask, input_format, allow_unsafe) as cluster:
        result = diffing.diff(
            ckpts[0], ckpts[1], strip_prefixes=list(strip_prefix),
            renames=os.fspath(map) if map else (), align_mode=align, values=values, atol=atol,
            rtol=rtol, scheme=scheme, match=match, roles=list(role),
            progress=bar if values and progress else None,
            values_pass=None if cluster is None else cluster.diff_pass(), layout=layout,
        )
    return DiffResult(diffing.report(result, all_records=all, expand=expand))


def scan(paths: PathLike | Sequence[PathLike], *, jobs: int = 8, progress: bool = False,
         on_file: Callable[[Mapping[str, Any]], None] | None = None,
         trust: Sequence[str] = ()) -> ScanResult:
    """A security verdict for every file under ``paths`` (files, directories, URLs), as
    ``inspector scan`` gives it; nothing from a file is imported or run.

    ``jobs``: files examined at once; ``on_file``: called with each file's record (an item of
    ``to_dict()["files"]``) as soon as it is examined, in order; ``progress``: a bar on a
    terminal's stderr; ``trust``: names the user vouches for (``MODULE.NAME``, as ``--trust``).
    :attr:`ScanResult.exit_code` is picklescan's: 1 if any file is dangerous, else 2 if any
    could not be fully examined, else 0.
    """
    from inspector.adapters.security.scan import SCHEMA, collect, scan_file, summary
    from inspector.fleet import run_ordered

    names = [os.fspath(p) for p in ([paths] if isinstance(paths, (str, os.PathLike))
                                    else paths)]
    if not names:
        raise UsageError("scan needs at least one path")
    missing = [p for p in names if not _exists(p)]
    if missing:
        raise NotFoundError("no such file or directory", missing[0])
    from contextlib import nullcontext

    files, notes = collect(names)
    results = []
    if trust:
        from inspector.adapters.security.trust import trusting
    with trusting(list(trust)) if trust else nullcontext(), \
            _progress(progress, len(files), "scan", unit="file") as bar:
        for _, r in run_ordered(files, scan_file, jobs):
            if isinstance(r, Exception):  # scan_file turns bad files into results: a bug
                raise r
            results.append(r)
            if on_file is not None:
                with bar.paused():
                    on_file(r.to_dict())
            bar.advance(1)
    return ScanResult({"schema": SCHEMA, "files": [r.to_dict() for r in results],
                       "not_followed": notes, "summary": summary(results, notes)})


def _exists(p: str) -> bool:
    from inspector.adapters.source import is_url

    if is_url(p):
        from inspector.adapters.errors import InspectorError
        from inspector.adapters.source import as_source

        try:
            return bool(as_source(p).exists())
        except InspectorError:
            return True  # scanned: the error becomes its line
    return os.path.lexists(p)


def stats(paths: CheckpointLike | Sequence[CheckpointLike], *, match: str | None = None,
          groups: bool = False, scheme: str | None = None, threads: int | None = None,
          input_format: str | None = None, dask: str | None = None,
          allow_unsafe: bool = False, progress: bool = False) -> StatsResult:
    """Value statistics (``inspector stats``): of one checkpoint, per tensor and group (NaN/Inf,
    zeros, norms) with findings; of several, or of one directory of a run's checkpoints, per
    group and checkpoint the norm and its relative change.

    ``match``: only tensors whose name matches; ``groups``: the rows (and table) are the
    groups; ``threads``: tensors read in parallel; ``dask``: read the values on a Dask cluster.
    :attr:`StatsResult.exit_code` is 1 when an error finding (NaN or Inf) was made.
    """
    from inspector import value_stats

    items = [paths] if isinstance(paths, (str, os.PathLike, Checkpoint)) else list(paths)
    if not items:
        raise UsageError("stats needs at least one path")
    names = [os.fspath(p) for p in items if not isinstance(p, Checkpoint)]
    if len(names) == len(items):  # paths only: a directory may be a run of checkpoints
        items = list(value_stats.expand(names))
    ckpts = [_load(p, input_format, allow_unsafe) for p in items]
    total = sum(t.nbytes or 0 for c in ckpts for t in value_stats.selected(c, match)) \
        if progress else 0
    with _progress(progress, total, "stats") as bar, \
            _cluster(dask, input_format, allow_unsafe) as cluster:
        tensor_pass = None if cluster is None else cluster.stats_pass(bar)
        if len(ckpts) == 1:
            results = None if tensor_pass is None else tensor_pass(
                [(ckpts[0], value_stats.selected(ckpts[0], match), None)])[0]
            one = value_stats.file_stats(ckpts[0], match=match, scheme=scheme, threads=threads,
                                         progress=bar, results=results)
            return StatsResult(value_stats.report(one), errors=one.errors, groups=groups)
        run = value_stats.run_stats(ckpts, match=match, scheme=scheme, threads=threads,
                                    progress=bar, tensor_pass=tensor_pass)
        return StatsResult(value_stats.run_report(run), errors=run.errors, groups=groups)


def _progress(on: bool, total: int, label: str, unit: str = "B") -> Any:
    """The stderr progress bar of a pass (drawn only on a terminal), or one that never draws."""
    from inspector.progress import progress

    bar = progress(total, label, unit=unit)
    if not on:
        bar.close()
    return bar


def _cluster(dask: str | None, input_format: str | None, allow_unsafe: bool) -> Any:
    """A connected Dask cluster for ``dask`` (an address, ``local``, ``local:N``), else a
    context of None."""
    if not dask:
        from contextlib import nullcontext

        return nullcontext(None)
    from inspector import cluster

    return cluster.connect(dask, input_format=input_format, allow_unsafe=allow_unsafe)


def predict(arch: str, *, set: Sets = None, formula: bool = False, symbol: Sequence[str] = (),
            scheme: str | None = None) -> PredictResult:
    """An architecture's expected tensors, group counts and total from hyperparameters alone
    (``inspector predict``); ``formula``: also the closed form, in the variables ``symbol``
    (``"NAME=HP[,HP][@DEG]"``) adds or replaces."""
    from inspector.reports.predict import build

    return PredictResult(build(arch, _sets(set), scheme, formula, list(symbol)))


def budget(arch: str | Sequence[str], *, target: int | str, solve: str | Sequence[str],
           set: Sets = None, range: Sequence[str] = (), step: int = 1, tie: Sequence[str] = (),
           under: bool = False, compare: bool = False, top: int | None = None,
           scheme: str | None = None) -> BudgetResult:
    """The hyperparameters whose predicted parameter count hits ``target`` (``inspector
    budget``: ``predict`` backwards).

    ``target``: a count (``103360``, ``"150k"``, ``"1.5M"``); ``solve``: the free integer
    hyperparameter(s) (``"d_model"`` or two); ``set``: fixed ones (``"ARCH:K=V"`` keys apply to
    that architecture only); ``range``: ``"[PARAM=]LO:HI"`` values to search; ``tie``:
    ``"PARAM=EXPR"`` derived ones; ``under``: never exceed the target; ``compare``: solve each
    architecture of ``arch`` at the same target; ``top``: candidates to keep (default 5, 1 with
    ``compare``).
    """
    from inspector import budget_solver
    from inspector.reports.budget import build

    archs = _words(arch)
    if len(archs) > 1 and not compare:
        raise UsageError("several --arch values need --compare")
    free = _words(solve)
    sets = _sets(set)
    scoped: dict[str, dict[str, Any]] = {}
    for key in [k for k in sets if ":" in k]:
        name, _, hp = key.partition(":")
        scoped.setdefault(name, {})[hp] = sets.pop(key)
    unknown = sorted(name for name in scoped if name not in archs)
    if unknown:
        raise UsageError(f"--set for an architecture not compared: {', '.join(unknown)}")
    ranges: dict[str, tuple[int, int | None]] = {}
    for text in range:
        named, bounds = budget_solver.parse_range(text)
        for n in [named] if named else free:
            ranges[n] = bounds
    ties = dict(budget_solver.parse_tie(t) for t in tie)
    count = target if isinstance(target, int) else budget_solver.parse_target(target)
    common: dict[str, Any] = dict(ranges=ranges, step=step, ties=ties, under=under,
                                  scheme=scheme)
    if compare:
        results = budget_solver.compare(archs, count, free, sets, scoped, top=top or 1,
                                        **common)
    else:
        results = [budget_solver.solve(archs[0], count, free,
                                       {**sets, **scoped.get(archs[0], {})}, top=top or 5,
                                       **common)]
    return BudgetResult(build(count, compare, results))
