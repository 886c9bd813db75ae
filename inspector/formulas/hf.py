"""Architectures ``gpt2`` (``GPT2LMHeadModel``) and ``llama`` (``LlamaForCausalLM``) in Hugging Face
transformers' naming, with hyperparameters read from the ``config.json`` beside the weights.

Keys are transformers' config keys. HF GPT-2 projections are ``Conv1D`` modules whose weight is
(in, out), the transpose of ``nn.Linear``; Llama's are ``nn.Linear`` (out, in) and its norms are
RMSNorms (weight only). ``save_pretrained`` leaves a tied ``lm_head.weight`` out of safetensors
files; it is predicted as tied to the embedding (counted once).

The other Hugging Face families (BART, T5, BERT, Mistral, ...) are data in
:mod:`inspector.formulas.hf_families`. ``config.json``'s ``model_type`` picks the family when
there is one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import blocks_torch as bt
from inspector.formulas.core import (
    Arch,
    HParam,
    Prediction,
    Symbol,
    expected,
    register,
)

# FLAX_LAYOUTS stays importable from here
from inspector.formulas.hf_layout import FLAX_LAYOUTS, hf_config  # noqa: F401
from inspector.formulas.torch_nn import parameters


def sidecar_config(ckpt: Checkpoint) -> dict[str, Any]:
    """The checkpoint's ``config.json`` (:func:`~inspector.formulas.hf_layout.hf_config`)."""
    return hf_config(ckpt)


def _from_config(arch_hparams: tuple[HParam, ...]):
    names = {h.name for h in arch_hparams}

    def read(ckpt: Checkpoint) -> dict[str, Any]:
        cfg = sidecar_config(ckpt)
        return {k: v for k, v in cfg.items() if k in names}

    return read


def conv1d(prefix: str, nf: int, nx: int) -> list[TensorEntry]:
    """transformers' ``Conv1D(nf, nx)``: ``weight`` (nx, nf) = (in, out), ``bias`` (nf,)."""
    return [bt.param(prefix, "weight", (nx, nf), "conv1d"),
            bt.param(prefix, "bias", (nf,), "conv1d")]


def rms_norm(prefix: str, hidden_size: int) -> list[TensorEntry]:
    """``LlamaRMSNorm``: ``weight`` only."""
    return [bt.param(prefix, "weight", (hidden_size,), "rms_norm")]


def _claims(ckpt: Checkpoint, model_type: str, signature: str) -> bool:
    """``config.json``'s ``model_type`` decides when there is one (a directory whose config says
    ``mistral`` is not checked as ``llama`` by resemblance, and one that says ``llama`` is checked
    as llama whatever it holds); without one, the signature tensor does."""
    mt = sidecar_config(ckpt).get("model_type")
    if mt is None:
        return signature in parameters(ckpt)
    # a Trainer's optimizer.pt beside config.json holds no model tensors
    return mt == model_type and bool(parameters(ckpt))


def _layers(ckpt: Checkpoint, pattern: str) -> int | None:
    idx = [int(m.group(1)) for n in parameters(ckpt) if (m := re.search(pattern, n))]
    return max(idx) + 1 if idx else None


def _tied(ckpt: Checkpoint, head: str) -> bool:
    """True when the head is absent (``save_pretrained`` drops a tied one) or shares storage."""
    stored = [t.stored_name for t in ckpt.tensors if t.name == head]
    return not stored or bool(ckpt.shared_with().get(stored[0]))


# --- gpt2 --------------------------------------------------------------------------------------

GPT2_HPARAMS = (
    HParam("vocab_size", 50257, "vocabulary size"),
    HParam("n_positions", 1024, "learned positions (wpe)"),
    HParam("n_embd", 768, "model width"),
    HParam("n_layer", 12, "transformer blocks"),
    HParam("n_head", 12, "heads (changes no shape; must divide n_embd)"),
    HParam("n_inner", None, "MLP width (null: 4 * n_embd)"),
    HParam("tie_word_embeddings", True, "lm_head shares transformer.wte", bool),
    HParam("add_cross_attention", False, "crossattention + ln_cross_attn in every block", bool),
)


