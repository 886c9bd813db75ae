"""``inspector check PATH``: set a checkpoint next to what its hyperparameters predict.

Example::

    $ inspector check fixtures/sockeye/sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp
    $ inspector check model_dir --set rnn_num_hidden=32 --format json

Hyperparameters come from the checkpoint's own config (Sockeye ``args.yaml``, ...), ``--set``
overrides them, and what neither gives is inferred from the shapes where they determine it
(reported as ``inferred``). Three verdicts (:mod:`inspector.formulas.check`) and their exit codes
are below; a pickle whose globals a loader would run is refused (exit 2) unless
``--allow-unsafe``, and then never verified (exit 1).
"""

from __future__ import annotations

import argparse
import sys

from inspector.commands.options import add_allow_unsafe, add_input_format, add_set_argument

NAME = "check"
HELP = "compare a checkpoint's tensors and group counts with the formula prediction"
FORMATS = ("table", "markdown", "json", "csv")
EXITS = ("0 verified, 1 mismatch (or an unsafe pickle read with --allow-unsafe), "
         "3 incomplete (--strict: 1), 2 error (or an unsafe pickle refused)")
EPILOG = """verdicts and exit codes:
  verified    0  every stored tensor was predicted with its exact shape, every predicted
                 tensor was found
  mismatch    1  a wrong shape, a missing or unexpected tensor of a part the architecture
                 models, or an inconsistent structure (a repeated block, optimizer state or
                 tied pair whose shape disagrees)
  incomplete  3  parts are not modelled (unknown option or layer, unrecognised tensors; each
                 named with the reason, its tensors listed as not_modelled; everything else is
                 still checked), or no architecture applies and only the structure was audited
                 ("incomplete (structure consistent)"); with --strict: exit 1
  unsafe      1  a pickle whose globals a loader would run, read with --allow-unsafe
                 (never verified); without it the file is refused: exit 2
  error       2  unreadable file, bad arguments"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="checkpoint file, shard index or model directory")
    p.add_argument("--arch", help="architecture (default: recognised from the checkpoint)")
    add_set_argument(p)
    p.add_argument("--scheme", help="grouping scheme name or YAML file (default: the arch's)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    add_input_format(p)
    add_allow_unsafe(p)
    p.add_argument("--strict", action="store_true",
                   help="an incomplete check fails too (exit 1 instead of 3)")
    p.epilog = EPILOG


def run(args: argparse.Namespace) -> int:
    from inspector.api import check

    result = check(args.path, arch=args.arch, set=args.set, scheme=args.scheme,
                   input_format=args.input_format, allow_unsafe=args.allow_unsafe,
                   strict=args.strict)
    sys.stdout.write(result.render(args.format, args.style))
    return result.exit_code
