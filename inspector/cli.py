"""Command line: ``inspector <verb> ...``; each verb lives in :mod:`inspector.commands`.

Example::

    $ inspector show fixtures/torch/seed001_transformer_lm.pt --format markdown

Exit codes: 0 success; 1 a check or diff found differences; 2 bad input (unreadable, corrupt or
unsupported file) or bad usage. Errors print as one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from inspector.adapters.errors import InspectorError

EXIT_OK, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line, like every other error of the tool."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _version() -> str:
    from . import __version__

    return __version__


def _parser() -> argparse.ArgumentParser:
    from importlib import import_module

    from .commands import MODULES

    p = _Parser(
        prog="inspector",
        description="What is inside a checkpoint, read without the framework that wrote it.",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.add_argument("--version", action="version", version=f"inspector {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module_name in MODULES:
        module = import_module(f"{__package__}.commands.{module_name}")
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.__doc__)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args._run(args)
    except InspectorError as e:
        if args.debug:
            _debug_traceback()
        print(f"inspector: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception:
        if not args.debug:
            raise
        _debug_traceback()
        return EXIT_ERROR
    finally:
        if args.debug:
            _remote_stats()


def _remote_stats() -> None:
    """Under --debug: the requests and bytes each remote file cost (URLs redacted)."""
    transport = sys.modules.get("inspector.adapters.remote_transport")
    if transport is None:
        return
    stats = transport.STATS
    sys.stdout.flush()
    for url, (n, b) in stats.per_url.items():
        sys.stderr.write(f"inspector: debug: {url}: {n} request(s), {b:,} bytes\n")
    sys.stderr.write(
        f"inspector: debug: remote total: {stats.requests} request(s), {stats.bytes:,} bytes\n"
    )


def _debug_traceback() -> None:
    """The traceback of the error being handled, URLs with their credentials redacted."""
    import traceback

    from inspector.adapters.remote_transport import redact_text

    sys.stderr.write(redact_text(traceback.format_exc()))


if __name__ == "__main__":
    sys.exit(main())
