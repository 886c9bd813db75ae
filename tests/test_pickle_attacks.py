"""Issue 26, items 2-5: the pickle verdict follows what is called with what, past any error.

``tests/corpus/pickle/attacks`` holds payloads built from scratch (``make_attacks.py``), each of
which the real loaders ran when the generator loaded it in a fresh producer process
(``attacks.truth.json``: ``pickle.loads`` and ``torch.load(weights_only=False)`` left the
marker). Here the tool must call every one dangerous, say why, and never leave a marker.
"""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from test_verdict_corpus import containers

from inspector.adapters.security import verdicts as V
from inspector.adapters.security.restricted_pickle import (
    PickleError,
    base_allowed,
    scan_globals,
    unpickle,
)
from inspector.adapters.security.scan import scan_file

from conftest import run_cli
from test_torch_adapter import (
    BUILD,
    EMPTY_TUPLE,
    MARK,
    NEWOBJ,
    NONE,
    REDUCE,
    dict_of,
    floats,
    g,
    i,
    pid,
    s,
    tup,
    write_zip,
)

CORPUS = Path(__file__).resolve().parent / "corpus" / "pickle"
ATTACKS = CORPUS / "attacks"
TRUTH = json.loads((CORPUS / "attacks.truth.json").read_text())["files"]
NAMES = sorted(TRUTH)

# what each class's verdict must say (the global and the reason)
EXPECT = {
    "error_": ("system (called", "on the fickling, modelscan, picklescan lists"),
    "ctor_": ("by numpy.random._pickle.", ""),
    "class_": ("builds a class", ""),
    "patch_": ("changes how", "a BUILD on the class itself sets"),
    "io_mailbox": ("mailbox.MH", "writes files (`mailbox.MH.__setitem__`"),
    "io_dbm": ("dbm.dumb._Database", "writes files ("),
    "eval_": ("evaluates strings", ""),
}


def _marker(name: str) -> Path:
    return Path(TRUTH[name]["marker"])


def _check(path: Path, name: str) -> None:
    marker = _marker(name)
    r = scan_file(path)
    assert not marker.exists(), f"the payload of {name} ran in the tool"
    assert r.verdict == "dangerous", r.to_dict()
    prefix = next(p for p in EXPECT if name.startswith(p))
    text = " ".join(i.text for i in r.items if i.level == "dangerous")
    for needle in EXPECT[prefix]:
        assert needle in text, (needle, text)
    if name.startswith("error_"):  # the reader's error is reported as well
        assert any(i.level == "error" for i in r.items), r.to_dict()


def test_every_payload_ran_under_a_real_loader():
    assert len(NAMES) >= 62
    for name, fact in TRUTH.items():
        assert any(fact["ran"].values()), name
        assert (ATTACKS / name).is_file()


@pytest.mark.parametrize("name", NAMES)
def test_payload_is_dangerous_and_says_why(name):
    _check(ATTACKS / name, name)


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith(("error_", "io_", "ctor_r"))
                                  and n.endswith(".pkl")])
def test_payload_in_every_container(tmp_path, name):
    """The same bytes as a torch zip (odd root), a legacy torch file, an object .npy, an .npz."""
    for path in containers(tmp_path, (ATTACKS / name).read_bytes(), "c"):
        _check(path, name)


@pytest.mark.parametrize("name", ["io_mailbox_mh_setitem_p2.pkl",
                                  "class_abcmeta_newobj_func_range.pkl"])
def test_payload_is_live_under_pickle_loads(tmp_path, name):
    """Two of them shown live here too (stdlib only): a loader overwrites a chosen file through
    mailbox.MH.__setitem__; range() on an instance of a class the pickle built evaluates a
    string through typing.get_type_hints."""
    marker = _marker(name)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    if name.startswith("io_mailbox"):
        marker.write_text("original")
    subprocess.run([sys.executable, "-c", "import pickle,sys; pickle.loads(open(sys.argv[1],"
                    "'rb').read())", str(ATTACKS / name)], capture_output=True, timeout=60)
    try:
        assert marker.exists() and marker.read_text() != "original"
    finally:
        marker.unlink(missing_ok=True)


