"""``inspector predict --arch A --set k=v ...``: the seed documents' hand calculation as a
command: expected tensors, per-group counts and total, with no file at all.

Example::

    $ inspector predict --arch sockeye-rnn --set num_layers=2:2 \\
        --set num_embed=512:512 --set rnn_num_hidden=512 \\
        --set rnn_attention_type=dot
    $ inspector predict --arch sockeye-rnn --set rnn_attention_type=dot \\
        --formula

``--formula`` prints the closed form: the total as an exact polynomial in the architecture's
symbols (``--symbol b=source_vocab_size,target_vocab_size@1`` adds or replaces one), the other
hyperparameters fixed at their values.
"""

from __future__ import annotations

import argparse
import sys

from inspector.commands.options import add_set_argument

NAME = "predict"
HELP = "expected tensors, group counts and total from hyperparameters alone (no file)"
FORMATS = ("table", "markdown", "json", "csv")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", required=True, help="architecture (inspector archs lists them)")
    add_set_argument(p)
    p.add_argument("--formula", action="store_true",
                   help="also print the closed form (total and each group) in the symbols")
    p.add_argument("--symbol", action="append", default=[], metavar="NAME=HP[,HP][@DEG]",
                   help="a closed-form variable setting these hyperparameters (HP may be name:i "
                        "for part i of an a:b pair)")
    p.add_argument("--scheme", help="grouping scheme name or YAML file (default: the arch's)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")


def run(args: argparse.Namespace) -> int:
    from inspector.api import predict

    result = predict(args.arch, set=args.set, formula=args.formula, symbol=args.symbol,
                     scheme=args.scheme)
    sys.stdout.write(result.render(args.format, args.style))
    return result.exit_code
