"""``inspector check`` on the real Keras layer fixtures: wrong layer configs and configs swapped
between two models are mismatches; an unknown layer is not modelled, and the layers after it are
still checked (their input width read from their stored weights).

The fixtures are written by Keras 3.15.1, tf.keras 2.15.0, Keras 2.0.5 / 2.1.6 / 2.2.4 / 2.3.1 and
tf.keras 1.15.5 (``fixtures/keras/make_layers.py``, ``make_old_keras.py``); every one of them
verifies or is incomplete as ``test_formulas_keras`` lists, each against the producer's truth.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import pytest

from inspector.adapters.registry import load
from inspector.formulas.check import check
from inspector.formulas.core import get
from inspector.formulas.keras_layers import einsum_shapes
from tests.conftest import FIXTURES, load_truth, run_cli

KERAS = FIXTURES / "keras"


def failing(path: str, edit: str) -> tuple[str, set[str]]:
    result = check(load(KERAS / path, allow_unsafe=True), get("keras"), {"edit": edit})
    return result.verdict, {g.name for g in result.groups if g.status != "ok"}


# (fixture, one wrong config value, the layers whose variables it changes)
WRONG = [
    ("layers_conv2d.keras", "separable_conv2d.depth_multiplier=1", {"separable_conv2d"}),
    # the depthwise output width (8*dm) is the transposed convolution's input
    ("layers_conv2d.keras", "depthwise_conv2d.depth_multiplier=1",
     {"depthwise_conv2d", "conv2d_transpose"}),
    ("layers_conv2d.keras", "conv2d_transpose.filters=3",
     {"conv2d_transpose", "batch_normalization", "group_normalization", "batch_normalization_1",
      "dense"}),
    ("layers_conv2d.keras", "group_normalization.center=False", {"group_normalization"}),
    # cropping changes the spatial size, so the flattened width the Dense kernel takes
    ("keras2_layers_conv2d.h5", "cropping2d.cropping=1", {"dense"}),
    ("layers_conv1d_3d.keras", "depthwise_conv1d.depth_multiplier=1",
     {"depthwise_conv1d", "conv1d_transpose"}),
    ("keras2_layers_seq_attention.h5", "additive_attention.use_scale=False",
     {"additive_attention"}),
    ("layers_seq_attention.keras", "attention.score_mode='dot'", {"attention"}),
    ("keras2_layers_seq_attention.h5", "einsum_dense.bias_axes=None", {"einsum_dense"}),
    ("layers_seq_attention.keras", "einsum_dense.output_shape=[None, 6]",
     {"einsum_dense", "layer_normalization"}),
    ("keras205_conv2d.h5", "batch_normalization_1.center=True", {"batch_normalization_1"}),
    ("keras231_rnn.h5", "gru_1.reset_after=True", {"gru_1"}),
    ("keras216_conv1d_3d.h5", "separable_conv1d_1.depth_multiplier=2", {"separable_conv1d_1"}),
    # after the Lambda: still checked
    ("keras224_seq2seq_states.h5", "lstm_2.units=5", {"lstm_2"}),
    # Reshape -> Permute feed the Bidirectional LSTM its width and the Conv1D its length
    ("layers_reshape_states.keras", "reshape.target_shape=[2, 12]", {"bidirectional", "dense"}),
    # the wrapped LSTM's width: both directions, the Conv1D on the sequence, the Dense on states
    ("keras2_layers_reshape_states.h5", "lstm.units=4", {"bidirectional", "conv1d", "dense"}),
    ("keras2_layers_reshape_states.h5", "conv1d.kernel_size=2", {"conv1d", "dense"}),
]


@pytest.mark.parametrize("path,edit,layers", WRONG, ids=[f"{p}:{e}" for p, e, _ in WRONG])
def test_wrong_layer_config_is_a_mismatch_of_exactly_its_layers(path, edit, layers):
    verdict, groups = failing(path, edit)
    assert verdict == "mismatch"
    assert {g.removeprefix("sequential/") for g in groups} == layers


@pytest.mark.parametrize("model,other", [
    ("keras231_rnn.h5", "keras231_bidir_td.h5"),
    ("keras205_conv2d.h5", "keras205_conv1d_3d.h5"),
    ("layers_conv2d.keras", "layers_conv1d_3d.keras"),
    ("keras2_layers_seq_attention.h5", "keras2_layers_conv2d.h5"),
])
def test_config_swapped_between_two_models_is_a_mismatch(model, other):
    # keras2_layers_seq_attention.h5 holds Lambda bytecode: refused unless --allow-unsafe,
    # and then never verified (status unsafe), its mismatched tensors still listed
    lambda_code = model.startswith("keras2_layers_seq")
    r = run_cli("check", str(KERAS / model), "--set", f"config={KERAS / other}",
                "--format", "json", *(["--allow-unsafe"] if lambda_code else []))
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verdict"] == ("unsafe" if lambda_code else "mismatch")
    assert rep["tensors"]


def test_old_keras_naming_is_read_from_keras_version():
    """Keras 2.3.1 names recurrent weights without the cell scope; forcing the modern naming
    on its file is a mismatch, the file's own version verifies."""
    path = str(KERAS / "keras231_rnn.h5")
    assert run_cli("check", path).returncode == 0
    r = run_cli("check", path, "--set", "rnn_cell_scope=yes", "--format", "json")
    assert r.returncode == 1
    missing = {t["name"] for t in json.loads(r.stdout)["tensors"] if t["status"] == "missing"}
    assert "lstm_1/lstm_cell/kernel" in missing


