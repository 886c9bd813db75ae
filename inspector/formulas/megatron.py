"""Architecture ``megatron-gpt``: a Megatron-LM GPT checkpoint checked against its own ``args``
(the ``argparse.Namespace`` Megatron saves in every checkpoint), as Megatron builds the model.

Shapes are the global (tensor-parallel merged) ones the adapter lists. Megatron-core names
(``megatron/core/models/gpt/gpt_model.py`` with the local or Transformer Engine layer spec,
``megatron/core/transformer/attention.py``, ``mlp.py``) and the legacy ``megatron.legacy.model``
names (``language_model.embedding``, ``language_model.encoder.layers.N.self_attention.
query_key_value``, ...). From ``args``:

* ``embedding.word_embeddings`` / ``output_layer``: (padded_vocab_size, hidden_size);
  ``padded_vocab_size`` as ``tokenizer._vocab_size_with_padding`` computes it (vocab_size
  rounded up to make_vocab_size_divisible_by x tensor_model_parallel_size) when args lack it;
  ``output_layer`` only with untie_embeddings_and_output_weights, or (tied, legacy ``torch``
  format) the last pipeline stage's copy (``output_layer`` / ``word_embeddings_for_head``);
* ``position_embeddings``: (max_position_embeddings, hidden_size) for learned_absolute;
* per layer: ``linear_qkv`` (kv_channels x (heads + 2 x groups), hidden) with groups =
  num_query_groups under group_query_attention, else heads; its bias with add_bias_linear or
  add_qkv_bias; ``linear_proj`` (hidden, kv_channels x heads); ``linear_fc1`` (ffn_hidden_size
  x 2 with swiglu, hidden); ``linear_fc2`` (hidden, ffn_hidden_size); biases with
  add_bias_linear; norms (hidden) with a bias for LayerNorm, not RMSNorm; under Transformer
  Engine the norms are ``linear_qkv.layer_norm_weight`` / ``linear_fc1.layer_norm_weight``;
* ``final_layernorm`` (legacy ``final_norm``).

``torch_dist`` checkpoints stack the layers: ``decoder.layers.X`` is (num_layers, ...).
Defaults follow ``validate_args``: ffn_hidden_size 4 x hidden (SwiGLU: int(8 x hidden / 3 / 64)
x 64), kv_channels hidden // heads.

Not modelled (``incomplete``, never a mismatch): mixture of experts (num_experts), qk_layernorm,
multi-latent attention, multi-token prediction, Transformer Engine ``_extra_state`` objects, and
any name outside these layouts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint
from inspector.formulas.core import Arch, HParam, Part, Prediction, expected, register

FORMAT = "megatron"

HPARAMS = (
    HParam("num_layers", None, "transformer layers"),
    HParam("hidden_size", None, "model width"),
    HParam("ffn_hidden_size", None, "MLP width (null: 4 x hidden_size; SwiGLU: "
           "int(8 x hidden / 3 / 64) x 64)"),
    HParam("num_attention_heads", None, "query heads"),
    HParam("kv_channels", None, "per-head width (null: hidden_size // num_attention_heads)"),
    HParam("group_query_attention", False, "grouped-query attention", bool),
    HParam("num_query_groups", 1, "key/value groups under group_query_attention"),
    HParam("swiglu", False, "SwiGLU MLP: linear_fc1 holds gate and up", bool),
    HParam("padded_vocab_size", None, "embedding rows (null: vocab_size padded)"),
    HParam("vocab_size", None, "tokenizer vocabulary before padding"),
    HParam("make_vocab_size_divisible_by", 128, "vocabulary padding multiple (per tp rank)"),
    HParam("tensor_model_parallel_size", 1, "tensor-parallel ranks (vocabulary padding)"),
    HParam("pipeline_model_parallel_size", 1, "pipeline stages (a tied last stage keeps a "
           "copy of the embedding)"),
    HParam("untie_embeddings_and_output_weights", False, "a separate output_layer", bool),
    HParam("add_bias_linear", True, "biases of the linear layers", bool),
    HParam("add_qkv_bias", False, "a QKV bias without other linear biases", bool),
    HParam("normalization", "LayerNorm", "LayerNorm has weight and bias; RMSNorm (and the "
           "others) a weight", str),
    HParam("position_embedding_type", "learned_absolute", "learned_absolute adds "
           "position_embeddings (rope, yarn, mrope, none: no table)", str),
    HParam("max_position_embeddings", None, "learned position table rows"),
    HParam("naming", "mcore", "parameter names: mcore (decoder.layers.N) or legacy "
           "(language_model.encoder.layers.N); from the stored names", str, ("mcore", "legacy")),
    HParam("te_norms", False, "Transformer Engine fused norms (linear_qkv.layer_norm_weight); "
           "from the stored names", bool),
    HParam("stacked", False, "layers stacked along dim 0 (torch_dist); from the stored names",
           bool),
    HParam("stage_copy", False, "a tied last pipeline stage's copy of the embedding is stored "
           "(legacy torch format); from the stored names", bool),
)
KEYS = tuple(h.name for h in HPARAMS[:19])
MODELLED = (
    r"^(?:language_model\.)?embedding\.(?:word|position)_embeddings\.weight$",
    r"^(?:language_model\.)?(?:decoder|encoder)\.layers\.(?:\d+\.)?(?:input_layernorm|"
    r"pre_mlp_layernorm|input_norm|post_attention_norm)\.(?:weight|bias)$",
    r"^(?:language_model\.)?(?:decoder|encoder)\.layers\.(?:\d+\.)?self_attention\.(?:"
    r"linear_qkv|linear_proj|query_key_value|dense)\.(?:weight|bias|layer_norm_weight|"
    r"layer_norm_bias)$",
    r"^(?:language_model\.)?(?:decoder|encoder)\.layers\.(?:\d+\.)?mlp\.(?:linear_fc1|linear_fc2|"
    r"dense_h_to_4h|dense_4h_to_h)\.(?:weight|bias|layer_norm_weight|layer_norm_bias)$",
    r"^(?:language_model\.)?(?:decoder|encoder)\.(?:final_layernorm|final_norm)\.(?:weight|bias)$",
    r"^(?:language_model\.)?output_layer\.weight$",
    r"^word_embeddings_for_head\.weight$",
)


def _args(ckpt: Checkpoint) -> dict[str, Any] | None:
    if ckpt.format != FORMAT:
        return None
    args = ckpt.hyperparameters.get("args")
    return args if isinstance(args, dict) else None


def from_args(ckpt: Checkpoint) -> dict[str, Any]:
    """The hyperparameters Megatron's saved args give."""
    args = _args(ckpt)
    if args is None:
        return {}
    return {k: args[k] for k in KEYS if k in args and args[k] is not None}


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    """The layout facts the stored names say (naming, fused norms, stacking, stage copy)."""
    if ckpt.format != FORMAT:
        return {}
    names = list(ckpt.keys())
    legacy = any(n.startswith("language_model.") for n in names)
    return {
        "naming": "legacy" if legacy else "mcore",
        "te_norms": any(n.endswith(".linear_qkv.layer_norm_weight") for n in names),
        "stacked": any(re.match(r"^(?:decoder|encoder)\.layers\.[a-z_]", n) for n in names),
        "stage_copy": "word_embeddings_for_head.weight" in names or (
            not legacy and "output_layer.weight" in names and not (_args(ckpt) or {}).get(
                "untie_embeddings_and_output_weights", True)),
    }


