"""The ``keras`` architecture against the real Keras fixtures and the seed documents.

Ground truth: ``fixtures/keras/*.truth.json`` (recorded from Keras 3.15.1 / tf.keras 2.15.0 at
generation time: every variable's path or name, shape, trainable flag, ``count_params``) and the
hand calculations of seeds 002 and 004.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from pathlib import Path

import h5py
import pytest

from inspector.adapters.errors import FormatError, UnknownFormatError, UsageError
from inspector.adapters.registry import load
from inspector.formulas import keras_graph as kf
from inspector.formulas.core import get
from tests.conftest import FIXTURES, load_truth

KERAS = FIXTURES / "keras"
TRUTHS = sorted(KERAS.glob("*.truth.json"))


def config_of(fixture: Path) -> dict:
    """The model config, read straight from the file (weights-only files: their sibling's)."""
    name = fixture.name
    if name.endswith(".weights.h5"):  # Keras 3 save_weights of the same model
        fixture = fixture.with_name(name.removesuffix(".weights.h5") + ".keras")
    elif name.endswith("_weights.h5"):  # tf.keras 2 save_weights of the same model
        fixture = fixture.with_name(name.removesuffix("_weights.h5") + ".h5")
    if fixture.suffix == ".keras":
        with zipfile.ZipFile(fixture) as zf:
            return json.loads(zf.read("config.json"))
    with h5py.File(fixture, "r") as f:
        return json.loads(f.attrs["model_config"])


def truth_variables(truth: dict) -> dict[str, tuple[tuple[int, ...], bool]]:
    """Keras path (Keras 3) or weight name without ``:0`` (Keras 2) -> (shape, trainable)."""
    out = {}
    for layer in truth["layers"]:
        for w in layer["weights"]:
            name = w["path"] or (w.get("name_as_built") or w["name"]).removesuffix(":0")
            out[name] = (tuple(w["shape"]), w["trainable"])
    return out


def predict(**hp):
    arch = get("keras")
    return arch.predict(arch.resolve(hp))


# Real fixtures whose prediction leaves a part out, with what it leaves out (every variable is
# still predicted): a Keras 2 Lambda's output shape is Python code, so the next layer's input
# width is read from its stored kernel.
INCOMPLETE = {  # full-model file name (regex) -> parts
    r"^tfkeras\d+_(reloaded_)?seq2seq_states\.h5$": {"input of layer dense (Dense)"},
    r"^keras2\d\d_(reloaded_)?seq2seq_states\.h5$": {"input of layer dense_1 (Dense)"},
}


def left_out_of(fixture: Path) -> set[str]:
    full_model = fixture.name.replace("_weights.h5", ".h5")
    return next((v for k, v in INCOMPLETE.items() if re.match(k, full_model)), set())


# Keras 3 weights-only files whose names the reader must guess: BatchNormalization(center=False)
# stores the same shapes as (scale=False), and the file has no config to tell them apart.
GUESSED = {"layers_conv2d.weights.h5": {"variable names of layer sequential/batch_normalization"}}


@pytest.mark.parametrize("truth_path", TRUTHS, ids=lambda p: p.name.removesuffix(".truth.json"))
def test_every_fixture_matches_keras(truth_path: Path) -> None:
    truth = load_truth(truth_path)
    fixture = truth_path.with_name(truth_path.name.removesuffix(".truth.json"))
    config = config_of(fixture)
    # the naming facts the file itself carries (keras_version), as `check` reads them
    facts = get("keras").from_checkpoint(load(sibling_with_config(fixture) or fixture, allow_unsafe=True))
    facts.pop("model_config", None)
    p = predict(model_config=config, **facts)
    assert {part.name for part in p.parts} == left_out_of(fixture)
    got = {t.name: (t.shape, t.role == "parameter") for t in p.tensors}
    assert got == truth_variables(truth)
    assert p.total(None) == truth["count_params"]
    assert p.total("parameter") == truth["trainable_params"]
    assert p.total("buffer") == truth["non_trainable_params"]


@pytest.mark.parametrize("truth_path", TRUTHS[::3], ids=lambda p: p.name)
def test_version_detected_from_config(truth_path: Path) -> None:
    truth = load_truth(truth_path)
    config = config_of(truth_path.with_name(truth_path.name.removesuffix(".truth.json")))
    assert kf.detect_keras3(config) == truth["producer"]["version"].startswith("3.")


@pytest.mark.parametrize("name", ["lstm.keras", "lstm.legacy.h5", "keras2_lm_adam.h5"])
def test_config_path_reads_keras_zip_and_h5(name: str) -> None:
    truth = load_truth(KERAS / f"{name}.truth.json")
    p = predict(config=str(KERAS / name))
    assert p.total(None) == truth["count_params"]


def test_changing_reset_after_gives_the_other_gru_fixture() -> None:
    """GRU(4, reset_after=True) config with reset_after flipped == the real reset_after=False
    model: only the bias changes, (2, 12) -> (12,)."""
    config = config_of(KERAS / "gru_reset_after.keras")
    gru = next(e for e in config["config"]["layers"] if e["class_name"] == "GRU")
    gru["config"]["reset_after"] = False
    truth = load_truth(KERAS / "gru_reset_before.keras.truth.json")
    p = predict(model_config=config)
    assert {t.name: (t.shape, True) for t in p.tensors} == truth_variables(truth)
    assert p.total(None) == 96


def test_unknown_layer_class_is_a_note_not_a_guess() -> None:
    config = config_of(KERAS / "shared_layer.keras")
    head = next(e for e in config["config"]["layers"] if e["name"] == "head")
    head["class_name"] = "MyDense"
    p = predict(model_config=config)
    assert [t.name for t in p.tensors] == ["shared_dense/kernel", "shared_dense/bias"]
    assert len(p.notes) == 1
    assert p.notes[0].startswith("cannot predict layer head of class MyDense")


def test_unknown_layer_in_the_middle_keeps_recorded_shapes_downstream() -> None:
    """Keras 3 records tensor shapes in the graph: after an unknown layer the next one still
    gets its input shape (nested model: inner_seq unknown, head still predicted)."""
    config = config_of(KERAS / "nested_sequential_in_functional.keras")
    inner = next(e for e in config["config"]["layers"] if e["name"] == "inner_seq")
    inner["class_name"] = "MyBlock"
    p = predict(model_config=config)
    assert [t.name for t in p.tensors] == ["stem/kernel", "stem/bias", "head/kernel", "head/bias"]
    assert p.notes and "inner_seq of class MyBlock" in p.notes[0]


# ---- through the Keras adapter: `inspector check` ----------------------------------------


def sibling_with_config(fixture: Path) -> Path | None:
    """The full-model file of a weights-only fixture (same model, same seed)."""
    name = fixture.name
    if name.endswith(".weights.h5"):
        return fixture.with_name(name.removesuffix(".weights.h5") + ".keras")
    if name.endswith("_weights.h5"):
        return fixture.with_name(name.removesuffix("_weights.h5") + ".h5")
    return None


@pytest.mark.parametrize("truth_path", TRUTHS, ids=lambda p: p.name.removesuffix(".truth.json"))
def test_check_passes_on_every_fixture(truth_path: Path) -> None:
    """The adapter's config (or, for weights-only files, config= the full-model sibling)
    predicts exactly what the file holds; the architecture is detected from the file."""
    from inspector.adapters.registry import load
    from inspector.formulas.check import check

    fixture = truth_path.with_name(truth_path.name.removesuffix(".truth.json"))
    sibling = sibling_with_config(fixture)
    ckpt = load(fixture, allow_unsafe=True)
    result = check(ckpt, None, {"config": str(sibling)} if sibling else {})
    assert result.arch == "keras"
    left_out = left_out_of(fixture) | GUESSED.get(fixture.name, set())
    if left_out:  # incomplete, never a mismatch: exactly these parts, nothing contradicted
        assert result.verdict == "incomplete", (result.issues, result.notes)
        assert {p.name for p in result.parts} == left_out
        assert not [i for i in result.issues if i.mismatch]
    else:
        assert result.ok, (result.issues, result.notes)
    assert result.found_total == load_truth(truth_path)["trainable_params"]
    if sibling is None:
        assert result.provenance["model_config"] == "checkpoint"


def failing_groups(path: Path, edit: str) -> set[str]:
    from inspector.adapters.registry import load
    from inspector.formulas.check import check

    result = check(load(path), get("keras"), {"edit": edit})
    return {g.name for g in result.groups if g.status != "ok"}


def test_one_wrong_hyperparameter_fails_exactly_the_dependent_groups() -> None:
    # LSTM units feed the next Dense's kernel; the embedding does not depend on them
    assert failing_groups(KERAS / "lm_adam.keras", "lstm.units=8") == {"lm/lstm", "lm/dense"}
    assert failing_groups(KERAS / "keras2_lm_adam.h5", "embedding.output_dim=9") == {
        "embedding", "lstm"}
    assert failing_groups(KERAS / "gru_reset_after.legacy.h5", "gru.reset_after=False") == {"gru"}
    assert failing_groups(KERAS / "batch_norm.keras", "batch_normalization.center=False") == {
        "sequential/batch_normalization"}


def test_edit_errors() -> None:
    with pytest.raises(UsageError, match="no layer named 'nope'"):
        predict(config=str(KERAS / "lstm.keras"), edit="nope.units=3")
    with pytest.raises(UsageError, match="LAYER.KEY=VALUE"):
        predict(config=str(KERAS / "lstm.keras"), edit="units=3")


# ---- layers= specs: cross-checked against real models ------------------------------------


def test_spec_equals_real_stacked_lstm() -> None:
    truth = load_truth(KERAS / "stacked_lstm.keras.truth.json")
    p = predict(layers="LSTM(4, return_sequences=True), LSTM(3, return_sequences=True), LSTM(2)",
                input_shape="(5, 3)")
    assert {t.name: (t.shape, True) for t in p.tensors} == truth_variables(truth)


def test_spec_equals_real_tf_keras2_model() -> None:
    """tf.keras 2 names carry no model prefix: the Functional model's names come out of a
    Sequential spec with keras_version=2."""
    truth = load_truth(KERAS / "keras2_bilstm_gru_bn.h5.truth.json")
    p = predict(layers="Bidirectional(LSTM(4, return_sequences=True)), GRU(3), "
                       "BatchNormalization(), Dense(2)", input_shape="5,3", keras_version="2")
    got = {t.name: (t.shape, t.role == "parameter") for t in p.tensors}
    assert got == truth_variables(truth)
    assert (p.total("parameter"), p.total("buffer")) == (387, 6)


def test_spec_equals_real_time_distributed_and_attention() -> None:
    """The fixtures are Functional models (no prefix); a spec is a Sequential (Keras 3 prefixes
    its name), so the prefix is dropped before comparing."""
    td = load_truth(KERAS / "time_distributed_dense.keras.truth.json")
    p = predict(layers="TimeDistributed(Dense(4))", input_shape="5,3")
    got = {t.name.removeprefix("sequential/"): (t.shape, True) for t in p.tensors}
    assert got == truth_variables(td)
    mha = load_truth(KERAS / "multi_head_attention.keras.truth.json")
    p = predict(layers="MultiHeadAttention(2, 4)", input_shape="5,8")
    assert p.total(None) == mha["count_params"] == 288


# ---- the seeds ----------------------------------------------------------------------------


def test_seed002_embedding_flatten_dense() -> None:
    """Seed 002 In[3]: 1,000,000 + 0 + 320,032 + 33 = 1,320,065 (its model.summary())."""
    p = predict(layers="Embedding(10000, 100, input_length=100), Flatten(), Dense(32), Dense(1)")
    assert p.total() == 1_320_065
    assert p.shapes() == {
        "sequential/embedding/embeddings": (10000, 100),
        "sequential/dense/kernel": (10000, 32),
        "sequential/dense/bias": (32,),
        "sequential/dense_1/kernel": (32, 1),
        "sequential/dense_1/bias": (1,),
    }


def test_seed002_input_length_or_input_shape() -> None:
    """Keras 3 dropped input_length; input_shape gives the same model."""
    a = predict(layers="Embedding(10000,100),Flatten(),Dense(32),Dense(1)", input_shape="100")
    assert a.total() == 1_320_065
    # without any length, Flatten's output is unknown: the Dense layers cannot be predicted
    b = predict(layers="Embedding(10000,100),Flatten(),Dense(32),Dense(1)")
    assert b.total() == 1_000_000
    assert any("dense of class Dense" in n for n in b.notes)


def test_seed002_recurrent_models() -> None:
    """Seed 002: SimpleRNN(32) on 100-wide embeddings (100+32)*32+32 = 4,256, model 1,004,289;
    LSTM(32) ((100+32)*32+32)*4 = 17,024, model 1,017,057."""
    assert predict(layers="SimpleRNN(32)", input_shape="None,100").total() == 4_256
    assert predict(layers="Embedding(10000,100),SimpleRNN(32),Dense(1)").total() == 1_004_289
    assert predict(layers="LSTM(32)", input_shape="None,100").total() == 17_024
    assert predict(layers="Embedding(10000,100),LSTM(32),Dense(1)").total() == 1_017_057


def test_seed004() -> None:
    """Seed 004: LSTM(2) on (40, 3): W (3, 8), U (2, 8), b (8,) = 48; Dense(5), Dense(2) on
    (None, 3): 15 + 10 + 5 + 2 = 32."""
    p = predict(layers="LSTM(2)", input_shape="(40,3)")
    assert p.total() == 48
    assert sorted(p.shapes().values()) == [(2, 8), (3, 8), (8,)]
    assert predict(layers="Dense(5), Dense(2)", input_shape="None,3").total() == 32


def test_timesteps_do_not_change_the_count() -> None:
    """Seed 004's summary prints (None, 4, 3) while its code says 40: same 48."""
    assert {predict(layers="LSTM(2)", input_shape=f"{t},3").total() for t in (4, 40)} == {48}


# ---- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [
    "__import__('os').system('true')",
    "Dense(units=len('ab'))",
    "Dense(32) + Dense(1)",
    "Dense(32",
    "Frobnicate(3)",
    "Dense(1, 2)",
])
def test_bad_spec_is_a_usage_error(spec: str) -> None:
    with pytest.raises(UsageError):
        predict(layers=spec, input_shape="3")


