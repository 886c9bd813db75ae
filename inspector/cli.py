"""Command line: ``inspector <verb> ...``; each verb lives in :mod:`inspector.commands`.

Example::

    $ inspector show fixtures/torch/seed001_transformer_lm.pt --format markdown

Global options (``--debug``, ``--raw-numbers``, ``--verbose``, ``--color``) work before or after
the verb. Exit codes of every verb are listed in ``inspector --help`` (each command module's
``EXITS``). Errors print as one line on stderr; ``--debug`` adds the traceback.
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
            from inspector.adapters.redaction import redact_text

            self.exit(EXIT_ERROR, f"{self.prog}: error: {redact_text(message)}\n")

    return _Parser


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's help formatter at the width it would find itself; descriptions and epilogs
    are plain text (:mod:`inspector.help_plain`): prose wrapped, examples as written. argparse
    makes one for every argument it adds: the class is made once, the text conversion imported
    only when a help text is written."""
    cls = _PLAIN_FORMATTER
    if not cls:
        import argparse

        class _Plain(argparse.RawDescriptionHelpFormatter):
            def _fill_text(self, text: str, width: int, indent: str) -> str:
                from .help_plain import render, to_blocks

                blocks = getattr(text, "blocks", None) or to_blocks(text, docstring=False)
                return "\n".join(indent + line if line else line
                                 for line in render(blocks, width - len(indent)).split("\n"))

        cls.append(_Plain)
    return cls[0](prog, width=_terminal_width() - 2)


_PLAIN_FORMATTER: list[type[argparse.HelpFormatter]] = []


class _Described(str):
    """A verb's docstring with its plain-text blocks (stored or converted now)."""

    blocks: list = []


def _description(name: str, doc: str, stored: dict | None) -> _Described:
    from .help_plain import to_blocks

    text = _Described(doc)
    text.blocks = stored[name] if stored and name in stored else to_blocks(doc)
    return text


def _version() -> str:
    from . import __version__

    return __version__


DEFAULT_EXITS = "0 success, 2 error"
COLOR_CHOICES = ("auto", "always", "never")


