"""Weights in plain pickles, joblib and object .npy/.npz; class-keyed names; id()-keyed
optimizer state. Each against what its producer recorded (``fixtures/dirs/make_fixtures.py``:
numpy 2.4.6 / 1.26.4, torch 2.13.0, joblib 1.6.0, Lightning 2.6.6), nothing computed by the tool.
"""

from __future__ import annotations

import pickle

import pytest

from inspector.adapters.registry import load
from inspector.diffing import diff
from inspector.reports.listing import listing

from conftest import FIXTURES, load_truth, run_cli

PICKLES = FIXTURES / "dirs" / "pickles"
FILES = sorted(p.name[: -len(".truth.json")] for p in PICKLES.glob("*.truth.json"))


@pytest.mark.parametrize("name", FILES)
def test_pickled_weights_match_the_producer(name):
    truth = load_truth(PICKLES / f"{name}.truth.json")
    ckpt = load(PICKLES / name)
    report = listing(ckpt)
    got = {t["stored_name"]: t for t in report["tensors"]}
    want = {t["stored_name"]: t for t in truth["tensors"]}
    assert list(got) == list(want), "names or their order differ from the producer's"
    for n, w in want.items():
        g = got[n]
        assert (g["shape"], g["dtype"]) == (w["shape"], w["dtype"]), n
        if not (name.endswith(".npz") and "." not in n):
            # plain np.savez members keep the npz adapter's MXNet-2 role convention
            assert g["role"] == w["role"], n
    assert report["totals"]["tensors"] == truth["tensor_count"]
    if truth.get("parameter_count") is not None:
        assert report["totals"]["parameters"] == truth["parameter_count"]
        assert report["totals"]["buffers"] == truth["buffer_count"]
    for group in truth.get("same_object", []):
        assert set(got[group[1]].get("shared_with", [])) == {group[0]}
    # the stand-ins for NumPy/torch/joblib are understood: no foreign-global warnings, except
    # the one call a loader makes on nested torch.save bytes (pickle.dumps of a tensor), whose
    # verdict is the examined bytes': foreign (a warning), never dangerous for plain tensors
    nested = "torch.storage._load_from_bytes"
    assert not [f for f in ckpt.findings if f.severity != "info" and f.subject != nested]
    assert not [f for f in ckpt.findings if f.severity == "danger"], ckpt.findings


def test_fortran_order_is_kept():
    truth = load_truth(PICKLES / "numpy_dict.p2.pkl.truth.json")
    ckpt = load(PICKLES / "numpy_dict.p2.pkl")
    for t in truth["tensors"]:
        assert ckpt[t["stored_name"]].extra["fortran_order"] is t["fortran_order"]