def test_scan_exits_1_and_listing_verbs_refuse():
    proc = run_cli("scan", str(ATTACKS))
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1].startswith(f"scanned {len(NAMES)} files: 0 safe, 0 "
                                                   f"foreign, {len(NAMES)} dangerous")
    for name in ("io_mailbox_mh_setitem_p2.pkl", "error_p2_bytearray_then_system.pkl"):
        shown = run_cli("show", str(ATTACKS / name))
        assert shown.returncode != 0 and "Traceback" not in shown.stderr
    assert not any(_marker(n).exists() for n in NAMES)


# ---------------------------------------------------------------------------------------------
# the contract of the reader and the wording of verdicts


def test_pickle_error_holds_every_global_of_the_whole_pickle():
    data = (ATTACKS / "error_p4_memo_names_then_system.pkl").read_bytes()
    with pytest.raises(PickleError) as e:
        unpickle(data, base_allowed())
    got = e.value.globals
    assert got is not None and got["os.system"].verdict.level == V.DANGEROUS
    assert got["os.system"].verdict.use == V.CALLED
    # the static scan resolves STACK_GLOBAL through memo gets too
    assert [n for n, _ in scan_globals(data)] == ["builtins.bytearray", "os.system"]


def test_a_stream_is_left_where_the_reader_stopped():
    data = (ATTACKS / "error_p2_bytearray_then_system.pkl").read_bytes()
    f = io.BytesIO(b"junk" + data)
    f.seek(4)
    with pytest.raises(PickleError) as e:
        unpickle(f, base_allowed())
    assert "os.system" in e.value.globals
    assert 4 < f.tell() < 4 + len(data)


def _globals(body: bytes) -> dict:
    data = b"\x80\x02" + body + b"."
    try:
        _, found = unpickle(data, base_allowed())
    except PickleError as e:
        found = e.globals
    return {name: ref.verdict for name, ref in found.items()}


def test_unknown_class_with_state_is_dangerous_and_says_what_would_run():
    """Not vetted (the vetted class is omegaconf.dictconfig.DictConfig): constructed and given
    state, its code runs with the file's data."""
    ns = g("omegaconf", "DictConfig") + EMPTY_TUPLE + NEWOBJ + dict_of(("k", s("v"))) + BUILD
    v = _globals(ns)["omegaconf.DictConfig"]
    assert v.level == V.DANGEROUS
    assert v.why.startswith("not vetted, and a loader would construct it and give an instance "
                            "its state")
    assert "(`omegaconf.DictConfig.__setstate__`)" in v.why


def test_dunder_calling_builtin_on_an_unknown_object_names_the_method():
    inst = g("mylib", "Thing") + EMPTY_TUPLE + NEWOBJ
    v = _globals(g("builtins", "range") + tup(inst) + REDUCE)
    assert v["builtins.range"].level == V.SAFE
    assert v["mylib.Thing"].level == V.DANGEROUS
    assert "`mylib.Thing.__index__ (by builtins.range)`" in v["mylib.Thing"].why


@pytest.mark.parametrize("call,value", [
    (g("builtins", "len") + tup(b"]") + REDUCE, 0),
    (g("__builtin__", "abs") + tup(b"J\xfd\xff\xff\xff") + REDUCE, 3),
    (g("builtins", "max") + tup(b"K\x01K\x05") + REDUCE, 5),
    (g("builtins", "sorted") + tup(b"(K\x02K\x01l") + REDUCE, [1, 2]),
    (g("builtins", "range") + tup(b"K\x03") + REDUCE, range(3)),
    (g("__builtin__", "long") + tup(s("12")) + REDUCE, 12),
])
def test_pure_builtins_on_plain_values_are_computed_and_safe(call, value):
    data = b"\x80\x02" + call + b"."
    obj, found = unpickle(data, base_allowed())
    assert obj == value == pickle.loads(data)
    assert all(ref.verdict.level == V.SAFE for ref in found.values()), found


