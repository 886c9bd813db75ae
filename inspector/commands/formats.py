"""``inspector formats``: the supported checkpoint formats."""

from __future__ import annotations

import argparse
import sys

NAME = "formats"
HELP = "list the supported checkpoint formats"


def add_arguments(p: argparse.ArgumentParser) -> None:
    del p  # no options


def run(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from inspector.adapters.registry import formats

    rows = [(a.name, ", ".join(a.extensions), a.description) for a in formats()]
    sys.stdout.write(tabulate(rows, ["format", "usual names", "what"], "simple") + "\n")
    sys.stdout.write("\nDetection is by content (magic bytes), not by the file name.\n")
    return 0
