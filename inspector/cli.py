"""Command line: ``inspector show PATH``, ``inspector formats``.

Example::

    $ inspector show fixtures/torch/seed001_transformer_lm.pt --format markdown

Exit codes: 0 success; 1 a check or diff found differences; 2 bad input (unreadable, corrupt or
unsupported file) or bad usage. Errors print as one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from adapters.errors import InspectorError, UnsafeContentError

EXIT_OK, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line, like every other error of the tool."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    from .listing import SORTS
    from .render import FORMATS

    p = _Parser(
        prog="inspector",
        description="What is inside a checkpoint, read without the framework that wrote it.",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    show = sub.add_parser("show", help="list every tensor with its shape, dtype, count and role")
    show.add_argument("path", help="checkpoint file, shard index or model directory")
    show.add_argument("--format", choices=FORMATS, default="table", help="output format")
    show.add_argument("--match", metavar="REGEX", help="only tensors whose name matches")
    show.add_argument("--sort", choices=SORTS, default="stored", help="row order")
    show.add_argument(
        "--input-format", metavar="NAME", help="skip detection and read as this format"
    )
    show.add_argument(
        "--allow-unsafe",
        action="store_true",
        help="list a pickle that references code-execution globals (os.system, eval, ...) "
        "instead of refusing it; nothing from the file is run either way",
    )

    sub.add_parser("formats", help="list the supported checkpoint formats")
    return p


def _show(args: argparse.Namespace) -> int:
    from adapters.registry import load

    from .listing import listing
    from .render import render

    ckpt = load(args.path, args.input_format)
    danger = sorted({f.subject or f.message for f in ckpt.findings if f.severity == "danger"})
    if danger and not args.allow_unsafe:
        raise UnsafeContentError(
            f"refused: the pickle references {', '.join(danger)}, which can execute code "
            "(nothing was run; --allow-unsafe lists it anyway)",
            ckpt.path,
        )
    sys.stdout.write(render(listing(ckpt, args.match, args.sort), args.format))
    return EXIT_OK


def _formats(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from adapters.registry import adapters

    rows = [(a.name, ", ".join(a.extensions), a.description) for a in adapters()]
    sys.stdout.write(tabulate(rows, ["format", "usual names", "what"], "simple") + "\n")
    sys.stdout.write("\nDetection is by content (magic bytes), not by the file name.\n")
    return EXIT_OK


COMMANDS = {"show": _show, "formats": _formats}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except InspectorError as e:
        if args.debug:
            raise
        print(f"inspector: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
