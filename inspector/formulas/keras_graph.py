"""Shape propagation through a Keras model config: every variable of every layer, named by
Keras' own paths (Keras 3 ``v.path``, Keras 2 TF weight names), through Sequential and
Functional graphs, nested models and wrappers (Bidirectional, TimeDistributed)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import TensorEntry

from . import blocks_keras as kb
from .core import Part
from .keras_calls import (
    Call,
    Cannot,
    Ctx,
    Shape,
    emit,
    global_pool,
    last,
    pool,
    ranked,
    shape_str,
    tensor,
    tuple_of,
    window,
)
from .keras_layers import MORE_LAYERS

# --------------------------------------------------------------------------------------------
# Layers with variables
# --------------------------------------------------------------------------------------------


def _dense(ctx: Ctx, c: Call) -> list[Shape]:
    if c.get("lora_rank") or c.get("quantization_config"):
        raise Cannot("LoRA / quantized Dense layers are not supported")
    n_in, units = last(c.x), int(c.cfg["units"])
    emit(ctx, c, kb.dense(n_in, units, bool(c.get("use_bias", True))))
    return [c.x[:-1] + (units,)]


def _embedding(ctx: Ctx, c: Call) -> list[Shape]:
    x = c.args[0] if c.args else None
    length = c.get("input_length")
    if x is None:
        x = (None, length)
    elif isinstance(length, int) and len(x) == 2 and x[1] is None:
        x = (x[0], length)  # Keras 2: input_length fixes the sequence length
    emit(ctx, c, kb.embedding(int(c.cfg["input_dim"]), int(c.cfg["output_dim"])))
    return [tuple(x) + (int(c.cfg["output_dim"]),)]


def _rnn_outputs(c: Call, kind: str, units: int, x: Shape) -> list[Shape]:
    seq = (x[0], x[1], units) if c.get("return_sequences", False) else (x[0], units)
    out = [seq]
    if c.get("return_state", False):
        out += [(x[0], units)] * (2 if kind == "LSTM" else 1)
    return out


def _rnn(ctx: Ctx, c: Call) -> list[Shape]:
    kind, cell_cfg, cell_name = c.cls, c.cfg, None
    if c.cls == "RNN":  # keras.layers.RNN(SomeCell(...))
        cell = c.cfg.get("cell") or {}
        if cell.get("class_name") not in kb.RNN_CELL_CLASSES:
            raise Cannot(f"RNN cell of class {cell.get('class_name')} is not supported")
        kind, cell_cfg = kb.RNN_CELL_CLASSES[cell["class_name"]], cell.get("config", {})
        cell_name = cell_cfg.get("name")
    if not ctx.cell_scope:
        cell_name = ""  # Keras <= 2.3, tf.keras 1.x: lstm_1/kernel
    x = c.x[0] if isinstance(c.x, list) and c.x else c.x  # Keras 2: [x, *initial_state]
    x = ranked(x, 3)
    units = int(cell_cfg["units"])
    emit(ctx, c, kb.rnn_cell(kind, last(x), units, bool(cell_cfg.get("use_bias", True)),
                              # no key: Keras < 2.1.4 (one bias only) or a layers= spec
                              bool(cell_cfg.get("reset_after", ctx.cell_scope)), cell_name))
    return _rnn_outputs(c, kind, units, x)


def _conv(rank: int) -> Callable[[Ctx, Call], list[Shape]]:
    def conv(ctx: Ctx, c: Call) -> list[Shape]:
        x = ranked(c.x, rank + 2)
        first = c.get("data_format", "channels_last") == "channels_first"
        ch_axis = 1 if first else -1
        channels = x[ch_axis]
        if channels is None:
            raise Cannot(f"the channel dimension of its input {shape_str(x)} is unknown")
        ks = tuple_of(c.cfg["kernel_size"], rank)
        strides = tuple_of(c.get("strides", 1), rank)
        dil = tuple_of(c.get("dilation_rate", 1), rank)
        filters, groups = int(c.cfg["filters"]), int(c.get("groups", 1))
        emit(ctx, c, kb.conv(ks, channels, filters, groups, bool(c.get("use_bias", True)),
                              f"Conv{rank}D"))
        spatial = x[2:] if first else x[1:-1]
        pad = c.get("padding", "valid")
        windows = zip(spatial, ks, strides, dil, strict=True)
        new = tuple(window(n, k, s, d, pad) for n, k, s, d in windows)
        return [(x[0], filters, *new) if first else (x[0], *new, filters)]

    return conv


def _layer_norm(ctx: Ctx, c: Call) -> list[Shape]:
    x = tensor(c.x)
    dims = tuple(x[a] for a in _axes(c.get("axis", -1), len(x)))
    if any(d is None for d in dims):
        raise Cannot(f"a normalised axis of its input {shape_str(x)} is unknown")
    emit(ctx, c, kb.layer_norm(dims, bool(c.get("center", True)), bool(c.get("scale", True)),
                                bool(c.get("rms_scaling", False))))
    return [x]


def _batch_norm(ctx: Ctx, c: Call) -> list[Shape]:
    x = tensor(c.x)
    axes = _axes(c.get("axis", -1), len(x))
    if any(x[a] is None for a in axes):
        raise Cannot(f"a normalised axis of its input {shape_str(x)} is unknown")
    # one axis: a vector; several (Keras 2 only): broadcastable, 1 on the other axes
    shape = (x[axes[0]],) if len(axes) == 1 else tuple(
        x[i] if i in axes else 1 for i in range(len(x)))
    emit(ctx, c, kb.batch_norm(shape, bool(c.get("center", True)), bool(c.get("scale", True))))
    return [x]


def _mha(ctx: Ctx, c: Call) -> list[Shape]:
    if c.get("use_gate", False):
        raise Cannot("gated MultiHeadAttention (use_gate) is not supported")
    q = tensor(c.kwargs.get("query", c.args[0] if c.args else None), "query")
    # called with the query alone (a layers= spec): self-attention
    v = tensor(c.kwargs.get("value", c.args[1] if len(c.args) > 1 else q), "value")
    k = tensor(c.kwargs.get("key", c.args[2] if len(c.args) > 2 else v), "key")
    heads, key_dim = int(c.cfg["num_heads"]), int(c.cfg["key_dim"])
    value_dim = int(c.get("value_dim", key_dim))
    out = c.get("output_shape")
    out_shape = (last(q, "query"),) if out is None else tuple_of(out, None)
    emit(ctx, c, kb.multi_head_attention(
        last(q, "query"), last(k, "key"), last(v, "value"), heads, key_dim, value_dim,
        out_shape, bool(c.get("use_bias", True))))
    return [q[:-1] + out_shape]


# --------------------------------------------------------------------------------------------
# Wrappers and nested models
# --------------------------------------------------------------------------------------------


def _inner(c: Call, layer: Mapping[str, Any], name: str, scope: str, args: list[Any]) -> Call:
    return Call(layer["class_name"], layer.get("config", {}), name, scope, args, {},
                 c.build, c.trainable and layer.get("config", {}).get("trainable", True))


def _bidirectional(ctx: Ctx, c: Call) -> list[Shape]:
    fwd_cfg = c.cfg["layer"]
    bwd_cfg = c.cfg.get("backward_layer") or fwd_cfg
    fwd = _call(ctx, _inner(c, fwd_cfg, _direction("forward_", fwd_cfg), c.prefix, [c.x]))
    bwd = _call(ctx, _inner(c, bwd_cfg, _direction("backward_", bwd_cfg), c.prefix, [c.x]))
    mode = c.cfg.get("merge_mode", "concat")
    a, b = fwd[0], bwd[0]
    if mode is None:
        merged = [a, b]
    elif mode == "concat":
        merged = [a[:-1] + (None if None in (a[-1], b[-1]) else a[-1] + b[-1],)]
    else:  # sum, mul, ave
        merged = [a]
    return merged + fwd[1:] + bwd[1:]


def _direction(prefix: str, layer: Mapping[str, Any]) -> str:
    """``forward_lstm``: Keras 3 configs store the prefixed name already, Keras 2 ones do not."""
    name = layer["config"]["name"]
    return name if name.startswith(prefix) else prefix + name


def _time_distributed(ctx: Ctx, c: Call) -> list[Shape]:
    x = tensor(c.x)
    layer = c.cfg["layer"]
    # Keras 3 builds the wrapped layer under its own name; Keras 2 puts its variables
    # directly under the wrapper's (time_distributed/kernel).
    name, scope = (layer["config"]["name"], c.prefix) if ctx.keras3 else (c.name, c.scope)
    out = _call(ctx, _inner(c, layer, name, scope, [(x[0], *x[2:])]))
    return [(x[0], x[1], *o[1:]) for o in out]


def _model(ctx: Ctx, c: Call) -> list[Shape]:
    """A Sequential or Functional model used as a layer (or the top-level model)."""
    if c.cls == "Sequential":
        # Keras 3 builds a Sequential's layers inside its own name scope; Keras 2 never
        # prefixes. A Functional is built where it is defined: no prefix in either.
        scope = f"{c.name}/" if ctx.keras3 else ""
        return [_sequential(ctx, c, scope)]
    return _functional(ctx, c)


def _sequential(ctx: Ctx, c: Call, scope: str) -> Shape | None:
    layers = list(c.cfg.get("layers", []))
    x: Shape | None = c.args[0] if c.args else None
    if layers and layers[0]["class_name"] == "InputLayer":
        own = _input_shape(layers.pop(0).get("config", {}))
        x = own if x is None else x
    if x is None and c.cfg.get("build_input_shape") is not None:
        x = _shape(c.cfg["build_input_shape"])
    for layer in layers:
        lc = layer.get("config", {})
        if x is None:
            batch = lc.get("batch_shape") or lc.get("batch_input_shape")
            x = _shape(batch) if batch is not None else None
        call = Call(layer["class_name"], lc, lc.get("name", ""), scope, [x], {}, c.build,
                     c.trainable and lc.get("trainable", True))
        x = _first(_safe_call(ctx, call))
    return x


def _functional(ctx: Ctx, c: Call) -> list[Shape]:
    layers = c.cfg.get("layers", [])
    names = {_layer_name(entry) for entry in layers}
    given = c.args[0] if c.args else None
    inputs = _refs(c.cfg.get("input_layers", []))
    if given is not None and not isinstance(given, list):
        given = [given]
    outputs: dict[tuple[str, int], list[Shape | None]] = {}
    for i, (lname, _n, _t) in enumerate(inputs):
        entry = next((e for e in layers if _layer_name(e) == lname), None)
        own = _input_shape(entry.get("config", {})) if entry else None
        outputs[(lname, 0)] = [given[i] if given and i < len(given) else own]
    for entry in layers:  # InputLayers not listed as model inputs
        if entry["class_name"] == "InputLayer" and (_layer_name(entry), 0) not in outputs:
            outputs[(_layer_name(entry), 0)] = [_input_shape(entry.get("config", {}))]

    todo = [(e, i + _first_node(e, ctx.keras3), node) for e in layers
            if e["class_name"] != "InputLayer"
            for i, node in enumerate(e.get("inbound_nodes") or [])]
    built: set[str] = set()
    while todo:
        progress, rest = False, []
        for entry, i, node in todo:
            try:
                args, kwargs = _node_args(node, outputs, names)
            except _Pending:
                rest.append((entry, i, node))
                continue
            lname, lc = _layer_name(entry), entry.get("config", {})
            call = Call(entry["class_name"], lc, lname, "", args, kwargs, lname not in built,
                         c.trainable and lc.get("trainable", True), str(entry.get("module", "")))
            built.add(lname)
            outputs[(lname, i)] = _safe_call(ctx, call)
            progress = True
        if not progress:
            unplaced = sorted({_layer_name(e) for e, _, _ in rest})
            why = f"cannot place it in the graph of {c.name}: its inputs are never produced"
            ctx.notes.append(f"cannot place layers {', '.join(unplaced)} in the graph of "
                             f"{c.name}: their inputs are never produced")
            for entry in {_layer_name(e): e for e, _, _ in rest}.values():
                lname = _layer_name(entry)
                if lname not in built:  # its variables are not predicted: not modelled
                    ctx.parts.append(Part(f"layer {lname} ({entry['class_name']})", why,
                                          rf"(^|/){re.escape(lname)}/"))
            break
        todo = rest
    result = []
    for lname, n, t in _refs(c.cfg.get("output_layers", [])):
        shapes = outputs.get((lname, n)) or []
        result.append(shapes[t] if t < len(shapes) else None)
    return result


class _Pending(Exception):
    """A node input that has not been computed yet."""


def _first_node(entry: Mapping[str, Any], keras3: bool) -> int:
    """The index of a layer's first node in this graph. A model built from Inputs and used as a
    layer starts with a node of its own (its input linked to its output) that the config leaves
    out, so its calls here are nodes 1, 2, ... (Keras 2: functional.py _should_skip_first_node,
    Functional and Sequential whose first layer is an InputLayer). Keras 3 numbers the calls
    from 0 (Keras 3.15 writes ``keras_history: ["encoder", 0, 0]`` for a nested Functional)."""
    cls = entry.get("class_name")
    if keras3 or cls not in ("Functional", "Model", "Sequential"):
        return 0
    inner = (entry.get("config") or {}).get("layers") or []
    return int(bool(inner) and isinstance(inner[0], Mapping)
               and inner[0].get("class_name") == "InputLayer")


def _node_args(node: Any, outputs: Mapping[tuple[str, int], list[Shape | None]],
               names: set[str]) -> tuple[list[Any], dict[str, Any]]:
    """A config node's (args, kwargs) with every tensor replaced by its shape."""

    def lookup(lname: str, n: int, t: int, recorded: Any = None) -> Shape | None:
        if (lname, n) not in outputs:
            if lname not in names:
                raise Cannot(f"its input comes from an unknown layer {lname!r}")
            raise _Pending
        shapes = outputs[(lname, n)]
        got = shapes[t] if t < len(shapes) else None
        return _shape(recorded) if got is None and recorded is not None else got

    def conv(v: Any) -> Any:
        if isinstance(v, dict):
            if v.get("class_name") == "__keras_tensor__":
                cfg = v["config"]
                return lookup(*cfg["keras_history"], recorded=cfg.get("shape"))
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            if len(v) in (3, 4) and isinstance(v[0], str) and v[0] in names \
                    and isinstance(v[1], int) and isinstance(v[2], int):
                return lookup(v[0], v[1], v[2])
            return [conv(x) for x in v]
        return v

    if isinstance(node, dict):  # Keras 3: {"args": [...], "kwargs": {...}}
        return [conv(a) for a in node.get("args", [])], conv(node.get("kwargs", {}))
    # Keras 2: [[layer, node, tensor, kwargs], ...]; several entries form one list argument
    tensors = [lookup(e[0], e[1], e[2]) for e in node]
    kwargs = conv(node[0][3]) if node and len(node[0]) > 3 and node[0][3] else {}
    return [tensors[0] if len(tensors) == 1 else tensors], kwargs


