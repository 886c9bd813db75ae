"""``inspector show PATH``: list every tensor with its shape, dtype, count and role."""

from __future__ import annotations

import argparse
import gc
import sys

from inspector.pickle_policy import add_allow_unsafe, refuse_if_unsafe

__all__ = ["refuse_if_unsafe"]  # kept importable from here

NAME = "show"
HELP = "list every tensor with its shape, dtype, count and role"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from inspector.reports.listing import SORTS
    from inspector.reports.render import FORMATS

    p.add_argument("path", help="checkpoint file, shard index or model directory")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument("--match", metavar="REGEX", help="only tensors whose name matches")
    p.add_argument("--sort", choices=SORTS, default="stored", help="row order")
    p.add_argument("--input-format", metavar="NAME", help="skip detection and read as this format")
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
    from inspector.adapters.registry import load
    from inspector.reports.listing import listing
    from inspector.reports.render import render

    ckpt = load(args.path, args.input_format)
    if args.globals:
        from inspector.pickle_globals import globals_report, render_globals

        report = globals_report(ckpt)
        sys.stdout.write(render_globals(report, args.format))
        return 1 if any(r["severity"] == "danger" for r in report["globals"]) else 0
    refuse_if_unsafe(ckpt, args.allow_unsafe)
    params = {"depth": args.depth} if args.depth is not None else None
    report = listing(ckpt, args.match, args.sort, args.scheme, params)
    view = "layers" if args.per_layer else "groups" if args.groups else "tensors"
    if args.format == "json":  # written as it is made: a big report is not held whole
        from inspector.reports.render import json_chunks

        sys.stdout.writelines(json_chunks(report))
    else:
        sys.stdout.write(render(report, args.format, view))
    return 0
