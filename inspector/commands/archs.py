"""``inspector archs [NAME]``: the architectures ``check`` and ``predict`` know, one line each;
with a NAME (or ``--verbose``), its hyperparameters (the producer's own names) and defaults.

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
    from inspector.reports.catalog import FORMATS

    p.add_argument("name", nargs="?", help="show only this architecture")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: one block per architecture; table: one row "
                        "per hyperparameter)")


def _value(v) -> str:
    return "-" if v is None else str(v)


def _brief(found: list, style) -> str:
    """One line per architecture: name, hyperparameter count, description."""
    width = max((len(a.name) for a in found), default=0)
    out = [style.wrap(f"{a.name:<{width}}  {len(a.hparams):>3} hp  {a.description}",
                      " " * (width + 10)) for a in found]
    out += ["", style.wrap(f"{len(found)} architectures; 'inspector archs NAME' for one's "
                           "hyperparameters, --verbose for all")]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    from inspector.formulas import archs, get

    if args.format:
        from inspector.reports.catalog import archs as report
        from inspector.reports.catalog import render

        sys.stdout.write(render(report(args.name), args.format, args.style))
        return 0
    if not args.name and not args.style.verbose:
        sys.stdout.write(_brief(archs(), args.style))
        return 0
    chosen = [get(args.name)] if args.name else archs()
    out = []
    for a in chosen:
        out.append(args.style.wrap(f"{a.name}: {a.description}"))
        width = max((len(h.name) for h in a.hparams), default=0)
        for h in a.hparams:
            choices = f" [{'|'.join(map(str, h.choices))}]" if h.choices else ""
            line = f"  {h.name:<{width}}  {_value(h.default):<12} {h.help}{choices}"
            out.append(args.style.wrap(line, " " * (width + 17)))
        if a.symbols:
            out.append(args.style.wrap("  closed-form symbols: " + ", ".join(
                f"{s.name}={'/'.join(s.targets)}" for s in a.symbols), "    "))
        out.append("")
    sys.stdout.write("\n".join(out))
    return 0
