"""Architecture ``ctranslate2-transformer``: a CTranslate2 ``TransformerSpec`` model (what
``ct2-opennmt-py-converter``, ``ct2-fairseq-converter``, ``ct2-marian-converter`` and
``ct2-opus-mt-converter`` write for encoder-decoder Transformers) checked against its own
attributes (``encoder/num_heads``, ``encoder/pre_norm`` in ``model.bin``) and vocabulary files.

The variables are those ``python/ctranslate2/specs/transformer_spec.py`` declares
(``TransformerEncoderSpec`` / ``TransformerDecoderSpec`` with ``attention_spec`` and
``common_spec``), ``d`` the model width, ``ff`` the feed-forward width:

- ``encoder/embeddings_0/weight`` (source vocab, d), ``decoder/embeddings/weight`` (target vocab,
  d), the position tables ``*/position_encodings/encodings`` (positions, d) when stored;
- per encoder layer ``self_attention/linear_0`` (3d, d: query, key and value fused),
  ``linear_1`` (d, d), ``layer_norm``; ``ffn/linear_0`` (ff, d), ``ffn/linear_1`` (d, ff),
  ``ffn/layer_norm``; a decoder layer adds ``attention/linear_0`` (d, d, the query),
  ``linear_1`` (2d, d: key and value fused), ``linear_2`` (d, d) and its ``layer_norm``;
- ``encoder/layer_norm`` and ``decoder/layer_norm`` (pre-norm models), ``decoder/projection``
  (target vocab, d);
- with int8 / int16 weights (``--quantization``), each linear and embedding weight's
  ``weight_scale``: one per row for int8, one scalar for int16 (``model_spec._quantize``).

A duplicate variable is an alias in the file (``_alias_variables``, e.g. tied embeddings): it is
predicted as tied to the variable it names. Biases, the final norms and the position tables
are optional in the spec: their presence is read from the stored names. ``num_heads`` is
checked against the width (``d`` must divide into heads).

Not modelled (``incomplete``, never a mismatch): relative positions, rotary or ALiBi attention,
multi-query attention, gated FFNs, several source embeddings, ``project_in``/``project_out``,
AWQ quantization, and any other spec (``WhisperSpec``, language models).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint
from inspector.formulas.core import Arch, HParam, Part, Prediction, expected, register

FORMAT = "ctranslate2"
SPEC = "TransformerSpec"
QUANTIZED = ("int8", "int16")

HPARAMS = (
    HParam("encoder_layers", None, "encoder layers (encoder/layer_N)"),
    HParam("decoder_layers", None, "decoder layers (decoder/layer_N)"),
    HParam("d_model", None, "model width"),
    HParam("ffn", None, "feed-forward width (ffn/linear_0 rows)"),
    HParam("num_heads", None, "attention heads (the encoder/num_heads attribute)"),
    HParam("decoder_num_heads", None, "decoder heads (decoder/num_heads; null: num_heads)"),
    HParam("source_vocab", None, "source vocabulary (source_ or shared_vocabulary file)"),
    HParam("target_vocab", None, "target vocabulary (target_ or shared_vocabulary file)"),
    HParam("pre_norm", True, "pre-norm layers (the encoder/pre_norm attribute)", bool),
    HParam("final_norm", True, "encoder/layer_norm and decoder/layer_norm (stored names)", bool),
    HParam("positions", 0, "rows of the stored position tables (0: none stored)"),
    HParam("attention_bias", True, "biases of the attention linears (stored names)", bool),
    HParam("ffn_bias", True, "biases of the FFN linears (stored names)", bool),
    HParam("projection_bias", True, "decoder/projection/bias (stored names)", bool),
    HParam("shared_embeddings", False, "encoder embedding an alias of the decoder's", bool),
    HParam("tied_projection", False, "decoder/projection/weight an alias of the decoder "
           "embedding", bool),
    HParam("shared_positions", False, "the encoder's position table an alias of the decoder's",
           bool),
    HParam("quantization", "none", "weight type: none, int8 or int16 (stored dtypes)", str,
           ("none", "int8", "int16")),
)
REQUIRED = ("encoder_layers", "decoder_layers", "d_model", "ffn", "source_vocab",
            "target_vocab")
MODELLED = (
    r"^(?:encoder/embeddings_0|decoder/embeddings)/weight(?:_scale)?$",
    r"^(?:encoder|decoder)/position_encodings/encodings$",
    r"^(?:encoder|decoder)/layer_norm/(?:gamma|beta)$",
    r"^decoder/projection/(?:weight|weight_scale|bias)$",
    r"^(?:encoder|decoder)/layer_\d+/(?:self_attention|attention|ffn)/"
    r"(?:linear_\d/(?:weight|weight_scale|bias)|layer_norm/(?:gamma|beta))$",
)
_LAYER = re.compile(r"^(encoder|decoder)/layer_(\d+)/")
# TransformerSpec attributes that mean a layout this formula does not predict
_UNMODELLED_ATTRIBUTES = {
    "decoder/alibi": "ALiBi attention",
    "encoder/multi_query_attention": "multi-query attention",
}
UNMODELLED_NAMES = Part(
    "other TransformerSpec options",
    "relative positions, rotary embeddings, gated FFNs, project_in/out, several source "
    "embeddings or AWQ weights are not modelled",
    r"(?:relative_|rotary|linear_0_noact|project_(?:in|out)/|embeddings_[1-9]|_zero$|"
    r"/qweight|/layernorm_embedding/)",
)


def _attributes(ckpt: Checkpoint) -> Mapping[str, Any]:
    attrs = ckpt.hyperparameters.get("attributes")
    return attrs if isinstance(attrs, dict) else {}


def applies(ckpt: Checkpoint) -> bool:
    return ckpt.format == FORMAT and ckpt.hyperparameters.get("spec") in (SPEC, "")\
        and "encoder/layer_0/self_attention/linear_0/weight" in ckpt


def from_model(ckpt: Checkpoint) -> dict[str, Any]:
    """The attributes ``model.bin`` stores and the vocabulary files' sizes."""
    if ckpt.format != FORMAT:
        return {}
    attrs = _attributes(ckpt)
    out: dict[str, Any] = {}
    for name, key in (("num_heads", "encoder/num_heads"),
                      ("decoder_num_heads", "decoder/num_heads")):
        if isinstance(attrs.get(key), int):
            out[name] = attrs[key]
    if isinstance(attrs.get("encoder/pre_norm"), int):
        out["pre_norm"] = bool(attrs["encoder/pre_norm"])
    sizes = ckpt.hyperparameters.get("vocabulary_sizes") or {}
    for name, files in (("source_vocab", ("source_vocabulary", "shared_vocabulary")),
                        ("target_vocab", ("target_vocabulary", "shared_vocabulary"))):
        found = next((sizes[f] for f in files if isinstance(sizes.get(f), int)), None)
        if found is not None:
            out[name] = found
    return out


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    """Layer counts and widths from the shapes; the optional variables from the names."""
    if ckpt.format != FORMAT:
        return {}
    layers = {"encoder": -1, "decoder": -1}
    for name in ckpt.keys():
        m = _LAYER.match(name)
        if m:
            layers[m[1]] = max(layers[m[1]], int(m[2]))
    out: dict[str, Any] = {"encoder_layers": layers["encoder"] + 1,
                           "decoder_layers": layers["decoder"] + 1}
    emb = ckpt.get("encoder/embeddings_0/weight")
    if emb is not None and len(emb.shape) == 2:
        out["source_vocab"], out["d_model"] = emb.shape
    dec = ckpt.get("decoder/embeddings/weight")
    if dec is not None and len(dec.shape) == 2:
        out["target_vocab"] = dec.shape[0]
    ffn = ckpt.get("encoder/layer_0/ffn/linear_0/weight")
    if ffn is not None and ffn.shape:
        out["ffn"] = ffn.shape[0]
    pos = ckpt.get("encoder/position_encodings/encodings") \
        or ckpt.get("decoder/position_encodings/encodings")
    out["positions"] = pos.shape[0] if pos is not None and pos.shape else 0
    out["final_norm"] = "encoder/layer_norm/gamma" in ckpt
    out["attention_bias"] = "encoder/layer_0/self_attention/linear_0/bias" in ckpt
    out["ffn_bias"] = "encoder/layer_0/ffn/linear_0/bias" in ckpt
    out["projection_bias"] = "decoder/projection/bias" in ckpt
    aliases = ckpt.metadata.get("aliases") or {}
    dec_emb = "decoder/embeddings/weight"
    out["shared_embeddings"] = aliases.get("encoder/embeddings_0/weight") == dec_emb
    out["tied_projection"] = aliases.get("decoder/projection/weight") == dec_emb
    out["shared_positions"] = aliases.get("encoder/position_encodings/encodings") == \
        "decoder/position_encodings/encodings"
    weight = ckpt.get("encoder/layer_0/self_attention/linear_0/weight")
    out["quantization"] = weight.dtype if weight is not None and weight.dtype in QUANTIZED \
        else "none"
    return out


