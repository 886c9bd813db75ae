"""``inspector --help`` from the generated text is argparse's text byte for byte, and a stale or
inapplicable stored text is never used."""

from __future__ import annotations

import os

import pytest

from inspector import cli, help_text


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
