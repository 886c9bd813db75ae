"""Command line: ``inspector <verb> ...``; each verb lives in :mod:`inspector.commands`.

Example::

    $ inspector show fixtures/torch/seed001_transformer_lm.pt --format markdown

Global options (``--debug``, ``--raw-numbers``, ``--verbose``, ``--color``) work before or after
the verb. Exit codes of every verb are listed in ``inspector --help`` (each command module's
``EXITS``). Errors print as one line on stderr; ``--debug`` adds the traceback.
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


DEFAULT_EXITS = "0 success, 2 error"
COLOR_CHOICES = ("auto", "always", "never")


def _global_options(p: argparse.ArgumentParser, after_verb: bool) -> None:
    """The options every verb takes, before the verb (defaults set) or after it (no defaults,
    so a value given before the verb is kept)."""
    def default(value: object) -> object:
        return argparse.SUPPRESS if after_verb else value

    g = p.add_argument_group("global options (before or after the verb)")
    g.add_argument("--debug", action="store_true", default=default(False),
                   help="on error, show the traceback instead of one line")
    g.add_argument("--raw-numbers", action="store_true", default=default(False),
                   help="counts without thousands separators (42767, not 42,767)")
    g.add_argument("-v", "--verbose", action="store_true", default=default(False),
                   help="every hyperparameter, not only those that determine shapes")
    g.add_argument("--color", choices=COLOR_CHOICES, default=default("auto"),
                   help="colour status words, findings and deltas (auto: only on a terminal, "
                        "never with NO_COLOR set)")


def _parser() -> argparse.ArgumentParser:
    from importlib import import_module

    from .commands import MODULES

    modules = [import_module(f"{__package__}.commands.{name}") for name in MODULES]
    width = max(len(m.NAME) for m in modules)
    exits = "\n".join(f"  {m.NAME:<{width}}  {getattr(m, 'EXITS', DEFAULT_EXITS)}"
                      for m in modules)
    p = _Parser(
        prog="inspector",
        description="What is inside a checkpoint, read without the framework that wrote it.",
        epilog=f"exit codes:\n{exits}\n\nTables fit the terminal (or COLUMNS); piped output "
               "keeps full names and no colour.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"inspector {_version()}")
    _global_options(p, after_verb=False)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in modules:
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(cmd)
        _global_options(cmd, after_verb=True)
        cmd.set_defaults(_run=module.run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from inspector.reports.text import terminal_style

    args = _parser().parse_args(argv)
    args.style = terminal_style(args.raw_numbers, args.verbose, args.color)
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
