"""Hugging Face families as data: one :class:`Family` entry each, over the shared blocks of
:mod:`inspector.formulas.hf_layout`. A new family is a new entry here.

Each entry gives the ``config.json`` keys it reads with transformers' defaults (``config``), the
dimensions and flags as expressions over them (``dims``: ``d`` width, ``V`` vocabulary, ``H``
query heads, ``KV`` key/value heads, ``hd`` head width, ``ff`` feed-forward width; flags
``qkv_bias``, ``o_bias``, ``mlp_bias``, ``norm_bias``, ``norm_affine`` and the family's own), the
base model's parts, and its model classes (:class:`Head`). Families that share a body differ only
in these flags: BART, mBART, Marian and M2M100 share :data:`BART_BODY`; Llama-style decoders
share :data:`CAUSAL_BODY`; BERT and RoBERTa share :data:`BERT_BODY`.

``file_flags`` are what the file itself tells: buffers an older transformers saved (4.30's
``position_ids``, GPT-NeoX masks, M2M100 position tables) or FSMT's 4.x layout, read from the stored
names and then checked like any tensor.

Verified against transformers 5.23 models built from a config (fixtures/hf/) and transformers
4.30.2 ones (fixtures/hf/v4/); the mixtures of experts (Mixtral, Qwen2-MoE) against 4.57 and 5.24
(fixtures/hf/v4_57/, v5_24/), including 5.x's in-memory fused experts.
"""

from __future__ import annotations

from inspector.formulas.hf_layout import (
    Attn,
    Buf,
    Emb,
    Family,
    Head,
    Layers,
    Lin,
    Mlp,
    Norm,
    Param,
    Tie,
    Unsaved,
    Vec,
    register_family,
)

# --- shared naming -----------------------------------------------------------------------------

KVQO = {"k": "k_proj", "v": "v_proj", "q": "q_proj", "o": "out_proj"}  # fairseq order
QKVO = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}
FC = {"up": "fc1", "down": "fc2"}
GATED = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}

# --- BART-style encoder-decoders (BART, mBART, Marian, M2M100/NLLB) ---------------------------
# Flags: positions ("learned": a table of P + 2 rows; "sinusoidal_param": a parameter
# save_pretrained leaves out; "sinusoidal_buffer": a non-persistent buffer), embed_norm
# (layernorm_embedding), final_norm (a last layer_norm per stack), logits_bias
# (final_logits_bias), shared (one model.shared table for both stacks and the head).

BART_ENCODER_LAYER = (
    Attn("self_attn", KVQO), Norm("self_attn_layer_norm"), Mlp("", FC), Norm("final_layer_norm"),
)
BART_DECODER_LAYER = (
    Attn("self_attn", KVQO), Norm("self_attn_layer_norm"),
    Attn("encoder_attn", KVQO), Norm("encoder_attn_layer_norm"),
    Mlp("", FC), Norm("final_layer_norm"),
)


def _heads(ff: str, heads: str) -> dict[str, str]:
    """A stack's own feed-forward width and head count (head width ``d // H``)."""
    return {"ff": ff, "H": heads, "KV": "H", "hd": "d // H"}


def _stack(side: str, vocab: str, layers: str, ff: str, heads: str, layer: tuple) -> tuple:
    return (
        Emb(f"{side}.embed_tokens", vocab),
        Emb(f"{side}.embed_positions", "P + 2", when="positions == 'learned'"),
        Unsaved((Emb(f"{side}.embed_positions", "P"),), "sinusoidal, rebuilt at load",
                when="positions == 'sinusoidal_param'"),
        Buf(f"{side}.embed_positions.weights", ("P + 2", "d"),
            when="positions == 'sinusoidal_buffer' and saved_position_tables"),
        Layers(f"{side}.layers.{{i}}", layers, layer, bind=_heads(ff, heads)),
        Norm(f"{side}.layernorm_embedding", when="embed_norm"),
        Norm(f"{side}.layer_norm", when="final_norm"),
    )


