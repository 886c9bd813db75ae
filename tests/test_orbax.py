"""orbax-checkpoint directories: listings equal orbax's own metadata() (names, shapes, dtypes
where the layout keeps them in plain files), roles, values of uncompressed zarr arrays equal
orbax's restore; damaged metadata fails in one line."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from inspector import values
from inspector.adapters.errors import FormatError
from inspector.adapters.registry import load

from conftest import FIXTURES, load_truth

ORBAX = FIXTURES / "orbax"
LAYOUTS = ["ocdbt", "zarr2", "zarr2_raw", "zarr3", "manager"]


@pytest.mark.parametrize("name", LAYOUTS)
def test_listing_equals_orbax_metadata(name):
    truth = load_truth(ORBAX / f"{name}.truth.json")
    ckpt = load(ORBAX / name)
    assert ckpt.format == "orbax"
    got = {t.stored_name: t for t in ckpt.tensors}
    assert sorted(got) == sorted(w["stored_name"] for w in truth["tensors"])
    ocdbt = truth["layout"] in ("ocdbt", "manager")
    for w in truth["tensors"]:
        t = got[w["stored_name"]]
        assert list(t.shape) == w["shape"] and t.role.value == w["role"], w
        # OCDBT keeps dtypes inside tensorstore's compressed database: named unknown
        assert t.dtype == ("unknown" if ocdbt else w["dtype"]), w
    params = sum(t.numel for t in ckpt.tensors if t.role.value == "parameter")
    assert params == truth["parameter_count"]
    if ocdbt:
        assert any("OCDBT" in f.message for f in ckpt.findings)
        # sizes unknown, and the totals say so instead of a bare 0 B
        from inspector.reports.listing import listing

        assert listing(ckpt)["totals"]["bytes_unknown_tensors"] == len(truth["tensors"])


def test_sharded_arrays_say_their_shape_is_the_written_piece():
    """orbax writes each device's piece (and splits a replicated one among replicas): write_shape
    is not the array's shape, and the listing says so instead of guessing."""
    truth = load_truth(ORBAX / "sharded.truth.json")
    ckpt = load(ORBAX / "sharded")
    assert sorted(t.stored_name for t in ckpt.tensors) == sorted(
        w["stored_name"] for w in truth["tensors"])
    assert all(t.extra.get("shape_is_write_shape") for t in ckpt.tensors)
    assert any("not the array's" in f.message and f.severity == "warning"
               for f in ckpt.findings)
    assert any(list(ckpt[w["stored_name"]].shape) != w["shape"] for w in truth["tensors"])


def test_manager_lists_the_latest_step_and_names_the_others():
    truth = load_truth(ORBAX / "manager.truth.json")
    ckpt = load(ORBAX / "manager")
    assert ckpt.metadata["steps"] == truth["all_steps"]
    assert ckpt.metadata["step"] == truth["latest_step"]
    assert any("steps here" in f.message for f in ckpt.findings)
    # a step folder alone is one checkpoint too
    assert len(load(ORBAX / "manager" / "1").tensors) == len(truth["tensors"])


def test_uncompressed_zarr_values_equal_orbax_restore():
    truth = load_truth(ORBAX / "zarr2_raw.truth.json")
    ckpt = load(ORBAX / "zarr2_raw")
    for w in truth["tensors"]:
        t = ckpt[w["stored_name"]]
        x = np.concatenate(list(values.iter_values(ckpt, t))).astype("<f4")
        assert hashlib.sha256(x.tobytes()).hexdigest() == w["values"]["sha256_f32le"], t.name


@pytest.mark.parametrize("name,why", [("zarr2", "zstd-compressed"), ("ocdbt", "dtype unknown"),
                                      ("zarr3", "zarr v3")])
def test_unreadable_values_say_why(name, why):
    ckpt = load(ORBAX / name)
    with pytest.raises(FormatError, match=why):
        list(values.iter_values(ckpt, ckpt.tensors[1]))


def _copy(tmp_path, name="zarr2_raw"):
    dst = tmp_path / name
    shutil.copytree(ORBAX / name, dst)
    return dst


@pytest.mark.parametrize("edit,match", [
    (lambda d: (d / "_METADATA").write_text("{not json"), "not readable JSON"),
    (lambda d: (d / "_METADATA").write_text('{"x": 1}'), "no 'tree_metadata'"),
    (lambda d: shutil.rmtree(d / "params.Dense_0.kernel"), "folder is missing"),
    (lambda d: (d / "params.Dense_0.kernel" / ".zarray").write_text(
        json.dumps({"shape": [-1], "dtype": "<f4"})), "not a list of non-negative"),
    (lambda d: (d / "params.Dense_0.kernel" / ".zarray").write_text(
        json.dumps({"shape": [2], "dtype": "|O"})), "zarr dtype '|O' not known"),
    (lambda d: (d / "_METADATA").write_text("[" * 100000 + "]" * 100000), "JSON|tree_metadata"),
])
def test_damaged_metadata_fails_in_one_line(tmp_path, edit, match):
    d = _copy(tmp_path)
    edit(d)
    with pytest.raises(FormatError, match=match) as e:
        load(d)
    assert "\n" not in str(e.value)


def test_scan_says_nothing_dangerous(cli):
    r = cli("scan", str(ORBAX / "ocdbt"), str(ORBAX / "zarr2"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 dangerous" in r.stdout
