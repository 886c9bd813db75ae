"""What a Keras model config makes Keras run when it loads the model, examined without Keras.

Read in Keras 3.15.1's ``saving/serialization_lib.py`` (``deserialize_keras_object``,
``_retrieve_class_or_fn``), ``layers/core/lambda_layer.py`` and Keras 2's ``Lambda.from_config``
(``_parse_function_from_config``):

* **Python bytecode.** Keras 3 writes a Python lambda as ``{"class_name": "__lambda__",
  "config": {"code": ...}}`` (a Lambda's ``function``, ``output_shape``, ``mask``) or
  ``{"config": {"value": ...}}`` (any other field: ``arguments``, a loss); Keras 2 as a
  ``func_dump`` list with ``function_type`` (``output_shape_type``, ``mask_type``) ``"lambda"``.
  ``python_utils.func_load`` unmarshals it into a function that the layer calls: dangerous,
  wherever it sits (nested models, ``TimeDistributed``, ``Bidirectional``, compile config).
* **References by module.** ``{"module": M, "class_name": C, "registered_name": R}``. Keras'
  own objects (``keras``, ``keras.*``, ``keras_hub``, ``keras_cv``, ``keras_nlp``,
  ``tf_keras``) are safe, except the non-modelling APIs Keras 3.11+ refuses
  (``keras.config.enable_unsafe_deserialization`` turns safe mode off, ``keras.utils.get_file``
  downloads; older versions resolve them): dangerous. Keras' encoding of its built-in functions,
  ``{"module": "builtins", "class_name": "function", "config": "relu"}``, is safe for a name
  Keras resolves among its built-ins (:data:`KERAS_BUILTIN_FUNCTIONS`); another name is only
  found among the loader's registered custom objects (foreign), unless Python's builtins hold a
  listed one (``eval``): Keras before 3.9 imported the named module and took the name from it
  (CVE-2025-1550), so such a reference is judged as a pickle global is: a function reference is
  *called* (off the allowlist: dangerous), a class *constructed* through ``from_config``
  (foreign).
* **Files read at load.** A lookup layer's ``vocabulary`` given as a path (``StringLookup``,
  ``IntegerLookup``, ``TextVectorization``) is read when the layer is built: dangerous when the
  path is absolute or climbs out, foreign otherwise.
"""

from __future__ import annotations

import builtins

from .. import model
from . import verdicts as V
from .examination import DANGEROUS, ERROR, FOREIGN

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    from .examination import FileResult