BART_BODY = (
    Emb("shared", "V", when="shared"),
    *_stack("encoder", "V", "encoder_layers", "encoder_ffn_dim", "encoder_attention_heads",
            BART_ENCODER_LAYER),
    *_stack("decoder", "decoder_V", "decoder_layers", "decoder_ffn_dim",
            "decoder_attention_heads", BART_DECODER_LAYER),
    Tie("encoder.embed_tokens.weight", "shared.weight", when="shared"),
    Tie("decoder.embed_tokens.weight", "shared.weight", when="shared"),
)
BART_CONFIG = {
    "vocab_size": 50265, "d_model": 1024, "encoder_layers": 12, "decoder_layers": 12,
    "encoder_attention_heads": 16, "decoder_attention_heads": 16, "encoder_ffn_dim": 4096,
    "decoder_ffn_dim": 4096, "max_position_embeddings": 1024, "tie_word_embeddings": True,
}
BART_DIMS = {
    "d": "d_model", "V": "vocab_size", "decoder_V": "V", "P": "max_position_embeddings",
    "shared": True,
}
SEQ2SEQ_LM = Head("model", (
    Buf("final_logits_bias", (1, "decoder_V"), when="logits_bias"),
    Lin("lm_head", "d", "decoder_V", bias=False),
    Tie("lm_head.weight", "model.shared.weight", when="shared and tie_word_embeddings"),
    Tie("lm_head.weight", "model.decoder.embed_tokens.weight",
        when="not shared and tie_word_embeddings"),
))

BART = Family(
    "bart", "Hugging Face BART (BartModel, BartForConditionalGeneration; config.json keys)",
    BART_CONFIG,
    {**BART_DIMS, "positions": "'learned'", "embed_norm": True, "final_norm": False,
     "logits_bias": True},
    BART_BODY,
    {"BartForConditionalGeneration": SEQ2SEQ_LM, "BartModel": Head("")},
    "BartForConditionalGeneration",
)
MBART = Family(
    "mbart", "Hugging Face mBART (pre-norm BART with a last layer_norm per stack)",
    BART_CONFIG,
    {**BART_DIMS, "positions": "'learned'", "embed_norm": True, "final_norm": True,
     "logits_bias": True},
    BART_BODY,
    {"MBartForConditionalGeneration": SEQ2SEQ_LM, "MBartModel": Head("")},
    "MBartForConditionalGeneration",
)
MARIAN = Family(
    "marian", "Hugging Face Marian (MarianMTModel: sinusoidal positions, not saved)",
    {**BART_CONFIG, "vocab_size": 58101, "decoder_vocab_size": None,
     "share_encoder_decoder_embeddings": True},
    {**BART_DIMS, "decoder_V": "decoder_vocab_size or vocab_size",
     "shared": "share_encoder_decoder_embeddings", "positions": "'sinusoidal_param'",
     "embed_norm": False, "final_norm": False, "logits_bias": True},
    BART_BODY,
    {"MarianMTModel": SEQ2SEQ_LM},
    "MarianMTModel",
)
M2M100 = Family(
    "m2m_100", "Hugging Face M2M100 and NLLB (M2M100ForConditionalGeneration; sinusoidal "
    "positions are buffers)",
    {**BART_CONFIG, "vocab_size": 128112},
    {**BART_DIMS, "positions": "'sinusoidal_buffer'", "embed_norm": False, "final_norm": True,
     "logits_bias": False},
    BART_BODY,
    {"M2M100ForConditionalGeneration": SEQ2SEQ_LM, "M2M100Model": Head("")},
    "M2M100ForConditionalGeneration",
    file_flags={"saved_position_tables": (
        r"embed_positions\.weights$", False,
        "transformers 4 saved the sinusoidal embed_positions.weights buffers")},
)

# --- FSMT (fairseq WMT19): separate source and target vocabularies -----------------------------

