"""``sockeye-cnn``: Sockeye 1 (MXNet) convolutional encoder-decoder (ConvS2S, ``--encoder cnn
--decoder cnn``).

Shapes follow Sockeye 1.18's code (convolution.py ``ConvolutionBlock``, encoder.py
``ConvolutionalEncoder`` and positional embeddings, decoder.py ``ConvolutionalDecoder``,
layers.py ``ProjectedDotAttention``/``WeightNormalization``/``OutputLayer``), checked against the
real model in ``fixtures/sockeye``. With ``h = cnn_num_hidden``: encoder and decoder each project
their embedding to ``h`` (``i2h_weight``, no bias), then every layer is one 1-D convolution
``conv_weight`` (g*h, h, kernel) with ``conv_bias`` (g*h,), g = 2 for GLU (it halves the output)
and 1 otherwise. The decoder attends with plain dot attention (no parameters) or, with
``cnn_project_qkv``, a query ``dense0`` (h, h) and fused key/value ``dense1`` (2h, h) per layer.
Learned positional embeddings are (max_seq_len + 1, num_embed) tables; fixed ones are computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import sockeye_options as options
from inspector.formulas.blocks import linear, param
from inspector.formulas.core import Arch, HParam, Prediction, Symbol, register
from inspector.formulas.sockeye_common import (
    TYING_TYPES,
    hparams_from_args,
    pair,
    sockeye_args,
    sockeye_major,
)
from inspector.formulas.sockeye_rnn import embeddings

ACTIVATIONS = ("glu", "relu", "sigmoid", "softrelu", "tanh")  # C.CNN_ACTIVATION_TYPES
POSITIONAL = ("fixed", "learned", "none")
ENC, DEC = "encoder_cnn_", "decoder_cnn_"
POS_EMBED = ("source_pos_embed_weight", "target_pos_embed_weight")


def _require(ok: bool, message: str) -> None:
    if not ok:
        from inspector.adapters.errors import UsageError

        raise UsageError(f"inconsistent hyperparameters: {message}")


def conv_block(prefix: str, h: int, kernel: int, act: str, wn: bool,
               block: str) -> list[TensorEntry]:
    """One ``ConvolutionBlock``: weight (g*h, h, kernel), weight-norm scale (g*h, 1, 1), bias."""
    out_dim = 2 * h if act == "glu" else h
    t = [param(prefix + "conv_weight", (out_dim, h, kernel), block)]
    if wn:
        t.append(param(prefix + "conv_wn_scale", (out_dim, 1, 1), block))
    t.append(param(prefix + "conv_bias", (out_dim,), block))
    return t


def predict(values: Mapping[str, Any]) -> Prediction:
    hp = ARCH.resolve(values)
    sn, tn = pair(hp["num_layers"], "num_layers")
    se, te = pair(hp["num_embed"], "num_embed")
    ks, kt = pair(hp["cnn_kernel_width"], "cnn_kernel_width")
    h, act, wn = hp["cnn_num_hidden"], hp["cnn_activation_type"], hp["weight_normalization"]
    _require(ks % 2 == 1, "the encoder's (centered) cnn_kernel_width must be odd")
    _require(min(sn, tn, ks, kt, h, se, te) >= 1, "sizes and layer counts must be at least 1")

    t: list[TensorEntry] = embeddings(hp, se, te, h)
    if wn:  # OutputLayer normalises its (possibly tied) weight per vocabulary row
        t.append(param("target_output_wn_scale", (hp["target_vocab_size"], 1), "output"))
    if hp["cnn_positional_embedding_type"] == "learned":
        ls, lt = pair(hp["max_seq_len"], "max_seq_len")
        t.append(param(POS_EMBED[0], (ls + 1, se), "positional"))  # + C.SPACE_FOR_XOS
        t.append(param(POS_EMBED[1], (lt + 1, te), "positional"))
    t += linear(ENC + "i2h", h, se, bias=False, block="encoder")
    for i in range(sn):
        t += conv_block(f"{ENC}{i}_", h, ks, act, wn, "encoder")
    t += linear(DEC + "i2h", h, te, bias=False, block="decoder")
    for i in range(tn):
        t += conv_block(f"{DEC}{i}_", h, kt, act, wn, "decoder")
        if hp["cnn_project_qkv"]:  # Gluon Dense children of ProjectedDotAttention
            t += linear(f"{DEC}{i}_dense0", h, h, block="attention")
            t += linear(f"{DEC}{i}_dense1", 2 * h, h, block="attention")
    return Prediction("sockeye-cnn", hp, t)


def applies(ckpt: Checkpoint) -> bool:
    args = sockeye_args(ckpt)
    if args:
        return sockeye_major(ckpt) == "1" and args.get("encoder") == "cnn"
    return any(t.name.startswith(ENC + "0_conv_") for t in ckpt.tensors)


def _layers(shapes: Mapping[str, Any], prefix: str) -> list[tuple[int, ...]]:
    """Conv weight shapes of layers 0, 1, ... under ``prefix``."""
    out = []
    while f"{prefix}{len(out)}_conv_weight" in shapes:
        out.append(shapes[f"{prefix}{len(out)}_conv_weight"])
    return out


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    """What the stored shapes determine: vocabularies, embeddings, hidden size, layer counts,
    kernel widths, GLU or not, positional tables, projections, weight norm, tying."""
    shapes = {t.name: t.shape for t in ckpt.tensors}
    out: dict[str, Any] = {}
    enc, dec = _layers(shapes, ENC), _layers(shapes, DEC)
    ei, di = shapes.get(ENC + "i2h_weight"), shapes.get(DEC + "i2h_weight")
    if not (enc and dec and ei and di and len(enc[0]) == 3 and enc[0][1]):
        return out
    out["num_layers"] = f"{len(enc)}:{len(dec)}"
    out["cnn_num_hidden"] = enc[0][1]
    out["num_embed"] = f"{ei[1]}:{di[1]}"
    out["cnn_kernel_width"] = f"{enc[0][2]}:{dec[0][2]}"
    # only GLU doubles the conv output; the other activations share their shapes
    out["cnn_activation_type"] = "glu" if enc[0][0] == 2 * enc[0][1] else "relu"
    out["cnn_project_qkv"] = DEC + "0_dense0_weight" in shapes
    out["weight_normalization"] = ENC + "0_conv_wn_scale" in shapes
    pos = [shapes.get(n) for n in POS_EMBED]
    if pos[0] and pos[1]:
        out["cnn_positional_embedding_type"] = "learned"
        out["max_seq_len"] = f"{pos[0][0] - 1}:{pos[1][0] - 1}"
    else:  # fixed and none store nothing
        out["cnn_positional_embedding_type"] = "fixed"
    emb = shapes.get("source_target_embed_weight")
    src, trg = shapes.get("source_embed_weight", emb), shapes.get("target_embed_weight", emb)
    if src and trg:
        out["source_vocab_size"], out["target_vocab_size"] = src[0], trg[0]
    if "target_output_weight" not in shapes:
        out["weight_tying"] = True
        out["weight_tying_type"] = "src_trg_softmax" if emb else "trg_softmax"
    elif emb:
        out["weight_tying"], out["weight_tying_type"] = True, "src_trg"
    else:
        out["weight_tying"] = False
    return out


HPARAMS = (
    HParam("source_vocab_size", 32000, "source vocabulary size (vocab.src.0.json)"),
    HParam("target_vocab_size", 32000, "target vocabulary size (vocab.trg.0.json)"),
    HParam("num_layers", "6:6", "convolution layers encoder:decoder", str),
    HParam("num_embed", "512:512", "embedding sizes source:target", str),
    HParam("cnn_num_hidden", 512, "hidden size h of every convolution (encoder = decoder)"),
    HParam("cnn_kernel_width", "3:3", "kernel widths encoder:decoder (encoder's must be odd)",
           str),
    HParam("cnn_activation_type", "glu", "activation (glu doubles the conv output)", str,
           ACTIVATIONS),
    HParam("cnn_positional_embedding_type", "learned", "positional embeddings (only learned "
           "ones are parameters)", str, POSITIONAL),
    HParam("cnn_project_qkv", False, "query and key/value projections in each decoder layer",
           bool),
    HParam("cnn_hidden_dropout", 0.2, "dropout between convolutions (no shape change)", float),
    HParam("weight_normalization", False, "weight norm scales on convolutions and the output "
           "layer", bool),
    HParam("weight_tying", False, "tie weights (--weight-tying)", bool),
    HParam("weight_tying_type", "trg_softmax", "what is tied", str, TYING_TYPES),
    HParam("max_seq_len", "99:99", "max lengths source:target (learned positional tables hold "
           "+1)", str),
)

SYMBOLS = (
    Symbol("vs", ("source_vocab_size",), degree=1, help="source vocabulary"),
    Symbol("vt", ("target_vocab_size",), degree=1, help="target vocabulary"),
    Symbol("se", ("num_embed:0",), degree=1, help="source embedding size"),
    Symbol("te", ("num_embed:1",), degree=1, help="target embedding size"),
    Symbol("h", ("cnn_num_hidden",), degree=2, help="cnn_num_hidden"),
    Symbol("ks", ("cnn_kernel_width:0",), degree=1, step=2, help="encoder kernel width (odd)"),
    Symbol("kt", ("cnn_kernel_width:1",), degree=1, help="decoder kernel width"),
    Symbol("sn", ("num_layers:0",), degree=1, help="encoder layers"),
    Symbol("tn", ("num_layers:1",), degree=1, help="decoder layers"),
)

ARCH = register(
    Arch(
        name="sockeye-cnn",
        description="Sockeye 1 (MXNet) convolutional (ConvS2S) encoder-decoder",
        hparams=HPARAMS,
        predict=predict,
        scheme="sockeye-cnn",
        from_checkpoint=lambda ckpt: hparams_from_args(ARCH, ckpt),
        infer=infer,
        applies=applies,
        symbols=SYMBOLS,
        modelled=options.MODELLED["sockeye-cnn"],
        unmodelled=lambda ckpt: options.unmodelled("sockeye-cnn", ckpt),
        aliases=options.ALIASES,
    )
)
