"""``inspector scan PATH...``: a security verdict for every file that can carry code.

Files and directories (recursive; symbolic links are not followed out of the tree). One line per
file: ``safe``, ``foreign``, ``dangerous`` or ``error``, with the globals or findings behind it,
then a summary line. Exit 1 if anything is dangerous, 0 otherwise, 2 on a usage error (picklescan's
convention). Nothing from a file is imported or run.
"""

from __future__ import annotations

import argparse
import sys

NAME = "scan"
HELP = "security verdict (safe/foreign/dangerous/error) for every file under the given paths"
PROGRESS_AFTER = 5


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")


def run(args: argparse.Namespace) -> int:
    from inspector.adapters.errors import UsageError
    from inspector.scan import SCHEMA, collect, line, scan_file, summary, summary_line

    missing = [p for p in args.paths if not _exists(p)]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
    files, notes = collect(args.paths)
    progress = sys.stderr.isatty() and len(files) > PROGRESS_AFTER
    results = []
    for n, path in enumerate(files, 1):
        if progress:
            sys.stderr.write(f"\r\033[Kscanning {n}/{len(files)} {str(path)[-60:]}")
            sys.stderr.flush()
        r = scan_file(path)
        results.append(r)
        if args.format == "text":
            if progress:
                sys.stderr.write("\r\033[K")
            sys.stdout.write(line(r) + "\n")
    if progress:
        sys.stderr.write("\r\033[K")
    s = summary(results, notes)
    if args.format == "json":
        import json

        doc = {"schema": SCHEMA, "files": [r.to_dict() for r in results], "not_followed": notes,
               "summary": s}
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        from inspector.reports.render import sanitize

        for note in notes:
            sys.stdout.write(f"note: {sanitize(note)}\n")
        sys.stdout.write(summary_line(s) + "\n")
    return 1 if s["dangerous"] else 0


def _exists(p: str) -> bool:
    import os

    return os.path.lexists(p)
