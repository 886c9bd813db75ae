"""``inspector inventory PATH [PATH ...] -o store.duckdb``: a model store as a database.

Writes one row per checkpoint (format, counts, scan verdict, statistics findings), one per
tensor (name, shape, dtype, role, group, digest, samples, NaN/Inf, min/max/mean/std), one per
finding and one per lineage edge into DuckDB (``-o NAME.duckdb``) or Parquet files
(``-o DIR.parquet``: a ``<table>.parquet`` per table). A second run over the same paths skips
every checkpoint whose files are unchanged without reading its tensors; lineage edges are
rebuilt from the stored fingerprints. Needs the ``inventory`` extra (DuckDB).

Examples::

    $ inspector inventory fixtures/lineage/zoo -o zoo.duckdb
    $ duckdb zoo.duckdb "SELECT path, scan_verdict FROM checkpoints"
    $ inspector inventory s3://bucket/models/ -o store.duckdb \\
        --dask tcp://scheduler:8786

Exit codes: 0 every checkpoint indexed, 2 some could not be read (their rows say why).
"""

from __future__ import annotations

import argparse
import sys

from inspector.commands.options import add_allow_unsafe, add_dask

NAME = "inventory"
EXITS = "0 every checkpoint indexed, 2 some could not be read (rows with the error are kept)"
HELP = "index checkpoints, tensors, findings and lineage into DuckDB or Parquet (incremental)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="checkpoints, directories of checkpoints, prefixes or URLs")
    p.add_argument("-o", "--output", required=True, metavar="FILE.duckdb|DIR.parquet",
                   help="the database (created, or updated in place)")
    p.add_argument("--jobs", type=int, default=2, metavar="N",
                   help="checkpoints indexed at once (default 2)")
    add_dask(p)
    add_allow_unsafe(p)


def run(args: argparse.Namespace) -> int:
    from inspector.inventory import build
    from inspector.inventory_dask import mapper as dask_mapper

    failed: list[str] = []
    with dask_mapper(getattr(args, "dask", None), args.allow_unsafe) as mapper:
        counts = build(args.paths, args.output, jobs=args.jobs,
                       allow_unsafe=args.allow_unsafe, mapper=mapper, on_error=failed.append)
    sys.stdout.write(f"inventory {args.output}: {counts['indexed']} indexed, "
                     f"{counts['skipped']} unchanged, {counts['errors']} unreadable, "
                     f"{counts['edges']} lineage edges\n")
    for message in failed:  # one line each, as every verb names a file it cannot read
        sys.stderr.write(f"inspector: {message}\n")
    return 2 if counts["errors"] else 0
