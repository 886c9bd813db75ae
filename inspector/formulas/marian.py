"""Architecture ``marian-transformer``: a Marian NMT Transformer (``type: transformer``) checked
against the options in its own ``special:model.yml``, as Marian builds the graph
(``src/models/transformer.h``, ``src/layers/generic.h``, ``src/layers/output.cpp``,
``src/layers/embedding.cpp``). ``d`` is ``dim-emb``, layers are numbered from 1:

- embeddings: ``Wemb`` when ``tied-embeddings-all`` or ``tied-embeddings-src`` (one table for
  both sides), else ``encoder_Wemb`` / ``decoder_Wemb`` (vocab, d) (``dim-vocabs``);
- per encoder layer ``encoder_lN_self_Wq`` / ``Wk`` / ``Wv`` / ``Wo`` (d, d) and ``bq`` / ``bk`` /
  ``bv`` / ``bo`` (1, d); ``encoder_lN_ffn_W1`` (d, ffn), ``W2`` ... (ffn, ffn), ``Wk`` (ffn, d)
  for ``transformer-ffn-depth`` k, biases ``b1`` ... (1, out); a decoder layer adds
  ``decoder_lN_context_*`` (the same shapes); the decoder's FFN may have its own
  ``transformer-decoder-dim-ffn`` / ``transformer-decoder-ffn-depth`` (0: the encoder's);
- layer norms ``<prefix>_ln_scale`` / ``_ln_bias`` (1, d): one after each block for every ``n``
  in ``transformer-postprocess`` (prefix ``..._self_Wo``, ``..._context_Wo``, ``..._ffn_ffn``),
  one before it with suffix ``_pre`` for every ``n`` in ``transformer-preprocess``;
  ``encoder_top_ln_*`` / ``decoder_top_ln_*`` for ``n`` in ``transformer-postprocess-top``;
- the output layer ``decoder_ff_logit_out_b`` (1, target vocab), and unless
  ``tied-embeddings`` / ``tied-embeddings-all`` (then it reuses the decoder's embedding)
  ``decoder_ff_logit_out_Wt`` (target vocab, d) (older models: ``_W`` (d, target vocab)).

Not modelled (``incomplete``): other model types (``s2s``, ``amun``, ``nematus``, ``bert``...),
average-attention decoders, RNN layers in a Transformer, trained positions, tied layers, highway
or RMS norms, embedding norms, factors, ``transformer-no-bias`` / ``-no-affine`` and any other
tensor name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint
from inspector.formulas.core import Arch, HParam, Part, Prediction, expected, register

FORMAT = "marian-npz"
OUT = "decoder_ff_logit_out"

HPARAMS = (
    HParam("dim-emb", None, "model width d"),
    HParam("enc-depth", None, "encoder layers"),
    HParam("dec-depth", None, "decoder layers"),
    HParam("transformer-dim-ffn", None, "feed-forward width"),
    HParam("transformer-ffn-depth", 2, "dense layers per feed-forward block"),
    HParam("transformer-decoder-dim-ffn", 0, "the decoder's FFN width (0: the encoder's)"),
    HParam("transformer-decoder-ffn-depth", 0, "the decoder's FFN depth (0: the encoder's)"),
    HParam("transformer-heads", 8, "attention heads (must divide dim-emb)"),
    HParam("source-vocab", None, "source vocabulary (dim-vocabs[0])"),
    HParam("target-vocab", None, "target vocabulary (dim-vocabs[-1])"),
    HParam("tied-embeddings", False, "the output layer reuses the decoder embedding", bool),
    HParam("tied-embeddings-src", False, "one embedding table for source and target", bool),
    HParam("tied-embeddings-all", False, "one table for source, target and output", bool),
    HParam("transformer-preprocess", "", "pre-block ops (n: a _pre layer norm)", str),
    HParam("transformer-postprocess", "dan", "post-block ops (n: a layer norm)", str),
    HParam("transformer-postprocess-top", "", "ops on the stacks' outputs (n: top norm)", str),
    HParam("output-omit-bias", False, "no decoder_ff_logit_out_b", bool),
    HParam("legacy-output", False, "decoder_ff_logit_out_W (d, vocab) instead of _Wt "
           "(stored names)", bool),
)
REQUIRED = ("dim-emb", "enc-depth", "dec-depth", "transformer-dim-ffn", "source-vocab",
            "target-vocab")
MODELLED = (
    r"^(?:(?:encoder|decoder)_)?Wemb$",
    r"^decoder_ff_logit_out_(?:Wt|W|b)$",
    r"^(?:encoder|decoder)_l\d+_(?:self|context)_(?:W[qkvo]|b[qkvo]|Wo_ln_(?:scale|bias)(?:_pre)?)$",
    r"^(?:encoder|decoder)_l\d+_ffn_(?:W\d+|b\d+|ffn_ln_(?:scale|bias)(?:_pre)?)$",
    r"^(?:encoder|decoder)_top_ln_(?:scale|bias)$",
)
# options whose layouts are not predicted, with the value that means "off"
OPTIONS_OFF = {
    "transformer-decoder-autoreg": "self-attention",
    "transformer-train-position-embeddings": False,
    "transformer-tied-layers": [],
    "transformer-no-bias": False,
    "transformer-no-affine": False,
    "transformer-postprocess-emb": "d",
    "factors-dim-emb": 0,
    "lemma-dim-emb": 0,
    "ulr": False,
}
_LAYERS = re.compile(r"^(encoder|decoder)_l(\d+)_")


def applies(ckpt: Checkpoint) -> bool:
    return ckpt.format == FORMAT and ckpt.hyperparameters.get("type") == "transformer"


def from_config(ckpt: Checkpoint) -> dict[str, Any]:
    """The options of ``special:model.yml`` this formula reads, under their own names."""
    if ckpt.format != FORMAT:
        return {}
    cfg = ckpt.hyperparameters
    out = {h.name: cfg[h.name] for h in HPARAMS if h.name in cfg
           and isinstance(cfg[h.name], (int, str, bool)) and cfg[h.name] is not None}
    vocabs = cfg.get("dim-vocabs")
    if isinstance(vocabs, list) and vocabs and all(isinstance(v, int) for v in vocabs):
        out["source-vocab"], out["target-vocab"] = vocabs[0], vocabs[-1]
    return out


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    """What the names and shapes give when the YAML lacks it (a model.yml is always saved)."""
    if ckpt.format != FORMAT:
        return {}
    depth = {"encoder": 0, "decoder": 0}
    for name in ckpt.keys():
        m = _LAYERS.match(name)
        if m:
            depth[m[1]] = max(depth[m[1]], int(m[2]))
    out: dict[str, Any] = {"enc-depth": depth["encoder"], "dec-depth": depth["decoder"],
                           "legacy-output": f"{OUT}_W" in ckpt}
    q = ckpt.get("encoder_l1_self_Wq")
    if q is not None and q.shape:
        out["dim-emb"] = q.shape[0]
    w1 = ckpt.get("encoder_l1_ffn_W1")
    if w1 is not None and len(w1.shape) == 2:
        out["transformer-dim-ffn"] = w1.shape[1]
    return out


def unmodelled(ckpt: Checkpoint) -> list[Part]:
    cfg = ckpt.hyperparameters
    parts = []
    for key, off in OPTIONS_OFF.items():
        if key in cfg and cfg[key] not in (off, None) and not (off == [] and not cfg[key]):
            parts.append(Part(key, f"{key}: {cfg[key]!r} is not modelled", r"."))
    for key in ("transformer-preprocess", "transformer-postprocess",
                "transformer-postprocess-top"):
        ops = cfg.get(key)
        if isinstance(ops, str) and set(ops) - set("dan"):
            parts.append(Part(key, f"{key}: {ops!r} (h: highway, r: RMS norm) is not modelled",
                              r"."))
    return parts


def predict(hp: Mapping[str, Any]) -> Prediction:
    missing = [k for k in REQUIRED if hp[k] is None]
    if missing:
        raise UsageError("the Marian model does not give " + ", ".join(missing))
    d, heads = hp["dim-emb"], hp["transformer-heads"]
    if heads < 1 or d % heads:
        raise UsageError(f"transformer-heads {heads} does not divide dim-emb {d} "
                         "(Marian's SplitHeads)")
    src, tgt = hp["source-vocab"], hp["target-vocab"]
    shared = hp["tied-embeddings-all"] or hp["tied-embeddings-src"]
    if shared and src != tgt:
        raise UsageError(f"one embedding table (tied-embeddings-all/-src) needs equal "
                         f"vocabularies, dim-vocabs has {src} and {tgt}")
    out = []

    def p(name: str, shape: tuple[int, ...], block: str) -> None:
        out.append(expected(name, shape, "parameter", block))

    def norms(prefix: str, block: str) -> None:
        for _ in range(hp["transformer-postprocess"].count("n")):
            p(f"{prefix}_ln_bias", (1, d), block)
            p(f"{prefix}_ln_scale", (1, d), block)
        for _ in range(hp["transformer-preprocess"].count("n")):
            p(f"{prefix}_ln_bias_pre", (1, d), block)
            p(f"{prefix}_ln_scale_pre", (1, d), block)

    def attention(prefix: str) -> None:
        for w in "qkvo":
            p(f"{prefix}_W{w}", (d, d), "attention")
            p(f"{prefix}_b{w}", (1, d), "attention")
        norms(f"{prefix}_Wo", "norm")

    def ffn(prefix: str, width: int, depth: int) -> None:
        if depth < 1:
            raise UsageError(f"FFN depth {depth} is smaller than 1 (Marian aborts)")
        dims = [d] + [width] * (depth - 1) + [d]
        for i in range(1, depth + 1):
            p(f"{prefix}_W{i}", (dims[i - 1], dims[i]), "ffn")
            p(f"{prefix}_b{i}", (1, dims[i]), "ffn")
        norms(f"{prefix}_ffn", "norm")

    if shared:
        p("Wemb", (src, d), "embedding")
    else:
        p("encoder_Wemb", (src, d), "embedding")
        p("decoder_Wemb", (tgt, d), "embedding")
    ffn_width, ffn_depth = hp["transformer-dim-ffn"], hp["transformer-ffn-depth"]
    dec_width = hp["transformer-decoder-dim-ffn"] or ffn_width
    dec_depth = hp["transformer-decoder-ffn-depth"] or ffn_depth
    for i in range(1, hp["enc-depth"] + 1):
        attention(f"encoder_l{i}_self")
        ffn(f"encoder_l{i}_ffn", ffn_width, ffn_depth)
    for i in range(1, hp["dec-depth"] + 1):
        attention(f"decoder_l{i}_self")
        attention(f"decoder_l{i}_context")
        ffn(f"decoder_l{i}_ffn", dec_width, dec_depth)
    for side in ("encoder", "decoder"):
        for _ in range(hp["transformer-postprocess-top"].count("n")):
            p(f"{side}_top_ln_bias", (1, d), "norm")
            p(f"{side}_top_ln_scale", (1, d), "norm")
    tied = hp["tied-embeddings"] or hp["tied-embeddings-all"]
    if not tied:
        if hp["legacy-output"]:
            p(f"{OUT}_W", (d, tgt), "output")
        else:
            p(f"{OUT}_Wt", (tgt, d), "output")
    if not hp["output-omit-bias"]:
        p(f"{OUT}_b", (1, tgt), "output")
    notes = []
    if tied:
        notes.append("the output layer reuses the "
                     f"{'shared' if shared else 'decoder'} embedding (tied, not stored)")
    return Prediction("marian-transformer", dict(hp), out, notes)


MARIAN_TRANSFORMER = register(Arch(
    name="marian-transformer",
    description="Marian NMT Transformer (model.npz with its special:model.yml options)",
    hparams=HPARAMS,
    predict=predict,
    scheme="marian",
    from_checkpoint=from_config,
    infer=infer,
    applies=applies,
    modelled=MODELLED,
    unmodelled=unmodelled,
))