# --------------------------------------------------------------------------------------------
# Layers without variables: output shape rules
# --------------------------------------------------------------------------------------------


def _identity(_ctx: Ctx, c: Call) -> list[Shape]:
    return [c.args[0] if c.args else None]


def _flatten(_ctx: Ctx, c: Call) -> list[Shape]:
    x = tensor(c.x)
    rest = x[1:]
    if x[0] is Ellipsis:
        return [(None, None)]
    return [(x[0], None if None in rest else math.prod(rest))]


def _reshape(_ctx: Ctx, c: Call) -> list[Shape]:
    x = tensor(c.x)
    target = list(c.cfg["target_shape"])
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        total = None if None in x[1:] else math.prod(x[1:])
        target[target.index(-1)] = None if total is None else total // known
    return [(x[0], *target)]


def _concatenate(_ctx: Ctx, c: Call) -> list[Shape]:
    xs = c.x
    if not isinstance(xs, list) or any(s is None for s in xs):
        raise Cannot("its input shapes are unknown")
    axis = int(c.get("axis", -1)) % len(xs[0])
    dims = [s[axis] for s in xs]
    return [xs[0][:axis] + (None if None in dims else sum(dims),) + xs[0][axis + 1:]]


def _merge(_ctx: Ctx, c: Call) -> list[Shape]:
    xs = c.x if isinstance(c.x, list) else [c.x]
    known = [s for s in xs if s is not None]
    if not known:
        return [None]
    dims = zip(*known, strict=False)
    return [tuple(next((d for d in ds if d is not None), None) for ds in dims)]


