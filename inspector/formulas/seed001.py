"""Architecture ``seed001-lm``: the PyTorch models of seed 001 ("Why so big?").

``model`` picks one of the seed's classes; the other hyperparameters are the seed's own
constructor arguments. ``BareBonesTransformerLayer(emb_dim, dim_feedforward)`` is reached through
``n_hidden`` (``TransformerLM`` passes its ``n_hidden`` as ``dim_feedforward``), so the seed's
``BareBonesTransformerLayer(emb_dim, emb_dim)`` = 200 is ``model=transformer-layer n_hidden=5``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import blocks_torch as bt
from inspector.formulas.core import Arch, HParam, Prediction, Symbol, register
from inspector.formulas.hf_layout import hf_config
from inspector.formulas.torch_nn import explained_by, hparams_from, parameters

MODELS = (
    "embedding",  # nn.Embedding(n_vocab, emb_dim)
    "model1",  # Model1: embedding + lm_head
    "mlp",  # MLP(emb_dim, n_hidden)
    "feedforward-lm",  # FeedForwardLM
    "self-attention",  # BareBonesSelfAttention(emb_dim)
    "transformer-layer",  # BareBonesTransformerLayer(emb_dim, dim_feedforward=n_hidden)
    "transformer-lm",  # TransformerLM
)
HPARAMS = (
    HParam("model", "transformer-lm", "which of the seed's classes", str, MODELS),
    HParam("n_vocab", 256, "vocabulary size"),
    HParam("emb_dim", 5, "embedding width"),
    HParam("n_hidden", 16, "MLP hidden width (dim_feedforward of the transformer layer)"),
    HParam("max_len", 50, "positions (TransformerLM)"),
    HParam("tie_weights", True, "lm_head shares the embedding (Model1, FeedForwardLM; "
           "TransformerLM always ties)", bool),
)
# A config.json beside the weights (fixtures/torch/hf_model) names them the Hugging Face way.
CONFIG_ALIASES = {
    "vocab_size": "n_vocab",
    "hidden_size": "emb_dim",
    "intermediate_size": "n_hidden",
    "max_position_embeddings": "max_len",
    "tie_word_embeddings": "tie_weights",
}


def mlp(prefix: str, emb_dim: int, n_hidden: int) -> list[TensorEntry]:
    """``MLP``: ``model.0`` Linear(emb_dim, n_hidden), ``model.2`` Linear(n_hidden, emb_dim)."""
    seq = bt.join(prefix, "model")
    return bt.linear(f"{seq}.0", emb_dim, n_hidden) + bt.linear(f"{seq}.2", n_hidden, emb_dim)


def self_attention(prefix: str, emb_dim: int) -> list[TensorEntry]:
    """``BareBonesSelfAttention``: four biased Linear(emb_dim, emb_dim)."""
    names = ("get_query", "get_key", "get_value", "to_output")
    return [t for n in names for t in bt.linear(bt.join(prefix, n), emb_dim, emb_dim)]


def transformer_layer(prefix: str, emb_dim: int, dim_feedforward: int) -> list[TensorEntry]:
    return (
        self_attention(bt.join(prefix, "self_attention"), emb_dim)
        + mlp(bt.join(prefix, "mlp"), emb_dim, dim_feedforward)
        + bt.layer_norm(bt.join(prefix, "norm_after_attn"), emb_dim)
        + bt.layer_norm(bt.join(prefix, "norm_after_mlp"), emb_dim)
    )


def _lm(body: list[TensorEntry], hp: Mapping[str, Any], tied: bool, pos: bool) -> list[TensorEntry]:
    v, e = hp["n_vocab"], hp["emb_dim"]
    out = bt.embedding("word_to_embedding", v, e)
    if pos:
        out += bt.embedding("pos_to_embedding", hp["max_len"], e)
    out += body + bt.linear("lm_head", e, v, bias=False)
    return bt.tie(out, "lm_head.weight", "word_to_embedding.weight") if tied else out


def predict(hp: Mapping[str, Any]) -> Prediction:
    m, e, h = hp["model"], hp["emb_dim"], hp["n_hidden"]
    notes: list[str] = []
    if m == "embedding":
        tensors = bt.embedding("", hp["n_vocab"], e)
    elif m == "model1":
        tensors = _lm([], hp, hp["tie_weights"], pos=False)
    elif m == "mlp":
        tensors = mlp("", e, h)
    elif m == "feedforward-lm":
        tensors = _lm(mlp("model", e, h), hp, hp["tie_weights"], pos=False)
    elif m == "self-attention":
        tensors = self_attention("", e)
    elif m == "transformer-layer":
        tensors = transformer_layer("", e, h)
    else:
        tensors = _lm(transformer_layer("model", e, h), hp, tied=True, pos=True)
        if not hp["tie_weights"]:
            notes.append("TransformerLM always ties lm_head to word_to_embedding")
    return Prediction("seed001-lm", dict(hp), tensors, notes)


def from_checkpoint(ckpt: Checkpoint) -> dict[str, Any]:
    """A training dict's ``args`` (seed names), else a ``config.json`` beside the weights."""
    found = hparams_from(ckpt, (h.name for h in HPARAMS))
    cfg = hf_config(ckpt)
    for key, name in CONFIG_ALIASES.items():
        if key in cfg and name not in found:
            found[name] = cfg[key]
    return found


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    """Which class (from the names), vocabulary, widths, positions and tying (from the shapes)."""
    s = parameters(ckpt)
    out: dict[str, Any] = {}
    # safetensors' save_model keeps one name of a tied pair, here possibly lm_head.weight
    table = s.get("word_to_embedding.weight", s.get("lm_head.weight"))
    if table is not None:
        out["n_vocab"], out["emb_dim"] = table
        out["model"] = (
            "transformer-lm" if "pos_to_embedding.weight" in s
            else "feedforward-lm" if "model.model.0.weight" in s
            else "model1"
        )
        if "pos_to_embedding.weight" in s:
            out["max_len"] = s["pos_to_embedding.weight"][0]
        out["tie_weights"] = _tied(ckpt)
    elif "self_attention.get_query.weight" in s:
        out["model"], out["emb_dim"] = "transformer-layer", s["norm_after_attn.weight"][0]
    elif "get_query.weight" in s:
        out["model"], out["emb_dim"] = "self-attention", s["get_query.weight"][1]
    elif "model.0.weight" in s:
        out["model"], (out["n_hidden"], out["emb_dim"]) = "mlp", s["model.0.weight"]
    elif set(s) == {"weight"}:
        out["model"], (out["n_vocab"], out["emb_dim"]) = "embedding", s["weight"]
    for first in ("model.model.0.weight", "model.mlp.model.0.weight", "mlp.model.0.weight"):
        if first in s:
            out["n_hidden"] = s[first][0]
    return out


def _tied(ckpt: Checkpoint) -> bool:
    """Both names stored as one tensor, or only one of them stored."""
    names = {t.name: t.stored_name for t in ckpt.tensors}
    head, emb = names.get("lm_head.weight"), names.get("word_to_embedding.weight")
    return head is None or emb is None or emb in ckpt.shared_with().get(head, ())


SEED001 = register(Arch(
    name="seed001-lm",
    description="seed 001's PyTorch LMs: Model1, MLP, FeedForwardLM, bare-bones attention, "
    "BareBonesTransformerLayer, TransformerLM",
    hparams=HPARAMS,
    predict=predict,
    scheme="transformer-lm",
    from_checkpoint=from_checkpoint,
    infer=infer,
    applies=explained_by(infer, lambda: SEED001),
    symbols=(
        Symbol("v", ("n_vocab",), degree=1, help="n_vocab"),
        Symbol("e", ("emb_dim",), degree=2, help="emb_dim"),
        Symbol("h", ("n_hidden",), degree=1, help="n_hidden"),
        Symbol("m", ("max_len",), degree=1, help="max_len"),
    ),
))