def test_exactly_one_source() -> None:
    with pytest.raises(UsageError, match="exactly one"):
        predict()
    with pytest.raises(UsageError, match="exactly one"):
        predict(layers="Dense(1)", config="x.json")


@pytest.mark.parametrize("text", ["(0,3)", "abc", "(3.5,)"])
def test_bad_input_shape(text: str) -> None:
    with pytest.raises(UsageError, match="input_shape"):
        predict(layers="Dense(1)", input_shape=text)


def test_bad_config_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FormatError, match="bad.json"):
        predict(config=str(bad))
    noclass = tmp_path / "noclass.json"
    noclass.write_text('{"config": {}}')
    with pytest.raises(FormatError, match="class_name"):
        predict(config=str(noclass))
    zipped = tmp_path / "x.keras"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("metadata.json", "{}")
    # a container is the adapters' to read: a zip of no known layout is refused by the registry
    with pytest.raises(UnknownFormatError, match="x.keras: a zip archive of no known"):
        predict(config=str(zipped))
    with pytest.raises(FileNotFoundError, match="missing.json"):
        predict(config=str(tmp_path / "missing.json"))


def test_counts_come_from_shapes() -> None:
    p = predict(config=str(KERAS / "batch_norm.keras"))
    assert p.total(None) == sum(math.prod(t.shape) for t in p.tensors) == 49