def unmodelled(ckpt: Checkpoint) -> list[Part]:
    parts = []
    attrs = _attributes(ckpt)
    for key, what in _UNMODELLED_ATTRIBUTES.items():
        if attrs.get(key):
            parts.append(Part(what, f"{key} is set: {what} is not modelled", r"."))
    if any(UNMODELLED_NAMES.covers(n) for n in ckpt.keys()):
        parts.append(UNMODELLED_NAMES)
    return parts


def predict(hp: Mapping[str, Any]) -> Prediction:
    missing = [k for k in REQUIRED if hp[k] is None]
    if missing:
        raise UsageError("the CTranslate2 model does not give " + ", ".join(missing))
    d, ff = hp["d_model"], hp["ffn"]
    for key in ("num_heads", "decoder_num_heads"):
        heads = hp[key] if hp[key] is not None else hp["num_heads"]
        if heads is not None and (heads < 1 or d % heads):
            raise UsageError(f"{key} {heads} does not divide the width {d} "
                             "(CTranslate2's attention splits it into heads)")
    q = hp["quantization"]
    out = []

    def weight(name: str, shape: tuple[int, ...], block: str, tie: str | None = None) -> None:
        out.append(expected(name, shape, "parameter", block, tied_to=tie))
        if q in QUANTIZED and tie is None:
            scale = name + "_scale"
            out.append(expected(scale, (shape[0],) if q == "int8" else (), "buffer", block))

    def linear(prefix: str, rows: int, cols: int, bias: bool, block: str) -> None:
        weight(f"{prefix}/weight", (rows, cols), block)
        if bias:
            out.append(expected(f"{prefix}/bias", (rows,), "parameter", block))

    def norm(prefix: str, block: str) -> None:
        out.append(expected(f"{prefix}/beta", (d,), "parameter", block))
        out.append(expected(f"{prefix}/gamma", (d,), "parameter", block))

    ab, fb = hp["attention_bias"], hp["ffn_bias"]
    dec_emb = "decoder/embeddings/weight"
    weight("encoder/embeddings_0/weight", (hp["source_vocab"], d), "embedding",
           dec_emb if hp["shared_embeddings"] else None)
    weight(dec_emb, (hp["target_vocab"], d), "embedding")
    if hp["positions"]:
        table = "decoder/position_encodings/encodings"
        out.append(expected(table, (hp["positions"], d), "buffer", "positions"))
        out.append(expected("encoder/position_encodings/encodings", (hp["positions"], d),
                            "buffer", "positions", table if hp["shared_positions"] else None))
    for side, layers in (("encoder", hp["encoder_layers"]), ("decoder", hp["decoder_layers"])):
        for i in range(layers):
            p = f"{side}/layer_{i}"
            linear(f"{p}/self_attention/linear_0", 3 * d, d, ab, "self_attention")
            linear(f"{p}/self_attention/linear_1", d, d, ab, "self_attention")
            norm(f"{p}/self_attention/layer_norm", "norm")
            if side == "decoder":
                linear(f"{p}/attention/linear_0", d, d, ab, "attention")
                linear(f"{p}/attention/linear_1", 2 * d, d, ab, "attention")
                linear(f"{p}/attention/linear_2", d, d, ab, "attention")
                norm(f"{p}/attention/layer_norm", "norm")
            linear(f"{p}/ffn/linear_0", ff, d, fb, "ffn")
            linear(f"{p}/ffn/linear_1", d, ff, fb, "ffn")
            norm(f"{p}/ffn/layer_norm", "norm")
        if hp["final_norm"]:
            norm(f"{side}/layer_norm", "norm")
    weight("decoder/projection/weight", (hp["target_vocab"], d), "projection",
           dec_emb if hp["tied_projection"] else None)
    if hp["projection_bias"]:
        out.append(expected("decoder/projection/bias", (hp["target_vocab"],), "parameter",
                            "projection"))
    notes = [f"{'pre' if hp['pre_norm'] else 'post'}-norm layers"]
    if q in QUANTIZED:
        notes.append(f"{q} weights with their scales "
                     f"({'one per row' if q == 'int8' else 'one per tensor'})")
    if hp["final_norm"] and not hp["pre_norm"]:
        notes.append("final layer norms stored although pre_norm is false")
    return Prediction("ctranslate2-transformer", dict(hp), out, notes)


CTRANSLATE2_TRANSFORMER = register(Arch(
    name="ctranslate2-transformer",
    description="CTranslate2 TransformerSpec (converted OpenNMT-py, fairseq, Marian "
                "Transformers): model.bin attributes and vocabularies",
    hparams=HPARAMS,
    predict=predict,
    scheme="ctranslate2",
    from_checkpoint=from_model,
    infer=infer,
    applies=applies,
    modelled=MODELLED,
    unmodelled=unmodelled,
    aliases={"enc_layers": "encoder_layers", "dec_layers": "decoder_layers",
             "heads": "num_heads", "hidden_size": "d_model", "transformer_ff": "ffn"},
))
