"""``inspector report PATH [PATH2] -o report.html``: the audit as one self-contained HTML file.

Example::

    $ inspector report fixtures/sockeye/sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp \\
        -o report.html
    $ inspector report fixtures/stats/torch/lm_nan_zero.pt --values \\
        -o stats.html
    $ inspector report before.pt after.pt --values -o diff.html
    $ inspector report --lineage fixtures/lineage/zoo -o lineage.html

The file holds the listing (sortable, filterable), a chart of parameters per group and
per-layer bars (inline SVG), the check verdict with mismatches highlighted and, with two paths,
their diff. ``--values`` reads the values (as ``inspector stats`` and ``diff --values`` do):
per-group norms, NaN/Inf and zeros with the findings by severity, statistics columns in the
listing, and with two paths the diff's value comparison. With ``--lineage`` the paths are a
store and the page is its lineage forest (``inspector lineage``) as a tree. It loads nothing
from the network:
attach it to a model card or a pull request.
"""

from __future__ import annotations

import argparse
import sys

from inspector.commands.options import (
    add_allow_unsafe,
    add_input_format,
    add_set_argument,
    parse_sets,
)

NAME = "report"
HELP = "write the audit (listing, charts, check, diff, value stats) as one self-contained HTML"
EXITS = "0 written, 2 error (or an unsafe pickle refused)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a checkpoint, or two to diff (file, shard index or model directory)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the HTML file to write ('-' for stdout)")
    p.add_argument("--arch", help="architecture for the check (default: recognised)")
    add_set_argument(p)
    p.add_argument("--scheme", metavar="NAME|FILE", help="grouping scheme (default: auto)")
    p.add_argument("--values", action="store_true",
                   help="read the values (streamed): statistics per tensor and group with "
                        "findings (NaN/Inf, zeros), and with two paths the diff of contents")
    p.add_argument("--lineage", action="store_true",
                   help="the PATHs are a store: draw which checkpoint derives from which "
                        "(as inspector lineage) as a tree")
    add_input_format(p)
    add_allow_unsafe(p)


def _lineage(args: argparse.Namespace) -> str:
    from inspector import __version__
    from inspector.lineage import run as lineage
    from inspector.reports.lineage_html import to_html

    forest, counts = lineage(args.paths, allow_unsafe=args.allow_unsafe)
    return to_html(forest, counts, __version__)


def run(args: argparse.Namespace) -> int:
    from inspector.adapters.errors import UsageError
    from inspector.adapters.registry import load
    from inspector.reports.audit import build
    from inspector.reports.html import to_html

    if len(args.paths) > 2 and not args.lineage:
        raise UsageError(f"report takes one or two paths, not {len(args.paths)} (--lineage "
                         "takes any number)")
    from inspector.progress import progress

    if args.output != "-":
        _check_output(args.output)
    if args.lineage:
        text = _lineage(args)
    else:
        ckpts = [load(p, args.input_format, allow_unsafe=args.allow_unsafe) for p in args.paths]
        per_pass = sum(t.nbytes or 0 for c in ckpts for t in c.unique())
        total = per_pass * (2 if len(ckpts) == 2 else 1) if args.values else 0
        with progress(total, "report --values") as bar:
            report = build(ckpts, args.arch, parse_sets(args.set), args.scheme, args.values,
                           bar if args.values else None)
        text = to_html(report)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise _output_error(e, args.output) from None
        sys.stderr.write(f"wrote {args.output} ({len(text.encode()):,} bytes)\n")
    return 0


def _check_output(path: str) -> None:
    """Refuse an output path that cannot be written before any work is done."""
    import os

    from inspector.adapters.errors import InspectorError

    if os.path.isdir(path):
        raise InspectorError("is a directory (give a file name to write)", path)
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise InspectorError(f"cannot write: no such directory {parent}", path)


def _output_error(e: OSError, path: str) -> Exception:
    from inspector.adapters.errors import InspectorError

    return InspectorError(f"cannot write ({e.strerror or e})", path)
