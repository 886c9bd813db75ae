"""Formula blocks in PyTorch's convention: the tensors a ``torch.nn`` module puts in its
``state_dict``, under the names and in the order torch gives them.

Every block is a function ``block(prefix, ...) -> list[TensorEntry]`` whose keyword arguments are
the ``torch.nn`` constructor's own. ``prefix`` is the module's path in its model (``""`` for a
bare module, ``"encoder.rnn"`` inside one); names are joined with ``.`` as ``state_dict`` does.
Weights are (out, in). Compose blocks by concatenating their lists; tie one tensor to another
with :func:`tie`. None of these modules registers a buffer. The framework-neutral shapes come from
:mod:`inspector.formulas.blocks`; this module adds torch's argument order, names and modules.

API (stable): :func:`join`, :func:`param`, :func:`embedding`, :func:`linear`, :func:`layer_norm`,
:func:`rnn`, :func:`multihead_attention`, :func:`transformer_encoder_layer`,
:func:`transformer_decoder_layer`, :func:`transformer_stack`, :func:`tie`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from inspector.adapters.errors import UsageError
from inspector.adapters.model import TensorEntry
from inspector.formulas import blocks
from inspector.formulas.core import revised

RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}  # gate blocks stacked in weight_ih / weight_hh


def join(prefix: str, name: str) -> str:
    """``prefix.name``, or ``name`` alone at the top level."""
    return blocks.join(prefix, name, ".")


def param(prefix: str, name: str, shape: Iterable[int], block: str) -> TensorEntry:
    """One tensor ``prefix.name`` of ``shape``."""
    return blocks.param(join(prefix, name), shape, block)


def embedding(prefix: str, num_embeddings: int, embedding_dim: int) -> list[TensorEntry]:
    """``nn.Embedding``: ``weight`` (num_embeddings, embedding_dim)."""
    return blocks.embedding(prefix, num_embeddings, embedding_dim, sep=".")


def linear(prefix: str, in_features: int, out_features: int,
           bias: bool = True) -> list[TensorEntry]:
    """``nn.Linear(in_features, out_features, bias)``: ``weight`` (out, in), ``bias`` (out,)."""
    return blocks.linear(prefix, out_features, in_features, bias=bias, sep=".")


def layer_norm(
    prefix: str,
    normalized_shape: int | Sequence[int],
    elementwise_affine: bool = True,
    bias: bool = True,
) -> list[TensorEntry]:
    """``nn.LayerNorm``: ``weight`` and ``bias`` of ``normalized_shape`` when affine."""
    if not elementwise_affine:
        return []
    names = ("weight", "bias") if bias else ("weight",)
    if isinstance(normalized_shape, int):
        return blocks.layer_norm(prefix, normalized_shape, sep=".", names=names)
    return [param(prefix, n, normalized_shape, "layer_norm") for n in names]


def rnn(
    prefix: str,
    mode: str,
    input_size: int,
    hidden_size: int,
    num_layers: int = 1,
    bias: bool = True,
    bidirectional: bool = False,
    proj_size: int = 0,
) -> list[TensorEntry]:
    """``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` (``mode`` is the class name).

    Per layer ``k`` and direction (``""``, then ``"_reverse"``): ``weight_ih_l{k}``
    (gates*h, layer input), ``weight_hh_l{k}`` (gates*h, h or proj_size), two bias vectors
    ``bias_ih_l{k}``/``bias_hh_l{k}`` (gates*h) and, for an LSTM with ``proj_size``,
    ``weight_hr_l{k}`` (proj_size, h). Layer k > 0 reads the previous layer's output:
    (proj_size or h) times the number of directions.
    """
    if mode not in RNN_GATES:
        raise UsageError(f"mode must be one of {', '.join(RNN_GATES)}, not {mode!r}")
    if proj_size and mode != "LSTM":
        raise UsageError("proj_size is only supported by LSTM")
    if proj_size >= hidden_size > 0:
        raise UsageError("proj_size must be smaller than hidden_size")
    gate = RNN_GATES[mode] * hidden_size
    real_hidden = proj_size or hidden_size
    directions = ("", "_reverse") if bidirectional else ("",)
    block = f"torch_{mode.lower()}"
    out: list[TensorEntry] = []
    for k in range(num_layers):
        width = input_size if k == 0 else real_hidden * len(directions)
        for d in directions:
            sfx = f"_l{k}{d}"
            out.append(param(prefix, f"weight_ih{sfx}", (gate, width), block))
            out.append(param(prefix, f"weight_hh{sfx}", (gate, real_hidden), block))
            if bias:
                out.append(param(prefix, f"bias_ih{sfx}", (gate,), block))
                out.append(param(prefix, f"bias_hh{sfx}", (gate,), block))
            if proj_size:
                out.append(param(prefix, f"weight_hr{sfx}", (proj_size, hidden_size), block))
    return out


def multihead_attention(
    prefix: str,
    embed_dim: int,
    num_heads: int = 1,
    bias: bool = True,
    add_bias_kv: bool = False,
    kdim: int | None = None,
    vdim: int | None = None,
) -> list[TensorEntry]:
    """``nn.MultiheadAttention``: packed ``in_proj_weight`` (3E, E) when key and value widths
    equal ``embed_dim``, otherwise ``q_proj_weight`` (E, E), ``k_proj_weight`` (E, kdim),
    ``v_proj_weight`` (E, vdim); ``in_proj_bias`` (3E) with ``bias``; ``bias_k``/``bias_v``
    (1, 1, E) with ``add_bias_kv``; ``out_proj`` a Linear(E, E, bias). The head count changes
    no shape, but torch requires it to divide ``embed_dim``.
    """
    if num_heads < 1 or embed_dim % num_heads:
        raise UsageError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
    kdim = embed_dim if kdim is None else kdim
    vdim = embed_dim if vdim is None else vdim
    e, b = embed_dim, "attention"
    if kdim == e and vdim == e:
        out = [param(prefix, "in_proj_weight", (3 * e, e), b)]
    else:
        out = [
            param(prefix, "q_proj_weight", (e, e), b),
            param(prefix, "k_proj_weight", (e, kdim), b),
            param(prefix, "v_proj_weight", (e, vdim), b),
        ]
    if bias:
        out.append(param(prefix, "in_proj_bias", (3 * e,), b))
    if add_bias_kv:
        out += [param(prefix, "bias_k", (1, 1, e), b), param(prefix, "bias_v", (1, 1, e), b)]
    return out + _as(linear(join(prefix, "out_proj"), e, e, bias), b)


def transformer_encoder_layer(
    prefix: str, d_model: int, nhead: int, dim_feedforward: int = 2048, bias: bool = True
) -> list[TensorEntry]:
    """``nn.TransformerEncoderLayer``: ``self_attn``, ``linear1`` (ff, d), ``linear2`` (d, ff),
    ``norm1``, ``norm2`` (``bias`` applies to all of them)."""
    return (
        multihead_attention(join(prefix, "self_attn"), d_model, nhead, bias=bias)
        + _feedforward(prefix, d_model, dim_feedforward, bias)
        + _norms(prefix, d_model, bias, 2)
    )


def transformer_decoder_layer(
    prefix: str, d_model: int, nhead: int, dim_feedforward: int = 2048, bias: bool = True
) -> list[TensorEntry]:
    """``nn.TransformerDecoderLayer``: ``self_attn``, ``multihead_attn`` (cross attention),
    ``linear1``, ``linear2``, ``norm1``..``norm3``."""
    return (
        multihead_attention(join(prefix, "self_attn"), d_model, nhead, bias=bias)
        + multihead_attention(join(prefix, "multihead_attn"), d_model, nhead, bias=bias)
        + _feedforward(prefix, d_model, dim_feedforward, bias)
        + _norms(prefix, d_model, bias, 3)
    )


def transformer_stack(
    prefix: str,
    kind: str,
    num_layers: int,
    d_model: int,
    nhead: int,
    dim_feedforward: int = 2048,
    bias: bool = True,
    norm: bool = False,
) -> list[TensorEntry]:
    """``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` (``kind`` "encoder"/"decoder"):
    ``layers.{i}.*`` and, when given a final ``norm`` LayerNorm(d_model, bias), ``norm.*``."""
    layer = {"encoder": transformer_encoder_layer, "decoder": transformer_decoder_layer}[kind]
    out: list[TensorEntry] = []
    for i in range(num_layers):
        out += layer(join(prefix, f"layers.{i}"), d_model, nhead, dim_feedforward, bias)
    if norm:
        out += layer_norm(join(prefix, "norm"), d_model, bias=bias)
    return out


def tie(tensors: list[TensorEntry], name: str, to: str) -> list[TensorEntry]:
    """``tensors`` with ``name`` marked as sharing storage with ``to`` (counted once)."""
    names = {t.name for t in tensors}
    if name not in names or to not in names:
        raise ValueError(f"cannot tie {name} to {to}: both must be predicted")
    return [blocks.tie([t], to)[0] if t.name == name else t for t in tensors]


def _as(tensors: list[TensorEntry], block: str) -> list[TensorEntry]:
    return [revised(t, block=block) for t in tensors]


def _feedforward(prefix: str, d: int, ff: int, bias: bool) -> list[TensorEntry]:
    return _as(
        linear(join(prefix, "linear1"), d, ff, bias) + linear(join(prefix, "linear2"), ff, d, bias),
        "feedforward",
    )


def _norms(prefix: str, d: int, bias: bool, n: int) -> list[TensorEntry]:
    return [t for i in range(1, n + 1) for t in layer_norm(join(prefix, f"norm{i}"), d, bias=bias)]