def test_nothing_from_a_plain_pickle_runs(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (eval, (f"open({str(marker)!r}, 'w')",))

    for proto in range(6):
        p = tmp_path / f"evil{proto}.pkl"
        p.write_bytes(pickle.dumps({"w": Payload()}, protocol=proto))
        proc = run_cli("show", str(p))
        assert proc.returncode == 2 and "refused" in proc.stderr and "eval" in proc.stderr, proc.stderr
        assert not marker.exists()
    # the same bytes do run under pickle.loads: the test would notice
    pickle.loads(p.read_bytes())
    assert marker.exists()


def test_text_is_not_taken_for_a_pickle(tmp_path, cli):
    p = tmp_path / "notes.txt"
    p.write_text("(define x 1)\ncommit\n")
    proc = cli("show", str(p))
    assert proc.returncode == 2 and "a text file" in proc.stderr


# --- names that do not leak the reader --------------------------------------------------------

LIGHTNING = FIXTURES / "dirs" / "lightning"


@pytest.mark.parametrize("name", ["class_keyed_callbacks.ckpt", "lightning_1step.ckpt"])
def test_lightning_checkpoints(name):
    truth = load_truth(LIGHTNING / f"{name}.truth.json")
    ckpt = load(LIGHTNING / name)
    report = listing(ckpt)
    got = {t["stored_name"]: t for t in report["tensors"]}
    assert list(got) == [t["stored_name"] for t in truth["tensors"]]
    for t in truth["tensors"]:
        g = got[t["stored_name"]]
        assert (g["shape"], g["dtype"], g["role"]) == (t["shape"], t["dtype"], t["role"])
    assert report["totals"]["parameters"] == truth["parameter_count"]
    assert report["totals"]["buffers"] == truth["buffer_count"]


def test_class_keys_are_named_by_their_dotted_class_name():
    truth = load_truth(LIGHTNING / "class_keyed_callbacks.ckpt.truth.json")
    ckpt = load(LIGHTNING / "class_keyed_callbacks.ckpt")
    names = [t.stored_name for t in ckpt.tensors]
    for t in truth["tensors"]:
        if "class" in t["key_types"]:
            assert t["stored_name"] in names
    proc = run_cli("show", str(LIGHTNING / "class_keyed_callbacks.ckpt"), "--format", "json")
    assert proc.returncode == 0
    assert "restricted_pickle" not in proc.stdout and "<placeholder" not in proc.stdout


# --- optimizer state keyed by id() ------------------------------------------------------------

OLD = FIXTURES / "dirs" / "old_optimizer"


@pytest.mark.parametrize("run", ["run1.pt", "run2.pt"])
def test_id_keyed_optimizer_state_is_named_after_its_parameter(run):
    truth = load_truth(OLD / f"{run}.truth.json")
    ckpt = load(OLD / run)
    got = {t.stored_name: t for t in ckpt.tensors}
    assert sorted(got) == sorted(t["stored_name"] for t in truth["tensors"])
    for m in truth["optimizer_state_mapping"]:
        for slot in ("exp_avg", "exp_avg_sq"):
            t = got[f"optimizer.state.{m['state_key']}.{slot}"]
            assert t.name == f"optimizer.state.{m['parameter_index']}.{slot}"
            assert list(t.shape) == m["shape"]
    assert ckpt.totals()["parameters"] == truth["parameter_count"]


def test_two_runs_diff_as_the_same_structure(cli):
    res = diff(load(OLD / "run1.pt"), load(OLD / "run2.pt"))
    assert not res.structural
    proc = cli("diff", str(OLD / "run1.pt"), str(OLD / "run2.pt"))
    assert proc.returncode == 0 and "same structure" in proc.stdout


@pytest.mark.parametrize("name", [
    "dirs/torchscript_script.pt", "dirs/pickles/numpy_dict.p0.pkl",
    "dirs/pickles/numpy_dict.p5.pkl", "dirs/pickles/torch_state_dict.p2.pkl",
    "dirs/pickles/joblib_numpy.joblib", "dirs/pickles/joblib_numpy_z3.joblib",
    "dirs/pickles/object_dict.npy", "dirs/old_optimizer/run1.pt",
])
def test_damaged_copies_end_in_one_clean_error(tmp_path, name):
    """Truncations and byte flips of the new formats: a listing or an InspectorError, never
    another exception (derandomised)."""
    import random

    from inspector.adapters.errors import InspectorError

    data = (FIXTURES / name).read_bytes()
    rng = random.Random(name)
    variants = [data[: rng.randrange(1, len(data))] for _ in range(10)]
    for _ in range(20):
        b = bytearray(data)
        for _ in range(rng.choice([1, 2, 4])):
            b[rng.randrange(len(b))] = rng.randrange(256)
        variants.append(bytes(b))
    target = tmp_path / (FIXTURES / name).name
    for v in variants:
        target.write_bytes(v)
        try:
            listing(load(target))
        except InspectorError:
            pass


def test_joblib_values_are_read_from_their_bytes():
    """Uncompressed joblib lays arrays out as raw bytes: their values are read in place and
    equal what the producer dumped (the same dict, pickled by numpy into numpy_dict.p4.pkl,
    loaded here by numpy itself)."""
    np = pytest.importorskip("numpy")
    from inspector.values import iter_values

    want = pickle.loads((PICKLES / "numpy_dict.p4.pkl").read_bytes())  # our own fixture
    ckpt = load(PICKLES / "joblib_numpy.joblib")
    for t in ckpt.tensors:
        ref = want
        for part in t.stored_name.split("."):
            ref = ref[part]
        got = np.concatenate([np.asarray(c).ravel() for c in iter_values(ckpt, t)])
        assert np.array_equal(got, np.asarray(ref).ravel(order="C")), t.stored_name
