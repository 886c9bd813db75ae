"""``inspector stats PATH [PATH ...]``: value statistics of a checkpoint or of a training run.

One checkpoint: per tensor and per group count, min, max, mean, std, L2 norm, NaN/Inf, zeros,
subnormals and float16 overflows, with findings (NaN or Inf: error; a parameter all zeros or
constant, a layer whose norm is far from the others of its kind: warning). Several checkpoints,
or one directory of a run (params.NNNNN, epoch=*.ckpt, checkpoint-N/, ordered naturally): per
group and checkpoint the norm and the relative change from the previous checkpoint, with groups
that never changed, the first NaN/Inf and sudden jumps flagged.

Examples::

    $ inspector stats fixtures/stats/torch/lm_nan_zero.pt
    $ inspector stats fixtures/stats/sockeye1_run --format csv
    $ inspector stats s3://bucket/model/ --dask tcp://scheduler:8786

With ``--dask`` the values are read on a Dask cluster: each shard (or range of tensors) is a
task that reads its own bytes where it runs; the numbers are the same as without it.

Exit codes: 0 no error finding, 1 an error finding (NaN or Inf), 2 bad input (nothing is
reported then: a report is only printed once every value was read).
"""

from __future__ import annotations

import argparse
import sys

from inspector.commands.options import add_allow_unsafe, add_dask, add_input_format

NAME = "stats"
EXITS = "0 no error finding, 1 an error finding (NaN or Inf), 2 error (or an unsafe pickle refused)"
HELP = "value statistics per tensor and group (NaN/Inf, zeros, norms), or across a training run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from inspector.reports.render_stats import FORMATS

    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="checkpoint(s), or one directory of a run's checkpoints")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument("--match", metavar="REGEX", help="only tensors whose name matches")
    p.add_argument("--groups", action="store_true", help="groups only, not every tensor")
    p.add_argument("--scheme", metavar="NAME|FILE", default=None,
                   help="grouping scheme (default: detected from the names)")
    p.add_argument("--threads", type=int, metavar="N",
                   help="tensors read in parallel (default: by file size and cores)")
    add_input_format(p, "read every file as this format")
    add_dask(p)
    add_allow_unsafe(p)


def run(args: argparse.Namespace) -> int:
    from inspector.api import stats

    result = stats(args.paths, match=args.match, groups=args.groups, scheme=args.scheme,
                   threads=args.threads, input_format=args.input_format, dask=args.dask,
                   allow_unsafe=args.allow_unsafe, progress=True)
    sys.stdout.write(result.render(args.format, args.style))
    return result.exit_code
