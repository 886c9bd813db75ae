"""``inspector scan PATH...``: a security verdict for every file that can carry code.

Files and directories (recursive; symbolic links are not followed out of the tree). One line per
file: ``safe``, ``foreign``, ``dangerous`` or ``error``, with the globals or findings behind it,
then a summary line, each fitted to the terminal width (``COLUMNS``). Nothing from a file is
imported or run.

``--format sarif`` writes a SARIF 2.1.0 log for code scanning (GitHub, GitLab, SARIF viewers).

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
    p.add_argument("--format", choices=("text", "json", "csv", "sarif"), default="text",
                   help="output format: text (one line per file as it is scanned), json "
                        "(inspector.scan/1), csv (one row per file: path, verdict, kind, "
                        "what) or sarif (SARIF 2.1.0, for code scanning)")
    p.add_argument("--jobs", type=int, default=8, metavar="N", help="files examined at once")


def run(args: argparse.Namespace) -> int:
    from inspector.api import scan
    from inspector.reports.scan import tail, text_line

    def on_file(record: dict) -> None:
        sys.stdout.write(text_line(record, args.style))
        sys.stdout.flush()

    text = args.format == "text"
    result = scan(args.paths, jobs=args.jobs, progress=True, on_file=on_file if text else None)
    sys.stdout.write(tail(result.document, args.style) if text
                     else result.render(args.format, args.style))
    return result.exit_code
