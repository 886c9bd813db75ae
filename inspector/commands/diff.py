r"""``inspector diff A B``: what differs between two checkpoints of any formats.

Example::

    $ cd fixtures/diff/torch_finetune
    $ inspector diff before.pt after.pt --values
    $ inspector diff state_dict.pt lightning.ckpt --role parameter \
        --match 'layers\.'

Two layouts of one model are paired by the producer's own name mapping (``--layout``; built-in:
``hf-gguf-llama``, llama.cpp's ``convert_hf_to_gguf.py`` names, its q/k row permutation undone,
Mixtral's stacked experts; ``dcp-torch``, prefixes found from the names; ``ct2-onmt-py`` /
``ct2-fairseq``, CTranslate2's converters, fused q/k/v concatenated): "did the conversion keep
my model?" With ``--values`` each tensor's conversion error (max |a-b|, relative L2) and a
summary per group and stored type (Q8_0, F16, ...).

Example::

    $ inspector diff llama_hf/ llama.q8_0.gguf --values

Exit codes (h5diff-style, to gate CI): 0 no structural difference (with ``--values``: and no
changed values), 1 differences, 2 error. Without ``--values`` only names, shapes and dtypes are
compared: tensors that agree in those are "values not compared", never "unchanged".
"""

from __future__ import annotations

import argparse
import sys

from inspector.commands.options import add_allow_unsafe, add_dask, add_input_format

NAME = "diff"
HELP = "compare two checkpoints: added, removed, reshaped, retyped and (--values) changed tensors"
EXITS = ("0 same (structure; with --values also contents), 1 different, "
         "2 error (or an unsafe pickle refused)")
ROLES = ("parameter", "buffer", "optimizer", "other")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="first checkpoint (file, shard index or model directory)")
    p.add_argument("b", help="second checkpoint")
    from inspector.reports.render_diff import FORMATS

    p.add_argument("--format", choices=FORMATS, default="table",
                   help="output format: table (default), markdown, json (inspector.diff/1) or "
                        "csv (one row per tensor, never collapsed)")
    p.add_argument("--all", action="store_true",
                   help="also list tensors that did not change (or, without --values, whose "
                        "name, shape and dtype agree)")
    p.add_argument("--match", metavar="REGEX",
                   help="only tensors whose aligned or stored name matches; counts, groups and "
                        "the exit code are over those")
    p.add_argument("--role", action="append", choices=ROLES, default=[],
                   help="only tensors of this role on either side (repeatable), e.g. --role "
                        "parameter to leave optimizer state out")
    p.add_argument("--expand", action="store_true",
                   help="one row per tensor: do not collapse rows repeated across layers")
    p.add_argument("--values", action="store_true",
                   help="compare the contents of aligned tensors (streamed, bounded memory)")
    p.add_argument("--atol", type=float, default=0.0,
                   help="absolute tolerance for --values (default 0: any difference counts)")
    p.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for --values")
    p.add_argument("--strip-prefix", action="append", default=[], metavar="PREFIX",
                   help="also strip this name prefix (repeatable; arg:, aux:, module., "
                   "_orig_mod., model. always are)")
    p.add_argument("--map", metavar="FILE",
                   help="regex renames, one 'REGEX -> REPLACEMENT' per line, applied to both sides")
    p.add_argument("--align", choices=("names", "shapes"), default="names",
                   help="shapes: pair leftover tensors whose shape is unique on both sides")
    p.add_argument("--layout", metavar="NAME|FILE", default="auto",
                   help="pair two layouts of one model by the producer's name mapping (e.g. "
                        "hf-gguf-llama: Hugging Face <-> llama.cpp GGUF; dcp-torch); auto "
                        "(default): a built-in map when A and B are two layouts it knows; none")
    p.add_argument("--scheme", metavar="NAME|FILE", default=None,
                   help="grouping scheme for the per-group deltas (default: auto)")
    add_input_format(p, "read both files as this format")
    add_dask(p)
    add_allow_unsafe(p)


def run(args: argparse.Namespace) -> int:
    from inspector.api import diff

    result = diff(args.a, args.b, all=args.all, match=args.match, role=args.role,
                  expand=args.expand, values=args.values, atol=args.atol, rtol=args.rtol,
                  strip_prefix=args.strip_prefix, map=args.map, align=args.align,
                  layout=args.layout, scheme=args.scheme, input_format=args.input_format,
                  dask=args.dask, allow_unsafe=args.allow_unsafe, progress=True)
    sys.stdout.write(result.render(args.format, args.style))
    return result.exit_code
