"""More Keras layer rules for the graph walk of :mod:`keras_graph`: convolution variants
(separable, depthwise, transposed), group normalisation, dot-product and additive attention,
``EinsumDense``, ``Lambda`` and the weightless padding / cropping / up-sampling / 3-d pooling
layers. Each rule emits the layer's variables (Keras 3 ``v.path`` / Keras 2 weight names
relative to the layer) and returns its output shapes. Sources: ``keras/src/layers/**``
``build()`` and ``compute_output_shape()`` (Keras 3.15) and ``tf_keras``/standalone Keras 2.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from . import blocks_keras as kb
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

Rule = Callable[[Ctx, Call], list[Shape]]


def _spatial(c: Call, x: Shape, rank: int) -> tuple[bool, int, tuple[int | None, ...]]:
    """(channels_first, channels, spatial dims) of a rank-``rank`` convolution input."""
    first = c.get("data_format", "channels_last") == "channels_first"
    channels = x[1] if first else x[-1]
    if channels is None:
        raise Cannot(f"the channel dimension of its input {shape_str(x)} is unknown")
    return first, channels, tuple(x[2:] if first else x[1:-1])


def _out(x: Shape, first: bool, channels: int, spatial: Sequence[int | None]) -> Shape:
    return (x[0], channels, *spatial) if first else (x[0], *spatial, channels)


def _conv_windows(c: Call, spatial: Sequence[int | None], ks: Sequence[int],
                  rank: int) -> tuple[int | None, ...]:
    strides = tuple_of(c.get("strides", 1), rank)
    dil = tuple_of(c.get("dilation_rate", 1), rank)
    pad = c.get("padding", "valid")
    return tuple(window(n, k, s, d, pad) for n, k, s, d in zip(spatial, ks, strides, dil,
                                                                   strict=True))


def separable(rank: int) -> Rule:
    """``SeparableConv{1,2}D``: depthwise (*k, in, dm), pointwise (*1, in*dm, filters), bias."""

    def rule(ctx: Ctx, c: Call) -> list[Shape]:
        x = ranked(c.x, rank + 2)
        first, ch, spatial = _spatial(c, x, rank)
        ks = tuple_of(c.cfg["kernel_size"], rank)
        dm, filters = int(c.get("depth_multiplier", 1)), int(c.cfg["filters"])
        emit(ctx, c, kb.separable_conv(ks, ch, dm, filters, bool(c.get("use_bias", True)),
                                        f"SeparableConv{rank}D"))
        return [_out(x, first, filters, _conv_windows(c, spatial, ks, rank))]

    return rule


def depthwise(rank: int) -> Rule:
    """``DepthwiseConv{1,2}D``: kernel (*k, in, dm) (Keras 2: ``depthwise_kernel``), bias
    (in*dm,)."""

    def rule(ctx: Ctx, c: Call) -> list[Shape]:
        x = ranked(c.x, rank + 2)
        first, ch, spatial = _spatial(c, x, rank)
        ks = tuple_of(c.cfg["kernel_size"], rank)
        dm = int(c.get("depth_multiplier", 1))
        emit(ctx, c, kb.depthwise_conv(ks, ch, dm, bool(c.get("use_bias", True)),
                                        "kernel" if ctx.keras3 else "depthwise_kernel",
                                        f"DepthwiseConv{rank}D"))
        return [_out(x, first, ch * dm, _conv_windows(c, spatial, ks, rank))]

    return rule


def _deconv_length(n: int | None, k: int, s: int, d: int, padding: str,
                   output_padding: int | None) -> int | None:
    """Keras' ``deconv_output_length``."""
    if n is None:
        return None
    k = k + (k - 1) * (d - 1)
    if output_padding is None:
        if padding == "valid":
            return n * s + max(k - s, 0)
        if padding == "full":
            return n * s - (s + k - 2)
        return n * s
    pad = {"same": k // 2, "valid": 0, "full": k - 1}[padding]
    return (n - 1) * s + k - 2 * pad + output_padding


def transpose(rank: int) -> Rule:
    """``Conv{1,2,3}DTranspose``: kernel (*k, filters, in), bias (filters,)."""

    def rule(ctx: Ctx, c: Call) -> list[Shape]:
        x = ranked(c.x, rank + 2)
        first, ch, spatial = _spatial(c, x, rank)
        ks = tuple_of(c.cfg["kernel_size"], rank)
        filters = int(c.cfg["filters"])
        emit(ctx, c, kb.conv_transpose(ks, ch, filters, bool(c.get("use_bias", True)),
                                        f"Conv{rank}DTranspose"))
        strides = tuple_of(c.get("strides", 1), rank)
        dil = tuple_of(c.get("dilation_rate", 1), rank)
        op = c.get("output_padding")
        ops: Sequence[int | None] = [None] * rank if op is None else tuple_of(op, rank)
        pad = c.get("padding", "valid")
        new = tuple(_deconv_length(n, k, s, d, pad, o)
                    for n, k, s, d, o in zip(spatial, ks, strides, dil, ops, strict=True))
        return [_out(x, first, filters, new)]

    return rule


def group_norm(ctx: Ctx, c: Call) -> list[Shape]:
    """``GroupNormalization``: gamma / beta (channels,) on ``axis``."""
    x = tensor(c.x)
    axis = int(c.get("axis", -1))
    dim = x[axis]
    if dim is None:
        raise Cannot(f"the normalised axis of its input {shape_str(x)} is unknown")
    emit(ctx, c, kb.norm_affine((dim,), bool(c.get("center", True)),
                                 bool(c.get("scale", True)), "GroupNormalization"))
    return [x]


def _attention_inputs(c: Call) -> tuple[Shape, Shape]:
    xs = c.x
    if not isinstance(xs, list) or len(xs) < 2:
        raise Cannot("it expects [query, value] or [query, value, key]")
    q, v = tensor(xs[0], "query"), tensor(xs[1], "value")
    return q, v


def attention(ctx: Ctx, c: Call) -> list[Shape]:
    """``Attention``: ``scale`` () with use_scale, ``concat_score_weight`` () with
    score_mode concat; output: the query's shape with the value's width."""
    q, v = _attention_inputs(c)
    emit(ctx, c, kb.attention(bool(c.get("use_scale", False)),
                               c.get("score_mode", "dot") == "concat"))
    return [q[:-1] + (v[-1],)]


def additive_attention(ctx: Ctx, c: Call) -> list[Shape]:
    """``AdditiveAttention``: ``scale`` (query width,) with use_scale (default on)."""
    q, v = _attention_inputs(c)
    if c.get("use_scale", True):
        emit(ctx, c, kb.additive_attention(last(q, "query")))
    return [q[:-1] + (v[-1],)]


EINSUM_PATTERNS = (  # (regex on the equation with "..." -> "0", left elided)
    (re.compile(r"([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)\Z"), None),
    (re.compile(r"0([a-zA-Z]+),([a-zA-Z]+)->0([a-zA-Z]+)\Z"), True),
    (re.compile(r"([a-zA-Z]{2,})0,([a-zA-Z]+)->([a-zA-Z]+)0\Z"), False),
)


def einsum_shapes(equation: str, bias_axes: str | None, x: Shape, output_shape: Any
                  ) -> tuple[tuple[int, ...], tuple[int, ...] | None, Shape]:
    """Kernel shape, bias shape and full output shape of an ``EinsumDense``, as Keras'
    ``_analyze_einsum_string`` / ``_analyze_split_string`` compute them."""
    eq = equation.replace("...", "0")
    found = next(((m, left) for pattern, left in EINSUM_PATTERNS
                  if (m := pattern.match(eq)) is not None), None)
    if found is None:
        raise Cannot(f"equation {equation!r} is not of a form EinsumDense accepts")
    in_spec, w_spec, out_spec = found[0].groups()
    left_elided = bool(found[1])
    elided = len(x) - len(in_spec)
    out = [output_shape] if isinstance(output_shape, int) else list(output_shape)
    out.insert(0, x[0])
    if elided > 0 and left_elided:
        for i in range(1, elided):
            out.insert(1, x[i])
    elif elided > 0:
        out.extend(x[len(x) - elided:])
    if left_elided:
        in_map = {d: i + elided - len(x) for i, d in enumerate(in_spec)}
        out_map = {d: i + elided - len(out) for i, d in enumerate(out_spec)}
    else:
        in_map = {d: i for i, d in enumerate(in_spec)}
        out_map = {d: i for i, d in enumerate(out_spec)}
    for d in in_spec:
        if d in out_map and out[out_map[d]] is not None and out[out_map[d]] != x[in_map[d]]:
            raise Cannot(f"output_shape {output_shape} contradicts its input "
                          f"{shape_str(x)} on axis {d!r}")
    kernel = []
    for d in w_spec:
        size = x[in_map[d]] if d in in_map else out[out_map[d]] if d in out_map else None
        if size is None:
            raise Cannot(f"weight axis {d!r} of {equation!r} has no known size")
        kernel.append(int(size))
    bias = None
    if bias_axes:
        if any(ch not in out_spec for ch in bias_axes):
            raise Cannot(f"bias_axes {bias_axes!r} are not output axes of {equation!r}")
        start = min(out_spec.find(ch) for ch in bias_axes)
        sizes = [out[out_map[ch]] if ch in bias_axes else 1 for ch in out_spec[start:]]
        if any(s is None for s in sizes):
            raise Cannot(f"a bias axis of {equation!r} has no known size")
        bias = tuple(int(s) for s in sizes) + ((1,) * elided if not left_elided else ())
    return tuple(kernel), bias, tuple(out)


def einsum_dense(ctx: Ctx, c: Call) -> list[Shape]:
    if c.get("lora_rank") or c.get("quantization_config"):
        raise Cannot("LoRA / quantized EinsumDense layers are not supported")
    x = tensor(c.x)
    kernel, bias, out = einsum_shapes(str(c.cfg["equation"]), c.get("bias_axes"), x,
                                      c.cfg["output_shape"])
    emit(ctx, c, kb.einsum_dense(kernel, bias))
    return [out]


def lambda_layer(ctx: Ctx, c: Call) -> list[Shape | None]:
    """``Lambda``: never stores variables (Keras does not track them); its output shape only
    where the config gives it as data. Otherwise unknown: the next layers use the shapes a
    Keras 3 config records, or read their input width from their stored weights (a part)."""
    shape = c.get("output_shape")
    if c.get("output_shape_type", "raw") == "raw" and isinstance(shape, list | tuple) \
            and all(d is None or isinstance(d, int) for d in shape):
        x = c.args[0] if c.args else None
        batch = x[0] if isinstance(x, tuple) and x else None
        return [(batch, *shape)]
    ctx.notes.append(f"layer {c.name} (Lambda): its output shape is computed by Python code, "
                     "not given in the config")
    return [None]


def _per_axis(v: Any, rank: int) -> list[tuple[int, int]]:
    """``padding`` / ``cropping``: n, (a, b) or ((a, b), ...) -> one (before, after) per axis."""
    if isinstance(v, int):
        return [(v, v)] * rank
    v = list(v)
    if rank == 1 and len(v) == 2 and all(isinstance(d, int) for d in v):
        return [(int(v[0]), int(v[1]))]
    return [(d, d) if isinstance(d, int) else (int(d[0]), int(d[1])) for d in v]


def pad_crop(rank: int, sign: int, key: str) -> Rule:
    """``ZeroPadding{1,2,3}D`` (sign +1) and ``Cropping{1,2,3}D`` (sign -1)."""

    def rule(_ctx: Ctx, c: Call) -> list[Shape]:
        x = ranked(c.x, rank + 2)
        first = c.get("data_format", "channels_last") == "channels_first"
        spatial = x[2:] if first else x[1:-1]
        amounts = _per_axis(c.get(key, 1 if sign > 0 else 0), rank)
        new = tuple(None if n is None else n + sign * (a + b)
                    for n, (a, b) in zip(spatial, amounts, strict=True))
        return [(x[0], x[1], *new) if first else (x[0], *new, x[-1])]

    return rule


def upsampling(rank: int) -> Rule:
    def rule(_ctx: Ctx, c: Call) -> list[Shape]:
        x = ranked(c.x, rank + 2)
        size = tuple_of(c.get("size", 2), rank)
        if rank == 1:  # UpSampling1D: (batch, steps, features), no data_format
            return [(x[0], None if x[1] is None else x[1] * size[0], x[2])]
        first = c.get("data_format", "channels_last") == "channels_first"
        spatial = x[2:] if first else x[1:-1]
        new = tuple(None if n is None else n * s for n, s in zip(spatial, size, strict=True))
        return [(x[0], x[1], *new) if first else (x[0], *new, x[-1])]

    return rule


MORE_LAYERS: dict[str, Rule] = {
    "SeparableConv1D": separable(1),
    "SeparableConv2D": separable(2),
    "DepthwiseConv1D": depthwise(1),
    "DepthwiseConv2D": depthwise(2),
    "Conv1DTranspose": transpose(1),
    "Conv2DTranspose": transpose(2),
    "Conv3DTranspose": transpose(3),
    "GroupNormalization": group_norm,
    "Attention": attention,
    "AdditiveAttention": additive_attention,
    "EinsumDense": einsum_dense,
    "Lambda": lambda_layer,
    "MaxPooling3D": pool(3),
    "AveragePooling3D": pool(3),
    "GlobalMaxPooling3D": global_pool(3),
    "GlobalAveragePooling3D": global_pool(3),
    **{f"ZeroPadding{r}D": pad_crop(r, +1, "padding") for r in (1, 2, 3)},
    **{f"Cropping{r}D": pad_crop(r, -1, "cropping") for r in (1, 2, 3)},
    **{f"UpSampling{r}D": upsampling(r) for r in (1, 2, 3)},
}
