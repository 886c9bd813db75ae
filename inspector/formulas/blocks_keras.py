"""Formula blocks in Keras' own convention: variable names relative to the layer, Keras layouts.

Keras kernels are (in, out); a recurrent layer keeps one fused kernel (in, g*u), one fused
recurrent_kernel (u, g*u) and one bias (g*u) on its cell (g = 1 SimpleRNN, 3 GRU, 4 LSTM), and
a GRU with ``reset_after`` has a second (recurrent) bias row: (2, 3u). Trainable variables get
role ``parameter``, non-trainable ones (BatchNormalization moving statistics) role ``buffer``.
"""

from __future__ import annotations

from collections.abc import Sequence

from inspector.adapters.model import TensorEntry

from .core import expected

# gates per recurrent layer class and the name Keras gives the layer's cell
RNN_CELLS: dict[str, tuple[int, str]] = {
    "SimpleRNN": (1, "simple_rnn_cell"),
    "GRU": (3, "gru_cell"),
    "LSTM": (4, "lstm_cell"),
}
RNN_CELL_CLASSES: dict[str, str] = {
    "SimpleRNNCell": "SimpleRNN",
    "GRUCell": "GRU",
    "LSTMCell": "LSTM",
}


def _var(name: str, shape: Sequence[int], block: str, trainable: bool = True) -> TensorEntry:
    return expected(name, tuple(shape), "parameter" if trainable else "buffer", block)


def embedding(input_dim: int, output_dim: int) -> list[TensorEntry]:
    """``Embedding``: one (input_dim, output_dim) table."""
    return [_var("embeddings", (input_dim, output_dim), "Embedding")]


def dense(n_in: int, units: int, use_bias: bool = True, block: str = "Dense") -> list[TensorEntry]:
    """``Dense``: kernel (in, units) + bias (units,)."""
    out = [_var("kernel", (n_in, units), block)]
    if use_bias:
        out.append(_var("bias", (units,), block))
    return out


def rnn_cell(
    kind: str,
    n_in: int,
    units: int,
    use_bias: bool = True,
    reset_after: bool = True,
    cell: str | None = None,
) -> list[TensorEntry]:
    """A recurrent layer's cell variables, named ``<cell>/kernel`` etc. (``cell`` "": no cell
    scope, as Keras <= 2.3 names them).

    ``kind`` is ``SimpleRNN``, ``GRU`` or ``LSTM``; ``reset_after`` only matters for GRU.
    """
    gates, default_cell = RNN_CELLS[kind]
    scope = "" if cell == "" else f"{cell or default_cell}/"
    width = gates * units
    out = [
        _var(f"{scope}kernel", (n_in, width), kind),
        _var(f"{scope}recurrent_kernel", (units, width), kind),
    ]
    if use_bias:
        bias = (2, width) if kind == "GRU" and reset_after else (width,)
        out.append(_var(f"{scope}bias", bias, kind))
    return out


