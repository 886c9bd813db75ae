"""Where a Keras model config comes from when it is not embedded: a ``layers=`` spec (parsed
with ``ast``, never evaluated), a JSON / ``.keras`` / legacy ``.h5`` file, and ``edit=`` changes."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from inspector.adapters.ast_parse import literal_eval, parse
from inspector.adapters.errors import FormatError, UsageError

from .keras_graph import LAYERS, Shape, tuple_of

CONFIG_LIMIT = 64 << 20  # a JSON model config larger than this is refused

# --------------------------------------------------------------------------------------------
# Hyperparameters: a config file or a layers spec
# --------------------------------------------------------------------------------------------

# Positional arguments of the layer constructors a spec may use, in Keras' order.
POSITIONAL: dict[str, tuple[str, ...]] = {
    "Dense": ("units",),
    "Embedding": ("input_dim", "output_dim"),
    "SimpleRNN": ("units",),
    "LSTM": ("units",),
    "GRU": ("units",),
    "Conv1D": ("filters", "kernel_size"),
    "Conv2D": ("filters", "kernel_size"),
    "Conv3D": ("filters", "kernel_size"),
    **{f"SeparableConv{r}D": ("filters", "kernel_size") for r in (1, 2)},
    **{f"DepthwiseConv{r}D": ("kernel_size",) for r in (1, 2)},
    **{f"Conv{r}DTranspose": ("filters", "kernel_size") for r in (1, 2, 3)},
    "EinsumDense": ("equation", "output_shape"),
    "GroupNormalization": ("groups",),
    **{f"ZeroPadding{r}D": ("padding",) for r in (1, 2, 3)},
    **{f"Cropping{r}D": ("cropping",) for r in (1, 2, 3)},
    **{f"UpSampling{r}D": ("size",) for r in (1, 2, 3)},
    **{f"{k}Pooling{r}D": ("pool_size",) for k in ("Max", "Average") for r in (2, 3)},
    "Bidirectional": ("layer",),
    "TimeDistributed": ("layer",),
    "MultiHeadAttention": ("num_heads", "key_dim"),
    "LayerNormalization": ("axis",),
    "BatchNormalization": ("axis",),
    "Dropout": ("rate",),
    "SpatialDropout1D": ("rate",),
    "Activation": ("activation",),
    "Reshape": ("target_shape",),
    "RepeatVector": ("n",),
    "Permute": ("dims",),
    "MaxPooling1D": ("pool_size",),
    "AveragePooling1D": ("pool_size",),
    "Masking": ("mask_value",),
    "Input": ("shape",),
}


def to_snake_case(name: str) -> str:
    """Keras' default layer name for a class (``SimpleRNN`` -> ``simple_rnn``)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


# Integer variables a spec may use (``LSTM(h)``, ``input_shape=None,x``): closed forms.
SPEC_VARIABLES: dict[str, str] = {
    "x": "input width", "h": "hidden units", "e": "embedding width", "v": "vocabulary size",
}
_ARITH: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
}


def _literal(node: ast.AST, variables: Mapping[str, int | None], what: str) -> Any:
    """``ast.literal_eval`` plus the spec variables and integer + - * // (never ``eval``)."""
    if isinstance(node, ast.Name) and node.id in SPEC_VARIABLES:
        value = variables.get(node.id)
        if value is None:
            raise UsageError(f"{what}: {node.id} is used but not set (--set {node.id}=N)")
        return value
    if isinstance(node, ast.Tuple | ast.List):
        items = [_literal(e, variables, what) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        a, b = _literal(node.left, variables, what), _literal(node.right, variables, what)
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a | b, bool):
            return _ARITH[type(node.op)](a, b)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise UsageError(f"{what}: {ast.unparse(node)!r} is not a literal") from None


def parse_layers(spec: str, variables: Mapping[str, int | None] | None = None
                 ) -> list[dict[str, Any]]:
    """Layer configs from ``"Dense(32),LSTM(4, return_sequences=True)"``; names as Keras
    would give them in a fresh session (``dense``, ``dense_1``, ...)."""
    try:
        tree = parse(spec.strip(), mode="eval").body
    except SyntaxError as e:
        raise UsageError(f"layers={spec!r}: not a layer list ({e.msg})") from None
    calls = tree.elts if isinstance(tree, ast.Tuple | ast.List) else [tree]
    counters: dict[str, int] = {}
    return [_layer_from_ast(node, spec, counters, variables or {}) for node in calls]


def _layer_from_ast(node: ast.AST, spec: str, counters: dict[str, int],
                    variables: Mapping[str, int | None]) -> dict[str, Any]:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name | ast.Attribute):
        raise UsageError(f"layers={spec!r}: {ast.unparse(node)!r} is not a layer call")
    cls = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
    if cls not in LAYERS and cls not in ("Input", "InputLayer"):
        raise UsageError(f"layers={spec!r}: unknown layer class {cls}; "
                         f"known: {', '.join(sorted(LAYERS))}")
    names = POSITIONAL.get(cls, ())
    if len(node.args) > len(names):
        raise UsageError(f"layers={spec!r}: {cls} takes at most {len(names)} positional "
                         f"argument(s) here ({', '.join(names) or 'none'}); name the others")

    def value(v: ast.AST) -> Any:
        if isinstance(v, ast.Call):
            return _layer_from_ast(v, spec, counters, variables)
        return _literal(v, variables, f"layers={spec!r}")

    cfg = {names[i]: value(a) for i, a in enumerate(node.args)}
    for kw in node.keywords:
        if kw.arg is None:
            raise UsageError(f"layers={spec!r}: ** arguments are not supported")
        cfg[kw.arg] = value(kw.value)
    if cls == "Input":
        return {"class_name": "InputLayer", "config": {"shape": list(tuple_of(cfg["shape"], 1))}}
    if "name" not in cfg:
        base = to_snake_case(cls)
        n = counters.get(base, 0)
        counters[base] = n + 1
        cfg["name"] = base if n == 0 else f"{base}_{n}"
    return {"class_name": cls, "config": cfg}


