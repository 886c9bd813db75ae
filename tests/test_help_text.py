"""``inspector --help`` from the generated text is argparse's text byte for byte, and a stale or
inapplicable stored text is never used."""

from __future__ import annotations

import os
import re
from importlib import import_module

import pytest

from inspector import cli, help_plain, help_text
from inspector.commands import MODULES


def test_generated_help_is_current():
    with open(os.path.join(os.path.dirname(cli.__file__), cli.HELP_MODULE), encoding="utf-8") as f:
        assert f.read() == cli.compile_help(), (
            "run: python -c 'from inspector.cli import write_help; write_help()'")


def _argparse_help(columns: int, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    return cli._parser(["--help"]).format_help()


def _exit_code(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as e:  # argparse's own --help exits
        return int(e.code or 0)


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("columns", [cli.HELP_WIDTH, 60, 120])
def test_help_equals_argparse(flag, columns, monkeypatch, capsys):
    monkeypatch.delenv("LANGUAGE", raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    expected = _argparse_help(columns, monkeypatch)
    assert _exit_code([flag]) == 0
    assert capsys.readouterr().out == expected


def test_stored_help_used_only_when_it_applies(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(cli.HELP_WIDTH))
    monkeypatch.delenv("LANGUAGE", raising=False)
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert cli._stored_help() == help_text.TEXT
    monkeypatch.setenv("LANG", "de_DE.UTF-8")  # argparse's words could be translated
    assert cli._stored_help() is None
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("COLUMNS", "100")
    assert cli._stored_help() is None
    monkeypatch.setenv("COLUMNS", str(cli.HELP_WIDTH))
    stale = dict(help_text.SOURCES, **{"commands/show.py": (0, 0)})
    monkeypatch.setattr(help_text, "SOURCES", stale)  # a verb's module edited since
    assert cli._stored_help() is None


# -- each verb's --help: plain text, wrapped to the terminal -------------------------------------

_RST = re.compile(r"``|:(?:mod|func|class|meth|attr|data|ref):`|(?<![\w`])`[^`\s][^`]*`|::$")


def _verb_help(verb: str, columns: int, monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    capsys.readouterr()
    assert _exit_code([verb, "--help"]) == 0
    return capsys.readouterr().out


def _literal_lines(doc: str) -> list[str]:
    """The lines of the docstring's ``Example::`` blocks, as written."""
    return [line for kind, *rest in help_plain.to_blocks(doc) if kind == "pre"
            for line in rest[0] if line.strip()]


@pytest.mark.parametrize("verb", MODULES)
def test_verb_help_is_plain_and_fits_80_columns(verb, monkeypatch, capsys):
    text = _verb_help(verb, 80, monkeypatch, capsys)
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, long
    markup = [line for line in text.splitlines() if _RST.search(line)]
    assert not markup, markup
    doc = import_module(f"inspector.commands.{verb}").__doc__
    for line in doc.splitlines():  # the examples keep their line breaks
        if line.startswith("    $ ") or line.startswith("        --"):
            assert line.rstrip().replace("\\\\", "\\") in text, line
    assert "Example::" not in text and "Examples::" not in text


@pytest.mark.parametrize("verb", ["check", "stats", "budget"])
def test_verb_help_follows_the_terminal_width(verb, monkeypatch, capsys):
    text = _verb_help(verb, 60, monkeypatch, capsys)
    doc = import_module(f"inspector.commands.{verb}").__doc__
    literal = set(_literal_lines(doc))
    prose = [line for line in text.splitlines() if line not in literal and len(line) > 60
             and not line.startswith("usage:")]
    assert not prose, prose
    wide = _verb_help(verb, 160, monkeypatch, capsys)
    assert max(map(len, wide.splitlines())) > 100  # prose fills a wide terminal too


def test_rst_to_plain_text():
    doc = (":mod:`inspector.x` and ``--flag`` and :func:`~pkg.mod.fn`.\n\n"
           "Example::\n\n    $ inspector a \\\n        --b\n\n    $ inspector c\n\n"
           "Trailing text ::\n\n    literal\n\n"
           "heading:\n  term    definition that is long enough to wrap at a narrow width\n"
           "  other   short\n")
    text = help_plain.render(help_plain.to_blocks(doc), 40)
    assert text.splitlines()[0] == "inspector.x and --flag and fn."
    assert "Example:\n\n    $ inspector a \\\n        --b\n\n    $ inspector c\n" in text
    assert "Trailing text\n\n    literal" in text
    assert ("heading:\n  term    definition that is long enough\n"
            "          to wrap at a narrow width\n  other   short") in text


def test_stored_descriptions_are_current():
    """The descriptions stored in help_text.py are the conversion of today's docstrings."""
    assert help_text.DESCRIPTIONS == {
        m.NAME: help_plain.to_blocks(m.__doc__)
        for m in (import_module(f"inspector.commands.{v}") for v in MODULES)}
    assert cli._stored_blocks() == help_text.DESCRIPTIONS
