"""``inspector schemes``: list the built-in grouping schemes (or show one, or check a file).

Example::

    $ inspector schemes
    $ inspector schemes sockeye-rnn          # its groups and patterns
    $ inspector schemes my_scheme.yaml       # validate a user scheme
"""

from __future__ import annotations

import argparse
import sys

NAME = "schemes"
HELP = "list the grouping schemes used by --scheme (or show / validate one)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from inspector.reports.catalog import FORMATS

    p.add_argument("scheme", nargs="?", metavar="NAME|FILE", help="show this scheme's rules")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="output format of the list (a scheme's rules are text)")


def run(args: argparse.Namespace) -> int:
    from inspector import grouping
    from inspector.reports.render import sanitize

    out = []
    if args.scheme is None:
        from inspector.reports.catalog import render, schemes

        sys.stdout.write(render(schemes(), args.format, args.style))
        return 0
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
