"""TensorFlow checkpoints (the tensor bundle) against TensorFlow's own reader.

``fixtures/tf/`` holds a ``tf.train.Checkpoint`` of a Keras LM after one Adam step and a TF1
``Saver`` checkpoint in two shards, written by TensorFlow 2.15 (``fixtures/tf/make_fixtures.py``);
their truth is what ``tf.train.load_checkpoint`` reads back: names, shapes, dtypes, values."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import inspector
from inspector.adapters.errors import FormatError
from inspector.adapters.registry import load

from conftest import FIXTURES, load_truth, run_cli

TF = FIXTURES / "tf"
INDEXES = {"tf2_lm": TF / "tf2_lm" / "ckpt-1.index",
           "tf1_graph": TF / "tf1_graph" / "model.ckpt.index"}


def _truth(name: str) -> dict:
    path = INDEXES[name]
    return load_truth(path.with_name(path.name + ".truth.json"))


@pytest.mark.parametrize("name", sorted(INDEXES))
@pytest.mark.parametrize("how", ["index", "directory"])
def test_listing_is_what_tensorflow_reads(name, how):
    truth = _truth(name)
    ckpt = load(INDEXES[name] if how == "index" else INDEXES[name].parent)
    assert ckpt.format == "tf-checkpoint"
    got = {t.stored_name: t for t in ckpt.tensors}
    assert sorted(got) == sorted(t["stored_name"] for t in truth["tensors"])
    for t in truth["tensors"]:
        assert list(got[t["stored_name"]].shape) == t["shape"], t["stored_name"]
        assert got[t["stored_name"]].dtype == t["dtype"], t["stored_name"]


@pytest.mark.parametrize("name", sorted(INDEXES))
def test_parameters_are_the_trainable_variables(name):
    """Optimizer slots, step counters and batch-norm statistics are not parameters: the count is
    the model's trainable parameters as TensorFlow/Keras count them."""
    ckpt = load(INDEXES[name])
    assert ckpt.totals()["parameters"] == _truth(name)["trainable_params"]
    shown = json.loads(run_cli("show", str(INDEXES[name]), "--format", "json").stdout)
    assert shown["totals"]["parameters"] == _truth(name)["trainable_params"]


@pytest.mark.parametrize("name", sorted(INDEXES))
def test_values_are_tensorflows(name):
    ckpt = load(INDEXES[name])
    for t in _truth(name)["tensors"]:
        if "stats" not in t or not t["stats"]["count"]:
            continue
        x = np.asarray(inspector.get_tensor(ckpt, t["stored_name"]), dtype=np.float64).ravel()
        s = t["stats"]
        assert x.size == s["count"], t["stored_name"]
        assert x.min() == pytest.approx(s["min"]) and x.max() == pytest.approx(s["max"])
        assert float(np.dot(x, x)) == pytest.approx(s["sumsq"], rel=1e-9, abs=1e-12)


def test_stats_reads_every_shard():
    out = run_cli("stats", str(INDEXES["tf1_graph"]), "--format", "json")
    assert out.returncode in (0, 1), out.stderr
    rep = json.loads(out.stdout)
    want = {t["stored_name"]: t["stats"] for t in _truth("tf1_graph")["tensors"]
            if "stats" in t}
    got = {t["stored_name"] if "stored_name" in t else t["name"]: t for t in rep["tensors"]}
    for name, s in want.items():
        assert got[name]["stats"]["count"] == s["count"], name
        assert got[name]["stats"]["max"] == pytest.approx(s["max"]), name


def _rewrite(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "bad.index"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("edit", ["magic", "index_handle", "restarts", "entry_length"])
def test_hostile_index_is_one_line(edit, tmp_path):
    data = bytearray(INDEXES["tf2_lm"].read_bytes())
    n = len(data)
    if edit == "magic":
        data[-8:] = b"\0" * 8
    elif edit == "index_handle":  # the index block's handle points past the file
        data[n - 48 : n - 8] = bytes([0x80 | 0x7F] * 9 + [0x01]) + bytes(30)
    elif edit == "restarts":  # a restart count larger than the block
        data[n - 48 - 5 - 4 : n - 48 - 5] = struct.pack("<I", 0xFFFFFFF0)
    else:  # the first entry's value length runs past its block
        data[2] = 0x7F
    path = _rewrite(tmp_path, bytes(data))
    r = run_cli("show", str(path))
    assert r.returncode == 2, r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in r.stderr


def test_a_directory_of_two_checkpoints_without_state_names_them(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.index").write_bytes(INDEXES["tf2_lm"].read_bytes())
    with pytest.raises(FormatError, match="2 checkpoint indexes"):
        load(tmp_path, "tf-checkpoint")
