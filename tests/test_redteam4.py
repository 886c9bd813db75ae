"""Hostile files of kinds the other corpora do not hold (``tests/corpus/redteam4``, written and
checked against the real loaders by ``make_redteam4.py``: ``redteam4.truth.json`` records, per
file and loader, whether the payload ran). Whatever a real loader executes, ``scan`` calls
dangerous (exit 1), ``show`` refuses in one line (exit 2) and ``inspector.load`` refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import inspector
from inspector.adapters.security.scan import scan_file

from conftest import run_cli

HERE = Path(__file__).parent / "corpus" / "redteam4"
FILES = HERE / "files"
TRUTH = json.loads((HERE / "redteam4.truth.json").read_text())["files"]
EXECUTED = sorted(n for n, row in TRUTH.items() if "executed" in row.values())


def test_the_corpus_is_live() -> None:
    """The truth covers every file written, and most made a real loader run the payload."""
    assert sorted(p.name for p in FILES.iterdir()) == sorted(TRUTH)
    assert len(EXECUTED) >= 35


@pytest.mark.parametrize("name", EXECUTED)
def test_scan_and_load_refuse_what_a_loader_runs(name: str) -> None:
    res = scan_file(FILES / name)
    assert res.verdict == "dangerous", (name, res.kind, [i.text for i in res.items])
    with pytest.raises(inspector.UnsafeContentError):
        inspector.load(FILES / name)


@pytest.mark.parametrize("name", [n for n in EXECUTED if not n.startswith("iter_")]
                         + ["iter_list.pkl", "iter_stack_global.pkl"])
def test_show_refuses_in_one_line(name: str) -> None:
    proc = run_cli("show", str(FILES / name))
    assert proc.returncode == 2, proc.stdout[-500:]
    assert proc.stderr.count("\n") == 1 and "refused" in proc.stderr, proc.stderr


def test_scan_exits_1_on_the_directory() -> None:
    proc = run_cli("scan", str(FILES))
    assert proc.returncode == 1
    assert " 0 safe, 0 foreign" in proc.stdout.splitlines()[-1]


def test_python_source_is_no_pickle() -> None:
    """A pickle without its STOP counts only when a loader could import its first global:
    Python source (``import x`` reads as INST of module ``"mport x"``) stays Python source."""
    from inspector.adapters.security.examination import could_start_pickle

    root = Path(__file__).parent.parent
    sources = sorted(root.glob("adapters/**/*.py")) + sorted(root.glob("fixtures/**/*.py"))
    assert len(sources) > 50
    assert not [p for p in sources if could_start_pickle(p.read_bytes()[: 1 << 20])]
    res = scan_file(root / "fixtures/onmt_tf/transformer/model_description.py")
    assert res.verdict == "foreign" and res.kind == "python"
