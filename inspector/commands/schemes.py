"""``inspector schemes``: list the built-in grouping schemes (or show one, or check a file).

Example::

    $ inspector schemes
    $ inspector schemes sockeye-rnn          # its groups and patterns
    $ inspector schemes my_scheme.yaml       # validate a user scheme
"""

from __future__ import annotations

import argparse
import re
import sys

NAME = "schemes"
HELP = "list the grouping schemes used by --scheme (or show / validate one)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scheme", nargs="?", metavar="NAME|FILE", help="show this scheme's rules")


def run(args: argparse.Namespace) -> int:
    from inspector import grouping
    from inspector.reports.render import sanitize

    out = []
    if args.scheme is None:
        names = grouping.builtin_names()
        width = max(len(n) for n in names)
        for n in names:
            s = grouping.get_scheme(n)
            first = re.split(r"[.:;] ", s.description)[0].rstrip(".")
            out.append(f"{n:<{width}}  {first}")
        out.append("")
        out.append("auto (the default) picks the best-scoring scheme for a checkpoint's names, "
                   f"falling back to {grouping.FALLBACK}.")
    else:
        s = grouping.get_scheme(args.scheme)
        out.append(f"{sanitize(s.name)}  ({sanitize(s.source)})")
        out.append(sanitize(s.description))
        for k, v in s.parameters.items():
            out.append(f"parameter {k} = {v}")
        if s.detect:
            out.append(f"detect (selected when the score reaches {s.min_score}):")
            for d in s.detect:
                on = "format" if d.on_format else "names"
                out.append(f"  {d.score:+d}  {on} /{sanitize(d.pattern.pattern)}/")
        out.append("groups (first match wins; unmatched names go to other):")
        for g in s.groups:
            flag = "  [embedding]" if g.embedding else ""
            out.append(f"  {sanitize(g.name)}{flag}")
            for rx in g.patterns:
                out.append(f"      /{sanitize(rx.pattern)}/")
    sys.stdout.write("\n".join(out) + "\n")
    return 0
