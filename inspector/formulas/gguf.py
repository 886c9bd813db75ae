"""Architecture ``gguf-llama``: a GGUF file of llama.cpp's Llama family checked against its own
metadata (the ``llama.*`` keys and the vocabulary), as llama.cpp's loader builds the model.

The tensors are those ``llama_model::load_tensors`` creates for ``LLM_ARCH_LLAMA``
(llama.cpp ``src/llama-model.cpp``), in NumPy order (the reverse of ggml's ``ne`` there):
``token_embd`` (vocab, n_embd); per layer ``attn_norm``, ``attn_q`` (n_head * head_k, n_embd),
``attn_k`` / ``attn_v`` (n_head_kv * head_k|v, n_embd), ``attn_output`` (n_embd, n_head * head_k),
optional biases, ``ffn_norm``, and either the dense ``ffn_gate`` / ``ffn_up`` (n_ff, n_embd) and
``ffn_down`` (n_embd, n_ff), or with ``expert_count`` (Mixtral) the router ``ffn_gate_inp``
(n_expert, n_embd) and the stacked experts ``ffn_gate_exps`` / ``ffn_up_exps`` (n_expert, n_ff,
n_embd) and ``ffn_down_exps`` (n_expert, n_embd, n_ff); ``output_norm``; ``output`` (vocab,
n_embd), absent when llama.cpp reuses ``token_embd``; ``rope_freqs`` (n_rot / 2) when stored.
Block-quantized tensors are compared by their logical shape (elements, not bytes).

Not modelled (``incomplete``, never a mismatch): other ``general.architecture`` values (the
architecture does not apply), per-layer head counts (arrays), the old per-expert tensors
(``blk.N.ffn_gate.E.weight``), and any tensor name outside the Llama layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint
from inspector.formulas.core import Arch, HParam, Part, Prediction, expected, register

FORMAT = "gguf"
ARCHS = ("llama",)  # general.architecture values built as LLM_ARCH_LLAMA's tensors
# hyperparameter -> its key after "<arch>." in the GGUF metadata (gguf-py constants.Keys.LLM)
KEYS = {
    "vocab_size": "vocab_size",
    "embedding_length": "embedding_length",
    "block_count": "block_count",
    "feed_forward_length": "feed_forward_length",
    "head_count": "attention.head_count",
    "head_count_kv": "attention.head_count_kv",
    "key_length": "attention.key_length",
    "value_length": "attention.value_length",
    "rope_dimension_count": "rope.dimension_count",
    "expert_count": "expert_count",
    "expert_feed_forward_length": "expert_feed_forward_length",
}
REQUIRED = ("vocab_size", "embedding_length", "block_count", "feed_forward_length", "head_count")
TOKENS = "tokenizer.ggml.tokens"

HPARAMS = (
    HParam("vocab_size", None, f"tokens: <arch>.vocab_size, else the length of {TOKENS}"),
    HParam("embedding_length", None, "model width (n_embd)"),
    HParam("block_count", None, "layers (blk.N)"),
    HParam("feed_forward_length", None, "MLP width (n_ff), also each expert's"),
    HParam("head_count", None, "query heads (attention.head_count)"),
    HParam("head_count_kv", None, "key/value heads (null: head_count)"),
    HParam("key_length", None, "per-head q/k width (null: embedding_length // head_count)"),
    HParam("value_length", None, "per-head v width (null: key_length)"),
    HParam("rope_dimension_count", None, "rotary dimensions n_rot (null: key_length)"),
    HParam("expert_count", 0, "experts per layer (0: a dense MLP)"),
    HParam("expert_feed_forward_length", None, "each expert's width (null: feed_forward_length)"),
    HParam("tied_output", False, "no output.weight: llama.cpp reuses token_embd", bool),
    HParam("attention_bias", False, "attn_q/k/v/output biases (from the stored names)", bool),
    HParam("mlp_bias", False, "ffn_gate/up/down biases (from the stored names)", bool),
    HParam("rope_freqs", False, "a stored rope_freqs.weight (Llama 3.1 rope scaling)", bool),
)
MODELLED = (
    r"^(?:token_embd|output_norm|output|rope_freqs)\.weight$",
    r"^blk\.\d+\.(?:attn_(?:norm|q|k|v|output)|ffn_(?:norm|gate|up|down|gate_inp|gate_exps"
    r"|up_exps|down_exps))\.(?:weight|bias)$",
)


def _architecture(ckpt: Checkpoint) -> str | None:
    if ckpt.format != FORMAT:
        return None
    arch = ckpt.hyperparameters.get("general.architecture")
    return arch if isinstance(arch, str) else None


def _vocab(kv: Mapping[str, Any]) -> int | None:
    tokens = kv.get(TOKENS)
    if isinstance(tokens, list):
        return len(tokens)
    if isinstance(tokens, dict) and isinstance(tokens.get("length"), int):
        return tokens["length"]  # a long array, summarised by the adapter
    return None


def from_metadata(ckpt: Checkpoint) -> dict[str, Any]:
    """The hyperparameters the file's own key/values give (scalars only)."""
    arch = _architecture(ckpt)
    if arch is None:
        return {}
    kv = ckpt.hyperparameters
    out: dict[str, Any] = {}
    for name, key in KEYS.items():
        v = kv.get(f"{arch}.{key}")
        if isinstance(v, int) and not isinstance(v, bool):
            out[name] = v
    if "vocab_size" not in out and (n := _vocab(kv)) is not None:
        out["vocab_size"] = n
    return out


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    """The optional tensors, from the stored names (llama.cpp creates them only when present)."""
    if _architecture(ckpt) is None:
        return {}
    return {"tied_output": "output.weight" not in ckpt,
            "attention_bias": "blk.0.attn_q.bias" in ckpt,
            "mlp_bias": "blk.0.ffn_gate.bias" in ckpt or "blk.0.ffn_up.bias" in ckpt,
            "rope_freqs": "rope_freqs.weight" in ckpt}


