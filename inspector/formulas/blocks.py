"""Framework-neutral formula blocks and the MXNet / Sockeye conventions.

Every block is ``block(prefix, ..., sep=...) -> list[TensorEntry]``: the tensors one layer owns,
named ``prefix + sep + leaf`` (``sep="_"`` for MXNet symbols such as ``decoder_rnn_l0_i2h_weight``,
``"."`` for Gluon / PyTorch module paths such as ``encoder.layers.0.ff.ff1.weight``). An empty
``prefix`` gives the bare leaf. Weights are (out, in) as MXNet's ``FullyConnected`` and PyTorch's
``Linear`` store them. Architectures compose blocks by concatenating lists; :func:`tie` marks a
tensor as sharing storage with another (counted once).

API (stable):

- :func:`param` one tensor;
- :func:`embedding` (vocab, dim) table;
- :func:`linear` weight (out, in) with or without bias;
- :func:`layer_norm` scale and shift vectors (``gamma``/``beta`` in MXNet, ``weight``/``bias`` in
  PyTorch);
- :func:`mx_rnn_cell` an MXNet ``mx.rnn`` cell as Sockeye builds it: ``i2h``/``h2h`` weight and
  bias, gate blocks stacked (LSTM 4, GRU 3, RNN 1), plus the layer-norm cells' scale/shift;
- :func:`mha_projections` the projections of multi-head attention in fused or separate layout;
- :func:`tie` the same tensors marked as aliases of others.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from inspector.adapters.model import TensorEntry
from inspector.formulas.core import expected, revised

# Gate blocks stacked in an MXNet cell's i2h/h2h weight (mx.rnn.LSTMCell: i, f, c, o).
MX_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}

# Sockeye's layer-normalised cells (sockeye/rnn.py): base cell type and the extra
# (leaf, gate-block multiplier) scale/shift vectors each adds, in the order Sockeye creates them.
# The per-gate cells create "<g>_shift" before "<g>_scale" (and swap their roles); only the names
# matter here.
MX_LN_CELLS: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {
    "lnlstm": (
        "lstm",
        (("i2h_scale", 4), ("i2h_shift", 4), ("h2h_scale", 4), ("h2h_shift", 4),
         ("c_scale", 1), ("c_shift", 1)),
    ),
    "lnglstm": (
        "lstm",
        tuple((f"{g}_{k}", 1) for g in "ifcos" for k in ("shift", "scale")),
    ),
    "lngru": (
        "gru",
        (("i2h_scale", 3), ("i2h_shift", 3), ("h2h_scale", 3), ("h2h_shift", 3)),
    ),
    "lnggru": ("gru", tuple((f"{g}_{k}", 1) for g in "rzo" for k in ("shift", "scale"))),
}


def join(prefix: str, leaf: str, sep: str = "_") -> str:
    """``prefix + sep + leaf``; ``leaf`` alone for an empty prefix. A prefix that already ends
    with ``sep`` (Sockeye's ``decoder_rnn_``) is not doubled."""
    if not prefix:
        return leaf
    return prefix + leaf if prefix.endswith(sep) else f"{prefix}{sep}{leaf}"


def param(name: str, shape: Iterable[int], block: str, role: str = "parameter") -> TensorEntry:
    """One expected tensor; every dimension must be a positive integer."""
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"{name}: negative dimension in {dims}")
    return expected(name, dims, role=role, block=block)


def embedding(prefix: str, vocab: int, dim: int, *, sep: str = "_", leaf: str = "weight",
              block: str = "embedding") -> list[TensorEntry]:
    """An embedding table ``prefix_weight`` (vocab, dim)."""
    return [param(join(prefix, leaf, sep), (vocab, dim), block)]


def linear(prefix: str, out_features: int, in_features: int, *, bias: bool = True,
           sep: str = "_", weight: str = "weight", bias_leaf: str = "bias",
           block: str = "linear") -> list[TensorEntry]:
    """A fully connected layer in (out, in) layout: ``weight`` (out, in), ``bias`` (out,)."""
    out = [param(join(prefix, weight, sep), (out_features, in_features), block)]
    if bias:
        out.append(param(join(prefix, bias_leaf, sep), (out_features,), block))
    return out


def layer_norm(prefix: str, dim: int, *, sep: str = "_", names: Sequence[str] = ("gamma", "beta"),
               block: str = "layer_norm") -> list[TensorEntry]:
    """Layer normalisation: one (dim,) vector per name (scale, shift)."""
    return [param(join(prefix, n, sep), (dim,), block) for n in names]


def mx_rnn_cell(prefix: str, cell_type: str, num_hidden: int, input_size: int, *,
                sep: str = "_") -> list[TensorEntry]:
    """An MXNet RNN cell (``mx.rnn.LSTMCell``/``GRUCell``, Sockeye's ``ln*`` cells).

    ``i2h_weight`` (g*h, input_size), ``i2h_bias`` (g*h,), ``h2h_weight`` (g*h, h),
    ``h2h_bias`` (g*h,) with g gate blocks; MXNet keeps two bias vectors like PyTorch.
    """
    base, extra = MX_LN_CELLS.get(cell_type, (cell_type, ()))
    if base not in MX_GATES:
        raise ValueError(f"unknown MXNet cell type {cell_type!r}")
    g = MX_GATES[base] * num_hidden
    out = linear(join(prefix, "i2h", sep), g, input_size, sep="_", block=cell_type)
    out += linear(join(prefix, "h2h", sep), g, num_hidden, sep="_", block=cell_type)
    out += [param(join(prefix, leaf, sep), (mult * num_hidden,), cell_type) for leaf, mult in extra]
    return out


def mha_projections(prefix: str, d_model: int, *, kv_dim: int | None = None, layout: str = "qkv",
                    names: dict[str, str] | None = None, bias: bool = False, sep: str = "_",
                    block: str = "attention") -> list[TensorEntry]:
    """Multi-head attention projections (heads do not change shapes, only split d_model).

    ``layout``: ``"qkv"`` one fused (3d, d) input projection (self-attention); ``"q_kv"`` a query
    (d, d) and a fused key/value (2d, kv_dim) projection; ``"q_k_v"`` three separate ones. Then
    the output projection (d, d). ``names`` maps the roles ``qkv``, ``q``, ``kv``, ``k``, ``v``,
    ``out`` to the producer's leaf names.
    """
    kv = d_model if kv_dim is None else kv_dim
    n = {"qkv": "qkv", "q": "q", "kv": "kv", "k": "k", "v": "v", "out": "out", **(names or {})}
    parts: dict[str, list[tuple[str, int, int]]] = {
        "qkv": [("qkv", 3 * d_model, d_model)],
        "q_kv": [("q", d_model, d_model), ("kv", 2 * d_model, kv)],
        "q_k_v": [("q", d_model, d_model), ("k", d_model, kv), ("v", d_model, kv)],
    }
    if layout not in parts:
        raise ValueError(f"unknown attention layout {layout!r}")
    out: list[TensorEntry] = []
    for role, o, i in [*parts[layout], ("out", d_model, d_model)]:
        out += linear(join(prefix, n[role], sep), o, i, bias=bias, sep=sep, block=block)
    return out


def tie(tensors: Iterable[TensorEntry], to: str) -> list[TensorEntry]:
    """``tensors`` marked as aliases of ``to`` (same storage, counted once)."""
    return [revised(t, tie=to) for t in tensors]
