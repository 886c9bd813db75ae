"""``inspector scan PATH...``: a security verdict for every file that can carry code.

Files and directories (recursive; symbolic links are not followed out of the tree). One line per
file: ``safe``, ``foreign``, ``dangerous`` or ``error``, with the globals or findings behind it,
then a summary line, each fitted to the terminal width (``COLUMNS``). Nothing from a file is
imported or run.

Exit codes (picklescan's convention): 1 if any file is dangerous; else 2 if any file could not be
fully examined (``error``: what was found before the break is still reported) or on a usage
error; else 0.
"""

from __future__ import annotations

import argparse
import sys

NAME = "scan"
HELP = "security verdict (safe/foreign/dangerous/error) for every file under the given paths"
EXITS = "0 nothing dangerous or unexamined, 1 some file is dangerous, 2 some file is error " \
    "(not fully examined) or usage error"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="files, directories or URLs (s3://bucket/runs/)")
    p.add_argument("--format", choices=("text", "json", "csv"), default="text",
                   help="output format: text (one line per file as it is scanned), json "
                        "(inspector.scan/1) or csv (one row per file: path, verdict, kind, "
                        "what)")
    p.add_argument("--jobs", type=int, default=8, metavar="N", help="files examined at once")


def run(args: argparse.Namespace) -> int:
    from inspector.adapters.errors import NotFoundError
    from inspector.adapters.security.scan import SCHEMA, collect, scan_file, summary
    from inspector.fleet import run_ordered
    from inspector.reports.scan import line, summary_line

    missing = [p for p in args.paths if not _exists(p)]
    if missing:
        raise NotFoundError("no such file or directory", missing[0])
    files, notes = collect(args.paths)
    from inspector.progress import progress

    results = []
    with progress(len(files), "scan", unit="file") as bar:
        for _, r in run_ordered(files, scan_file, args.jobs):
            if isinstance(r, Exception):  # scan_file turns bad files into results: a bug
                raise r
            results.append(r)
            if args.format == "text":
                verdict, _, rest = line(r, args.style.width).partition(" ")
                with bar.paused():
                    sys.stdout.write(args.style.paint(verdict) + " " + rest + "\n")
                    sys.stdout.flush()
            bar.advance(1)
    s = summary(results, notes)
    if args.format == "json":
        import json

        doc = {"schema": SCHEMA, "files": [r.to_dict() for r in results], "not_followed": notes,
               "summary": s}
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    elif args.format == "csv":
        import csv

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["path", "verdict", "kind", "what"])
        for r in results:
            d = r.to_dict()
            w.writerow([d["path"], d["verdict"], d["kind"] or "",
                        "; ".join(f["text"] for f in d["findings"])])
    else:
        from inspector.reports.render import sanitize
        from inspector.reports.scan import fit

        for note in notes:
            sys.stdout.write(fit(f"note: {sanitize(note)}", args.style.width) + "\n")
        sys.stdout.write(fit(summary_line(s), args.style.width) + "\n")
    return 1 if s["dangerous"] else 2 if s["error"] else 0


def _exists(p: str) -> bool:
    import os

    from inspector.adapters.source import is_url

    if is_url(p):
        from inspector.adapters.errors import InspectorError
        from inspector.adapters.source import as_source

        try:
            return as_source(p).exists()
        except InspectorError:
            return True  # scanned: the error becomes its line
    return os.path.lexists(p)