def _global_options(p: argparse.ArgumentParser, after_verb: bool) -> None:
    """The options every verb takes, before the verb (defaults set) or after it (no defaults,
    so a value given before the verb is kept)."""
    import argparse

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
    # after the verb into its own list: both lists are trusted (argparse would replace one)
    g.add_argument("--trust", metavar="MODULE.NAME", action="append", default=default([]),
                   dest="trust_after" if after_verb else "trust",
                   help="vouch for a pickle global nobody vetted (repeatable), as torch's "
                        "add_safe_globals does: it is safe, never a known-dangerous one "
                        "(also INSPECTOR_TRUST, pyproject.toml [tool.inspector] trust)")


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the verb that ``argv`` names gets its own arguments (and imports what
    they need): the others are listed by name and help line, as ``--help`` shows them."""
    from importlib import import_module

    from .commands import MODULES

    args = sys.argv[1:] if argv is None else argv
    verb = _verb(args)
    # A known verb without --help parses with its own parser alone: the other verbs' modules
    # (their names, help lines and exit codes) are only for the top-level help and errors.
    alone = verb in MODULES and not {"-h", "--help"} & set(args[:args.index(verb)])
    modules = [import_module(f"{__package__}.commands.{name}")
               for name in ((verb,) if alone else MODULES)]
    width = max(len(m.NAME) for m in modules)
    exits = "\n".join(f"  {m.NAME:<{width}}  {getattr(m, 'EXITS', DEFAULT_EXITS)}"
                      for m in modules)
    _english_argparse()
    parser_class = _parser_class()
    p = parser_class(
        prog="inspector",
        description="What is inside a checkpoint, read without the framework that wrote it.",
        epilog=f"exit codes:\n{exits}\n\nTables fit the terminal (or COLUMNS); piped output "
               "keeps full names and no colour.",
    )
    p.add_argument("--version", action="version", version=f"inspector {_version()}")
    _global_options(p, after_verb=False)
    sub = p.add_subparsers(dest="command", required=True, parser_class=parser_class,
                           metavar="COMMAND")
    helping = {"-h", "--help"} & set(args)
    stored = _stored_blocks() if verb and helping else None
    for module in modules:
        description = _description(module.NAME, module.__doc__, stored) \
            if module.NAME == verb and helping else module.__doc__
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=description)
        if module.NAME == verb:
            module.add_arguments(cmd)
            _global_options(cmd, after_verb=True)
        cmd.set_defaults(_run=module.run)
    return p


def _english() -> bool:
    """Whether the messages' language is English or unset (LANGUAGE, LC_ALL, LC_MESSAGES,
    LANG: the first one set decides, as gettext reads them)."""
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        lang = os.environ.get(var, "")
        if lang.split("_")[0].split(".")[0] not in _ENGLISH:
            return False
        if lang:
            break
    return True


def _english_argparse() -> None:
    """In an English or unset locale, argparse's messages untranslated without asking gettext:
    argparse looks each one up (the environment, locale names, catalogue files) as it builds
    every parser and argument, some 40 lookups per command line that all find nothing."""
    import argparse
    import gettext  # (imported by argparse)

    if _english() and argparse._ is gettext.gettext:  # type: ignore[attr-defined]
        argparse._ = str  # type: ignore[attr-defined]
        argparse.ngettext = _ngettext  # type: ignore[attr-defined]


def _ngettext(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


HELP_MODULE = "help_text.py"
HELP_WIDTH = 80  # the width of a pipe with no COLUMNS: the help text stored for it
_ENGLISH = ("", "C", "POSIX", "en")


def _help_sources() -> dict[str, tuple[int, int]]:
    """Size and CRC-32 of every file the help texts come from (this module, the plain-text
    conversion and the command modules: names, help lines, exit codes, docstrings)."""
    from binascii import crc32

    from .commands import MODULES

    here = os.path.dirname(os.path.abspath(__file__))
    out = {}
    for rel in ("cli.py", "help_plain.py", "commands/__init__.py",
                *(f"commands/{m}.py" for m in MODULES)):
        with open(os.path.join(here, *rel.split("/")), "rb") as f:
            data = f.read()
        out[rel] = (len(data), crc32(data))
    return out


def _stored_help() -> str | None:
    """``inspector --help`` as argparse prints it, from ``inspector/help_text.py``, when that
    applies here: the same Python minor version and width, an English (or unset) locale and
    every source file unchanged since it was generated; else None (argparse runs)."""
    if _terminal_width() != HELP_WIDTH or not _english():
        return None
    try:
        from inspector import help_text as gen

        if tuple(gen.PYTHON) != sys.version_info[:2] or gen.SOURCES != _help_sources():
            return None
    except (ImportError, OSError):
        return None
    return gen.TEXT


def _stored_blocks() -> dict | None:
    """Each verb's description as plain-text blocks, from ``inspector/help_text.py`` when every
    source file is unchanged since it was generated; else None (converted when shown)."""
    try:
        from inspector import help_text as gen

        if gen.SOURCES != _help_sources():
            return None
        return gen.DESCRIPTIONS
    except (ImportError, OSError, AttributeError):
        return None


def compile_help() -> str:
    """The text of ``inspector/help_text.py``: argparse's ``inspector --help`` at
    :data:`HELP_WIDTH` columns, with the size and CRC-32 of the files it comes from, so that
    ``--help`` imports neither argparse nor the command modules. Regenerate after editing a
    verb's name, help line or exit codes (a test fails until then; a stale text is never
    used)::

        python -c "from inspector.cli import write_help; write_help()"
    """
    from importlib import import_module
    from pprint import pformat
    from unittest import mock

    from .commands import MODULES
    from .help_plain import to_blocks

    with mock.patch.dict(os.environ, {"COLUMNS": str(HELP_WIDTH)}):
        text = _parser(["--help"]).format_help()
    descriptions = {}
    for name in MODULES:
        module = import_module(f"{__package__}.commands.{name}")
        descriptions[module.NAME] = to_blocks(module.__doc__)
    return (
        '"""``inspector --help`` as argparse prints it. GENERATED by\n'
        "``inspector.cli.compile_help()`` -- do not edit; a source file that differs from the\n"
        'size and CRC-32 recorded here makes ``--help`` run argparse instead."""\n\n'
        "# ruff: noqa: E501\n"
        f"PYTHON = {tuple(sys.version_info[:2])!r}\n\n"
        f"SOURCES = {pformat(_help_sources(), width=100)}\n\n"
        f"TEXT = {text!r}\n\n"
        "# each verb's docstring as plain text (inspector.help_plain.to_blocks)\n"
        f"DESCRIPTIONS = {pformat(descriptions, width=100)}\n"
    )


