"""``inspector archs [NAME]``: the architectures ``check`` and ``predict`` know, with their
hyperparameters (the producer's own names) and defaults.

Example::

    $ inspector archs
    $ inspector archs sockeye-rnn
"""

from __future__ import annotations

import argparse
import sys

NAME = "archs"
HELP = "list the architectures of check/predict with their hyperparameters and defaults"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="show only this architecture")


def _value(v) -> str:
    return "-" if v is None else str(v)


def run(args: argparse.Namespace) -> int:
    from inspector.formulas import archs, get

    chosen = [get(args.name)] if args.name else archs()
    out = []
    for a in chosen:
        out.append(f"{a.name}: {a.description}")
        width = max((len(h.name) for h in a.hparams), default=0)
        for h in a.hparams:
            choices = f" [{'|'.join(map(str, h.choices))}]" if h.choices else ""
            out.append(f"  {h.name:<{width}}  {_value(h.default):<12} {h.help}{choices}")
        if a.symbols:
            out.append("  closed-form symbols: " + ", ".join(
                f"{s.name}={'/'.join(s.targets)}" for s in a.symbols))
        out.append("")
    sys.stdout.write("\n".join(out))
    return 0