MAX_NODES = 2_000_000  # dicts, lists and scalars walked in one config
KERAS_PACKAGES = frozenset({"keras", "keras_hub", "keras_cv", "keras_nlp", "tf_keras"})
# keras/src/saving/serialization_lib.py NON_MODELING_APIS (Keras 3.15.1): refused by Keras
# 3.11+, resolved by earlier versions.
NON_MODELING_APIS = frozenset({
    "keras.backend.clear_session", "keras.config.enable_unsafe_deserialization",
    "keras.models.load_model", "keras.models.model_from_json", "keras.models.save_model",
    "keras.preprocessing.image_dataset_from_directory", "keras.preprocessing.image.load_img",
    "keras.preprocessing.image.save_img", "keras.preprocessing.text_dataset_from_directory",
    "keras.saving.deserialize_keras_object", "keras.saving.load_model",
    "keras.saving.load_weights", "keras.saving.register_keras_serializable",
    "keras.saving.save_model", "keras.saving.save_weights", "keras.saving.serialize_keras_object",
    "keras.utils.audio_dataset_from_directory", "keras.utils.clear_session",
    "keras.utils.deserialize_keras_object", "keras.utils.get_file",
    "keras.utils.image_dataset_from_directory", "keras.utils.load_img",
    "keras.utils.register_keras_serializable", "keras.utils.save_img",
    "keras.utils.serialize_keras_object", "keras.utils.text_dataset_from_directory",
})
# The names a "builtins" "function" reference resolves to in Keras 3.15.1: every public
# function of keras.<m> for m in serialization_lib.BUILTIN_MODULES (activations, constraints,
# initializers, losses, metrics, optimizers, regularizers), as api_export.get_symbol_from_name
# returns them (listed by running that lookup in the producer venv; get/serialize/deserialize
# left out).
KERAS_BUILTIN_FUNCTIONS = frozenset({
    "binary_accuracy", "binary_crossentropy", "binary_focal_crossentropy",
    "categorical_accuracy", "categorical_crossentropy", "categorical_focal_crossentropy",
    "categorical_generalized_cross_entropy", "categorical_hinge", "celu", "circle",
    "concordance_correlation", "cosine_similarity", "ctc", "dice", "elu", "exponential", "gelu",
    "glu", "hard_shrink", "hard_sigmoid", "hard_silu", "hard_tanh", "hinge", "huber",
    "kl_divergence", "leaky_relu", "linear", "log_cosh", "log_sigmoid", "log_softmax",
    "mean_absolute_error", "mean_absolute_percentage_error", "mean_squared_error",
    "mean_squared_logarithmic_error", "mish", "pearson_correlation", "poisson", "relu", "relu6",
    "selu", "sigmoid", "silu", "soft_shrink", "softmax", "softplus", "softsign",
    "sparse_categorical_accuracy", "sparse_categorical_crossentropy", "sparse_plus",
    "sparse_sigmoid", "sparse_top_k_categorical_accuracy", "sparsemax", "squared_hinge",
    "squareplus", "tanh", "tanh_shrink", "threshold", "top_k_categorical_accuracy", "tversky",
})
MODEL_CLASSES = frozenset({"Functional", "Sequential", "Model"})
LAMBDA_TYPE_KEYS = {"function_type": "function", "output_shape_type": "output_shape",
                    "mask_type": "mask"}  # Keras 2 Lambda: <field>_type "lambda" -> <field>


def config_items(config: Any) -> list[tuple[str, str]]:
    """``(level, text)`` for everything in ``config`` Keras would run or resolve by module."""
    out: list[tuple[str, str]] = []
    # (node, the enclosing layer's label, the key path inside it)
    stack: list[tuple[Any, str, str]] = [(config, "the config", "")]
    nodes = 0
    while stack:
        node, owner, field = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            out.append((ERROR, f"config has more than {MAX_NODES:,} nodes: not examined "
                               "further"))
            break
        if isinstance(node, list):
            stack.extend((v, owner, field) for v in reversed(node))
            continue
        if not isinstance(node, dict):
            continue
        cls, conf = node.get("class_name"), node.get("config")
        is_owner = isinstance(cls, str) and isinstance(conf, dict) and isinstance(
            conf.get("name"), str)
        if is_owner:
            kind = "model" if cls in MODEL_CLASSES else f"{cls} layer"
            owner, field = f"{kind} {conf['name']!r}", ""
        if cls == "__lambda__":
            out.append((DANGEROUS, _bytecode(owner, field, conf, "Keras 3 __lambda__")))
            continue
        _keras2_lambda(node, owner, out)
        if cls == "Lambda" and isinstance(conf, dict):
            fn = conf.get("function")
            if (isinstance(fn, list) and fn and isinstance(fn[0], str)
                    and "function_type" not in conf):
                out.append((DANGEROUS, _bytecode(owner, "function", fn, "Keras 2 func_dump")))
        vocabulary = conf.get("vocabulary") if isinstance(conf, dict) else None
        if isinstance(vocabulary, str):
            out.append(_vocabulary_file(owner, vocabulary))
        ref = _reference(node)
        if ref is not None:
            out.append((ref[0], f"{owner}{_at(field)}: {ref[1]}"))
        for key, value in reversed(list(node.items())):
            if isinstance(value, (dict, list)):
                inner = "" if is_owner and key == "config" else (
                    f"{field}.{key}" if field else str(key))
                stack.append((value, owner, inner))
    return out


