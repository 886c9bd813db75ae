r"""What a Keras model config makes Keras run when it loads the model, examined without Keras.

Read in Keras 3.15.1's ``saving/serialization_lib.py`` (``deserialize_keras_object``,
``_retrieve_class_or_fn``), ``layers/core/lambda_layer.py`` and Keras 2's ``Lambda.from_config``
(``_parse_function_from_config``):

* **Python bytecode.** Keras 3 writes a Python lambda as ``{"class_name": "__lambda__",
  "config": {"code": ...}}`` (a Lambda's ``function``, ``output_shape``, ``mask``) or
  ``{"config": {"value": ...}}`` (any other field: ``arguments``, a loss); Keras 2 as a
  ``func_dump`` list with ``function_type`` (``output_shape_type``, ``mask_type``) ``"lambda"``.
  ``python_utils.func_load`` unmarshals it into a function that the layer calls: dangerous,
  wherever it sits (nested models, ``TimeDistributed``, ``Bidirectional``, compile config).
* **References by module.** ``{"module": M, "class_name": C, "registered_name": R}``. A class
  of Keras (``keras``, ``keras.*``, ``tf_keras``) is safe only when it is one of the classes
  whose ``from_config`` was reviewed as building the object from data
  (:data:`.keras_classes.DATA_CLASSES`, generated from Keras 3.15.1); a Keras function only when
  it is a public function of the modelling namespaces (activations, losses, metrics, ops,
  initializers, regularizers, constraints, random). Any other Keras, KerasHub, KerasCV or
  KerasNLP class or function is dangerous (built or called with the file's config, never
  reviewed), and so are the non-modelling APIs Keras 3.11+ refuses
  (``keras.config.enable_unsafe_deserialization``, ``keras.utils.get_file``). Keras' encoding
  of its built-in functions, ``{"module": "builtins", "class_name": "function", "config":
  "relu"}``, is safe for a name Keras resolves among its built-ins
  (:data:`KERAS_BUILTIN_FUNCTIONS`); another name is only found among the loader's registered
  custom objects (foreign), unless Python's builtins hold a listed one (``eval``): Keras before
  3.9 imported the named module and took the name from it (CVE-2025-1550), so a reference to a
  module outside Keras is dangerous (a function is called, a class built by ``from_config`` with
  the file's config). A class named without a module (Keras 2) is resolved only among Keras's
  own classes and the loader's registered custom objects: foreign when Keras has none by that
  name.
* **Layers that carry code in their config** (:data:`CODE_CARRIERS`): ``TorchModuleWrapper``
  keeps its module as ``torch.save`` bytes in base64 and ``from_config`` ``torch.load``\ s them
  with ``weights_only=False``: the bytes are decoded and examined with the walk a loose torch
  file gets (:mod:`.embedded`). ``TFSMLayer`` loads the SavedModel at its ``filepath`` and runs
  its graph: dangerous. ``JaxLayer`` / ``FlaxLayer`` call the functions and module their
  config names: those references are judged as above (a function is called). tf.keras 2's op
  layers (``TFOpLambda``, ``SlicingOpLambda``, ``ClassMethod``, ``InstanceProperty``,
  ``InstanceMethod``, ``TensorFlowOpLayer``) call a TensorFlow function, method or op named
  in the config: :mod:`.tf_keras_ops`.
* **Files read at load.** A lookup layer's ``vocabulary`` given as a path (``StringLookup``,
  ``IntegerLookup``, ``TextVectorization``) is read when the layer is built: dangerous when the
  path is absolute or climbs out, foreign otherwise.
"""

from __future__ import annotations

import builtins

from .. import model
from . import verdicts as V
from .examination import DANGEROUS, ERROR, FOREIGN
from .keras_classes import DATA_CLASSES, KERAS_VERSION, MODELLING_FUNCTIONS
from .tf_keras_ops import OP_LAYERS, op_layer_items

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
CODE_CARRIERS = frozenset({"Lambda", "TorchModuleWrapper", "JaxLayer", "FlaxLayer", "TFSMLayer"})
# serialization_lib's own encodings: data, or handled on their own (__lambda__)
MARKERS = frozenset({"__keras_tensor__", "__tensor__", "__numpy__", "__bytes__", "__ellipsis__",
                     "__slice__", "__lambda__", "__tuple__", "__typespec__", "function"})
MODELLING_NAMESPACES = frozenset({"activations", "losses", "metrics", "ops", "initializers",
                                  "regularizers", "constraints", "random"})
MAX_MODULE_B64 = 512 << 20  # a TorchModuleWrapper's base64 torch.save bytes
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
        if cls in CODE_CARRIERS and isinstance(conf, dict) and _keras_module(node):
            out += _carrier(cls, conf, owner)
        elif cls in OP_LAYERS and isinstance(conf, dict) and _keras_module(node):
            out += op_layer_items(cls, conf, owner)
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


def _keras_module(node: dict) -> bool:
    """The node names no module (Keras resolves it among its own classes) or a Keras one."""
    module = node.get("module")
    return not module or (isinstance(module, str)
                          and module.split(".", 1)[0] in KERAS_PACKAGES)