def _repeat_vector(_ctx: Ctx, c: Call) -> list[Shape]:
    x = tensor(c.x)
    return [(x[0], int(c.cfg["n"]), *x[1:])]


def _permute(_ctx: Ctx, c: Call) -> list[Shape]:
    x = tensor(c.x)
    return [(x[0], *(x[d] for d in c.cfg["dims"]))]


IDENTITY_LAYERS = frozenset({
    "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
    "GaussianDropout", "AlphaDropout", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax",
    "ThresholdedReLU", "Masking", "ActivityRegularization", "Identity", "UnitNormalization",
})
MERGE_LAYERS = frozenset({"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"})

LAYERS: dict[str, Callable[[Ctx, Call], list[Shape]]] = {
    "Dense": _dense,
    "Embedding": _embedding,
    "SimpleRNN": _rnn,
    "LSTM": _rnn,
    "GRU": _rnn,
    "RNN": _rnn,
    "Conv1D": _conv(1),
    "Conv2D": _conv(2),
    "Conv3D": _conv(3),
    "LayerNormalization": _layer_norm,
    "BatchNormalization": _batch_norm,
    "MultiHeadAttention": _mha,
    "Bidirectional": _bidirectional,
    "TimeDistributed": _time_distributed,
    "Sequential": _model,
    "Functional": _model,
    "Model": _model,
    "Flatten": _flatten,
    "Reshape": _reshape,
    "RepeatVector": _repeat_vector,
    "Permute": _permute,
    "Concatenate": _concatenate,
    "GlobalMaxPooling1D": global_pool(1),
    "GlobalAveragePooling1D": global_pool(1),
    "GlobalMaxPooling2D": global_pool(2),
    "GlobalAveragePooling2D": global_pool(2),
    "MaxPooling1D": pool(1),
    "AveragePooling1D": pool(1),
    "MaxPooling2D": pool(2),
    "AveragePooling2D": pool(2),
    **{k: _identity for k in IDENTITY_LAYERS},
    **{k: _merge for k in MERGE_LAYERS},
    # keras_layers' rules: convolution variants, attention, EinsumDense, ...
    **MORE_LAYERS,
}


