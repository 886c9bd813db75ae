"""Keras HDF5 / .keras adapter: seed totals from real files, detection, metadata only, bad input.

Per-fixture names, shapes, dtypes and trainable splits against Keras' own records are checked by
``test_fixture_truth.py``; here the seed documents' totals, the no-value-read guarantee and the
hostile files (built inside the tests with h5py and zipfile).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile

import h5py
import numpy as np
import pytest

import inspector.adapters.keras as keras_adapter
from inspector.adapters.errors import FormatError, UnsafeContentError
from inspector.adapters.registry import detect, load

from conftest import FIXTURES, ROOT
from hostile import assert_clean_error

KERAS = FIXTURES / "keras"

# Seed 002 (In[3], In[4], In[6]) and seed 004: Keras' model.summary() totals as the seeds state them.
SEED_TOTALS = {
    "seed002_embedding_flatten_dense": 1_320_065,
    "seed002_embedding_simplernn_dense": 1_004_289,
    "seed002_embedding_lstm_dense": 1_017_057,
    "seed004_lstm": 48,
    "seed004_dense": 32,
    "keras2_seed004_lstm": 48,
}
SEED_FILES = sorted(
    p for stem in SEED_TOTALS for p in KERAS.glob(f"{stem}*") if not p.name.endswith(".json")
)


@pytest.mark.parametrize("path", SEED_FILES, ids=lambda p: p.name)
def test_seed_totals_from_real_files(path):
    stem = next(s for s in sorted(SEED_TOTALS, key=len, reverse=True) if path.name.startswith(s))
    ckpt = load(path)
    assert ckpt.totals()["parameters"] == SEED_TOTALS[stem]
    assert ckpt.totals()["buffers"] == 0


def test_every_seed_model_in_every_layout():
    names = {p.name for p in SEED_FILES}
    for stem in SEED_TOTALS:
        if stem.startswith("keras2_"):
            assert {f"{stem}.h5", f"{stem}_weights.h5"} <= names
        else:
            assert {f"{stem}.keras", f"{stem}.weights.h5"} <= names


def test_seed002_lstm_per_layer_counts():
    # Seed 002 In[6]: embedding 1,000,000; LSTM 4*(100*32 + 32*32 + 32) = 17,024; dense 33.
    ckpt = load(KERAS / "seed002_embedding_lstm_dense.keras")
    per_layer: dict[str, int] = {}
    for t in ckpt.tensors:
        layer = t.name.split("/")[1]
        per_layer[layer] = per_layer.get(layer, 0) + t.numel
    assert per_layer == {"embedding": 1_000_000, "lstm": 17_024, "dense": 33}


# ---------------------------------------------------------------- detection


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("lstm.keras", "keras-v3"),
        ("lstm.weights.h5", "keras-weights-h5"),
        ("lstm.legacy.h5", "keras-legacy-h5"),
        ("keras2_lm_adam.h5", "keras2-h5"),
        ("keras2_lm_adam_weights.h5", "keras2-weights-h5"),
    ],
)
def test_detected_by_content_not_extension(tmp_path, name, fmt):
    renamed = tmp_path / "checkpoint.bin"
    shutil.copy(KERAS / name, renamed)
    adapter, _ = detect(renamed)
    assert adapter.name == "keras"
    assert load(renamed).format == fmt


def test_torch_zip_is_not_taken_for_a_keras_archive():
    torch_zip = next(p for p in sorted((FIXTURES / "torch").glob("*.pt")) if zipfile.is_zipfile(p))
    assert detect(torch_zip)[0].name == "torch"
    assert detect(KERAS / "lstm.keras")[0].name == "keras"


def test_hdf5_after_a_user_block(tmp_path):
    path = tmp_path / "ub.weights.h5"
    with h5py.File(path, "w", userblock_size=1024) as f:
        f.create_group("layers/dense/vars").attrs["name"] = "dense"
        f["layers/dense/vars/0"] = np.zeros((3, 2), "float32")
        f["layers/dense/vars/1"] = np.zeros(2, "float32")
        f.create_group("vars").attrs["name"] = "sequential"
    assert detect(path)[0].name == "keras"
    ckpt = load(path)
    assert [t.name for t in ckpt.tensors] == ["sequential/dense/kernel", "sequential/dense/bias"]
    # Offsets are absolute in the file, user block included: they point at the data.
    raw = path.read_bytes()
    kernel = ckpt.tensors[0]
    assert kernel.offset >= 1024
    assert raw[kernel.offset : kernel.offset + kernel.nbytes] == bytes(24)


# ---------------------------------------------------------------- metadata only


@pytest.fixture
def no_dataset_reads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a listing read dataset values")

    for attr in ("__getitem__", "read_direct", "__array__", "__iter__", "astype", "asstr"):
        monkeypatch.setattr(h5py.Dataset, attr, refuse)


LAYOUT_SAMPLES = [
    "lm_adam.keras",
    "lm_adam.weights.h5",
    "lm_adam.legacy.h5",
    "keras2_lm_adam.h5",
    "keras2_bilstm_gru_bn_weights.h5",
    "batch_norm.keras",
]


@pytest.mark.parametrize("name", LAYOUT_SAMPLES)
def test_listing_reads_no_values(name, no_dataset_reads):
    assert load(KERAS / name).tensors


def _h5_bytes(path):
    """The HDF5 bytes of a fixture and where they start in it (the member of a .keras)."""
    if path.suffix == ".keras":
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("model.weights.h5")
            return z.read(info), keras_adapter._member_data_offset(open(path, "rb"), info, "")
    return path.read_bytes(), 0


@pytest.mark.parametrize("name", LAYOUT_SAMPLES)
def test_zeroed_data_lists_identically_and_offsets_point_at_the_data(tmp_path, name):
    src = KERAS / name
    original = load(src)
    raw = bytearray(src.read_bytes())
    h5, start = _h5_bytes(src)
    spans = []
    with h5py.File(io.BytesIO(h5), "r") as f:

        def visit(_, obj):
            if isinstance(obj, h5py.Dataset) and obj.id.get_offset() is not None:
                off, n = obj.id.get_offset(), obj.id.get_storage_size()
                assert h5[off : off + n] == obj[()].tobytes()  # the test may read values
                spans.append((obj.name, start + off, n))

        f.visititems(visit)
    assert spans
    by_stored = {t.stored_name: t for t in original.tensors}
    for stored, off, n in spans:
        if stored in by_stored:
            assert (by_stored[stored].offset, by_stored[stored].nbytes) == (off, n), stored
        raw[off : off + n] = bytes(n)
    copy = tmp_path / name
    copy.write_bytes(bytes(raw))
    zeroed = load(copy)
    assert [(t.name, t.stored_name, t.shape, t.dtype, t.role) for t in zeroed.tensors] == [
        (t.name, t.stored_name, t.shape, t.dtype, t.role) for t in original.tensors
    ]


def test_config_and_versions_are_reported():
    legacy = load(KERAS / "keras2_lm_adam.h5")
    assert legacy.metadata["keras_version"] == "2.15.0"
    assert legacy.metadata["backend"] == "tensorflow"
    assert legacy.hyperparameters["class_name"] == "Sequential"
    assert legacy.hyperparameters["training_config"]["optimizer_config"]["config"]["name"] == "Adam"
    archive = load(KERAS / "lm_adam.keras")
    assert archive.metadata["keras_version"] == "3.15.1"
    assert archive.hyperparameters["config"]["name"] == "lm"
    assert archive.hyperparameters["compile_config"]["optimizer"]["class_name"] == "Adam"


def test_weights_only_file_says_its_names_are_inferred():
    ckpt = load(KERAS / "lstm.weights.h5")
    assert any("no model config" in f.message for f in ckpt.findings)
    assert not load(KERAS / "lstm.keras").findings


def test_cli_lists_a_keras_archive_without_importing_a_framework():
    probe = (
        "import json, sys; from inspector.cli import main; sys.stdout = open('/dev/null', 'w');"
        f"rc = main(['show', '--format', 'json', {str(KERAS / 'lm_adam.keras')!r}]);"
        "sys.stdout = sys.__stdout__;"
        "print(json.dumps([rc, sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('keras', 'tensorflow', 'torch', 'jax'))]))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [0, []], proc.stderr


# ---------------------------------------------------------------- hostile input


def _keras3_file(path, **extra):
    with h5py.File(path, "w") as f:
        f.create_group("vars").attrs["name"] = "functional"
        f.create_group("layers/input_layer/vars").attrs["name"] = "input_layer"
        f.create_group("layers/dense/vars").attrs["name"] = "dense"
        f["layers/dense/vars/0"] = np.ones((3, 2), "float32")
        for name, make in extra.items():
            make(f, name)
    return path


def test_bad_superblock(tmp_path, cli):
    p = tmp_path / "bad.h5"
    p.write_bytes(keras_adapter.HDF5_MAGIC + b"\xff" * 200)
    assert_clean_error(cli("show", str(p)), str(p), "HDF5")


def test_file_cut_in_the_middle(tmp_path, cli):
    data = (KERAS / "lm_adam.legacy.h5").read_bytes()
    p = tmp_path / "cut.h5"
    p.write_bytes(data[: len(data) // 2])
    assert_clean_error(cli("show", str(p)), str(p), "truncated")


def test_keras_zip_with_garbage_weights(tmp_path, cli):
    p = tmp_path / "bad.keras"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("metadata.json", '{"keras_version": "3.15.1"}')
        z.writestr("config.json", "{}")
        z.writestr("model.weights.h5", b"\x89HDF\r\n\x1a\n" + b"garbage" * 40)
    assert_clean_error(cli("show", str(p)), str(p), "model.weights.h5", "HDF5")


def test_keras_zip_with_bad_config(tmp_path, cli):
    p = tmp_path / "bad.keras"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("config.json", "{not json")
        z.writestr("model.weights.h5", (KERAS / "lstm.weights.h5").read_bytes())
    assert_clean_error(cli("show", str(p)), str(p), "config.json is not valid JSON")


def test_keras_zip_without_weights(tmp_path, cli):
    p = tmp_path / "empty.keras"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("config.json", "{}")
        z.writestr("metadata.json", "{}")
    assert_clean_error(cli("show", str(p)), str(p), "without model.weights.h5")


def test_compressed_member_lists_and_large_one_is_refused(tmp_path, monkeypatch):
    p = tmp_path / "deflated.keras"
    with zipfile.ZipFile(KERAS / "lstm.keras") as src, zipfile.ZipFile(p, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info), compress_type=zipfile.ZIP_DEFLATED)
    ckpt = load(p)
    assert ckpt.totals()["parameters"] == load(KERAS / "lstm.keras").totals()["parameters"]
    assert all(t.offset is None for t in ckpt.tensors)
    monkeypatch.setattr(keras_adapter, "MAX_COMPRESSED_H5", 1000)
    with pytest.raises(FormatError, match="compressed.*extract it"):
        load(p)


def test_huge_declared_shape_is_refused_as_keras_does(tmp_path, cli):
    def huge(f, name):
        f.create_dataset(
            "layers/dense/vars/1", shape=(1 << 40, 1 << 10), dtype="float32", chunks=(1, 1024)
        )

    p = _keras3_file(tmp_path / "huge.weights.h5", huge=huge)
    assert_clean_error(cli("show", str(p)), str(p), "/layers/dense/vars/1", "refused")


def test_missing_weight_of_weight_names(tmp_path, cli):
    p = tmp_path / "legacy.h5"
    with h5py.File(p, "w") as f:
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["layer_names"] = [b"dense"]
        f.create_group("dense").attrs["weight_names"] = [b"dense/kernel:0", b"dense/bias:0"]
        f["dense/dense/kernel:0"] = np.ones((3, 2), "float32")
    assert_clean_error(cli("show", str(p)), str(p), "dense/bias:0", "missing")


def test_external_link_and_virtual_dataset_are_not_followed(tmp_path):
    target = tmp_path / "elsewhere.h5"
    with h5py.File(target, "w") as f:
        f["secret"] = np.ones(5, "float32")

    def external(f, name):
        f["layers/dense/vars/1"] = h5py.ExternalLink(str(target), "/secret")

    def virtual(f, name):
        layout = h5py.VirtualLayout(shape=(5,), dtype="float32")
        layout[:] = h5py.VirtualSource(str(target), "secret", shape=(5,))
        f.create_virtual_dataset("extra/virtual", layout)

    p = _keras3_file(tmp_path / "links.weights.h5", external=external, virtual=virtual)
    with pytest.raises(UnsafeContentError, match="external link"):  # an absolute target
        load(p)
    ckpt = load(p, allow_unsafe=True)
    messages = " | ".join(f"{f.where}: {f.message}" for f in ckpt.findings)
    assert "/layers/dense/vars/1: external link" in messages
    assert "/extra/virtual: virtual dataset" in messages
    assert "/layers/dense/vars/1" not in {t.stored_name for t in ckpt.tensors}


def test_hard_link_cycle_terminates(tmp_path):
    p = _keras3_file(tmp_path / "cycle.weights.h5")
    with h5py.File(p, "a") as f:
        f["layers/dense/loop"] = f["layers"]
    ckpt = load(p)
    assert "/layers/dense/vars/0" in {t.stored_name for t in ckpt.tensors}


def test_plain_hdf5_is_listed_by_path(tmp_path):
    p = tmp_path / "plain.h5"
    with h5py.File(p, "w") as f:
        f["a/b"] = np.ones((2, 3), "float64")
    ckpt = load(p)
    assert ckpt.format == "hdf5"
    assert [(t.name, t.shape, t.dtype, t.role.value) for t in ckpt.tensors] == [
        ("a/b", (2, 3), "float64", "other")
    ]
    assert ckpt.findings


def test_walk_crosses_the_pipe_unchanged(tmp_path):
    """The child's facts (as columns of JSON) come back equal to the walk's own: plain
    contiguous datasets, chunked + compressed ones, empty ones, groups and soft links."""
    p = tmp_path / "mixed.h5"
    with h5py.File(p, "w") as f:
        f.attrs["layer_names"] = np.array([b"dense"])
        g = f.create_group("dense")
        g.attrs["weight_names"] = np.array([b"dense/kernel:0", b"dense/bias:0"])
        g.create_dataset("dense/kernel:0", data=np.ones((3, 4), "float32"))
        g.create_dataset("dense/bias:0", data=np.ones(4, "float16"), chunks=(2,),
                         compression="gzip")
        g.create_dataset("empty", shape=(0,), dtype="int8")
        f["alias"] = h5py.SoftLink("/dense/dense/kernel:0")
    size = p.stat().st_size
    here = keras_adapter._read_h5_here(str(p), str(p), size, 0)
    doc = json.loads(json.dumps(keras_adapter._facts_to_json(here)))
    assert keras_adapter._facts_from_json(doc) == here
    assert keras_adapter.read_h5(str(p), str(p), size, 0) == here