# ---- closed forms through spec variables ---------------------------------------------------


@pytest.mark.parametrize(("layers", "seed_formula"), [
    # seed 004: LSTM parameter number = 4 x ((x + h) x h + h)
    ("LSTM(h)", lambda x, h: 4 * ((x + h) * h + h)),
    # seed 002: SimpleRNN ((InputSize + nodes) * nodes) + nodes
    ("SimpleRNN(h)", lambda x, h: (x + h) * h + h),
    # seed 004: a dense layer i*h + h*o + h + o, here o = 2
    ("Dense(h), Dense(2)", lambda x, h: (x + 2) * h + (h + 2)),
])
def test_closed_form_is_the_seed_formula(layers, seed_formula) -> None:
    from inspector.formulas.closed_form import closed_form

    arch = get("keras")
    form = closed_form(arch, {"layers": layers, "input_shape": "None, x"})
    for x, h in [(3, 2), (100, 32), (7, 11)]:
        assert form(x=x, h=h, e=1, v=1) == seed_formula(x, h)


def test_unset_spec_variable() -> None:
    with pytest.raises(UsageError, match="h is used but not set"):
        predict(layers="LSTM(h)", input_shape="None,3")
    assert predict(layers="LSTM(2*h)", input_shape="None,x", h=1, x=3).total() == 48


def test_a_layer_that_cannot_be_placed_is_not_modelled_never_a_mismatch(tmp_path: Path) -> None:
    """A real tf.keras 2 model holding a model, with the head's input pointed at a node its
    encoder never produced: the head cannot be placed, so its variables are not modelled and
    the verdict is incomplete (exit 3), not mismatch."""
    import json
    import shutil

    import h5py

    from inspector.adapters.registry import load
    from inspector.formulas.check import check

    path = tmp_path / "unplaceable.h5"
    shutil.copy(KERAS / "keras2_nested_functional_head.h5", path)
    with h5py.File(path, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        head = next(e for e in config["config"]["layers"] if e["name"] == "head")
        head["inbound_nodes"] = [[["encoder", 5, 0, {}]]]
        f.attrs["model_config"] = json.dumps(config)
    result = check(load(path))
    assert result.verdict == "incomplete"
    assert not [i for i in result.issues if i.mismatch]
    assert {i.name for i in result.issues if i.status == "not_modelled"} == {
        "head/kernel", "head/bias"}