def applies(ckpt: Checkpoint) -> bool:
    """A Megatron checkpoint of a GPT model: embedding and decoder (or legacy encoder) layers."""
    if ckpt.format != FORMAT:
        return False
    return any(n.endswith("embedding.word_embeddings.weight") for n in ckpt.keys())


_UNMODELLED = (
    ("num_experts", "mixture of experts", r"\.mlp\.(?:router|experts|shared_experts)\."),
    ("qk_layernorm", "query/key layer norms", r"\.self_attention\.[qk]_layernorm\."),
    ("multi_latent_attention", "multi-latent attention", r"\.self_attention\.linear_(?:q_down|"
     r"q_up|kv_down|kv_up)_proj\."),
    ("mtp_num_layers", "multi-token prediction layers", r"^mtp\."),
)
EXTRA_STATE = Part("Transformer Engine extra state", "TE modules' _extra_state objects (FP8 "
                   "metadata), not parameters", r"\._extra_state$")


def unmodelled(ckpt: Checkpoint) -> list[Part]:
    args = _args(ckpt) or {}
    out = [Part(what, f"args.{key} = {args[key]!r}: not modelled", pattern)
           for key, what, pattern in _UNMODELLED if args.get(key)]
    out += [Part(what, "stored but not modelled", pattern) for key, what, pattern in _UNMODELLED
            if not args.get(key) and any(re.search(pattern, n) for n in ckpt.keys())]
    if any(EXTRA_STATE.covers(n) for n in ckpt.keys()):
        out.append(EXTRA_STATE)
    return out