def _carrier(cls: str, conf: dict, owner: str) -> list[tuple[str, str]]:
    """A Keras layer whose config carries code: what its ``from_config`` would load or run."""
    if cls == "TFSMLayer":
        path = conf.get("filepath")
        return [(DANGEROUS, f"{owner} (filepath) loads the TensorFlow SavedModel at {path!r} "
                            "and runs its graph (Keras 3 refuses it only in safe mode)")]
    if cls != "TorchModuleWrapper" or not isinstance(conf.get("module"), str):
        return []  # Lambda: above; JaxLayer / FlaxLayer: their references are judged
    import base64
    import binascii

    text = conf["module"]
    if len(text) > MAX_MODULE_B64:
        return [(ERROR, f"{owner} (module): {len(text):,} characters of base64 (limit "
                        f"{MAX_MODULE_B64:,}): the torch.save bytes are not examined")]
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as e:
        return [(ERROR, f"{owner} (module) is not base64 ({e}): TorchModuleWrapper.from_config "
                        "fails on it; not examined")]
    from .embedded import embedded_items

    loader = "TorchModuleWrapper.from_config's torch.load(weights_only=False)"
    return [(lv, f"{owner} (module, {len(data):,} bytes): {text_}")
            for lv, text_ in embedded_items(data, f"{owner} module", loader)]


def _reference(node: dict) -> tuple[str, str] | None:
    """The verdict on a class or function reference (None: safe, or no reference)."""
    cls = node.get("class_name")
    if not isinstance(cls, str) or "config" not in node:
        return None  # without "config" Keras deserializes the dict as plain values
    if cls == "function":
        return _function_reference(node)
    if cls in MARKERS or (cls in CODE_CARRIERS | OP_LAYERS and _keras_module(node)):
        return None
    module = node.get("module")
    if not isinstance(module, str) or not module:
        # Keras 2 / tf_keras write "Custom>Adam" for their own registered optimizers
        if cls in DATA_CLASSES or cls.removeprefix("Custom>") in DATA_CLASSES:
            return None
        return FOREIGN, (f"class {cls!r} by name: Keras takes it from its own classes, which "
                         f"hold none by that name (Keras {KERAS_VERSION}), or from the "
                         "loader's registered custom objects; nothing in the file runs")
    dotted = f"{module}.{cls}"
    why = V.listed(module, cls)
    if why:
        return DANGEROUS, f"class {dotted} ({why})"
    root = module.split(".", 1)[0]
    if root in KERAS_PACKAGES:
        if dotted in NON_MODELING_APIS:
            return DANGEROUS, (f"class {dotted}: a non-modelling Keras API (Keras 3.11+ "
                               "refuses it, earlier versions call it)")
        if root in ("keras", "tf_keras") and cls in DATA_CLASSES:
            return None
        return DANGEROUS, (f"class {dotted}: not among the {root} classes reviewed as data "
                           f"(Keras {KERAS_VERSION}); Keras builds it with from_config from the "
                           "file's config")
    registered = node.get("registered_name")
    also = f", registered as {registered!r}" if isinstance(registered, str) else ""
    return DANGEROUS, (f"class {dotted}{also}: an unvetted class that Keras builds with "
                       "from_config from the file's config (Keras 3.9+ takes it from the "
                       f"loader's registered objects, earlier versions import {module})")


def _function_reference(node: dict) -> tuple[str, str] | None:
    """``{"class_name": "function", "module": M, "config": name}``: a function Keras calls."""
    module, fn = node.get("module"), node.get("config")
    if not isinstance(module, str) or not module or not isinstance(fn, str):
        return None
    dotted = f"{module}.{fn}"
    if module == "builtins" and (fn in KERAS_BUILTIN_FUNCTIONS or not hasattr(builtins, fn)):
        if fn in KERAS_BUILTIN_FUNCTIONS:
            return None
        # Keras 3 looks it up only among registered custom objects; before 3.9 also in
        # Python's builtins, which do not hold it
        return FOREIGN, (f"function {fn!r} by name: Keras takes it from the loader's "
                         "registered custom objects; nothing in the file runs")
    why = V.listed(module, fn)
    if why:
        return DANGEROUS, f"function {dotted} ({why})"
    parts = module.split(".")
    if parts[0] in KERAS_PACKAGES:
        if dotted in NON_MODELING_APIS:
            return DANGEROUS, (f"function {dotted}: a non-modelling Keras API (Keras 3.11+ "
                               "refuses it, earlier versions call it)")
        space = parts[2] if parts[1:2] == ["src"] and len(parts) > 2 else (
            parts[1] if len(parts) > 1 else "")
        if parts[0] == "keras" and space in MODELLING_NAMESPACES and fn in MODELLING_FUNCTIONS:
            return None
        return DANGEROUS, (f"function {dotted}: not a public function of Keras's modelling "
                           f"namespaces (Keras {KERAS_VERSION}); Keras calls it")
    verdict = V.verdict(module, fn, {V.CALLED})
    if verdict.level == V.SAFE:
        return None
    return verdict.level, (f"function {dotted}: Keras before 3.9 imports {module} and calls "
                           f"it ({verdict.why})")