def parse_input_shape(text: str, variables: Mapping[str, int | None] | None = None) -> Shape:
    """``"100"``, ``"(40, 3)"``, ``"None,3"``: an input shape without the batch dimension."""
    what = f"input_shape={text!r}"
    try:
        v = _literal(parse(text.strip(), mode="eval").body, variables or {}, what) \
            if text.strip() else ()
    except SyntaxError:
        raise UsageError(f"{what}: expected e.g. 100, (40,3) or None,3") from None
    v = v if isinstance(v, tuple | list) else (v,)
    if not all(d is None or (isinstance(d, int) and d > 0) for d in v):
        raise UsageError(f"input_shape={text!r}: dimensions are positive integers or None")
    return (None, *v)


def embedded_config(hp: Mapping[str, Any]) -> dict[str, Any] | None:
    """The model config a Keras checkpoint's hyperparameters carry: the adapter puts the parsed
    ``config.json`` / ``model_config`` itself there (keys ``class_name``, ``config``, ...); a
    ``model_config`` entry (dict or JSON text) is accepted too. None when there is none."""
    config: Any = hp if "class_name" in hp and "config" in hp else hp.get("model_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            return None
    if not (isinstance(config, dict) and "class_name" in config and "config" in config):
        return None
    return {k: config[k] for k in ("class_name", "config")}


def load_config(path: str) -> dict[str, Any]:
    """A model config from a JSON file, or from any Keras checkpoint the adapters read (a
    ``.keras`` archive's ``config.json``, a legacy ``.h5``'s ``model_config``): side files and
    containers are the adapters' to read, not the formula's."""
    from inspector.adapters.registry import load
    from inspector.adapters.source import as_source

    src = as_source(path)
    head = src.read(0, 64).lstrip()
    if head[:1] != b"{":
        # read as data for the prediction (nothing runs): a Lambda's bytecode in a config
        # source is the checkpoint's concern, reported by scan and refused when it is checked
        config = embedded_config(load(src, allow_unsafe=True).hyperparameters)
        if config is None:
            raise FormatError("no Keras model config in this file", src.where)
        return config
    try:
        config = json.loads(src.read_text(CONFIG_LIMIT))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"not a JSON model config ({e})", src.where) from None
    if not isinstance(config, dict) or "class_name" not in config:
        raise FormatError("JSON has no 'class_name': not a Keras model config", src.where)
    return config


class ModelConfig(dict):
    """A model config dict that prints as a one-line summary in tables (JSON keeps it all)."""

    def __repr__(self) -> str:
        cfg = self.get("config")
        name = cfg.get("name", "?") if isinstance(cfg, dict) else "?"
        layers = cfg.get("layers", []) if isinstance(cfg, dict) else cfg
        return f"<{self.get('class_name')} {name!r}, {len(layers or [])} layers>"

    __str__ = __repr__


def json_object(value: Any) -> ModelConfig:
    """A model config given as a dict or a JSON string (the kind of ``model_config``)."""
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(value)
    return ModelConfig(value)


def apply_edits(config: Mapping[str, Any], edits: str) -> dict[str, Any]:
    """A copy of ``config`` with ``"lstm.units=8; dense.use_bias=False"`` applied: each
    ``LAYER.KEY=VALUE`` sets a key of the named layer's config, wherever it is nested."""
    out = json.loads(json.dumps(config))
    for item in filter(None, (e.strip() for e in edits.split(";"))):
        target, sep, text = item.partition("=")
        layer, dot, key = target.strip().rpartition(".")
        if not (sep and dot and layer and key):
            raise UsageError(f"edit={item!r}: expected LAYER.KEY=VALUE")
        try:
            value = literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = text.strip()
        found = [c for c in _layer_configs(out) if c.get("name") == layer]
        if not found:
            raise UsageError(f"edit={item!r}: the model has no layer named {layer!r}")
        for c in found:
            c[key] = value
    return out


def _layer_configs(node: Any) -> list[dict[str, Any]]:
    """Every layer ``config`` dict in a model config, wrapped and nested ones included."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "class_name" in node and isinstance(node.get("config"), dict):
            found.append(node["config"])
        for v in node.values():
            found += _layer_configs(v)
    elif isinstance(node, list):
        for v in node:
            found += _layer_configs(v)
    return found


def spec_config(layers: str, input_shape: str | None, name: str,
                variables: Mapping[str, int | None] | None = None) -> dict[str, Any]:
    """The Sequential model config a ``layers`` spec describes."""
    entries = parse_layers(layers, variables)
    if input_shape:
        if entries and entries[0]["class_name"] == "InputLayer":
            raise UsageError("give the input shape once: input_shape= or Input(...) in layers=")
        shape = parse_input_shape(input_shape, variables)
        entries.insert(0, {"class_name": "InputLayer", "config": {"batch_shape": list(shape)}})
    return {"class_name": "Sequential", "config": {"name": name, "layers": entries}}