def padded_vocab(hp: Mapping[str, Any]) -> int:
    """megatron/training/tokenizer/tokenizer.py ``_vocab_size_with_padding``."""
    if hp["padded_vocab_size"] is not None:
        return hp["padded_vocab_size"]
    if hp["vocab_size"] is None:
        raise UsageError("the args give neither padded_vocab_size nor vocab_size")
    multiple = hp["make_vocab_size_divisible_by"] * hp["tensor_model_parallel_size"]
    if multiple < 1:
        raise UsageError(f"make_vocab_size_divisible_by x tensor_model_parallel_size = {multiple}")
    return -(-hp["vocab_size"] // multiple) * multiple


def predict(hp: Mapping[str, Any]) -> Prediction:
    missing = [k for k in ("num_layers", "hidden_size", "num_attention_heads") if hp[k] is None]
    if missing:
        raise UsageError("the args do not give " + ", ".join(missing))
    h, heads, layers = hp["hidden_size"], hp["num_attention_heads"], hp["num_layers"]
    if heads < 1 or layers < 0:
        raise UsageError(f"num_attention_heads {heads}, num_layers {layers}")
    v = padded_vocab(hp)
    swiglu = hp["swiglu"]
    ffn = hp["ffn_hidden_size"]
    if ffn is None:
        ffn = int((4 * h * 2 / 3) / 64) * 64 if swiglu else 4 * h
    kvc = hp["kv_channels"] if hp["kv_channels"] is not None else h // heads
    groups = hp["num_query_groups"] if hp["group_query_attention"] else heads
    bias = hp["add_bias_linear"]
    norm_bias = hp["normalization"] == "LayerNorm"
    legacy = hp["naming"] == "legacy"
    te = hp["te_norms"] and not legacy
    lm = "language_model." if legacy else ""
    block = "encoder" if legacy else "decoder"
    n = dict(in_norm="input_norm", qkv="self_attention.query_key_value",
             proj="self_attention.dense", post_norm="post_attention_norm",
             fc1="mlp.dense_h_to_4h", fc2="mlp.dense_4h_to_h", final="final_norm") if legacy \
        else dict(in_norm="input_layernorm", qkv="self_attention.linear_qkv",
                  proj="self_attention.linear_proj", post_norm="pre_mlp_layernorm",
                  fc1="mlp.linear_fc1", fc2="mlp.linear_fc2", final="final_layernorm")
    if te:
        n["in_norm"], n["post_norm"] = f"{n['qkv']}.layer_norm", f"{n['fc1']}.layer_norm"
    stacked = hp["stacked"]

    def w(name: str, shape: tuple[int, ...], what: str) -> Any:
        return expected(name, shape, "parameter", what)

    def norm(prefix: str) -> list[Any]:
        sep = "_" if te and prefix.endswith("layer_norm") else "."
        out = [(f"{prefix}{sep}weight", (h,))]
        if norm_bias:
            out.append((f"{prefix}{sep}bias", (h,)))
        return out

    layer: list[tuple[str, tuple[int, ...], str]] = []
    for name, shape in norm(n["in_norm"]):
        layer.append((name, shape, "norm"))
    qkv = kvc * (heads + 2 * groups)
    layer.append((f"{n['qkv']}.weight", (qkv, h), "attention"))
    if bias or hp["add_qkv_bias"]:
        layer.append((f"{n['qkv']}.bias", (qkv,), "attention"))
    layer.append((f"{n['proj']}.weight", (h, kvc * heads), "attention"))
    if bias:
        layer.append((f"{n['proj']}.bias", (h,), "attention"))
    for name, shape in norm(n["post_norm"]):
        layer.append((name, shape, "norm"))
    fc1 = 2 * ffn if swiglu else ffn
    layer.append((f"{n['fc1']}.weight", (fc1, h), "mlp"))
    if bias:
        layer.append((f"{n['fc1']}.bias", (fc1,), "mlp"))
    layer.append((f"{n['fc2']}.weight", (h, ffn), "mlp"))
    if bias:
        layer.append((f"{n['fc2']}.bias", (h,), "mlp"))

    emb = f"{lm}embedding.word_embeddings.weight"
    out = [w(emb, (v, h), "embedding")]
    if hp["position_embedding_type"] == "learned_absolute":
        if hp["max_position_embeddings"] is None:
            raise UsageError("learned_absolute positions but no max_position_embeddings")
        out.append(w(f"{lm}embedding.position_embeddings.weight",
                     (hp["max_position_embeddings"], h), "embedding"))
    if stacked:
        out += [w(f"{lm}{block}.layers.{name}", (layers, *shape), what)
                for name, shape, what in layer]
    else:
        for i in range(layers):
            out += [w(f"{lm}{block}.layers.{i}.{name}", shape, what)
                    for name, shape, what in layer]
    out += [w(f"{lm}{block}.{n['final']}.{name.rsplit('.', 1)[1]}", shape, "norm")
            for name, shape in norm("x")]
    notes = []
    if hp["untie_embeddings_and_output_weights"]:
        out.append(w(f"{lm}output_layer.weight", (v, h), "output"))
    elif hp["stage_copy"]:
        head = "word_embeddings_for_head.weight" if legacy else "output_layer.weight"
        out.append(w(head, (v, h), "output"))  # its own parameter, synchronised by all-reduce
        notes.append(f"{head}: the last pipeline stage's copy of the tied embedding (stored "
                     "and counted separately)")
    if groups != heads:
        notes.append(f"grouped-query attention: {heads} query heads, {groups} key/value groups")
    if v != (hp["vocab_size"] or v):
        notes.append(f"vocabulary {hp['vocab_size']} padded to {v}")
    return Prediction("megatron-gpt", dict(hp), out, notes)


MEGATRON_GPT = register(Arch(
    name="megatron-gpt",
    description="Megatron-LM GPT (mcore or legacy names, torch or torch_dist), from its args",
    hparams=HPARAMS,
    predict=predict,
    scheme="megatron",
    from_checkpoint=from_args,
    infer=infer,
    applies=applies,
    modelled=MODELLED,
    unmodelled=unmodelled,
))