def examine_keras_config(config: Any, result: FileResult, where: str | None) -> None:
    """Add :func:`config_items` of ``config`` to ``result`` (a scan's
    :class:`~inspector.adapters.security.examination.FileResult`)."""
    for level, text in config_items(config):
        result.add(level, text, where)


def config_findings(config: Any, where: str | None) -> list[model.Finding]:
    """:func:`config_items` as checkpoint findings: dangerous ones with severity ``danger``
    (every verb refuses them, :mod:`inspector.adapters.security.policy`), the others
    ``warning``."""
    out = []
    for level, text in config_items(config):
        severity = "danger" if level == DANGEROUS else "warning"
        out.append(model.Finding(severity, text, where, text if level == DANGEROUS else None))
    return out


def _at(field: str) -> str:
    return f" ({field})" if field else ""


def _bytecode(owner: str, field: str, conf: Any, how: str) -> str:
    size = len(str(conf))
    when = ("when it compiles, evaluates or trains the model" if field.startswith(
        "compile_config") else "when it loads the model")
    return (f"{owner}{_at(field)} holds marshalled Python bytecode ({how}, {size:,} chars): "
            f"Keras runs it {when}")


def _vocabulary_file(owner: str, path: str) -> tuple[str, str]:
    """A lookup layer's ``vocabulary`` given as a path: Keras reads that file when it builds
    the layer (``IndexLookup.set_vocabulary`` through ``tf.io.gfile``; Keras 3.12+ only
    outside safe mode): dangerous when absolute or climbing out, as HDF5 external data."""
    from .file_reference import target_level

    level = target_level(path) or FOREIGN
    return level, f"{owner} (vocabulary) reads the file {path!r} when Keras builds the layer"


def _keras2_lambda(node: dict, owner: str, out: list[tuple[str, str]]) -> None:
    for type_key, field in LAMBDA_TYPE_KEYS.items():
        if node.get(type_key) == "lambda" and field in node:
            out.append((DANGEROUS, _bytecode(owner, field, node[field], "Keras 2 func_dump")))


def _reference(node: dict) -> tuple[str, str] | None:
    """The verdict on a ``module`` / ``class_name`` reference (None: safe or none)."""
    module, cls = node.get("module"), node.get("class_name")
    if not isinstance(module, str) or not isinstance(cls, str) or not module:
        return None
    fn = node.get("config") if cls == "function" else None
    name = fn if isinstance(fn, str) else cls
    what = "function" if cls == "function" else "class"
    dotted = f"{module}.{name}"
    if module == "builtins" and cls == "function" and (
            name in KERAS_BUILTIN_FUNCTIONS or not hasattr(builtins, name)):
        if name in KERAS_BUILTIN_FUNCTIONS:
            return None
        # Keras 3 looks it up only among registered custom objects; before 3.9 also in
        # Python's builtins, which do not hold it
        return FOREIGN, (f"function {name!r} by name: Keras takes it from the loader's "
                         "registered custom objects; nothing in the file runs")
    why = V.listed(module, name)
    if why:
        return DANGEROUS, f"{what} {dotted} ({why})"
    if module.split(".", 1)[0] in KERAS_PACKAGES:
        if dotted in NON_MODELING_APIS:
            return DANGEROUS, (f"{what} {dotted}: a non-modelling Keras API (Keras 3.11+ "
                               "refuses it, earlier versions call it)")
        return None
    registered = node.get("registered_name")
    also = f", registered as {registered!r}" if isinstance(registered, str) else ""
    verdict = V.verdict(module, name, {V.CALLED if cls == "function" else V.CONSTRUCTED})
    if verdict.level == V.SAFE:
        return None
    use = "calls it" if cls == "function" else "builds it through from_config"
    return verdict.level, (f"{what} {dotted}{also}: Keras before 3.9 imports {module} and "
                           f"{use} ({verdict.why})")
