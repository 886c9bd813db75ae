"""Command line: ``inspector <verb> ...``; each verb lives in :mod:`inspector.commands`.

Example::

    $ inspector show fixtures/torch/seed001_transformer_lm.pt --format markdown

Exit codes: 0 success; 1 a check or diff found differences; 2 bad input (unreadable, corrupt or
unsupported file) or bad usage. Errors print as one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import os
import sys

from inspector.adapters.errors import InspectorError

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

EXIT_OK, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


def _terminal_width() -> int:
    """``shutil.get_terminal_size().columns`` (COLUMNS, else the terminal, else 80), without
    importing shutil (and through it bz2 and lzma) for every help text."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def _parser_class() -> type[argparse.ArgumentParser]:
    import argparse

    class _Parser(argparse.ArgumentParser):
        """argparse that exits 2 with one line, like every other error of the tool."""

        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            kwargs.setdefault("formatter_class", _formatter)
            super().__init__(*args, **kwargs)

        def error(self, message: str) -> None:  # type: ignore[override]
            self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")

    return _Parser


def _formatter(prog: str) -> argparse.HelpFormatter:
    import argparse

    return argparse.HelpFormatter(prog, width=_terminal_width() - 2)


def _version() -> str:
    from . import __version__

    return __version__


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the verb that ``argv`` names gets its own arguments (and imports what
    they need): the others are listed by name and help line, as ``--help`` shows them."""
    from importlib import import_module

    from .commands import MODULES

    parser_class = _parser_class()
    p = parser_class(
        prog="inspector",
        description="What is inside a checkpoint, read without the framework that wrote it.",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.add_argument("--version", action="version", version=f"inspector {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=parser_class)
    verb = _verb(sys.argv[1:] if argv is None else argv)
    for module_name in MODULES:
        module = import_module(f"{__package__}.commands.{module_name}")
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.__doc__)
        if module.NAME == verb:
            module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return p


def _verb(argv: Sequence[str]) -> str | None:
    """The verb of a command line: its first word after the top-level options (which take no
    value); None when there is none (``--help``, ``--version``, a usage error)."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else list(argv)
    if args_list == ["--version"]:  # what argparse's version action prints, without argparse
        sys.stdout.write(f"inspector {_version()}\n")
        return EXIT_OK
    args = _parser(args_list).parse_args(args_list)
    try:
        return args._run(args)
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
