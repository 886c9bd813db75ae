"""OpenNMT-py architectures, predicted from the options an OpenNMT-py checkpoint stores
(``checkpoint["opt"]``, an argparse Namespace read as a dict): ``onmt-transformer``
(``-encoder_type transformer -decoder_type transformer``, and the ``transformer_lm`` decoder of
``-model_task lm``) and ``onmt-rnn`` (``rnn`` / ``brnn`` encoders, ``rnn`` decoders with or
without input feeding, LSTM or GRU, global attention ``general`` / ``dot`` / ``mlp``,
coverage, the bridge and copy attention).

Hyperparameters keep OpenNMT-py 3.x's option names; 2.x's (``rnn_size``, ``enc_rnn_size``,
``dec_rnn_size``) are aliases. Options 3.x added are read with the value 2.x behaved as when a
checkpoint lacks them (``add_qkvbias`` and ``add_ffnbias``: 2.x always had those biases). The
vocabulary sizes are taken from the stored embedding shapes (the checkpoint's ``src_vocab_size``
option is the vocabulary builder's cap, not the size). The ``generator`` (the output layer,
stored beside ``model``) is part of the model: ``generator.weight`` / ``generator.bias`` (2.x:
``generator.0.*``, an ``nn.Sequential``; copy attention: a ``CopyGenerator`` with ``linear`` and
``linear_copy``), tied to the decoder embedding with ``share_decoder_embeddings``.

Tensors follow OpenNMT-py 3.5's code (encoders/transformer.py, decoders/transformer.py,
modules/multi_headed_attn.py, position_ffn.py, embeddings.py, encoders/rnn_encoder.py,
decoders/decoder.py, modules/global_attention.py, stacked_rnn.py, copy_generator.py,
model_builder.py). The sinusoidal position table ``pe.pe`` is a (5000, 1, d) buffer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import blocks
from inspector.formulas import blocks_torch as bt
from inspector.formulas.blocks_nmt import Option, layer_count, option_parts, rnn_cell
from inspector.formulas.core import Arch, HParam, Part, Prediction, expected, register
from inspector.formulas.torch_nn import parameters

PE_MAX_LEN = 5000  # PositionalEncoding(dim, enc_type, max_len=5000)
VOCAB_NOTE = ("vocabulary sizes are taken from the stored embeddings (the opt's src_vocab_size "
              "is the vocabulary builder's cap)")
# OpenNMT-py 2.x option names of the same settings (2.x's rnn_size, like 3.x's hidden_size,
# sets both; read in _from_opt).
ALIASES = {"enc_rnn_size": "enc_hid_size", "dec_rnn_size": "dec_hid_size"}
_OLD_NAMES = {"rnn_size": "hidden_size", **ALIASES}


def stored_opt(ckpt: Checkpoint) -> dict[str, Any]:
    """The checkpoint's ``opt`` (``{}`` when it has none)."""
    opt = ckpt.hyperparameters.get("opt")
    return dict(opt) if isinstance(opt, Mapping) else {}


def _is_onmt(ckpt: Checkpoint) -> bool:
    h = ckpt.hyperparameters
    return isinstance(h.get("opt"), Mapping) and "vocab" in h and bool(parameters(ckpt))


def _kind(opt: Mapping[str, Any]) -> str | None:
    enc, dec = opt.get("encoder_type"), opt.get("decoder_type")
    if opt.get("model_task") == "lm" or dec == "transformer_lm":
        return "transformer" if dec == "transformer_lm" else None
    if enc == "transformer" and dec == "transformer":
        return "transformer"
    if enc in ("rnn", "brnn") and dec == "rnn":
        return "rnn"
    return None


def _from_opt(names: tuple[str, ...]):
    def read(ckpt: Checkpoint) -> dict[str, Any]:
        opt = stored_opt(ckpt)
        for old, new in _OLD_NAMES.items():  # 2.x names, where 3.x's are absent
            if new not in opt and old in opt:
                opt[new] = opt[old]
        if opt.get("word_vec_size", -1) and opt.get("word_vec_size", -1) > 0:
            opt.setdefault("src_word_vec_size", opt["word_vec_size"])
            opt.setdefault("tgt_word_vec_size", opt["word_vec_size"])
        if opt.get("layers", -1) and opt.get("layers", -1) > 0:
            opt.setdefault("enc_layers", opt["layers"])
            opt.setdefault("dec_layers", opt["layers"])
        if opt.get("hidden_size", -1) and opt.get("hidden_size", -1) > 0:
            opt.setdefault("enc_hid_size", opt["hidden_size"])
            opt.setdefault("dec_hid_size", opt["hidden_size"])
        out = {k: opt[k] for k in names if k in opt and opt[k] is not None}
        if "brnn" in names:
            out["brnn"] = opt.get("encoder_type") == "brnn"
        if "language_model" in names:
            out["language_model"] = opt.get("decoder_type") == "transformer_lm"
        if opt.get("copy_attn") and opt.get("copy_attn_type") is None and "copy_attn_type" in names:
            out["copy_attn_type"] = opt.get("global_attention")
        return out
    return read