def applies(ckpt: Checkpoint) -> bool:
    """A Llama-family GGUF file whose head counts are scalars (per-layer arrays: not modelled)."""
    arch = _architecture(ckpt)
    if arch not in ARCHS:
        return False
    kv = ckpt.hyperparameters
    return not any(isinstance(kv.get(f"{arch}.{KEYS[k]}"), (list, dict))
                   for k in ("head_count", "head_count_kv", "feed_forward_length"))


PER_EXPERT = Part("per-expert tensors", "older GGUF files store each expert as its own tensor "
                  "(blk.N.ffn_gate.E.weight); llama.cpp now stacks them in ffn_*_exps",
                  r"^blk\.\d+\.ffn_(?:gate|up|down)\.\d+\.weight$")


def unmodelled(ckpt: Checkpoint) -> list[Part]:
    """The older per-expert layout, when this file has it."""
    return [PER_EXPERT] if any(PER_EXPERT.covers(n) for n in ckpt.keys()) else []


def _w(name: str, shape: tuple[int, ...], block: str) -> Any:
    return expected(name, shape, "parameter", block)


def predict(hp: Mapping[str, Any]) -> Prediction:
    missing = [k for k in REQUIRED if hp[k] is None]
    if missing:
        raise UsageError("the GGUF metadata does not give " + ", ".join(missing))
    d, v, ff, heads = hp["embedding_length"], hp["vocab_size"], hp["feed_forward_length"], \
        hp["head_count"]
    if heads < 1:
        raise UsageError(f"head_count {heads} must be positive")
    kv = hp["head_count_kv"] if hp["head_count_kv"] is not None else heads
    hk = hp["key_length"] if hp["key_length"] is not None else d // heads
    hv = hp["value_length"] if hp["value_length"] is not None else hk
    n_rot = hp["rope_dimension_count"] if hp["rope_dimension_count"] is not None else hk
    experts = hp["expert_count"] or 0
    ffe = hp["expert_feed_forward_length"] or ff
    out = [_w("token_embd.weight", (v, d), "embedding")]
    if hp["rope_freqs"]:
        out.append(_w("rope_freqs.weight", (n_rot // 2,), "rope"))
    for i in range(hp["block_count"]):
        p = f"blk.{i}"
        out.append(_w(f"{p}.attn_norm.weight", (d,), "rms_norm"))
        out += [_w(f"{p}.attn_q.weight", (heads * hk, d), "attention"),
                _w(f"{p}.attn_k.weight", (kv * hk, d), "attention"),
                _w(f"{p}.attn_v.weight", (kv * hv, d), "attention"),
                _w(f"{p}.attn_output.weight", (d, heads * hk), "attention")]
        if hp["attention_bias"]:  # llama.cpp's shapes: bq and bo {n_embd}, bk and bv {n_embd_gqa}
            out += [_w(f"{p}.attn_q.bias", (d,), "attention"),
                    _w(f"{p}.attn_k.bias", (kv * hk,), "attention"),
                    _w(f"{p}.attn_v.bias", (kv * hv,), "attention"),
                    _w(f"{p}.attn_output.bias", (d,), "attention")]
        out.append(_w(f"{p}.ffn_norm.weight", (d,), "rms_norm"))
        if experts:
            out += [_w(f"{p}.ffn_gate_inp.weight", (experts, d), "router"),
                    _w(f"{p}.ffn_gate_exps.weight", (experts, ffe, d), "experts"),
                    _w(f"{p}.ffn_down_exps.weight", (experts, d, ffe), "experts"),
                    _w(f"{p}.ffn_up_exps.weight", (experts, ffe, d), "experts")]
        else:
            out += [_w(f"{p}.ffn_gate.weight", (ff, d), "mlp"),
                    _w(f"{p}.ffn_down.weight", (d, ff), "mlp"),
                    _w(f"{p}.ffn_up.weight", (ff, d), "mlp")]
            if hp["mlp_bias"]:
                out += [_w(f"{p}.ffn_gate.bias", (ff,), "mlp"),
                        _w(f"{p}.ffn_down.bias", (d,), "mlp"),
                        _w(f"{p}.ffn_up.bias", (ff,), "mlp")]
    out.append(_w("output_norm.weight", (d,), "rms_norm"))
    if not hp["tied_output"]:
        out.append(_w("output.weight", (v, d), "lm_head"))
    notes = []
    if kv != heads:
        notes.append(f"grouped-query attention: {heads} query, {kv} key/value heads")
    if experts:
        notes.append(f"mixture of experts: {experts} experts of width {ffe} per layer")
    if hp["tied_output"]:
        notes.append("no output.weight: llama.cpp uses token_embd as the output")
    return Prediction("gguf-llama", dict(hp), out, notes)


GGUF_LLAMA = register(Arch(
    name="gguf-llama",
    description="llama.cpp GGUF, Llama family incl. Mixtral experts (the file's llama.* keys)",
    hparams=HPARAMS,
    predict=predict,
    scheme="gguf",
    from_checkpoint=from_metadata,
    infer=infer,
    applies=applies,
    modelled=MODELLED,
    unmodelled=unmodelled,
))
