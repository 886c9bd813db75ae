"""``inspector show PATH...``: list every tensor with its shape, dtype, count and role.

A PATH may be a URL (``https://``, ``s3://``, any protocol fsspec knows with its package
installed; the ``remote`` extra). Several paths, or ``--format jsonl``, make a fleet: a directory
or prefix that is not itself a checkpoint stands for the checkpoints below it; ``--jobs`` of them
are read at once; one report per checkpoint (jsonl: one JSON object per line), a failure is
that checkpoint's line and the exit code is 2 at the end.
"""

from __future__ import annotations

import argparse
import gc
import sys

from inspector.adapters.security.policy import refuse_if_unsafe
from inspector.commands.options import add_allow_unsafe, add_input_format

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["refuse_if_unsafe"]  # kept importable from here

NAME = "show"
HELP = "list every tensor with its shape, dtype, count and role"
EXITS = ("0 success, 1 --globals found a dangerous global, "
         "2 error (or an unsafe pickle refused)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from inspector.reports.listing import SORTS
    from inspector.reports.render import FORMATS

    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="checkpoint file, shard index, model directory or URL; several (or a prefix) for "
        "a fleet",
    )
    p.add_argument(
        "--format",
        choices=(*FORMATS, "jsonl"),
        default="table",
        help="output format (jsonl: one JSON object per checkpoint and line)",
    )
    p.add_argument(
        "--jobs", type=int, default=8, metavar="N", help="checkpoints read at once (fleets)"
    )
    p.add_argument("--match", metavar="REGEX", help="only tensors whose name matches")
    p.add_argument("--sort", choices=SORTS, default="stored", help="row order")
    add_input_format(p)
    p.add_argument(
        "--scheme",
        metavar="NAME|FILE",
        default="auto",
        help="grouping scheme: a built-in (inspector schemes), a scheme YAML file, or auto "
        "(default: detected from the names)",
    )
    p.add_argument(
        "--depth",
        type=int,
        metavar="N",
        help="name components per group for schemes that take a depth (prefix; default 1)",
    )
    view = p.add_mutually_exclusive_group()
    view.add_argument(
        "--groups", action="store_true", help="one row per group instead of one per tensor"
    )
    view.add_argument(
        "--per-layer",
        action="store_true",
        help="groups with subtotals per captured layer (identical layers collapsed as layers.#)",
    )
    view.add_argument(
        "--globals",
        action="store_true",
        help="list the Python globals the checkpoint's pickle references (allowed, foreign, "
        "or able to execute code) instead of the tensors; never refused, nothing is run; "
        "exit 1 when any global is dangerous",
    )
    add_allow_unsafe(p)


def run(args: argparse.Namespace) -> int:
    # A listing builds many acyclic records: the cyclic GC would only walk them again and again
    # (0.15-0.3 s for 50,000 tensors); reference counting still frees memory.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if was_enabled:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    if len(args.paths) > 1 or args.format == "jsonl":
        return _fleet(args)
    args.path = args.paths[0]
    text, code = _report(args, args.path, stream=True)
    if isinstance(text, str):
        sys.stdout.write(text)
    else:  # JSON pieces, written as they are made: a big report is not held whole
        sys.stdout.writelines(text)
    return code


def _report(args: argparse.Namespace, path: object,
            stream: bool = False) -> tuple[str | Iterator[str], int]:
    """The rendered report of one checkpoint and its exit code; with ``stream``, a JSON
    report comes as an iterator of its pieces (:func:`inspector.reports.render.json_chunks`)."""
    from inspector.adapters.registry import load
    from inspector.reports.listing import listing
    from inspector.reports.render import render

    fmt = "json" if args.format == "jsonl" else args.format
    # --globals reports what the policy would refuse, so it loads under --allow-unsafe
    ckpt = load(path, args.input_format,  # type: ignore[arg-type]
                allow_unsafe=bool(args.allow_unsafe or args.globals))
    if args.globals:
        from inspector.pickle_globals import globals_report
        from inspector.reports.globals import render as render_globals

        report = globals_report(ckpt)
        code = 1 if any(r["severity"] == "danger" for r in report["globals"]) else 0
        return render_globals(report, fmt, args.style), code
    params = {"depth": args.depth} if args.depth is not None else None
    view = "layers" if args.per_layer else "groups" if args.groups else "tensors"
    # JSON and tables are written straight from the entries (no dict per tensor); per-layer
    # subtotals are made only where they are shown (JSON always carries everything).
    report = listing(ckpt, args.match, args.sort, args.scheme, params, lazy_rows=True,
                     per_layer=fmt == "json" or view == "layers")
    if stream and fmt == "json":
        from inspector.reports.render import json_chunks

        return json_chunks(report), 0
    return render(report, fmt, view, args.style), 0


def _fleet(args: argparse.Namespace) -> int:
    """One report per checkpoint, in order; failures reported and counted, never stopping; a
    progress bar (checkpoints done of the total) on a terminal."""
    from inspector.fleet import expand, run_ordered
    from inspector.progress import progress
    from inspector.reports.fleet import write_fleet

    def one(target):  # type: ignore[no-untyped-def]
        if target.error is not None:
            raise target.error
        return _report(args, target.source)

    targets = list(expand(args.paths))
    with progress(len(targets), "show", unit="checkpoint") as bar:
        return write_fleet(run_ordered(targets, one, args.jobs), args.format, bar)