def test_reloaded_model_scopes_are_canonicalised_to_the_layer_name():
    """A Keras 2.1.6 model loaded where it was built stores lstm_1_2/kernel:0 in layer lstm_1's
    group; the listing names it lstm_1/kernel (the name Keras built it with), the stored name
    stays the file's."""
    path = KERAS / "keras216_reloaded_seq2seq_states.h5"
    truth = load_truth(path.with_name(path.name + ".truth.json"))
    lstm = next(layer for layer in truth["layers"] if layer["name"] == "lstm_1")
    assert lstm["weights"][0]["name"] == "lstm_1_2/kernel:0"  # its second load in that session
    assert lstm["weights"][0]["name_as_built"] == "lstm_1/kernel:0"
    entry = load(path, allow_unsafe=True)["lstm_1/kernel"]  # a Keras 2 Lambda: bytecode
    assert entry.stored_name == "/model_weights/lstm_1/lstm_1_2/kernel:0"


def _renamed(tmp_path: Path, fixture: str, layer: str, cls: str) -> Path:
    """A copy of a real fixture with one layer's class renamed in its model_config."""
    out = tmp_path / fixture
    shutil.copy(KERAS / fixture, out)
    with h5py.File(out, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        entry = next(e for e in config["config"]["layers"] if e["config"]["name"] == layer)
        entry["class_name"] = cls
        f.attrs["model_config"] = json.dumps(config)
    return out


def test_unknown_layer_in_old_keras_is_incomplete_and_later_layers_are_checked(tmp_path):
    path = _renamed(tmp_path, "keras224_conv2d.h5", "separable_conv2d_1", "MySeparable")
    r = run_cli("check", str(path), "--format", "json")
    assert r.returncode == 3, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "incomplete"
    parts = {p["name"] for p in rep["parts"]}
    assert parts == {"layer separable_conv2d_1 (MySeparable)",
                     "input of layer depthwise_conv2d_1 (DepthwiseConv2D)",
                     "input of layer dense_1 (Dense)"}
    assert {t["name"].split("/")[0] for t in rep["tensors"]} == {"separable_conv2d_1"}
    assert {t["status"] for t in rep["tensors"]} == {"not_modelled"}
    ok = {g["name"] for g in rep["groups"] if g["status"] == "ok"}
    assert {"conv2d_1", "depthwise_conv2d_1", "conv2d_transpose_1", "batch_normalization_1",
            "dense_1"} <= ok
    # a wrong config after the unknown layer is still a mismatch
    for edit in ("conv2d_transpose_1.filters=3", "dense_1.units=3"):
        r = run_cli("check", str(path), "--set", f"edit={edit}")
        assert r.returncode == 1 and "MISMATCH" in r.stdout, edit


def test_lambda_in_keras2_graph_is_incomplete_never_mismatch():
    """Keras 2 records no shapes in its config: after a Lambda the next Dense reads its input
    width from its stored kernel; every variable is still predicted and found."""
    path = str(KERAS / "keras231_seq2seq_states.h5")
    refused = run_cli("check", path, "--format", "json")  # the Lambda's bytecode
    assert refused.returncode == 2 and "marshalled Python bytecode" in refused.stderr
    r = run_cli("check", path, "--format", "json", "--allow-unsafe")
    assert r.returncode == 1, r.stderr  # never verified
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "unsafe"
    assert [p["name"] for p in rep["parts"]] == ["input of layer dense_1 (Dense)"]
    assert rep["tensors"] == []
    truth = load_truth(KERAS / "keras231_seq2seq_states.h5.truth.json")
    assert rep["totals"]["found"] == rep["totals"]["predicted"] == truth["count_params"]


@pytest.mark.parametrize("equation,bias_axes,x,out,kernel,bias,full", [
    ("abc,cd->abd", "d", (None, 7, 18), (None, 5), (18, 5), (5,), (None, None, 5)),
    ("abc,cde->abde", "de", (None, 4, 8), (4, 2, 3), (8, 2, 3), (2, 3), (None, 4, 2, 3)),
    ("...b,bc->...c", "c", (None, 3, 6), 4, (6, 4), (4,), (None, 3, 4)),
    ("ab...,bc->ac...", "c", (None, 6, 3), (4, 3), (6, 4), (4, 1), (None, 4, 3, 3)),
])
def test_einsum_shapes_follow_keras(equation, bias_axes, x, out, kernel, bias, full):
    """EinsumDense weight and output shapes as Keras 3.15.1 itself built them
    (``EinsumDense(equation, output_shape, bias_axes)(keras.Input(x[1:]))``: its weights'
    shapes and its output's shape), for plain, left- and right-elided equations."""
    assert einsum_shapes(equation, bias_axes, x, out) == (kernel, bias, full)


def test_layers_spec_equals_the_real_conv_zoo():
    """The Sequential conv model written as a layers= spec predicts exactly the variables
    Keras 3.15.1 reported for layers_conv2d.keras (paths, shapes, trainable)."""
    truth = load_truth(KERAS / "layers_conv2d.keras.truth.json")
    want = {w["path"]: (tuple(w["shape"]), w["trainable"])
            for layer in truth["layers"] for w in layer["weights"]}
    arch = get("keras")
    p = arch.predict(arch.resolve({
        "layers": "Conv2D(4,3), SeparableConv2D(8,3,padding='same',depth_multiplier=2), "
                  "DepthwiseConv2D(3,padding='same',depth_multiplier=2), MaxPooling2D(), "
                  "Conv2DTranspose(2,3,strides=2), BatchNormalization(center=False), "
                  "ZeroPadding2D(1), Cropping2D(2), UpSampling2D(), GroupNormalization(2), "
                  "BatchNormalization(center=False,scale=False), AveragePooling2D(3), "
                  "Flatten(), Dropout(0.1), Dense(2)",
        "input_shape": "(9,9,3)"}))
    assert {t.name: (t.shape, t.role == "parameter") for t in p.tensors} == want
    assert p.total(None) == truth["count_params"] == 758


def test_tf_keras_1_optimizer_moments_are_checked_against_their_parameters(tmp_path):
    """tf.keras 1.15 / 2.1 name Adam's moments [training/]Adam/<parameter>/m|v: each is checked
    against its parameter; a real file with one moment transposed is a mismatch naming it."""
    for name in ("tfkeras1155_rnn.h5", "tfkeras214_rnn.h5"):
        result = check(load(KERAS / name))
        assert result.verdict == "verified" and result.checked["optimizer_slots"] == 24
    path = tmp_path / "rnn.h5"
    shutil.copy(KERAS / "tfkeras1155_rnn.h5", path)
    with h5py.File(path, "r+") as f:
        ds = "optimizer_weights/training/Adam/lstm/kernel/m:0"
        value = f[ds][()]
        del f[ds]
        f[ds] = value.T
    r = run_cli("check", str(path), "--format", "json")
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert [(f["kind"], f["expected"], f["found"]) for f in rep["findings"]] == [
        ("optimizer_state", [4, 20], [20, 4])]


def test_bidirectional_after_an_unknown_layer_is_still_checked(tmp_path):
    """Keras 2.2.4: TimeDistributed renamed to an unknown class; the Bidirectional GRU after it
    reads its input width from its forward kernel, and a wrong GRU width is still a mismatch."""
    path = _renamed(tmp_path, "keras224_bidir_td.h5", "time_distributed_1", "MyTD")
    rep = json.loads(run_cli("check", str(path), "--format", "json").stdout)
    assert rep["verdict"] == "incomplete"
    assert {p["name"] for p in rep["parts"]} == {
        "layer time_distributed_1 (MyTD)", "input of layer bidirectional_2 (Bidirectional)"}
    assert {g["name"]: g["status"] for g in rep["groups"]}["bidirectional_2"] == "ok"
    r = run_cli("check", str(path), "--set", "edit=gru_1.units=3")
    assert r.returncode == 1 and "MISMATCH" in r.stdout