def _generator(hp: Mapping[str, Any], dec_emb: str, d: int, vocab: int) -> list[TensorEntry]:
    """The output layer: ``Linear(dec_hid_size, vocab)`` (tied to the decoder embedding with
    share_decoder_embeddings), or a ``CopyGenerator`` (``linear``, ``linear_copy``)."""
    g = hp["generator_prefix"]
    if hp["copy_attn"]:
        out = bt.linear(f"{g}.linear", d, vocab) + bt.linear(f"{g}.linear_copy", d, 1)
        head = f"{g}.linear.weight"
    else:
        out = bt.linear(g, d, vocab)
        head = f"{g}.weight"
    if hp["share_decoder_embeddings"]:
        out = [blocks.tie([t], dec_emb)[0] if t.name == head else t for t in out]
    return out


def embeddings(prefix: str, vocab: int, dim: int, position_encoding: bool) -> list[TensorEntry]:
    """``onmt.modules.Embeddings``: ``make_embedding.emb_luts.0`` and the sinusoidal ``pe.pe``
    buffer (5000, 1, dim) with ``position_encoding``."""
    out = bt.embedding(f"{prefix}.make_embedding.emb_luts.0", vocab, dim)
    if position_encoding:
        if dim % 2:
            raise UsageError(f"position_encoding needs an even embedding size, not {dim}")
        out.append(expected(f"{prefix}.make_embedding.pe.pe", (PE_MAX_LEN, 1, dim), "buffer",
                            "positions"))
    return out


# --- onmt-transformer -------------------------------------------------------------------------

COMMON = (
    HParam("src_word_vec_size", 512, "encoder embedding width"),
    HParam("tgt_word_vec_size", 512, "decoder embedding width"),
    HParam("enc_layers", 2, "encoder layers"),
    HParam("dec_layers", 2, "decoder layers"),
    HParam("enc_hid_size", 512, "encoder width (2.x: enc_rnn_size)"),
    HParam("dec_hid_size", 512, "decoder width (2.x: dec_rnn_size)"),
    HParam("position_encoding", False, "sinusoidal pe.pe buffers (5000, 1, d)", bool),
    HParam("share_embeddings", False, "decoder embedding = encoder embedding", bool),
    HParam("share_decoder_embeddings", False, "generator weight = decoder embedding", bool),
    HParam("copy_attn", False, "copy attention: a CopyGenerator", bool),
    HParam("src_vocab_len", 32, "source vocabulary size (from the stored embedding)"),
    HParam("tgt_vocab_len", 32, "target vocabulary size (from the stored embedding)"),
    HParam("generator_prefix", "generator", "the generator's module path (2.x: generator.0, "
           "from the stored names)", str),
)
TRANSFORMER_HPARAMS = (
    *COMMON,
    HParam("heads", 8, "attention heads (must divide the width)"),
    HParam("transformer_ff", 2048, "feed-forward width"),
    HParam("max_relative_positions", 0, "relative position embeddings (2n+1, d/heads) per "
           "self-attention; -1 rotary, -2 ALiBi: no parameter"),
    HParam("relative_positions_buckets", 0, "relative_attention_bias (buckets, heads) per "
           "self-attention"),
    HParam("add_qkvbias", True, "biases on the attention linears (absent before 3.0: always)",
           bool),
    HParam("add_ffnbias", True, "biases on the feed-forward linears (absent before 3.2: always)",
           bool),
    HParam("num_kv", 0, "key/value heads (0: heads)"),
    HParam("layer_norm", "standard", "standard (weight, bias) or rms (weight)", str,
           ("standard", "rms")),
    HParam("pos_ffn_activation_fn", "relu", "silu / gated-gelu add a w_3 linear", str),
    HParam("parallel_residual", False, "no feed_forward.layer_norm; the decoder's "
           "layer_norm_res unless shared_layer_norm", bool),
    HParam("shared_layer_norm", False, "parallel residual with one layer norm", bool),
    HParam("language_model", False, "decoder_type transformer_lm: no encoder, no context "
           "attention", bool),
)
T_NAMES = tuple(h.name for h in TRANSFORMER_HPARAMS)