def predict_gpt2(hp: Mapping[str, Any]) -> Prediction:
    e, v = hp["n_embd"], hp["vocab_size"]
    inner = hp["n_inner"] if hp["n_inner"] is not None else 4 * e
    if hp["n_head"] < 1 or e % hp["n_head"]:
        raise UsageError(f"n_embd {e} is not divisible by n_head {hp['n_head']}")
    out = bt.embedding("transformer.wte", v, e)
    out += bt.embedding("transformer.wpe", hp["n_positions"], e)
    for i in range(hp["n_layer"]):
        p = f"transformer.h.{i}"
        out += bt.layer_norm(f"{p}.ln_1", e) + conv1d(f"{p}.attn.c_attn", 3 * e, e)
        out += conv1d(f"{p}.attn.c_proj", e, e) + bt.layer_norm(f"{p}.ln_2", e)
        if hp["add_cross_attention"]:
            out += conv1d(f"{p}.crossattention.c_attn", 2 * e, e)
            out += conv1d(f"{p}.crossattention.q_attn", e, e)
            out += conv1d(f"{p}.crossattention.c_proj", e, e)
            out += bt.layer_norm(f"{p}.ln_cross_attn", e)
        out += conv1d(f"{p}.mlp.c_fc", inner, e) + conv1d(f"{p}.mlp.c_proj", e, inner)
    out += bt.layer_norm("transformer.ln_f", e) + bt.linear("lm_head", e, v, bias=False)
    if hp["tie_word_embeddings"]:
        out = bt.tie(out, "lm_head.weight", "transformer.wte.weight")
    return Prediction("gpt2", dict(hp), out)


def infer_gpt2(ckpt: Checkpoint) -> dict[str, Any]:
    s = parameters(ckpt)
    if "transformer.wte.weight" not in s:
        return {}
    out: dict[str, Any] = {}
    out["vocab_size"], out["n_embd"] = s["transformer.wte.weight"]
    if "transformer.wpe.weight" in s:
        out["n_positions"] = s["transformer.wpe.weight"][0]
    if (n := _layers(ckpt, r"^transformer\.h\.(\d+)\.")) is not None:
        out["n_layer"] = n
    fc = s.get("transformer.h.0.mlp.c_fc.weight")
    if fc is not None and len(fc) == 2 and fc[0] == out["n_embd"]:  # Conv1D (n_embd, n_inner);
        out["n_inner"] = fc[1]  # a quantizer's packed weight says nothing of n_inner
    out["add_cross_attention"] = "transformer.h.0.ln_cross_attn.weight" in s
    out["tie_word_embeddings"] = _tied(ckpt, "lm_head.weight")
    return out


GPT2 = register(Arch(
    name="gpt2",
    description="Hugging Face GPT2LMHeadModel (config.json keys)",
    hparams=GPT2_HPARAMS,
    predict=predict_gpt2,
    scheme="transformer-lm",
    from_checkpoint=_from_config(GPT2_HPARAMS),
    infer=infer_gpt2,
    applies=lambda ckpt: _claims(ckpt, "gpt2", "transformer.h.0.attn.c_attn.weight"),
    symbols=(
        Symbol("V", ("vocab_size",), degree=1, help="vocab_size"),
        Symbol("P", ("n_positions",), degree=1, help="n_positions"),
        Symbol("d", ("n_embd",), degree=2, start=12, step=12, help="n_embd (a multiple of n_head)"),
        Symbol("L", ("n_layer",), degree=1, help="n_layer"),
    ),
))


# --- llama -------------------------------------------------------------------------------------

LLAMA_HPARAMS = (
    HParam("vocab_size", 32000, "vocabulary size"),
    HParam("hidden_size", 4096, "model width"),
    HParam("intermediate_size", 11008, "MLP width (gate/up/down)"),
    HParam("num_hidden_layers", 32, "decoder layers"),
    HParam("num_attention_heads", 32, "query heads"),
    HParam("num_key_value_heads", None, "key/value heads, GQA (null: num_attention_heads)"),
    HParam("head_dim", None, "per-head width (null: hidden_size // num_attention_heads)"),
    HParam("tie_word_embeddings", False, "lm_head shares model.embed_tokens", bool),
    HParam("attention_bias", False, "biases on q/k/v/o_proj", bool),
    HParam("mlp_bias", False, "biases on gate/up/down_proj", bool),
    HParam("saved_inv_freq", False, "transformers before 4.31 saved each layer's "
           "self_attn.rotary_emb.inv_freq buffer (from the stored names)", bool),
)