def _call(ctx: Ctx, c: Call) -> list[Shape]:
    rule = LAYERS.get(c.cls)
    if rule is None:
        if c.module.startswith("keras.src.ops.") or (ctx.keras3 and "trainable" not in c.cfg):
            # an operation in a Keras 3 graph (``not_equal`` of a mask): never has variables;
            # its consumers read the shapes the config records. Every Keras 3 layer's config
            # has "trainable" (Layer.get_config), an Operation's has not (legacy .h5 configs
            # omit the module).
            return [None]
        raise Cannot("inspector does not know this class; its variables, if any, "
                      "are not in the prediction")
    return rule(ctx, c)


# Where a layer's input width is among its own stored variables: the variable's name relative
# to the layer (a regex) and the axis holding the width. Read only when the layer before has no
# predicted output shape (an unknown layer, a Lambda), so that the layers after it are checked.
INPUT_WIDTH_IN: dict[str, tuple[str, int]] = {
    "Dense": ("kernel", 0),
    **{k: (r"(\w+_cell/)?kernel", 0) for k in ("LSTM", "GRU", "SimpleRNN", "RNN")},
    **{f"Conv{r}D": ("kernel", -2) for r in (1, 2, 3)},
    **{f"Conv{r}DTranspose": ("kernel", -1) for r in (1, 2, 3)},
    **{f"SeparableConv{r}D": ("depthwise_kernel", -2) for r in (1, 2)},
    **{f"DepthwiseConv{r}D": ("(depthwise_)?kernel", -2) for r in (1, 2)},
    "BatchNormalization": ("moving_mean", 0),
    "LayerNormalization": ("gamma|beta", -1),
    "GroupNormalization": ("gamma|beta", 0),
    "MultiHeadAttention": ("query/kernel", 0),
    "Bidirectional": (r"forward_\w+/(\w+_cell/)?kernel", 0),
}


