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

from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError

from .core import Arch, HParam, Prediction, Symbol, register
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
    tensors, walk_notes, parts = model_variables(config,
                                                 None if version == "auto" else version == "3")
    notes += walk_notes
    seen: set[str] = set()
    for t in tensors:
        if t.name in seen:
            notes.append(f"two variables are both named {t.name}")
        seen.add(t.name)
    return Prediction("keras", dict(hp), tensors, notes, parts)


def from_checkpoint(ckpt: Any) -> dict[str, Any]:
    """The model config a Keras checkpoint embeds and the Keras major version that wrote it.

    The Keras adapter puts the parsed ``config.json`` / ``model_config`` itself into
    ``Checkpoint.hyperparameters`` (keys ``class_name``, ``config``, ...); a ``model_config``
    entry (dict or JSON text) is accepted too.
    """
    model = embedded_config(getattr(ckpt, "hyperparameters", None) or {})
    if model is None:
        return {}
    out: dict[str, Any] = {"model_config": model}
    version = str((getattr(ckpt, "metadata", None) or {}).get("keras_version", ""))
    if version[:1] in ("2", "3"):
        out["keras_version"] = version[:1]
    return out


def applies(ckpt: Any) -> bool:
    """A Keras file (any of the adapter's ``keras*`` formats) or one embedding a model config."""
    return str(getattr(ckpt, "format", "")).startswith("keras") or bool(from_checkpoint(ckpt))


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
        HParam("edit", None, "change layer config keys before predicting: "
               "'LAYER.KEY=VALUE; ...', e.g. 'lstm.units=8'", str),
        *(HParam(k, None, f"{what}: a variable layers=/input_shape= may use", int)
          for k, what in SPEC_VARIABLES.items()),
        HParam("model_config", None, "the parsed model config (embedded in the checkpoint)",
               json_object),
    ),
    predict=predict,
    scheme="keras",
    from_checkpoint=from_checkpoint,
    applies=applies,
    symbols=tuple(Symbol(k, (k,), help=what) for k, what in SPEC_VARIABLES.items()),
))
