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
import sys

from inspector.commands.options import add_set_argument

NAME = "budget"
HELP = "hyperparameters whose predicted parameter count hits a target (inverse of predict)"
FORMATS = ("table", "markdown", "json", "csv")


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


def run(args: argparse.Namespace) -> int:
    from inspector.api import budget

    result = budget(args.arch, target=args.target, solve=args.solve, set=args.set,
                    range=args.range, step=args.step, tie=args.tie, under=args.under,
                    compare=args.compare, top=args.top, scheme=args.scheme)
    sys.stdout.write(result.render(args.format, args.style))
    return result.exit_code