def _borrow(ctx: Ctx, c: Call) -> Call | None:
    """``c`` with its input width taken from its own stored variable, when its input shape
    is unknown; a part (no tensors) says the width was read, not predicted."""
    where = INPUT_WIDTH_IN.get(c.cls)
    if where is None or not ctx.stored or c.get("data_format") == "channels_first":
        return None
    x = c.args[0] if c.args else None
    if isinstance(x, list):
        return None
    if x is not None and x and x[-1] is not None:
        return None
    pattern, axis = where
    found = [(n, s) for n, s in ctx.stored.items() if n.startswith(c.prefix)
             and re.fullmatch(pattern, n[len(c.prefix):]) and len(s) > abs(axis) - (axis < 0)]
    if not found:
        return None
    name, shape = found[0]
    width = int(shape[axis]) * (int(c.get("groups", 1)) if c.cls.startswith("Conv") else 1)
    ctx.parts.append(Part(f"input of layer {c.name} ({c.cls})",
                          f"the layer before it has no predicted output shape: its input width "
                          f"{width} is read from the stored {name}, not predicted"))
    x = (Ellipsis, width) if x is None else (*x[:-1], width)
    return replace(c, args=[x, *c.args[1:]])


def _safe_call(ctx: Ctx, c: Call) -> list[Shape | None]:
    """The layer's outputs; on failure a note and an unknown output (its variables left out)."""
    if not c.args or c.args[0] is None:  # an unknown input: fall back on the recorded shape
        recorded = (c.cfg.get("build_config") or {}).get("input_shape")
        if recorded is not None and not isinstance(recorded[0], list):
            c = replace(c, args=[_shape(recorded), *c.args[1:]])
    borrowed = _borrow(ctx, c) if c.build else None
    c = borrowed or c
    before = len(ctx.tensors)
    try:
        return list(_call(ctx, c))
    except Cannot as e:
        del ctx.tensors[before:]
        _not_modelled(ctx, c, str(e))
    except (KeyError, TypeError, ValueError) as e:
        del ctx.tensors[before:]
        _not_modelled(ctx, c, f"bad config ({e!r})")
    return [None]


