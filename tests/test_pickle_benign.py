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
from inspector.adapters.security.trust import trusting

from conftest import load_truth, run_cli

BENIGN = Path(__file__).resolve().parent / "corpus" / "pickle" / "benign"
TRUTH = load_truth(BENIGN / "benign.truth.json")["files"]


# A user's own Enum (user_enums.py beside make_benign.py): pickled as `Color(1)`, the loader
# calls the class with the value. Nothing but its source proves it an Enum (a constructor given
# one string could evaluate it): dangerous, until the user vouches for the classes.
USER_ENUMS = ["user_enums.Color", "user_enums.Perm"]
TRUST = [w for n in USER_ENUMS for w in ("--trust", n)]


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_benign_file_is_not_dangerous(name):
    with trusting(USER_ENUMS if name.startswith("enum_member") else []):
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
    """Their classes were read (vetted.py names the versions) and are vetted."""
    assert scan_file(BENIGN / name).verdict == "safe"


def test_scan_of_benign_corpus_exits_0():
    proc = run_cli("scan", *TRUST, str(BENIGN))
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.parametrize("protocol", range(6))
def test_user_enum_member_is_dangerous_until_trusted(protocol):
    """Python pickles an Enum member as ``(cls, (value,))``: an unvetted class called with a
    value from the file. Dangerous with a true reason; safe, and said so, once trusted."""
    path = BENIGN / f"enum_member_p{protocol}.pkl"
    r = scan_file(path)
    assert r.verdict == "dangerous"
    for g in r.globals:
        assert g["verdict"] == "dangerous" and g["use"] == "called"
        assert "not vetted" in g["why"] and "Enum member" in g["why"]
    with trusting(USER_ENUMS):
        r = scan_file(path)
    assert r.verdict == "safe"
    assert {g["why"] for g in r.globals} == {"trusted by the user (--trust or trust=)"}


def test_python2_names_and_pure_builtins_are_safe():
    r = scan_file(BENIGN / "py2_type_refs_p2.pkl")
    assert {(g["name"], g["resolved"]) for g in r.globals} >= {("__builtin__.long", "builtins.int")}
    assert r.verdict == "safe"
    assert scan_file(BENIGN / "pure_builtins_p2.pkl").verdict == "safe"
