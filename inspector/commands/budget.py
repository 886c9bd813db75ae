"""``inspector budget``: the hyperparameters whose predicted parameter count hits a budget
(``predict`` run backwards, on the same formula engine).

Example::

    $ inspector budget --arch rau-lstm --set vocab_size=64 \\
        --set num_layers=3 --target 103360 --solve hidden_units
    $ inspector budget --arch rau-transformer --set vocab_size=64 \\
        --set num_layers=3 --set num_heads=4 --target 150k --solve d_model \\
        --tie feedforward_size=4*d_model
    $ inspector budget --compare \\
        --arch rau-lstm,rau-transformer,rau-stack-rnn --set vocab_size=64 \\
        --set num_layers=3 --set num_heads=4 --set stack_size=32 \\
        --tie feedforward_size=4*d_model --target 100000 \\
        --solve hidden_units,d_model

With ``--compare`` each architecture solves the first ``--solve`` name it has; a ``--set`` or
``--tie`` applies where the architecture has the names it mentions, ``--set ARCH:K=V`` to that
architecture only. Values the architecture refuses (d_model not divisible by num_heads, ...)
are skipped and reported.
"""

from __future__ import annotations

import argparse
import re
import sys

from inspector.commands.options import add_set_argument, parse_sets

NAME = "budget"
HELP = "hyperparameters whose predicted parameter count hits a target (inverse of predict)"
FORMATS = ("table", "markdown", "json", "csv")
_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", required=True, action="append",
                   help="architecture; with --compare several (repeat or comma-separate)")
    add_set_argument(p)
    p.add_argument("--target", required=True,
                   help="parameter budget: 103360, 103,360, 150k, 1.5M")
    p.add_argument("--solve", required=True, metavar="PARAM[,PARAM2]",
                   help="the free integer hyperparameter(s); with --compare, candidates in order")
    p.add_argument("--range", action="append", default=[], metavar="[PARAM=]LO:HI",
                   help="values to search (HI may be left empty: found by doubling)")
    p.add_argument("--step", type=int, default=1, help="search only LO, LO+STEP, ...")
    p.add_argument("--tie", action="append", default=[], metavar="PARAM=EXPR",
                   help="derive a hyperparameter, e.g. feedforward_size=4*d_model")
    p.add_argument("--under", action="store_true", help="never exceed the target")
    p.add_argument("--compare", action="store_true",
                   help="solve each --arch at the same target, side by side")
    p.add_argument("--top", type=int, help="candidates to list (default 5; 1 with --compare)")
    p.add_argument("--scheme", help="grouping scheme for the breakdown (default: the arch's, "
                                    "else by formula block)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")


def parse_target(text: str) -> int:
    from inspector.adapters.errors import UsageError

    m = re.fullmatch(r"\s*([0-9][0-9_,]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kKmMgGbB]?)\s*", text)
    if m is None:
        raise UsageError(f"--target {text!r}: expected a count such as 103360, 150k or 1.5M")
    number = float(m.group(1).replace(",", "").replace("_", ""))
    return round(number * _SUFFIX[m.group(2).lower()])


def run(args: argparse.Namespace) -> int:
    from inspector import budget
    from inspector.adapters.errors import UsageError
    from inspector.reports.budget import build, render

    archs = [a.strip() for item in args.arch for a in item.split(",") if a.strip()]
    if len(archs) > 1 and not args.compare:
        raise UsageError("several --arch values need --compare")
    solve = [s.strip() for s in args.solve.split(",") if s.strip()]
    sets = parse_sets(args.set)
    scoped: dict[str, dict[str, str]] = {}
    for key in [k for k in sets if ":" in k]:
        arch, _, name = key.partition(":")
        scoped.setdefault(arch, {})[name] = sets.pop(key)
    unknown = set(scoped) - set(archs)
    if unknown:
        raise UsageError(f"--set for an architecture not compared: {', '.join(sorted(unknown))}")
    ranges: dict[str, tuple[int, int | None]] = {}
    for text in args.range:
        name, bounds = budget.parse_range(text)
        for n in [name] if name else solve:
            ranges[n] = bounds
    ties = dict(budget.parse_tie(t) for t in args.tie)
    target = parse_target(args.target)
    common = dict(ranges=ranges, step=args.step, ties=ties, under=args.under,
                  scheme=args.scheme)
    if args.compare:
        results = budget.compare(archs, target, solve, sets, scoped, top=args.top or 1,
                                 **common)
    else:
        results = [budget.solve(archs[0], target, solve, {**sets, **scoped.get(archs[0], {})},
                                top=args.top or 5, **common)]
    report = build(target, args.compare, results)
    sys.stdout.write(render(report, args.format, args.style))
    return 0
