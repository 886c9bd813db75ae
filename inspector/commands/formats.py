"""``inspector formats``: the supported checkpoint formats."""

from __future__ import annotations

import argparse
import sys

NAME = "formats"
HELP = "list the supported checkpoint formats"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from inspector.reports.catalog import FORMATS

    p.add_argument("--format", choices=FORMATS, default="table", help="output format")


def run(args: argparse.Namespace) -> int:
    from inspector.reports.catalog import formats, render

    sys.stdout.write(render(formats(), args.format, args.style))
    return 0