FSMT = Family(
    "fsmt", "Hugging Face FSMT (fairseq wmt19; separate vocabularies, sinusoidal positions)",
    {"src_vocab_size": 42024, "tgt_vocab_size": 42024, "d_model": 1024, "encoder_layers": 12,
     "decoder_layers": 12, "encoder_attention_heads": 16, "decoder_attention_heads": 16,
     "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096, "max_position_embeddings": 1024,
     "pad_token_id": 1, "tie_word_embeddings": False, "transformers_version": None},
    # Layouts by the transformers version that saved the file (config.json's
    # transformers_version; without it, the stored position tables tell 4.30 from 5.x):
    # - 5.x saves the position tables; tied, the encoder's table and the output projection are
    #   the decoder's (target vocabulary); untied, nothing is shared.
    # - 4.57 saves them too; untied, the decoder's table is the output projection
    #   (FSMTDecoder sets output_projection.weight = embed_tokens.weight; save_pretrained keeps
    #   output_projection); tied, the decoder's table and the output projection are the
    #   encoder's (source vocabulary).
    # - 4.30 left the tables out; untied, the output projection is the decoder's table; tied, the
    #   decoder's table is the encoder's and the output projection keeps its own.
    {"d": "d_model", "P": "max_position_embeddings + pad_token_id + 1",
     "v4": "transformers_major == 4 or transformers_major is None and not saved_positions",
     "tie5": "saved_positions and tie_word_embeddings and not v4",
     "tie4": "v4 and tie_word_embeddings",
     "tie457": "tie4 and saved_positions",
     "tie_out": "tie5 or v4 and not saved_positions and not tie_word_embeddings",
     "tie_dec": "v4 and saved_positions and not tie_word_embeddings"},
    (
        Emb("encoder.embed_tokens", "tgt_vocab_size if tie5 else src_vocab_size"),
        Emb("encoder.embed_positions", "P", when="saved_positions"),
        Unsaved((Emb("encoder.embed_positions", "P"),), "sinusoidal, rebuilt at load",
                when="not saved_positions"),
        Layers("encoder.layers.{i}", "encoder_layers", BART_ENCODER_LAYER,
               bind=_heads("encoder_ffn_dim", "encoder_attention_heads")),
        Emb("decoder.embed_tokens", "src_vocab_size if tie4 else tgt_vocab_size"),
        Emb("decoder.embed_positions", "P", when="saved_positions"),
        Unsaved((Emb("decoder.embed_positions", "P"),), "sinusoidal, rebuilt at load",
                when="not saved_positions"),
        Layers("decoder.layers.{i}", "decoder_layers", BART_DECODER_LAYER,
               bind=_heads("decoder_ffn_dim", "decoder_attention_heads")),
        Lin("decoder.output_projection", "d", "src_vocab_size if tie457 else tgt_vocab_size",
            bias=False),
        Tie("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", when="tie5"),
        Tie("decoder.output_projection.weight", "decoder.embed_tokens.weight", when="tie_out"),
        Tie("decoder.embed_tokens.weight", "encoder.embed_tokens.weight", when="tie4"),
        Tie("decoder.output_projection.weight", "encoder.embed_tokens.weight", when="tie457"),
        Tie("decoder.embed_tokens.weight", "decoder.output_projection.weight", when="tie_dec"),
    ),
    {"FSMTForConditionalGeneration": Head("model")},
    "FSMTForConditionalGeneration",
    file_flags={"saved_positions": (
        r"embed_positions\.weight$", True,
        "transformers 5 saves the sinusoidal position tables, 4 did not")},
)

# --- T5 (relative attention bias in each stack's first block; RMS norms; no biases) ------------


def _t5_stack(side: str, layers: str, cross: bool) -> tuple:
    attn = {"q": "q", "k": "k", "v": "v", "o": "o"}
    ff = 2 if cross else 1  # the feed-forward sublayer's index (after cross attention: 2)
    block = (
        Attn("layer.0.SelfAttention", attn),
        Emb("layer.0.SelfAttention.relative_attention_bias", "relative_attention_num_buckets",
            "H", when="i == 0"),
        Norm("layer.0.layer_norm"),
        *((Attn("layer.1.EncDecAttention", attn), Norm("layer.1.layer_norm")) if cross else ()),
        Mlp(f"layer.{ff}.DenseReluDense", {"up": "wi", "down": "wo"}, when="not gated"),
        Mlp(f"layer.{ff}.DenseReluDense", {"gate": "wi_0", "up": "wi_1", "down": "wo"},
            when="gated"),
        Norm(f"layer.{ff}.layer_norm"),
    )
    return (
        Emb(f"{side}.embed_tokens", "V"),
        Layers(f"{side}.block.{{i}}", layers, block),
        Norm(f"{side}.final_layer_norm"),
        Tie(f"{side}.embed_tokens.weight", "shared.weight"),
    )