def predict_llama(hp: Mapping[str, Any]) -> Prediction:
    d, v, ff = hp["hidden_size"], hp["vocab_size"], hp["intermediate_size"]
    heads = hp["num_attention_heads"]
    kv = hp["num_key_value_heads"] if hp["num_key_value_heads"] is not None else heads
    hd = hp["head_dim"] if hp["head_dim"] is not None else d // heads
    ab, mb = hp["attention_bias"], hp["mlp_bias"]
    out = bt.embedding("model.embed_tokens", v, d)
    for i in range(hp["num_hidden_layers"]):
        a, m = f"model.layers.{i}.self_attn", f"model.layers.{i}.mlp"
        out += bt.linear(f"{a}.q_proj", d, heads * hd, ab)
        out += bt.linear(f"{a}.k_proj", d, kv * hd, ab) + bt.linear(f"{a}.v_proj", d, kv * hd, ab)
        out += bt.linear(f"{a}.o_proj", heads * hd, d, ab)
        if hp["saved_inv_freq"]:  # arange(0, head_dim, 2): ceil(head_dim / 2) frequencies
            out.append(expected(f"{a}.rotary_emb.inv_freq", ((hd + 1) // 2,), "buffer", "rotary"))
        out += bt.linear(f"{m}.gate_proj", d, ff, mb) + bt.linear(f"{m}.up_proj", d, ff, mb)
        out += bt.linear(f"{m}.down_proj", ff, d, mb)
        out += rms_norm(f"model.layers.{i}.input_layernorm", d)
        out += rms_norm(f"model.layers.{i}.post_attention_layernorm", d)
    out += rms_norm("model.norm", d) + bt.linear("lm_head", d, v, bias=False)
    if hp["tie_word_embeddings"]:
        out = bt.tie(out, "lm_head.weight", "model.embed_tokens.weight")
    notes = [] if kv == heads else [f"grouped-query attention: {heads} query, {kv} key/value heads"]
    return Prediction("llama", dict(hp), out, notes)


def infer_llama(ckpt: Checkpoint) -> dict[str, Any]:
    """Sizes, layers, biases and tying; head counts only split q/k widths, so they stay as given."""
    s = parameters(ckpt)
    if "model.embed_tokens.weight" not in s:
        return {}
    out: dict[str, Any] = {}
    out["vocab_size"], out["hidden_size"] = s["model.embed_tokens.weight"]
    if (n := _layers(ckpt, r"^model\.layers\.(\d+)\.")) is not None:
        out["num_hidden_layers"] = n
    if "model.layers.0.mlp.gate_proj.weight" in s:
        out["intermediate_size"] = s["model.layers.0.mlp.gate_proj.weight"][0]
    out["attention_bias"] = "model.layers.0.self_attn.q_proj.bias" in s
    out["mlp_bias"] = "model.layers.0.mlp.gate_proj.bias" in s
    out["tie_word_embeddings"] = _tied(ckpt, "lm_head.weight")
    out["saved_inv_freq"] = any(t.name.endswith(".self_attn.rotary_emb.inv_freq")
                                for t in ckpt.tensors)
    return out


LLAMA = register(Arch(
    name="llama",
    description="Hugging Face LlamaForCausalLM (config.json keys; GQA, head_dim, biases)",
    hparams=LLAMA_HPARAMS,
    predict=predict_llama,
    scheme="transformer-lm",
    from_checkpoint=_from_config(LLAMA_HPARAMS),
    infer=infer_llama,
    applies=lambda ckpt: _claims(ckpt, "llama", "model.layers.0.self_attn.q_proj.weight"),
    symbols=(
        Symbol("V", ("vocab_size",), degree=1, help="vocab_size"),
        Symbol("d", ("hidden_size",), degree=2, start=32, step=32,
               help="hidden_size (a multiple of num_attention_heads)"),
        Symbol("f", ("intermediate_size",), degree=1, help="intermediate_size"),
        Symbol("L", ("num_hidden_layers",), degree=1, help="num_hidden_layers"),
    ),
))


# The families described as data (BART, T5, BERT, Mistral, ... ) register after these two.
from inspector.formulas import hf_families  # noqa: E402, F401