def conv(
    kernel_size: Sequence[int], in_channels: int, filters: int, groups: int = 1,
    use_bias: bool = True, block: str = "Conv",
) -> list[TensorEntry]:
    """``Conv1D/2D/3D``: kernel (*kernel_size, in/groups, filters) + bias (filters,)."""
    out = [_var("kernel", (*kernel_size, in_channels // groups, filters), block)]
    if use_bias:
        out.append(_var("bias", (filters,), block))
    return out


def layer_norm(
    shape: Sequence[int], center: bool = True, scale: bool = True, rms_scaling: bool = False
) -> list[TensorEntry]:
    """``LayerNormalization``: gamma (scale) and beta (center) over the normalised axes;
    ``rms_scaling`` keeps gamma only."""
    out = []
    if scale or rms_scaling:
        out.append(_var("gamma", shape, "LayerNormalization"))
    if center and not rms_scaling:
        out.append(_var("beta", shape, "LayerNormalization"))
    return out


def batch_norm(shape: Sequence[int], center: bool = True, scale: bool = True) -> list[TensorEntry]:
    """``BatchNormalization``: trainable gamma/beta, non-trainable moving mean and variance."""
    out = []
    if scale:
        out.append(_var("gamma", shape, "BatchNormalization"))
    if center:
        out.append(_var("beta", shape, "BatchNormalization"))
    out.append(_var("moving_mean", shape, "BatchNormalization", trainable=False))
    out.append(_var("moving_variance", shape, "BatchNormalization", trainable=False))
    return out


def multi_head_attention(
    query_dim: int,
    key_dim_in: int,
    value_dim_in: int,
    num_heads: int,
    key_dim: int,
    value_dim: int,
    output_shape: Sequence[int],
    use_bias: bool = True,
) -> list[TensorEntry]:
    """``MultiHeadAttention``: query/key/value projections (d, heads, key_dim|value_dim) with
    (heads, dim) biases, and ``attention_output`` (heads, value_dim, *output_shape)."""
    block = "MultiHeadAttention"
    out: list[TensorEntry] = []
    for name, d, width in (
        ("query", query_dim, key_dim),
        ("key", key_dim_in, key_dim),
        ("value", value_dim_in, value_dim),
    ):
        out.append(_var(f"{name}/kernel", (d, num_heads, width), block))
        if use_bias:
            out.append(_var(f"{name}/bias", (num_heads, width), block))
    out.append(_var("attention_output/kernel", (num_heads, value_dim, *output_shape), block))
    if use_bias:
        out.append(_var("attention_output/bias", tuple(output_shape), block))
    return out


def separable_conv(
    kernel_size: Sequence[int], in_channels: int, depth_multiplier: int, filters: int,
    use_bias: bool = True, block: str = "SeparableConv",
) -> list[TensorEntry]:
    """``SeparableConv1D/2D``: depthwise_kernel (*k, in, dm), pointwise_kernel
    (*1, in*dm, filters), bias (filters,)."""
    ones = (1,) * len(kernel_size)
    out = [
        _var("depthwise_kernel", (*kernel_size, in_channels, depth_multiplier), block),
        _var("pointwise_kernel", (*ones, in_channels * depth_multiplier, filters), block),
    ]
    if use_bias:
        out.append(_var("bias", (filters,), block))
    return out


def depthwise_conv(
    kernel_size: Sequence[int], in_channels: int, depth_multiplier: int, use_bias: bool = True,
    kernel_name: str = "kernel", block: str = "DepthwiseConv",
) -> list[TensorEntry]:
    """``DepthwiseConv1D/2D``: kernel (*k, in, dm) (Keras 2 names it ``depthwise_kernel``),
    bias (in*dm,)."""
    out = [_var(kernel_name, (*kernel_size, in_channels, depth_multiplier), block)]
    if use_bias:
        out.append(_var("bias", (in_channels * depth_multiplier,), block))
    return out


def conv_transpose(
    kernel_size: Sequence[int], in_channels: int, filters: int, use_bias: bool = True,
    block: str = "ConvTranspose",
) -> list[TensorEntry]:
    """``Conv1D/2D/3DTranspose``: kernel (*k, filters, in) (output channels first), bias."""
    out = [_var("kernel", (*kernel_size, filters, in_channels), block)]
    if use_bias:
        out.append(_var("bias", (filters,), block))
    return out


def norm_affine(shape: Sequence[int], center: bool = True, scale: bool = True,
                block: str = "Normalization") -> list[TensorEntry]:
    """gamma (scale) and beta (center) of a normalisation without statistics
    (``GroupNormalization``)."""
    out = []
    if scale:
        out.append(_var("gamma", shape, block))
    if center:
        out.append(_var("beta", shape, block))
    return out


def attention(use_scale: bool, concat: bool) -> list[TensorEntry]:
    """``Attention``: scalar ``scale`` (use_scale) and ``concat_score_weight`` (score_mode
    concat)."""
    out = []
    if use_scale:
        out.append(_var("scale", (), "Attention"))
    if concat:
        out.append(_var("concat_score_weight", (), "Attention"))
    return out


def additive_attention(dim: int) -> list[TensorEntry]:
    """``AdditiveAttention`` with use_scale: ``scale`` (query width,)."""
    return [_var("scale", (dim,), "AdditiveAttention")]


def einsum_dense(kernel: Sequence[int], bias: Sequence[int] | None) -> list[TensorEntry]:
    """``EinsumDense``: kernel and (with bias_axes) bias, shapes from its equation."""
    out = [_var("kernel", kernel, "EinsumDense")]
    if bias is not None:
        out.append(_var("bias", bias, "EinsumDense"))
    return out