T5 = Family(
    "t5", "Hugging Face T5 and T5 v1.1 (feed_forward_proj gated-*: wi_0/wi_1)",
    {"vocab_size": 32128, "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6,
     "num_decoder_layers": None, "num_heads": 8, "relative_attention_num_buckets": 32,
     "feed_forward_proj": "relu", "tie_word_embeddings": True},
    {"d": "d_model", "V": "vocab_size", "H": "num_heads", "KV": "num_heads", "hd": "d_kv",
     "ff": "d_ff", "gated": "'gated-' in feed_forward_proj", "qkv_bias": False,
     "mlp_bias": False, "norm_bias": False},
    (
        Emb("shared", "V"),
        *_t5_stack("encoder", "num_layers", cross=False),
        *_t5_stack("decoder", "num_decoder_layers if num_decoder_layers is not None "
                   "else num_layers", cross=True),
    ),
    {"T5ForConditionalGeneration": Head("", (
        Lin("lm_head", "d", "V", bias=False),
        # files written by transformers 4 with tie_word_embeddings false (T5 v1.1) store it
        Tie("lm_head.weight", "shared.weight", when="tie_word_embeddings"),
    )), "T5Model": Head("")},
    "T5ForConditionalGeneration",
)

# --- causal decoders ---------------------------------------------------------------------------
# Llama-style body: pre-norm RMSNorm blocks, separate or fused (Phi-3) q/k/v and gate/up.

CAUSAL_BODY = (
    Emb("embed_tokens", "V"),
    Layers("layers.{i}", "num_hidden_layers", (
        Attn("self_attn", QKVO, when="not fused"),
        Attn("self_attn", {"o": "o_proj", "qkv": "qkv_proj"}, when="fused"),
        Mlp("mlp", GATED, when="not fused"),
        Mlp("mlp", {"gate_up": "gate_up_proj", "down": "down_proj"}, when="fused"),
        Norm("input_layernorm"), Norm("post_attention_layernorm"),
    )),
    Norm("norm"),
)
CAUSAL_CONFIG = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": None,
    "head_dim": None, "tie_word_embeddings": False,
}
CAUSAL_DIMS = {
    "d": "hidden_size", "V": "vocab_size", "H": "num_attention_heads",
    "KV": "num_key_value_heads or num_attention_heads",
    "hd": "head_dim or hidden_size // num_attention_heads", "ff": "intermediate_size",
    "fused": False, "qkv_bias": False, "mlp_bias": False, "norm_bias": False,
}


def causal_lm(base: str = "model", embed: str = "model.embed_tokens",
              head: str = "lm_head") -> Head:
    """``*ForCausalLM``: an ``lm_head`` (no bias), tied to the embedding when configured."""
    return Head(base, (Lin(head, "d", "V", bias=False),
                       Tie(f"{head}.weight", f"{embed}.weight", when="tie_word_embeddings")))


