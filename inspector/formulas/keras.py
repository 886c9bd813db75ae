"""Architecture ``keras``: every variable of a Keras model, predicted from its model config.

The config is the one Keras writes (``.keras`` ``config.json``, legacy ``.h5`` root attribute
``model_config``; Keras 3 and Keras 2 / tf.keras layouts), a JSON file given as ``config=PATH``,
or a Sequential model written as a ``layers`` spec such as
``Embedding(10000,100,input_length=100),Flatten(),Dense(32),Dense(1)`` (parsed with ``ast``,
never evaluated). Shapes are propagated through Sequential and Functional graphs from the
input shapes; each predicted name is Keras' own variable path (Keras 3 ``v.path``, Keras 2 the
TF weight name without ``:0``). Trainable variables have role ``parameter``, non-trainable ones
(BatchNormalization statistics, layers with ``trainable: false``) role ``buffer``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, Role, TensorEntry

from .core import Arch, HParam, Part, Prediction, Symbol, register
from .keras_graph import model_variables
from .keras_spec import (
    SPEC_VARIABLES,
    apply_edits,
    embedded_config,
    json_object,
    load_config,
    spec_config,
)


def predict(hp: Mapping[str, Any]) -> Prediction:
    """The variables of the model given by ``layers``, ``config`` or (when neither is given,
    e.g. from a checkpoint) ``model_config``."""
    given = [k for k in ("config", "layers") if hp.get(k)]
    if len(given) > 1 or not (given or hp.get("model_config")):
        raise UsageError("keras needs exactly one of config=PATH, layers=SPEC or an embedded "
                         f"model_config (got {', '.join(given) or 'none'})")
    notes = []
    if hp.get("model_config") and given:
        notes.append(f"the embedded model_config is ignored: {given[0]}= given")
    if hp.get("config"):
        config = load_config(hp["config"])
    elif hp.get("layers"):
        config = spec_config(hp["layers"], hp.get("input_shape"), hp.get("name") or "sequential",
                             {k: hp.get(k) for k in SPEC_VARIABLES})
    else:
        config = hp["model_config"]
    if hp.get("edit"):
        config = apply_edits(config, hp["edit"])
    version = hp.get("keras_version", "auto")
    tensors, walk_notes, parts = model_variables(
        config, None if version == "auto" else version == "3",
        cell_scope=hp.get("rnn_cell_scope", "auto") != "no",
        stored=hp.get("stored_shapes") or {})
    notes += walk_notes
    stored = hp.get("stored_shapes")
    if isinstance(stored, StoredShapes) and stored.guessed:
        parts += guessed_parts(tensors, stored)
    seen: set[str] = set()
    for t in tensors:
        if t.name in seen:
            notes.append(f"two variables are both named {t.name}")
        seen.add(t.name)
    return Prediction("keras", dict(hp), tensors, notes, parts)


def from_checkpoint(ckpt: Checkpoint) -> dict[str, Any]:
    """The model config a Keras checkpoint embeds, the Keras major version that wrote it and
    its naming of recurrent weights (a weights-only file: the last two only).

    The Keras adapter puts the parsed ``config.json`` / ``model_config`` itself into
    ``Checkpoint.hyperparameters`` (keys ``class_name``, ``config``, ...); a ``model_config``
    entry (dict or JSON text) is accepted too.
    """
    model = embedded_config(ckpt.hyperparameters)
    out: dict[str, Any] = {} if model is None else {"model_config": model}
    version = str(ckpt.metadata.get("keras_version", ""))
    if version[:1] in ("2", "3"):
        out["keras_version"] = version[:1]
    tensors = list(ckpt.tensors)
    variables = {t.name: tuple(t.shape) for t in tensors
                 if t.role in (Role.PARAMETER, Role.BUFFER)}
    if variables:
        out["stored_shapes"] = StoredShapes(variables)
        out["stored_shapes"].guessed = frozenset(
            t.name for t in tensors if (t.extra or {}).get("name_guessed"))
    scope = rnn_cell_scope(version, [t.name for t in tensors])
    if scope is not None:
        out["rnn_cell_scope"] = scope
    return out


class StoredShapes(dict):
    """The checkpoint's variable shapes by name; prints as a count in tables. ``guessed``: the
    names the reader had to guess (a Keras 3 weights file without its config)."""

    guessed: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"<{len(self)} stored variables>"

    __str__ = __repr__


def stored_shapes(value: Any) -> StoredShapes:
    if isinstance(value, StoredShapes):
        return value
    if not isinstance(value, dict):
        raise ValueError(value)
    return StoredShapes({str(k): tuple(int(d) for d in v) for k, v in value.items()})


# Standalone multi-backend Keras up to 2.3.x: recurrent weights directly under the layer.
STANDALONE_NO_CELL_SCOPE = re.compile(r"2\.[0-3]\.\d+\Z")
CELL_SCOPED = re.compile(r"(^|/)(lstm|gru|simple_rnn)_cell(_\d+)?/")


def rnn_cell_scope(version: str, names: Sequence[str]) -> str | None:
    """Whether a Keras 2 file names recurrent weights under the cell (``lstm/lstm_cell/kernel``,
    "yes") or not (``lstm_1/kernel``, "no"), from its ``keras_version``: standalone Keras
    <= 2.3 never does, Keras >= 2.4 and 3 always do. tf.keras versions end in ``-tf``
    (``2.2.4-tf`` is TensorFlow 1.15 and 2.0 alike): decided by the stored names."""
    version = version.strip()
    if STANDALONE_NO_CELL_SCOPE.match(version):
        return "no"
    if version.endswith("-tf"):
        return "yes" if any(CELL_SCOPED.search(n) for n in names) else "no"
    return None


def guessed_parts(tensors: Sequence[TensorEntry], stored: StoredShapes) -> list[Part]:
    """Layers of a weights-only Keras 3 file whose variable names the reader had to guess
    (``BatchNormalization(center=False)`` and ``(scale=False)`` store the same shapes) and
    that differ from the prediction: not modelled there, never a mismatch."""
    predicted = {t.name for t in tensors}
    layers = sorted({n.rpartition("/")[0] for n in stored.guessed})
    out = []
    for layer in layers:
        mine = {n for n in stored if n.rpartition("/")[0] == layer}
        if mine != {n for n in predicted if n.rpartition("/")[0] == layer}:
            out.append(Part(f"variable names of layer {layer}", "guessed by the reader: the "
                            "file has no model config to tell which optional variables are "
                            "stored", rf"^{re.escape(layer)}/[^/]+$", ("removed", "added")))
    return out


def applies(ckpt: Checkpoint) -> bool:
    """A Keras file (any of the adapter's ``keras*`` formats) or one embedding a model config."""
    return ckpt.format.startswith("keras") or \
        "model_config" in from_checkpoint(ckpt)


ARCH = register(Arch(
    name="keras",
    description="Keras model (Keras 3 or tf.keras 2) from its model config: every variable "
                "by Keras path, shapes propagated through Sequential/Functional graphs",
    hparams=(
        HParam("config", None, "JSON model config, .keras or legacy .h5 file to read it from",
               str),
        HParam("layers", None, "Sequential layer list, e.g. "
               "'Embedding(10000,100,input_length=100),Flatten(),Dense(32),Dense(1)'", str),
        HParam("input_shape", None, "input shape without the batch axis for layers=, "
               "e.g. '(40,3)' or 'None,100'", str),
        HParam("name", "sequential", "model name for layers= (Keras 3 paths start with it)",
               str),
        HParam("keras_version", "auto", "variable naming: 3 (v.path) or 2 (tf.keras weight "
               "names); auto: from the config (3 for layers=)", str, ("auto", "2", "3")),
        HParam("rnn_cell_scope", "auto", "recurrent weights under the cell's name "
               "(lstm/lstm_cell/kernel): no for Keras <= 2.3 and tf.keras 1.x (lstm_1/kernel); "
               "auto: yes", str, ("auto", "yes", "no")),
        HParam("edit", None, "change layer config keys before predicting: "
               "'LAYER.KEY=VALUE; ...', e.g. 'lstm.units=8'", str),
        *(HParam(k, None, f"{what}: a variable layers=/input_shape= may use", int)
          for k, what in SPEC_VARIABLES.items()),
        HParam("model_config", None, "the parsed model config (embedded in the checkpoint)",
               json_object),
        HParam("stored_shapes", None, "the checkpoint's variable shapes, read only for the "
               "input width of a layer after one whose output shape is unknown", stored_shapes),
    ),
    predict=predict,
    scheme="keras",
    from_checkpoint=from_checkpoint,
    applies=applies,
    symbols=tuple(Symbol(k, (k,), help=what) for k, what in SPEC_VARIABLES.items()),
))