def write_help() -> None:
    """Write :func:`compile_help` to ``inspector/help_text.py``."""
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), HELP_MODULE)
    with open(target, "w", encoding="utf-8") as f:
        f.write(compile_help())


VALUE_OPTIONS = ("--color", "--trust")  # global options that take their value as the next word


def _verb(argv: Sequence[str]) -> str | None:
    """The verb of a command line: its first word that is neither an option nor an option's
    value; None when there is none (``--help``, ``--version``, a usage error)."""
    words = iter(argv)
    for arg in words:
        if arg == "--":
            return None
        if arg in VALUE_OPTIONS:
            next(words, None)
        elif not arg.startswith("-"):
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else list(argv)
    if args_list == ["--version"]:  # what argparse's version action prints, without argparse
        sys.stdout.write(f"inspector {_version()}\n")
        return EXIT_OK
    if args_list in (["--help"], ["-h"]):
        text = _stored_help()
        if text is not None:  # argparse's own text, generated by write_help
            sys.stdout.write(text)
            return EXIT_OK
    from inspector.reports.text import terminal_style

    if _verb(args_list) is None and not {"-h", "--help", "--version"} & set(args_list):
        _usage_error("a verb is required (inspector --help lists them)")
        return EXIT_ERROR
    args = _parser(args_list).parse_args(args_list)
    if any("://" in arg for arg in args_list):  # (not imported for local paths: startup cost)
        from inspector.adapters.redaction import redact

        for arg in args_list:  # each URL's secrets are known before anything can print them
            redact(arg)
    args.style = terminal_style(args.raw_numbers, args.verbose, args.color)
    try:
        trust = [*args.trust, *getattr(args, "trust_after", ())]
        if trust:  # the trust module (and its check of the names) only when asked
            from inspector.adapters.security.trust import trusting

            with trusting(trust):
                return args._run(args)
        return args._run(args)
    except InspectorError as e:
        if args.debug:
            _debug_traceback()
        _error(str(e))
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except OSError as e:  # the system refused an operation (a full disk under stdout, ...)
        if args.debug:
            _debug_traceback()
        _error(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else
               f"{e.strerror or e} (errno {e.errno})" if e.errno else str(e))
        return EXIT_ERROR
    except Exception as e:  # a bug: one line (the traceback with --debug), never a crash dump
        if args.debug:
            _debug_traceback()
        _error(f"internal error ({type(e).__name__}: {e})"
               + ("" if args.debug else "; --debug shows the traceback"))
        return EXIT_ERROR
    finally:
        if args.debug:
            _remote_stats()


def _error(message: str) -> None:
    """``inspector: MESSAGE`` on stderr, on one line, URLs and known secrets redacted."""
    from inspector.adapters.redaction import redact_text

    line = " ".join(redact_text(message).split("\n"))
    sys.stdout.flush()
    print(f"inspector: {line}", file=sys.stderr)


def _usage_error(message: str) -> None:
    """argparse's usage lines, then one error line (exit 2)."""
    sys.stderr.write(_parser([]).format_usage())
    sys.stderr.write(f"inspector: error: {message}\n")


def console_main() -> None:
    """The ``inspector`` command: :func:`main`, then :func:`inspector.process_exit.leave`
    (no teardown of the report's objects when nothing is left to run at exit)."""
    from inspector.process_exit import leave

    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # the reader left (| head): nothing more to write
        sys.exit(code)
    leave(code)


def _remote_stats() -> None:
    """Under --debug: the requests and bytes each remote file cost (URLs redacted)."""
    transport = sys.modules.get("inspector.adapters.remote_transport")
    if transport is None:
        return
    stats = transport.STATS
    if not stats.requests:  # local files only (the module may be imported all the same)
        return
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
