"""fairseq architectures, predicted from the configuration a fairseq checkpoint stores:
``fairseq-transformer`` (``TransformerModel``: ``--arch transformer``, ``transformer_wmt_en_de``,
...), ``fairseq-transformer-lm`` (``TransformerLanguageModel``: ``transformer_lm*``) and
``fairseq-lstm`` (``LSTMModel``: ``lstm``, ``lstm_wiseman_iwslt_de_en``, ``lstm_luong_wmt_en_de``).

The configuration is the checkpoint's ``cfg["model"]`` (fairseq 0.10+ with Hydra: a dict, or the
``argparse.Namespace`` of a command-line run, flat ``encoder_embed_dim`` keys; the dataclass
``TransformerConfig`` nests ``encoder: {embed_dim: ...}``) or, before that, its ``args``
Namespace. Hyperparameters keep fairseq's option names. The dictionary sizes are not part of the
configuration (the task's dictionaries are separate files): they are taken from the stored
embedding shapes, as every formula here does for vocabularies.

Tensors follow fairseq 0.12's code (models/transformer/transformer_{encoder,decoder}.py,
modules/transformer_layer.py, modules/multihead_attention.py, models/lstm.py):

- attention: ``k_proj``, ``v_proj``, ``q_proj``, ``out_proj`` Linear with biases; the decoder's
  ``encoder_attn`` reads keys and values of the encoder's width;
- positions: sinusoidal ones hold no parameter (fairseq before the non-persistent ``weights``
  stored a 1-element ``_float_tensor`` buffer: predicted when the file has it); learned ones are
  an Embedding (max_positions + padding_idx + 1, d);
- ``encoder.version`` / ``decoder.version``: 1-element buffers;
- ``normalize_before`` adds a final ``layer_norm`` to the stack (the decoder's unless
  ``no_decoder_final_norm``); ``layernorm_embedding`` one after the embeddings;
- the decoder's ``output_projection`` (vocab, output_dim) is the input embedding when
  ``share_decoder_input_output_embed`` (``share_all_embeddings`` implies it and shares the
  encoder's embedding too).

Not modelled (``check`` names them and says ``incomplete``): adaptive softmax / adaptive input,
character embeddings, BASE layers, ``merge_src_tgt_embed``, and the LSTM's adaptive softmax.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import blocks
from inspector.formulas import blocks_torch as bt
from inspector.formulas.blocks_nmt import Option, as_bool, layer_count, option_parts, rnn_cell
from inspector.formulas.core import Arch, HParam, Part, Prediction, expected, register
from inspector.formulas.torch_nn import parameters

# fairseq's registered architecture names per model class (register_model_architecture).
TRANSFORMER_ARCHS = frozenset({
    "transformer", "transformer_tiny", "transformer_iwslt_de_en", "transformer_wmt_en_de",
    "transformer_vaswani_wmt_en_de_big", "transformer_vaswani_wmt_en_fr_big",
    "transformer_wmt_en_de_big", "transformer_wmt_en_de_big_t2t",
})
LM_ARCHS = frozenset({
    "transformer_lm", "transformer_lm_big", "transformer_lm_wiki103",
    "transformer_lm_baevski_wiki103", "transformer_lm_gbw", "transformer_lm_baevski_gbw",
    "transformer_lm_gpt", "transformer_lm_gpt2_small", "transformer_lm_gpt2_tiny",
    "transformer_lm_gpt2_medium", "transformer_lm_gpt2_big", "transformer_lm_gpt2_big_wide",
    "transformer_lm_gpt2_bigger", "transformer_lm_gpt3_small", "transformer_lm_gpt3_medium",
    "transformer_lm_gpt3_large", "transformer_lm_gpt3_xl", "transformer_lm_gpt3_2_7",
    "transformer_lm_gpt3_6_7", "transformer_lm_gpt3_13", "transformer_lm_gpt3_175",
})
LSTM_ARCHS = frozenset({"lstm", "lstm_wiseman_iwslt_de_en", "lstm_luong_wmt_en_de"})
# fairseq.data.Dictionary: <s>=0, <pad>=1, </s>=2, <unk>=3 unless a task builds it otherwise.
PAD = 1
VOCAB_NOTE = ("dictionary sizes are not in the stored configuration (the task's dict.*.txt): "
              "taken from the stored embeddings")


# --- the stored configuration -----------------------------------------------------------------

def stored_config(ckpt: Checkpoint) -> dict[str, Any]:
    """The checkpoint's model configuration with flat fairseq option names: ``cfg["model"]``
    (nested ``encoder``/``decoder``/``quant_noise`` groups flattened to ``encoder_embed_dim``...)
    or the legacy ``args``; ``{}`` when it has neither. ``_task`` and ``_criterion`` carry the
    task's and criterion's settings (positions, adaptive loss)."""
    h = ckpt.hyperparameters
    cfg = h.get("cfg")
    model: Any = None
    task: Any = {}
    criterion: Any = None
    if isinstance(cfg, Mapping) and isinstance(cfg.get("model"), Mapping):
        model = cfg["model"]
        task = cfg.get("task") if isinstance(cfg.get("task"), Mapping) else {}
        crit = cfg.get("criterion")
        criterion = crit.get("_name") if isinstance(crit, Mapping) else crit
    elif isinstance(h.get("args"), Mapping):
        model = task = h["args"]
    if not isinstance(model, Mapping):
        return {}
    flat: dict[str, Any] = {}
    for k, v in model.items():
        if k in ("encoder", "decoder", "quant_noise") and isinstance(v, Mapping):
            flat.update({f"{k}_{kk}": vv for kk, vv in v.items()})
        else:
            flat.setdefault(k, v)
    flat["_task"] = dict(task)
    flat["_criterion"] = criterion if criterion is not None else model.get("criterion")
    return flat


def arch_name(cfg: Mapping[str, Any]) -> str | None:
    name = cfg.get("arch") or cfg.get("_name")
    return name if isinstance(name, str) else None


def _claims(archs: frozenset[str]):
    def applies(ckpt: Checkpoint) -> bool:
        return arch_name(stored_config(ckpt)) in archs and bool(parameters(ckpt))
    return applies


def _kept(cfg: Mapping[str, Any], side: str) -> int | None:
    """``--{side}-layers-to-keep 0,2``: the model is built with that many layers."""
    keep = cfg.get(f"{side}_layers_to_keep")
    if isinstance(keep, str) and keep.strip():
        return len(keep.split(","))
    return None


def _from_config(names: tuple[str, ...], lm: bool = False):
    def read(ckpt: Checkpoint) -> dict[str, Any]:
        cfg = stored_config(ckpt)
        out = {k: cfg[k] for k in names if cfg.get(k) is not None}
        for side in ("encoder", "decoder"):
            if (n := _kept(cfg, side)) is not None and f"{side}_layers" in names:
                out[f"{side}_layers"] = n
        task = cfg.get("_task", {})
        for key in ("max_source_positions", "max_target_positions"):
            if key in names and key not in out:
                # build_model takes them from the task (the LM's: tokens_per_sample)
                got = task.get(key) or (task.get("tokens_per_sample") if lm else None)
                if got is not None:
                    out[key] = got
        if "decoder_attention" in out:
            out["decoder_attention"] = as_bool(out["decoder_attention"])
        if lm and cfg.get("decoder_final_norm") is not None:  # older LM checkpoints
            out["no_decoder_final_norm"] = not as_bool(cfg["decoder_final_norm"])
        return out
    return read


def _layers(names: Any, prefix: str) -> int:
    rx = re.compile(rf"^{re.escape(prefix)}\.layers\.(\d+)\.")
    idx = [int(m.group(1)) for n in names if (m := rx.match(n))]
    return max(idx) + 1 if idx else 0


# --- shared blocks ----------------------------------------------------------------------------

def mha(prefix: str, d: int, kdim: int | None = None) -> list[TensorEntry]:
    """fairseq's ``MultiheadAttention``: k/v/q/out projections with biases (k and v read
    ``kdim``)."""
    k = kdim or d
    return (bt.linear(f"{prefix}.k_proj", k, d) + bt.linear(f"{prefix}.v_proj", k, d)
            + bt.linear(f"{prefix}.q_proj", d, d) + bt.linear(f"{prefix}.out_proj", d, d))


def positions(prefix: str, learned: bool, max_positions: int, d: int, float_tensor: bool,
              padding_idx: int = PAD) -> list[TensorEntry]:
    """``PositionalEmbedding``: learned (max_positions + padding_idx + 1, d), or sinusoidal
    (no parameter; older fairseq stored a ``_float_tensor`` buffer of one element)."""
    if learned:
        return bt.embedding(f"{prefix}.embed_positions", max_positions + padding_idx + 1, d)
    if float_tensor:
        return [expected(f"{prefix}.embed_positions._float_tensor", (1,), "buffer", "positions")]
    return []


def _heads(d: int, heads: int, side: str) -> None:
    if heads < 1 or d % heads:
        raise UsageError(f"{side}_embed_dim {d} is not divisible by {side}_attention_heads {heads}")


def decoder_stack(hp: Mapping[str, Any], enc_dim: int | None, vocab: int) -> list[TensorEntry]:
    """``TransformerDecoder`` (``enc_dim`` None: no encoder attention, the LM's)."""
    d, inp = hp["decoder_embed_dim"], hp["decoder_input_dim"] or hp["decoder_embed_dim"]
    outd = hp["decoder_output_dim"] or d
    ff, heads = hp["decoder_ffn_embed_dim"], hp["decoder_attention_heads"]
    _heads(d, heads, "decoder")
    out = [expected("decoder.version", (1,), "buffer", "version")]
    out += bt.embedding("decoder.embed_tokens", vocab, inp)
    if hp["quant_noise_pq"]:
        out += bt.linear("decoder.quant_noise", d, d, bias=False)
    if inp != d:
        out += bt.linear("decoder.project_in_dim", inp, d, bias=False)
    if not hp["no_token_positional_embeddings"]:
        out += positions("decoder", hp["decoder_learned_pos"], hp["max_target_positions"], d,
                         hp["saved_float_tensor"])
    if hp["layernorm_embedding"]:
        out += bt.layer_norm("decoder.layernorm_embedding", d)
    for i in layer_count(hp["decoder_layers"], "decoder_layers"):
        p = f"decoder.layers.{i}"
        out += mha(f"{p}.self_attn", d)
        if hp["scale_attn"]:
            out += bt.layer_norm(f"{p}.attn_ln", d)
        if hp["scale_heads"]:
            out.append(bt.param(p, "c_attn", (heads,), "normformer"))
        out += bt.layer_norm(f"{p}.self_attn_layer_norm", d)
        if enc_dim is not None:
            out += mha(f"{p}.encoder_attn", d, enc_dim)
            out += bt.layer_norm(f"{p}.encoder_attn_layer_norm", d)
        if hp["scale_fc"]:
            out += bt.layer_norm(f"{p}.ffn_layernorm", ff)
        if hp["scale_resids"]:
            out.append(bt.param(p, "w_resid", (d,), "normformer"))
        out += bt.linear(f"{p}.fc1", d, ff) + bt.linear(f"{p}.fc2", ff, d)
        out += bt.layer_norm(f"{p}.final_layer_norm", d)
    if hp["decoder_normalize_before"] and not hp["no_decoder_final_norm"]:
        out += bt.layer_norm("decoder.layer_norm", d)
    if outd != d:
        out += bt.linear("decoder.project_out_dim", d, outd, bias=False)
    if hp["share_decoder_input_output_embed"]:
        out += bt.linear("decoder.output_projection", inp, vocab, bias=False)
        out = bt.tie(out, "decoder.output_projection.weight", "decoder.embed_tokens.weight")
    else:
        out += bt.linear("decoder.output_projection", outd, vocab, bias=False)
    return out


DECODER_HPARAMS = (
    HParam("decoder_embed_dim", 512, "decoder width"),
    HParam("decoder_input_dim", None, "decoder input embedding width (null: decoder_embed_dim)"),
    HParam("decoder_output_dim", None, "width before the output projection (null: "
           "decoder_embed_dim)"),
    HParam("decoder_ffn_embed_dim", 2048, "decoder feed-forward width"),
    HParam("decoder_layers", 6, "decoder layers (decoder_layers_to_keep counts when set)"),
    HParam("decoder_attention_heads", 8, "decoder heads (must divide decoder_embed_dim)"),
    HParam("decoder_normalize_before", False, "pre-norm decoder: a final decoder.layer_norm",
           bool),
    HParam("no_decoder_final_norm", False, "no final decoder.layer_norm with normalize_before",
           bool),
    HParam("decoder_learned_pos", False, "learned decoder positions", bool),
    HParam("max_target_positions", 1024, "rows of learned decoder positions (+ padding_idx + 1)"),
    HParam("share_decoder_input_output_embed", False, "output projection = decoder embedding",
           bool),
    HParam("no_token_positional_embeddings", False, "no positional embeddings at all", bool),
    HParam("layernorm_embedding", False, "a LayerNorm after the embeddings", bool),
    HParam("quant_noise_pq", 0.0, "quant-noise: a (d, d) quant_noise Linear per stack", float),
    HParam("scale_attn", False, "NormFormer: attn_ln per decoder layer", bool),
    HParam("scale_fc", False, "NormFormer: ffn_layernorm per decoder layer", bool),
    HParam("scale_heads", False, "NormFormer: c_attn (heads) per decoder layer", bool),
    HParam("scale_resids", False, "NormFormer: w_resid (d) per decoder layer", bool),
    HParam("tgt_vocab_size", 32, "target dictionary size (from the stored embedding)"),
    HParam("saved_float_tensor", False, "sinusoidal positions stored a _float_tensor buffer "
           "(fairseq before 0.12.3; from the stored names)", bool),
)


# --- fairseq-transformer ----------------------------------------------------------------------

TRANSFORMER_HPARAMS = (
    HParam("encoder_embed_dim", 512, "encoder width"),
    HParam("encoder_ffn_embed_dim", 2048, "encoder feed-forward width"),
    HParam("encoder_layers", 6, "encoder layers (encoder_layers_to_keep counts when set)"),
    HParam("encoder_attention_heads", 8, "encoder heads (must divide encoder_embed_dim)"),
    HParam("encoder_normalize_before", False, "pre-norm encoder: a final encoder.layer_norm",
           bool),
    HParam("encoder_learned_pos", False, "learned encoder positions", bool),
    HParam("max_source_positions", 1024, "rows of learned encoder positions (+ padding_idx + 1)"),
    HParam("share_all_embeddings", False, "one embedding for encoder, decoder and output", bool),
    HParam("no_cross_attention", False, "decoder layers without encoder_attn", bool),
    HParam("src_vocab_size", 32, "source dictionary size (from the stored embedding)"),
    *DECODER_HPARAMS,
)
T_NAMES = tuple(h.name for h in TRANSFORMER_HPARAMS)


def predict_transformer(hp: Mapping[str, Any]) -> Prediction:
    e = hp["encoder_embed_dim"]
    _heads(e, hp["encoder_attention_heads"], "encoder")
    hp_dec = dict(hp)
    share_all = hp["share_all_embeddings"]
    if share_all:
        if e != hp["decoder_embed_dim"]:
            raise UsageError("share_all_embeddings needs encoder_embed_dim == decoder_embed_dim")
        hp_dec["share_decoder_input_output_embed"] = True  # build_model sets it
    out = [expected("encoder.version", (1,), "buffer", "version")]
    out += bt.embedding("encoder.embed_tokens", hp["src_vocab_size"], e)
    if hp["quant_noise_pq"]:
        out += bt.linear("encoder.quant_noise", e, e, bias=False)
    if not hp["no_token_positional_embeddings"]:
        out += positions("encoder", hp["encoder_learned_pos"], hp["max_source_positions"], e,
                         hp["saved_float_tensor"])
    if hp["layernorm_embedding"]:
        out += bt.layer_norm("encoder.layernorm_embedding", e)
    for i in layer_count(hp["encoder_layers"], "encoder_layers"):
        p = f"encoder.layers.{i}"
        out += mha(f"{p}.self_attn", e) + bt.layer_norm(f"{p}.self_attn_layer_norm", e)
        out += bt.linear(f"{p}.fc1", e, hp["encoder_ffn_embed_dim"])
        out += bt.linear(f"{p}.fc2", hp["encoder_ffn_embed_dim"], e)
        out += bt.layer_norm(f"{p}.final_layer_norm", e)
    if hp["encoder_normalize_before"]:
        out += bt.layer_norm("encoder.layer_norm", e)
    vocab = hp["src_vocab_size"] if share_all else hp["tgt_vocab_size"]
    out += decoder_stack(hp_dec, None if hp["no_cross_attention"] else e, vocab)
    if share_all:
        out = bt.tie(out, "decoder.embed_tokens.weight", "encoder.embed_tokens.weight")
        out = [blocks.tie([t], "encoder.embed_tokens.weight")[0]
               if t.name == "decoder.output_projection.weight" else t for t in out]
    return Prediction("fairseq-transformer", dict(hp), out, [VOCAB_NOTE])


def infer_transformer(ckpt: Checkpoint) -> dict[str, Any]:
    """What the stored shapes say (used where the configuration is silent)."""
    s = parameters(ckpt)
    names = [t.name for t in ckpt.tensors]
    out: dict[str, Any] = {"saved_float_tensor": any(
        n.endswith("embed_positions._float_tensor") for n in names)}
    if "encoder.embed_tokens.weight" in s:
        out["src_vocab_size"], out["encoder_embed_dim"] = s["encoder.embed_tokens.weight"]
    out.update(_infer_decoder(s, names))
    if (n := _layers(names, "encoder")):
        out["encoder_layers"] = n
    if "encoder.layers.0.fc1.weight" in s:
        out["encoder_ffn_embed_dim"] = s["encoder.layers.0.fc1.weight"][0]
    return out


def _infer_decoder(s: Mapping[str, tuple[int, ...]], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "decoder.embed_tokens.weight" in s:
        out["tgt_vocab_size"], out["decoder_input_dim"] = s["decoder.embed_tokens.weight"]
    if "decoder.layers.0.fc1.weight" in s:
        out["decoder_ffn_embed_dim"], out["decoder_embed_dim"] = s["decoder.layers.0.fc1.weight"]
    if (n := _layers(names, "decoder")):
        out["decoder_layers"] = n
    return out


# Options that change tensors and are not modelled: the check names them (incomplete).
_ADAPTIVE = "adaptive softmax (AdaptiveSoftmax head and tail projections) is not modelled"
TRANSFORMER_OPTIONS = (
    Option("adaptive_softmax_cutoff", _ADAPTIVE, r"^decoder\.(adaptive_softmax|output_projection)"),
    Option("adaptive_input", "adaptive input embeddings are not modelled",
           r"^(encoder|decoder)\.embed_tokens"),
    Option("tie_adaptive_weights", "tied adaptive weights are not modelled", r"^decoder\."),
    Option("character_embeddings", "character embeddings (CharacterTokenEmbedder) are not "
           "modelled", r"^decoder\.embed_tokens"),
    Option("base_layers", "BASE layers are not modelled", r"^decoder\.layers\."),
    Option("merge_src_tgt_embed", "merge_src_tgt_embed is not modelled", r"embed_tokens"),
)


def _unmodelled_transformer(ckpt: Checkpoint) -> list[Part]:
    return option_parts(stored_config(ckpt), TRANSFORMER_OPTIONS)


_MODELLED = (r"^(encoder|decoder)\.(version|embed_tokens|embed_positions|layernorm_embedding|"
             r"quant_noise|project_in_dim|project_out_dim|layer_norm|output_projection)\b",
             r"^(encoder|decoder)\.layers\.\d+\.")

FAIRSEQ_TRANSFORMER = register(Arch(
    name="fairseq-transformer",
    description="fairseq TransformerModel (--arch transformer, transformer_wmt_en_de, ...) "
                "from the checkpoint's cfg.model / args",
    hparams=TRANSFORMER_HPARAMS,
    predict=predict_transformer,
    from_checkpoint=_from_config(T_NAMES),
    infer=infer_transformer,
    applies=_claims(TRANSFORMER_ARCHS),
    modelled=_MODELLED,
    unmodelled=_unmodelled_transformer,
))


# --- fairseq-transformer-lm -------------------------------------------------------------------

# base_lm_architecture sets decoder_normalize_before (stored so in args-era checkpoints); the
# dataclass config of fairseq 0.12 stores what the model was built with.
LM_HPARAMS = DECODER_HPARAMS
LM_NAMES = tuple(h.name for h in LM_HPARAMS)


def predict_lm(hp: Mapping[str, Any]) -> Prediction:
    out = decoder_stack(hp, None, hp["tgt_vocab_size"])
    return Prediction("fairseq-transformer-lm", dict(hp), out, [VOCAB_NOTE])


def infer_lm(ckpt: Checkpoint) -> dict[str, Any]:
    names = [t.name for t in ckpt.tensors]
    out = _infer_decoder(parameters(ckpt), names)
    out["saved_float_tensor"] = any(n.endswith("embed_positions._float_tensor") for n in names)
    return out


FAIRSEQ_LM = register(Arch(
    name="fairseq-transformer-lm",
    description="fairseq TransformerLanguageModel (--arch transformer_lm*) from the "
                "checkpoint's cfg.model / args",
    hparams=LM_HPARAMS,
    predict=predict_lm,
    from_checkpoint=_from_config(LM_NAMES, lm=True),
    infer=infer_lm,
    applies=_claims(LM_ARCHS),
    modelled=_MODELLED,
    unmodelled=_unmodelled_transformer,
))


# --- fairseq-lstm -----------------------------------------------------------------------------

LSTM_HPARAMS = (
    HParam("encoder_embed_dim", 512, "encoder embedding width"),
    HParam("encoder_hidden_size", 512, "encoder LSTM width per direction"),
    HParam("encoder_layers", 1, "encoder LSTM layers"),
    HParam("encoder_bidirectional", False, "bidirectional encoder LSTM", bool),
    HParam("decoder_embed_dim", 512, "decoder embedding width"),
    HParam("decoder_hidden_size", 512, "decoder LSTMCell width"),
    HParam("decoder_layers", 1, "decoder LSTMCell layers"),
    HParam("decoder_out_embed_dim", 512, "width before the output layer (additional_fc when "
           "different from decoder_hidden_size)"),
    HParam("decoder_attention", True, "attention layer (input_proj, output_proj)", bool),
    HParam("share_decoder_input_output_embed", False, "no fc_out: the output is the decoder "
           "embedding", bool),
    HParam("share_all_embeddings", False, "one embedding for encoder and decoder", bool),
    HParam("src_vocab_size", 32, "source dictionary size (from the stored embedding)"),
    HParam("tgt_vocab_size", 32, "target dictionary size (from the stored embedding)"),
)
L_NAMES = tuple(h.name for h in LSTM_HPARAMS)


def predict_lstm(hp: Mapping[str, Any]) -> Prediction:
    if hp["encoder_layers"] != hp["decoder_layers"]:
        raise UsageError("fairseq's LSTMModel needs encoder_layers == decoder_layers")
    layer_count(hp["encoder_layers"], "encoder_layers")
    ee, eh, de, dh = (hp["encoder_embed_dim"], hp["encoder_hidden_size"], hp["decoder_embed_dim"],
                      hp["decoder_hidden_size"])
    share_all = hp["share_all_embeddings"]
    shared_out = hp["share_decoder_input_output_embed"] or share_all
    units = eh * (2 if hp["encoder_bidirectional"] else 1)
    out = bt.embedding("encoder.embed_tokens", hp["src_vocab_size"], ee)
    out += bt.rnn("encoder.lstm", "LSTM", ee, eh, hp["encoder_layers"],
                  bidirectional=hp["encoder_bidirectional"])
    out += bt.embedding("decoder.embed_tokens",
                        hp["src_vocab_size"] if share_all else hp["tgt_vocab_size"], de)
    if units != dh:
        out += bt.linear("decoder.encoder_hidden_proj", units, dh)
        out += bt.linear("decoder.encoder_cell_proj", units, dh)
    for i in layer_count(hp["decoder_layers"], "decoder_layers"):
        out += rnn_cell(f"decoder.layers.{i}", "LSTM", (dh + de) if i == 0 else dh, dh)
    if hp["decoder_attention"]:
        out += bt.linear("decoder.attention.input_proj", dh, units, bias=False)
        out += bt.linear("decoder.attention.output_proj", dh + units, dh, bias=False)
    if dh != hp["decoder_out_embed_dim"]:
        out += bt.linear("decoder.additional_fc", dh, hp["decoder_out_embed_dim"])
    if not shared_out:
        out += bt.linear("decoder.fc_out", hp["decoder_out_embed_dim"], hp["tgt_vocab_size"])
    if share_all:
        out = bt.tie(out, "decoder.embed_tokens.weight", "encoder.embed_tokens.weight")
    return Prediction("fairseq-lstm", dict(hp), out, [VOCAB_NOTE])


def infer_lstm(ckpt: Checkpoint) -> dict[str, Any]:
    s = parameters(ckpt)
    out: dict[str, Any] = {}
    if "encoder.embed_tokens.weight" in s:
        out["src_vocab_size"], out["encoder_embed_dim"] = s["encoder.embed_tokens.weight"]
    if "decoder.embed_tokens.weight" in s:
        out["tgt_vocab_size"], out["decoder_embed_dim"] = s["decoder.embed_tokens.weight"]
    if "encoder.lstm.weight_hh_l0" in s:
        out["encoder_hidden_size"] = s["encoder.lstm.weight_hh_l0"][1]
    if "decoder.layers.0.weight_hh" in s:
        out["decoder_hidden_size"] = s["decoder.layers.0.weight_hh"][1]
    return out


LSTM_OPTIONS = (
    Option("adaptive_softmax_cutoff", _ADAPTIVE, r"^decoder\.(adaptive_softmax|fc_out)",
           active=lambda v, cfg: v not in (None, "") and cfg.get("_criterion") == "adaptive_loss"),
)

FAIRSEQ_LSTM = register(Arch(
    name="fairseq-lstm",
    description="fairseq LSTMModel (--arch lstm, lstm_wiseman_iwslt_de_en, lstm_luong_wmt_en_de) "
                "from the checkpoint's cfg.model / args",
    hparams=LSTM_HPARAMS,
    predict=predict_lstm,
    from_checkpoint=_from_config(L_NAMES),
    infer=infer_lstm,
    applies=_claims(LSTM_ARCHS),
    modelled=(r"^(encoder|decoder)\.",),
    unmodelled=lambda ckpt: option_parts(stored_config(ckpt), LSTM_OPTIONS),
))