MISTRAL = Family(
    "mistral", "Hugging Face Mistral (Llama body, GQA)",
    {**CAUSAL_CONFIG, "intermediate_size": 14336, "num_key_value_heads": 8},
    CAUSAL_DIMS, CAUSAL_BODY,
    {"MistralForCausalLM": causal_lm(), "MistralModel": Head("")},
    "MistralForCausalLM",
)
QWEN2 = Family(
    "qwen2", "Hugging Face Qwen2 (Llama body; q/k/v biases, o_proj without)",
    {**CAUSAL_CONFIG, "vocab_size": 151936, "intermediate_size": 22016},
    {**CAUSAL_DIMS, "qkv_bias": True, "o_bias": False},
    CAUSAL_BODY,
    {"Qwen2ForCausalLM": causal_lm(), "Qwen2Model": Head("")},
    "Qwen2ForCausalLM",
)
GEMMA = Family(
    "gemma", "Hugging Face Gemma (Llama body, explicit head_dim, tied head)",
    {**CAUSAL_CONFIG, "vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576,
     "num_hidden_layers": 28, "num_attention_heads": 16, "head_dim": 256,
     "tie_word_embeddings": True, "attention_bias": False},
    {**CAUSAL_DIMS, "qkv_bias": "attention_bias"},
    CAUSAL_BODY,
    {"GemmaForCausalLM": causal_lm(), "GemmaModel": Head("")},
    "GemmaForCausalLM",
)
PHI3 = Family(
    "phi3", "Hugging Face Phi-3 (Llama body; fused qkv_proj and gate_up_proj)",
    {**CAUSAL_CONFIG, "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192},
    {**CAUSAL_DIMS, "fused": True},
    CAUSAL_BODY,
    {"Phi3ForCausalLM": causal_lm(), "Phi3Model": Head("")},
    "Phi3ForCausalLM",
)
GPT_NEOX = Family(
    "gpt_neox", "Hugging Face GPT-NeoX (fused query_key_value; LayerNorms with bias; "
    "embed_out)",
    {"vocab_size": 50432, "hidden_size": 6144, "intermediate_size": 24576,
     "num_hidden_layers": 44, "num_attention_heads": 64, "max_position_embeddings": 2048,
     "rotary_pct": 0.25, "tie_word_embeddings": False, "attention_bias": True},
    {"d": "hidden_size", "V": "vocab_size", "H": "num_attention_heads",
     "KV": "num_attention_heads", "hd": "hidden_size // num_attention_heads",
     "ff": "intermediate_size", "qkv_bias": "attention_bias"},
    (
        Emb("embed_in", "V"),
        Layers("layers.{i}", "num_hidden_layers", (
            Norm("input_layernorm"), Norm("post_attention_layernorm"),
            Attn("attention", {"qkv": "query_key_value", "o": "dense"}),
            Mlp("mlp", {"up": "dense_h_to_4h", "down": "dense_4h_to_h"}),
            # buffers transformers 4 saved: causal mask, its fill value, rotary frequencies
            Buf("attention.bias", (1, 1, "max_position_embeddings", "max_position_embeddings"),
                when="saved_causal_mask"),
            Buf("attention.masked_bias", (), when="saved_masked_bias"),
            Buf("attention.rotary_emb.inv_freq", ("(hd * rotary_pct // 1 + 1) // 2",),
                when="saved_inv_freq"),
        )),
        Norm("final_layer_norm"),
    ),
    # transformers 5 names the head lm_head in memory and writes it as embed_out
    {"GPTNeoXForCausalLM": causal_lm("gpt_neox", "gpt_neox.embed_in", "embed_out"),
     "GPTNeoXModel": Head("")},
    "GPTNeoXForCausalLM",
    file_flags={
        "saved_causal_mask": (r"attention\.bias$", False,
                              "transformers 4 saved each layer's causal mask attention.bias"),
        "saved_masked_bias": (r"attention\.masked_bias$", False,
                              "transformers 4 saved attention.masked_bias"),
        "saved_inv_freq": (r"rotary_emb\.inv_freq$", False,
                           "transformers 4 saved the rotary inv_freq buffers"),
    },
)
OPT = Family(
    "opt", "Hugging Face OPT (learned positions + 2; project_in/out when word_embed_proj_dim "
    "differs)",
    {"vocab_size": 50272, "hidden_size": 768, "ffn_dim": 3072, "num_hidden_layers": 12,
     "num_attention_heads": 12, "max_position_embeddings": 2048, "word_embed_proj_dim": None,
     "enable_bias": True, "do_layer_norm_before": True, "_remove_final_layer_norm": False,
     "layer_norm_elementwise_affine": True, "tie_word_embeddings": True},
    {"d": "hidden_size", "e": "word_embed_proj_dim or hidden_size", "V": "vocab_size",
     "H": "num_attention_heads", "KV": "num_attention_heads",
     "hd": "hidden_size // num_attention_heads", "ff": "ffn_dim", "qkv_bias": "enable_bias",
     "mlp_bias": "enable_bias", "norm_affine": "layer_norm_elementwise_affine"},
    (
        Emb("decoder.embed_tokens", "V", "e"),
        Emb("decoder.embed_positions", "max_position_embeddings + 2"),
        Norm("decoder.final_layer_norm",
             when="do_layer_norm_before and not _remove_final_layer_norm"),
        Lin("decoder.project_out", "d", "e", bias=False, when="e != d"),
        Lin("decoder.project_in", "e", "d", bias=False, when="e != d"),
        Layers("decoder.layers.{i}", "num_hidden_layers", (
            Attn("self_attn", KVQO), Norm("self_attn_layer_norm"),
            Mlp("", FC), Norm("final_layer_norm"),
        )),
    ),
    {"OPTForCausalLM": Head("model", (
        Lin("lm_head", "e", "V", bias=False),
        Tie("lm_head.weight", "model.decoder.embed_tokens.weight", when="tie_word_embeddings"),
    )), "OPTModel": Head("")},
    "OPTForCausalLM",
)

# --- mixtures of experts (Mixtral, Qwen2-MoE) ----------------------------------------------------
# What save_pretrained writes, transformers 4.x and 5.x alike: one gated MLP per expert
# (transformers 5.24 fuses the experts in memory, experts.gate_up_proj (E, 2 ff, d) and
# experts.down_proj (E, d, ff), and its conversion mapping splits them again on save). A state
# dict taken from a transformers 5 model in memory (torch.save(model.state_dict())) keeps them
# fused, and Mixtral's block_sparse_moe is named mlp there: the file flag saved_fused_experts,
# read from the stored names, predicts that layout.


def scoped(prefix: str, parts: tuple, when: str | bool = True, **bind: str) -> Layers:
    """``parts`` once under ``prefix`` with dimensions rebound (a shared expert's own ``ff``)."""
    return Layers(prefix, 1, parts, bind=bind, when=when)


def experts(block: str, fused: str, count: str, names: dict[str, str], ff: str) -> tuple:
    """``count`` gated MLPs of width ``ff`` under ``block`` ``experts.{e}`` (the file's
    layout), or the two fused 3D parameters transformers 5 keeps in memory under ``fused``
    (``saved_fused_experts``: gate and up stacked in one ``gate_up_proj``)."""
    def under(prefix: str, name: str) -> str:
        return f"{prefix}.{name}" if prefix else name

    return (
        Layers(under(block, "experts.{i}"), count, (Mlp("", names),), bind={"ff": ff},
               when="not saved_fused_experts"),
        Param(under(fused, "experts.gate_up_proj"), (count, f"2 * {ff}", "d"),
              when="saved_fused_experts"),
        Param(under(fused, "experts.down_proj"), (count, "d", ff), when="saved_fused_experts"),
    )


FUSED_EXPERTS = {"saved_fused_experts": (
    r"experts\.gate_up_proj$", False,
    "experts fused in one (E, 2 ff, d) gate_up_proj: a transformers 5 state dict taken in "
    "memory (save_pretrained writes one MLP per expert)")}
MOE_DIMS = {**CAUSAL_DIMS, "mlp_bias": False}

MIXTRAL = Family(
    "mixtral", "Hugging Face Mixtral (Mistral attention; block_sparse_moe: a router and "
    "num_local_experts gated MLPs w1/w3/w2)",
    {**CAUSAL_CONFIG, "intermediate_size": 14336, "num_key_value_heads": 8,
     "num_local_experts": 8},
    MOE_DIMS,
    (
        Emb("embed_tokens", "V"),
        Layers("layers.{i}", "num_hidden_layers", (
            Attn("self_attn", QKVO),
            Lin("block_sparse_moe.gate", "d", "num_local_experts", bias=False,
                when="not saved_fused_experts"),
            Lin("mlp.gate", "d", "num_local_experts", bias=False, when="saved_fused_experts"),
            *experts("block_sparse_moe", "mlp", "num_local_experts",
                     {"gate": "w1", "down": "w2", "up": "w3"}, "ff"),
            Norm("input_layernorm"), Norm("post_attention_layernorm"),
        )),
        Norm("norm"),
    ),
    {"MixtralForCausalLM": causal_lm(), "MixtralModel": Head("")},
    "MixtralForCausalLM",
    helps={"num_local_experts": "experts per layer"},
    file_flags=FUSED_EXPERTS,
)
# Qwen2MoeDecoderLayer: a sparse block where i is not in mlp_only_layers and (i + 1) is a
# multiple of decoder_sparse_step (with num_experts > 0), else a dense MLP of intermediate_size.
QWEN2_MOE_SPARSE = ("num_experts > 0 and i not in mlp_only_layers "
                    "and (i + 1) // decoder_sparse_step * decoder_sparse_step == i + 1")
QWEN2_MOE = Family(
    "qwen2_moe", "Hugging Face Qwen2-MoE (Qwen2 attention; a router, num_experts MLPs of "
    "moe_intermediate_size, a shared expert and its gate; dense layers in mlp_only_layers)",
    {**CAUSAL_CONFIG, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
     "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
     "num_experts": 60, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
     "decoder_sparse_step": 1, "mlp_only_layers": []},
    # config.json's qkv_bias (4.57 and 5.x; always true) is the shared flag's name: the flag
    # holds transformers' default
    {**MOE_DIMS, "qkv_bias": True, "o_bias": False},
    (
        Emb("embed_tokens", "V"),
        Layers("layers.{i}", "num_hidden_layers", (
            Attn("self_attn", QKVO),
            scoped("mlp", (
                Lin("gate", "d", "num_experts", bias=False),
                *experts("", "", "num_experts", GATED, "moe_intermediate_size"),
                scoped("shared_expert", (Mlp("", GATED),),
                       ff="shared_expert_intermediate_size"),
                Lin("shared_expert_gate", "d", 1, bias=False),
            ), when=QWEN2_MOE_SPARSE),
            Mlp("mlp", GATED, when="not (" + QWEN2_MOE_SPARSE + ")"),
            Norm("input_layernorm"), Norm("post_attention_layernorm"),
        )),
        Norm("norm"),
    ),
    {"Qwen2MoeForCausalLM": causal_lm(), "Qwen2MoeModel": Head("")},
    "Qwen2MoeForCausalLM",
    helps={"num_experts": "routed experts per sparse layer",
           "mlp_only_layers": "layers with a dense MLP instead of experts (a list)"},
    file_flags=FUSED_EXPERTS,
)


# --- encoders ----------------------------------------------------------------------------------

BERT_LAYER = (
    Attn("attention", {"q": "self.query", "k": "self.key", "v": "self.value",
                       "o": "output.dense"}),
    Norm("attention.output.LayerNorm"),
    Mlp("", {"up": "intermediate.dense", "down": "output.dense"}),
    Norm("output.LayerNorm"),
)
BERT_CONFIG = {
    "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2,
    "tie_word_embeddings": True, "num_labels": 2, "transformers_version": None,
}
BERT_DIMS = {
    "d": "hidden_size", "V": "vocab_size", "H": "num_attention_heads",
    "KV": "num_attention_heads", "hd": "hidden_size // num_attention_heads",
    "ff": "intermediate_size", "pooler": True,
}
BERT_BODY = (
    Emb("embeddings.word_embeddings", "V"),
    Emb("embeddings.position_embeddings", "max_position_embeddings"),
    Emb("embeddings.token_type_embeddings", "type_vocab_size"),
    Norm("embeddings.LayerNorm"),
    Layers("encoder.layer.{i}", "num_hidden_layers", BERT_LAYER),
    Lin("pooler.dense", "d", "d", when="pooler"),
    Buf("embeddings.position_ids", (1, "max_position_embeddings"), when="saved_position_ids"),
)
POSITION_IDS = {"saved_position_ids": (
    r"embeddings\.position_ids$", False,
    "transformers before 4.31 saved the embeddings.position_ids buffer")}


def mlm_head(embed: str, dense: str, norm: str, decoder: str,
             bias: str | None) -> Head:
    """A masked-LM head: transform dense + norm, a decoder to the vocabulary tied to the word
    embeddings when configured, and its bias (a separate parameter the decoder's bias aliases
    when tied, where ``bias`` names it)."""
    parts: tuple = (
        Lin(dense, "d", "d"), Norm(norm), Lin(decoder, "d", "V"),
        Tie(f"{decoder}.weight", embed, when="tie_word_embeddings"),
    )
    if bias:
        # transformers 5 ties the decoder's bias only with the weights (_tied_weights_keys);
        # 4.x always did (the head's __init__ sets decoder.bias = self.bias)
        parts = (Vec(bias, "V"), *parts,
                 Tie(f"{decoder}.bias", bias,
                     when="tie_word_embeddings or transformers_major == 4"))
    base = embed.split(".", 1)[0]
    return Head(base, parts, set={"pooler": False})


BERT = Family(
    "bert", "Hugging Face BERT (BertModel with pooler, BertForMaskedLM, "
    "BertForSequenceClassification)",
    BERT_CONFIG, BERT_DIMS, BERT_BODY,
    {"BertModel": Head(""),
     "BertForMaskedLM": mlm_head("bert.embeddings.word_embeddings.weight",
                                 "cls.predictions.transform.dense",
                                 "cls.predictions.transform.LayerNorm",
                                 "cls.predictions.decoder", "cls.predictions.bias"),
     "BertForSequenceClassification": Head("bert", (Lin("classifier", "d", "num_labels"),))},
    "BertModel",
    file_flags=POSITION_IDS,
)
ROBERTA = Family(
    "roberta", "Hugging Face RoBERTa (BERT body; classification head without pooler)",
    {**BERT_CONFIG, "vocab_size": 50265},
    BERT_DIMS, BERT_BODY,
    {"RobertaModel": Head(""),
     "RobertaForMaskedLM": mlm_head("roberta.embeddings.word_embeddings.weight",
                                    "lm_head.dense", "lm_head.layer_norm", "lm_head.decoder",
                                    "lm_head.bias"),
     "RobertaForSequenceClassification": Head("roberta", (
         Lin("classifier.dense", "d", "d"), Lin("classifier.out_proj", "d", "num_labels"),
     ), set={"pooler": False})},
    "RobertaModel",
    file_flags=POSITION_IDS,
)
DISTILBERT = Family(
    "distilbert", "Hugging Face DistilBERT (no token types, no pooler)",
    {"vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072,
     "max_position_embeddings": 512, "sinusoidal_pos_embds": False,
     "tie_word_embeddings": True, "num_labels": 2},
    {"d": "dim", "V": "vocab_size", "H": "n_heads", "KV": "n_heads", "hd": "dim // n_heads",
     "ff": "hidden_dim"},
    (
        Emb("embeddings.word_embeddings", "V"),
        Emb("embeddings.position_embeddings", "max_position_embeddings"),
        Norm("embeddings.LayerNorm"),
        Layers("transformer.layer.{i}", "n_layers", (
            Attn("attention", {"q": "q_lin", "k": "k_lin", "v": "v_lin", "o": "out_lin"}),
            Norm("sa_layer_norm"),
            Mlp("ffn", {"up": "lin1", "down": "lin2"}),
            Norm("output_layer_norm"),
        )),
    ),
    {"DistilBertModel": Head(""),
     "DistilBertForMaskedLM": mlm_head("distilbert.embeddings.word_embeddings.weight",
                                       "vocab_transform", "vocab_layer_norm",
                                       "vocab_projector", None),
     "DistilBertForSequenceClassification": Head("distilbert", (
         Lin("pre_classifier", "d", "d"), Lin("classifier", "d", "num_labels"),
     ))},
    "DistilBertModel",
    helps={"sinusoidal_pos_embds": "fixed sinusoidal position table (changes no shape)"},
)

FAMILIES = (BART, MBART, MARIAN, M2M100, FSMT, T5, MISTRAL, QWEN2, GEMMA, PHI3, GPT_NEOX, OPT,
            BERT, ROBERTA, DISTILBERT, MIXTRAL, QWEN2_MOE)
ARCHS = {f.name: register_family(f) for f in FAMILIES}