def _norm(prefix: str, d: int, kind: str) -> list[TensorEntry]:
    return bt.layer_norm(prefix, d, bias=kind == "standard")


def _mha(prefix: str, d: int, hp: Mapping[str, Any], self_attn: bool) -> list[TensorEntry]:
    heads, bias = hp["heads"], hp["add_qkvbias"]
    if heads < 1 or d % heads:
        raise UsageError(f"width {d} is not divisible by heads {heads}")
    kv = d // heads * hp["num_kv"] if hp["num_kv"] else d
    out = (bt.linear(f"{prefix}.linear_keys", d, kv, bias)
           + bt.linear(f"{prefix}.linear_values", d, kv, bias)
           + bt.linear(f"{prefix}.linear_query", d, d, bias))
    out += bt.linear(f"{prefix}.final_linear", d, d, bias)
    if self_attn and hp["relative_positions_buckets"] > 0:
        out += bt.embedding(f"{prefix}.relative_attention_bias", hp["relative_positions_buckets"],
                            heads)
    elif self_attn and hp["max_relative_positions"] > 0:
        out += bt.embedding(f"{prefix}.relative_positions_embeddings",
                            2 * hp["max_relative_positions"] + 1, d // heads)
    return out


def _ffn(prefix: str, d: int, hp: Mapping[str, Any]) -> list[TensorEntry]:
    ff, bias = hp["transformer_ff"], hp["add_ffnbias"]
    out = bt.linear(f"{prefix}.w_1", d, ff, bias) + bt.linear(f"{prefix}.w_2", ff, d, bias)
    if not hp["parallel_residual"]:
        out += _norm(f"{prefix}.layer_norm", d, hp["layer_norm"])
    if hp["pos_ffn_activation_fn"] in ("silu", "gated-gelu"):
        out += bt.linear(f"{prefix}.w_3", d, ff, bias)
    return out


def predict_transformer(hp: Mapping[str, Any]) -> Prediction:
    de, dd, ln = hp["enc_hid_size"], hp["dec_hid_size"], hp["layer_norm"]
    lm = hp["language_model"]
    out: list[TensorEntry] = []
    if not lm:
        out += embeddings("encoder.embeddings", hp["src_vocab_len"], hp["src_word_vec_size"],
                          hp["position_encoding"])
        for i in layer_count(hp["enc_layers"], "enc_layers"):
            p = f"encoder.transformer.{i}"
            out += _mha(f"{p}.self_attn", de, hp, True) + _ffn(f"{p}.feed_forward", de, hp)
            out += _norm(f"{p}.layer_norm", de, ln)
        out += _norm("encoder.layer_norm", de, ln)
    dec_vocab = hp["src_vocab_len"] if hp["share_embeddings"] else hp["tgt_vocab_len"]
    out += embeddings("decoder.embeddings", dec_vocab, hp["tgt_word_vec_size"],
                      hp["position_encoding"])
    out += _norm("decoder.layer_norm", dd, ln)
    for i in layer_count(hp["dec_layers"], "dec_layers"):
        p = f"decoder.transformer_layers.{i}"
        out += _mha(f"{p}.self_attn", dd, hp, True) + _ffn(f"{p}.feed_forward", dd, hp)
        out += _norm(f"{p}.layer_norm_1", dd, ln)
        if hp["parallel_residual"] and not hp["shared_layer_norm"]:
            out += _norm(f"{p}.layer_norm_res", dd, ln)
        if not lm:
            out += _mha(f"{p}.context_attn", dd, hp, False) + _norm(f"{p}.layer_norm_2", dd, ln)
    return _finish("onmt-transformer", hp, out, dd, dec_vocab)


def _finish(arch: str, hp: Mapping[str, Any], out: list[TensorEntry], d: int,
            vocab: int) -> Prediction:
    emb = "decoder.embeddings.make_embedding.emb_luts.0.weight"
    if hp["share_embeddings"] and not hp.get("language_model"):
        out = bt.tie(out, emb, "encoder.embeddings.make_embedding.emb_luts.0.weight")
    target = blocks_target(out, emb)
    out += _generator(hp, target, d, vocab)
    return Prediction(arch, dict(hp), out, [VOCAB_NOTE])


def blocks_target(out: list[TensorEntry], name: str) -> str:
    """The storage owner of ``name`` among ``out`` (itself unless tied)."""
    for t in out:
        if t.name == name:
            return t.extra.get("tied_to") or name
    return name


def infer_common(ckpt: Checkpoint) -> dict[str, Any]:
    s = parameters(ckpt)
    out: dict[str, Any] = {}
    for side, key in (("encoder", "src"), ("decoder", "tgt")):
        emb = f"{side}.embeddings.make_embedding.emb_luts.0.weight"
        if emb in s:
            out[f"{key}_vocab_len"] = s[emb][0]
    if "src_vocab_len" not in out and "tgt_vocab_len" in out:
        out["src_vocab_len"] = out["tgt_vocab_len"]
    names = [t.name for t in ckpt.tensors]
    if any(n.startswith("generator.0.") for n in names):
        out["generator_prefix"] = "generator.0"
    return out


# Options whose tensors the formulas do not model: check says incomplete and names them.
_NOT_TRANSFORMER = (
    Option("num_experts", "mixture of experts feed-forward layers are not modelled",
           r"\.feed_forward\."),
    Option("self_attn_type", "average attention (AAN) is not modelled",
           r"^decoder\.transformer_layers\.\d+\.self_attn\.",
           active=lambda v, cfg: v == "average"),
    Option("lora_layers", "LoRA adapters are not modelled", r"lora_"),
    Option("lora_embedding", "LoRA embeddings are not modelled", r"lora_"),
    Option("quant_layers", "quantized layers are not modelled", "."),
)
_NOT_COMMON = (
    Option("n_src_feats", "source features (extra emb_luts, feat_merge mlp) are not modelled",
           r"^encoder\.embeddings\.|^encoder\.(transformer\.0|rnn)\."),
    Option("src_feats", "source features (extra emb_luts) are not modelled",
           r"^encoder\.embeddings\.|^encoder\.(transformer\.0|rnn)\."),
    Option("world_size", "tensor-parallel shards (widths divided by world_size) are not "
           "modelled", ".",
           active=lambda v, cfg: cfg.get("parallel_mode") == "tensor_parallel"
           and isinstance(v, int) and v > 1),
)
_NOT_RNN = (
    Option("context_gate", "context gates are not modelled", r"^decoder\.context_gate\."),
    Option("rnn_type", "SRU encoders are not modelled", r"^(encoder|decoder)\.rnn\.",
           active=lambda v, cfg: v == "SRU"),
)


def _unmodelled(options):
    def parts(ckpt: Checkpoint) -> list[Part]:
        opt = stored_opt(ckpt)
        return option_parts(opt, (*_NOT_COMMON, *options))
    return parts


def infer_transformer(ckpt: Checkpoint) -> dict[str, Any]:
    out = infer_common(ckpt)
    names = {t.name for t in ckpt.tensors}
    out["language_model"] = not any(n.startswith("encoder.") for n in names)
    return out


ONMT_TRANSFORMER = register(Arch(
    name="onmt-transformer",
    description="OpenNMT-py Transformer (encoder/decoder_type transformer, or transformer_lm) "
                "from the checkpoint's opt, generator included",
    hparams=TRANSFORMER_HPARAMS,
    predict=predict_transformer,
    scheme="opennmt-py",
    from_checkpoint=_from_opt(T_NAMES),
    infer=infer_transformer,
    applies=lambda ckpt: _is_onmt(ckpt) and _kind(stored_opt(ckpt)) == "transformer",
    modelled=(r"^(encoder|decoder)\.(embeddings\.make_embedding\.(emb_luts\.0|pe)\.|layer_norm\.)",
              r"^encoder\.transformer\.\d+\.", r"^decoder\.transformer_layers\.\d+\.",
              r"^generator\."),
    unmodelled=_unmodelled(_NOT_TRANSFORMER),
    aliases=ALIASES,
))


# --- onmt-rnn ---------------------------------------------------------------------------------

RNN_HPARAMS = (
    *COMMON,
    HParam("rnn_type", "LSTM", "LSTM or GRU (RNN: plain)", str, ("LSTM", "GRU", "RNN")),
    HParam("brnn", False, "bidirectional encoder (encoder_type brnn): hidden/2 per direction",
           bool),
    HParam("bridge", False, "a Linear per state between encoder and decoder", bool),
    HParam("input_feed", 1, "input feeding: stacked cells reading embedding + hidden"),
    HParam("global_attention", "general", "general, dot, mlp or none", str,
           ("general", "dot", "mlp", "none")),
    HParam("coverage_attn", False, "coverage: linear_cover (1 -> d)", bool),
    HParam("copy_attn_type", "general", "copy attention type (default: global_attention)", str,
           ("general", "dot", "mlp", "none")),
    HParam("reuse_copy_attn", False, "copy attention reuses the standard attention", bool),
)
R_NAMES = tuple(h.name for h in RNN_HPARAMS)


def global_attention(prefix: str, dim: int, kind: str, coverage: bool = False
                     ) -> list[TensorEntry]:
    """``GlobalAttention``: ``linear_in`` (general), ``linear_context`` / ``linear_query`` /
    ``v`` (mlp), ``linear_out`` (2d -> d, biased for mlp), ``linear_cover`` with coverage."""
    out: list[TensorEntry] = []
    if kind == "general":
        out += bt.linear(f"{prefix}.linear_in", dim, dim, bias=False)
    elif kind == "mlp":
        out += bt.linear(f"{prefix}.linear_context", dim, dim, bias=False)
        out += bt.linear(f"{prefix}.linear_query", dim, dim, bias=True)
        out += bt.linear(f"{prefix}.v", dim, 1, bias=False)
    out += bt.linear(f"{prefix}.linear_out", 2 * dim, dim, bias=kind == "mlp")
    if coverage:
        out += bt.linear(f"{prefix}.linear_cover", 1, dim, bias=False)
    return out


def predict_rnn(hp: Mapping[str, Any]) -> Prediction:
    mode, eh, dh = hp["rnn_type"], hp["enc_hid_size"], hp["dec_hid_size"]
    layer_count(hp["enc_layers"], "enc_layers")
    layer_count(hp["dec_layers"], "dec_layers")
    dirs = 2 if hp["brnn"] else 1
    if eh % dirs:
        raise UsageError(f"a bidirectional encoder needs an even enc_hid_size, not {eh}")
    per_dir = eh // dirs
    src_e, tgt_e = hp["src_word_vec_size"], hp["tgt_word_vec_size"]
    out = embeddings("encoder.embeddings", hp["src_vocab_len"], src_e, hp["position_encoding"])
    out += bt.rnn("encoder.rnn", mode, src_e, per_dir, hp["enc_layers"],
                  bidirectional=hp["brnn"])
    if hp["bridge"]:
        total = per_dir * hp["enc_layers"]
        for k in range(2 if mode == "LSTM" else 1):
            out += bt.linear(f"encoder.bridge.{k}", total, total)
    dec_vocab = hp["src_vocab_len"] if hp["share_embeddings"] else hp["tgt_vocab_len"]
    out += embeddings("decoder.embeddings", dec_vocab, tgt_e, hp["position_encoding"])
    if hp["input_feed"]:
        if mode == "RNN":
            raise UsageError("input feeding stacks LSTM or GRU cells only")
        for i in layer_count(hp["dec_layers"], "dec_layers"):
            out += rnn_cell(f"decoder.rnn.layers.{i}", mode, tgt_e + dh if i == 0 else dh, dh)
    else:
        out += bt.rnn("decoder.rnn", mode, tgt_e, dh, hp["dec_layers"])
    attn = hp["global_attention"]
    if attn != "none":
        out += global_attention("decoder.attn", dh, attn, hp["coverage_attn"])
    if hp["copy_attn"] and not hp["reuse_copy_attn"]:
        out += global_attention("decoder.copy_attn", dh, hp["copy_attn_type"])
    return _finish("onmt-rnn", hp, out, dh, dec_vocab)


ONMT_RNN = register(Arch(
    name="onmt-rnn",
    description="OpenNMT-py RNN/BRNN encoder-decoder (LSTM/GRU, global attention, input feeding, "
                "bridge, copy attention) from the checkpoint's opt, generator included",
    hparams=RNN_HPARAMS,
    predict=predict_rnn,
    scheme="opennmt-py",
    from_checkpoint=_from_opt(R_NAMES),
    infer=infer_common,
    applies=lambda ckpt: _is_onmt(ckpt) and _kind(stored_opt(ckpt)) == "rnn",
    modelled=(r"^(encoder|decoder)\.", r"^generator\."),
    unmodelled=_unmodelled(_NOT_RNN),
    aliases=ALIASES,
))