def test_unknown_called_global_says_what_is_known():
    v = _globals(g("mylib.tools", "run") + tup(s("x"), s("y")) + REDUCE)["mylib.tools.run"]
    assert v.level == V.DANGEROUS
    assert "not vetted" in v.why and "execute" not in v.why


def test_metaclass_named_only_is_not_dangerous():
    v = _globals(dict_of(("meta", g("abc", "ABCMeta"))))["abc.ABCMeta"]
    assert v.level == V.FOREIGN


def test_class_shaped_call_of_an_unknown_factory_builds_a_class():
    body = g("mylib", "Meta") + tup(s("X"), tup(g("builtins", "object")), dict_of()) + REDUCE
    v = _globals(body)["mylib.Meta"]
    assert v.level == V.DANGEROUS and v.why.startswith("builds a class")


def test_a_state_setting_a_special_name_is_dangerous_a_library_dunder_is_not():
    def state(key: str) -> bytes:
        return g("mylib", "Obj") + EMPTY_TUPLE + NEWOBJ + dict_of((key, s("x"))) + BUILD

    special = _globals(state("__reduce_ex__"))["mylib.Obj"]
    assert special.level == V.DANGEROUS and "its BUILD state sets __reduce_ex__" in special.why
    # torch's own data: dangerous only as any unvetted class given state is
    data = _globals(state("__overloads__"))["mylib.Obj"]
    assert data.level == V.DANGEROUS and data.why.startswith("not vetted")


def test_backward_hooks_are_called_through_the_torch_rebuilders(tmp_path):
    """``_rebuild_tensor_v2(..., backward_hooks, ...)`` sets ``tensor._backward_hooks``: torch
    calls them in backward(). Judged the same through the torch adapter's own rebuilder."""
    hooks = g("collections", "OrderedDict") + b")R" + MARK + i(0) + g("mylib", "hook") + b"u"
    body = (g("torch._utils", "_rebuild_tensor_v2")
            + tup(pid("0", 4), i(0), tup(i(2), i(2)), tup(i(2), i(1)), b"\x89", hooks)
            + REDUCE)
    path = write_zip(tmp_path / "hooks.pt", b"\x80\x02" + body + b".", {"0": floats(4)})
    r = scan_file(path)
    assert r.verdict == "dangerous", r.to_dict()
    got = {x["name"]: x for x in r.globals}
    assert got["mylib.hook"]["use"] == "called as a hook set by torch._utils._rebuild_tensor_v2"


def test_build_on_an_allowlisted_function_is_dangerous():
    body = (g("copyreg", "_reconstructor") + tup(NONE, dict_of(("__defaults__", b")")))
            + BUILD)
    v = _globals(body)["copyreg._reconstructor"]
    assert v.level == V.DANGEROUS and "a BUILD sets attributes on the function" in v.why


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith(("error_p2", "class_abc"))][:8])
def test_mutated_payloads_end_in_a_verdict(tmp_path, name):
    """Flipped bytes and truncations: a verdict every time, nothing run, no traceback."""
    import random

    data = (ATTACKS / name).read_bytes()
    rng = random.Random(name)
    for k in range(25):
        b = bytearray(data)
        for _ in range(1 + k % 3):
            b[rng.randrange(len(b))] = rng.randrange(256)
        if k % 5 == 0:
            b = b[: rng.randrange(1, len(b))]
        path = tmp_path / f"m{k}.pkl"
        path.write_bytes(bytes(b))
        r = scan_file(path)
        assert r.verdict in ("safe", "foreign", "dangerous", "error")
    assert not _marker(name).exists()
