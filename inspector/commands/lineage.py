"""``inspector lineage PATH [PATH ...]``: which checkpoint derives from which, with evidence.

Every checkpoint below the paths (files, model directories, trees, prefixes, URLs) is
fingerprinted once (a digest and position-stable samples per tensor: one pass over its values,
cached per file, so a second run over unchanged files reads no tensor bytes). Related pairs are
found from the samples, and each edge is typed: re-save, conversion, continued-training,
fine-tune (changed tensors named), lora-merge (targets and rank), adapter-of, resize, prune.
Unrelated models get no edge, even with one architecture: identical tensors count only when
they could not match by chance (norms initialised to ones never do).

Examples::

    $ inspector lineage fixtures/lineage/zoo
    $ inspector lineage runs/ s3://bucket/models/ --format json

Exit codes: 0 the forest was built (every checkpoint read), 2 some path could not be read
(the forest of the others is still printed).
"""

from __future__ import annotations

import argparse
import sys

from inspector.commands.options import add_allow_unsafe, add_dask

NAME = "lineage"
EXITS = "0 every checkpoint read, 2 some could not be read (or an unsafe pickle refused)"
HELP = "which checkpoint derives from which (re-save, fine-tune, LoRA merge, ...), with evidence"
FORMATS = ("table", "json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="checkpoints, directories of checkpoints, prefixes or URLs")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument("--cache", metavar="DIR",
                   help="where fingerprints are kept (default ~/.cache/inspector/fingerprints)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--jobs", type=int, default=2, metavar="N",
                   help="checkpoints fingerprinted at once (default 2)")
    add_dask(p)
    add_allow_unsafe(p)


def run(args: argparse.Namespace) -> int:
    import json

    from inspector.inventory_dask import mapper as dask_mapper
    from inspector.lineage import run as lineage
    from inspector.reports.lineage import render_table

    with dask_mapper(getattr(args, "dask", None), args.allow_unsafe) as mapper:
        forest, counts = lineage(args.paths, cache_dir=args.cache, use_cache=not args.no_cache,
                                 jobs=args.jobs, allow_unsafe=args.allow_unsafe, mapper=mapper)
    if args.format == "json":
        doc = forest.to_dict()
        doc["counts"] = counts
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_table(forest, counts, getattr(args, "style", None) and
                                      args.style.width))
    for e in forest.errors:
        sys.stderr.write(f"inspector: {e['error']}\n")
    return 2 if forest.errors else 0
