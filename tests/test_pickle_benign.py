"""Benign pickles people hold are never called dangerous (issue 26, item 7).

``tests/corpus/pickle/benign`` was written by the real producers (torch Distributed Checkpoint,
DeepSpeed ZeRO, NumPy generators, a user ``enum.Enum``, a protocol 2 type reference, pure
builtins on inert arguments: ``make_benign.py``); ``benign.truth.json`` records the globals the
real loader resolved while loading each file whole. The tool must see the same globals and call
the file safe or foreign.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.adapters.security.scan import scan_file

from conftest import load_truth, run_cli

BENIGN = Path(__file__).resolve().parent / "corpus" / "pickle" / "benign"
TRUTH = load_truth(BENIGN / "benign.truth.json")["files"]


PENDING = ("enum_member", "pure_builtins", "py2_type_refs")  # the verdict engine's next commit


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True)) if n.startswith(PENDING) else n
    for n in sorted(TRUTH)])
def test_benign_file_is_not_dangerous(name):
    r = scan_file(BENIGN / name)
    assert r.verdict in ("safe", "foreign"), r.to_dict()
    ours = {g["name"] for g in r.globals}
    # torch.load's find_class answers `torch.*Storage` itself (a StorageType), never reaching
    # the recording unpickler's: those are the only names the truth may lack
    assert ours >= set(TRUTH[name]["globals"])
    assert all(n.startswith("torch.") and n.endswith("Storage")
               for n in ours - set(TRUTH[name]["globals"]))


@pytest.mark.parametrize("name", [n for n in sorted(TRUTH) if n.startswith(("dcp/", "deepspeed"))])
def test_dcp_and_deepspeed_are_safe(name):
    """Their classes were read (lists.py names the files) and are allowlisted."""
    assert scan_file(BENIGN / name).verdict == "safe"


@pytest.mark.xfail(strict=True)
def test_scan_of_benign_corpus_exits_0():
    proc = run_cli("scan", str(BENIGN))
    assert proc.returncode == 0, proc.stdout[-3000:]