def _not_modelled(ctx: Ctx, c: Call, why: str) -> None:
    """A note, and a part naming the layer: its stored variables are not modelled (``check``
    reports them so, never as unexpected)."""
    ctx.notes.append(f"cannot predict layer {c.name} of class {c.cls}: {why}")
    if c.build:
        ctx.parts.append(Part(f"layer {c.name} ({c.cls})", why,
                              rf"(^|/){re.escape(c.name)}/"))


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def _shape(v: Any) -> Shape:
    return tuple(None if d is None else int(d) for d in v)


def _first(outs: Sequence[Shape | None]) -> Shape | None:
    return outs[0] if outs else None


def _axes(axis: Any, ndim: int) -> list[int]:
    return sorted({int(a) % ndim for a in (axis if isinstance(axis, list | tuple) else [axis])})


def _layer_name(entry: Mapping[str, Any]) -> str:
    return entry.get("name") or entry.get("config", {}).get("name", "")


def _input_shape(cfg: Mapping[str, Any]) -> Shape | None:
    for key in ("batch_shape", "batch_input_shape"):
        if cfg.get(key) is not None:
            return _shape(cfg[key])
    if cfg.get("shape") is not None:
        return (None, *_shape(cfg["shape"]))
    return None


def _refs(v: Any) -> list[tuple[str, int, int]]:
    """``input_layers``/``output_layers``: one ``[name, node, tensor]`` or a list of them."""
    if not v:
        return []
    if isinstance(v[0], str):
        v = [v]
    return [(r[0], int(r[1]), int(r[2])) for r in v]


def detect_keras3(config: Mapping[str, Any]) -> bool:
    """Whether a model config was written by Keras 3 (True) or Keras 2 / tf.keras (False)."""
    text = json.dumps(config)
    if '"batch_shape"' in text or '"DTypePolicy"' in text or '"__keras_tensor__"' in text:
        return True
    return not ('"batch_input_shape"' in text or '"inbound_nodes": [[' in text)


def model_variables(config: Mapping[str, Any], keras3: bool | None = None,
                    cell_scope: bool = True, stored: Mapping[str, Sequence[int]] | None = None
                    ) -> tuple[list[TensorEntry], list[str], list[Part]]:
    """Every variable of the model described by ``config`` (``{"class_name", "config"}``), the
    notes on what could not be predicted and the layers whose variables are therefore not
    modelled. ``keras3`` None: detect from the config; ``cell_scope`` False: recurrent
    weights directly under the layer (Keras <= 2.3, tf.keras of TensorFlow 1.x); ``stored``:
    the checkpoint's variable shapes by name, read only for the input width of a layer that
    follows one whose output shape is unknown."""
    if "class_name" not in config or "config" not in config:
        raise UsageError("a Keras model config needs 'class_name' and 'config'")
    ctx = Ctx(detect_keras3(config) if keras3 is None else keras3, cell_scope,
               stored=stored or {})
    cfg = config["config"]
    if isinstance(cfg, list):  # Keras <= 2.2.4 wrote a Sequential config as its layer list
        cfg = {"name": "sequential", "layers": cfg}
    call = Call(config["class_name"], cfg, cfg.get("name", ""), "", [], {}, True,
                 cfg.get("trainable", True))
    if call.cls not in ("Sequential", "Functional", "Model"):
        _safe_call(ctx, call)  # a bare layer config
    else:
        _model(ctx, call)
    return ctx.tensors, ctx.notes, ctx.parts

