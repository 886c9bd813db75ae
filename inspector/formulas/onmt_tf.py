"""OpenNMT-tf Transformers (``onmt-tf-transformer``), predicted from the model description the
``onmt-tf`` adapter attaches (``hyperparameters["onmt_tf_model"]``: ``model_description.py``
parsed, never run): a catalog name (``Transformer``, ``TransformerBig``, ...: their constructor
arguments are data here) or a ``model()`` returning ``opennmt.models.Transformer(...)`` with
literal arguments. Hyperparameters are the constructor's keyword arguments; vocabulary sizes
come from the stored embeddings (the vocabulary files are not read). ``share_embeddings=AUTO``
is decided as OpenNMT-tf does, from the ``config.yml`` in the directory (one vocabulary file
for source and target: ALL, else TARGET).

Variables follow OpenNMT-tf 2.32 (models/transformer.py, encoders/self_attention_encoder.py,
decoders/self_attention_decoder.py, layers/transformer.py, layers/position.py) under the object
graph's names (``model/encoder/layers/0/self_attention/layer/linear_queries/kernel``): Dense
kernels are (in, out); ``TransformerLayerWrapper`` normalises its input (pre-norm:
``input_layer_norm``) or its output (``output_layer_norm``); pre-norm stacks end with a
``layer_norm``; ``PositionEmbedder`` learns (maximum_position + 1, d) per stack; relative
positions add ``relative_position_keys`` / ``_values`` (2n+1, d/heads) to every self-attention;
the decoder's ``output_layer`` reuses the target embedding (no kernel) when sharing TARGET/ALL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import blocks
from inspector.formulas.blocks_nmt import layer_count
from inspector.formulas.core import Arch, HParam, Part, Prediction, register
from inspector.formulas.torch_nn import parameters

KEY = "onmt_tf_model"
SHARING = {"NONE": 0, "SOURCE_TARGET_INPUT": 1, "TARGET": 2, "ALL": 3, "AUTO": 4}
POSITION_ENCODERS = {"SinusoidalPositionEncoder": "sinusoidal", "PositionEmbedder": "embedder",
                     "None": "none"}
# opennmt/models/catalog.py: the Transformer entries and the constructor arguments they pass.
CATALOG: dict[str, dict[str, Any]] = {
    "Transformer": {},
    "TransformerBase": {},
    "TransformerBaseSharedEmbeddings": {"share_embeddings": "ALL"},
    "TransformerRelative": {"position_encoder_class": "None", "maximum_relative_position": 20},
    "TransformerBaseRelative": {"position_encoder_class": "None",
                                "maximum_relative_position": 20},
    "TransformerBig": {"num_units": 1024, "num_heads": 16, "ffn_inner_dim": 4096},
    "TransformerBigSharedEmbeddings": {"num_units": 1024, "num_heads": 16,
                                       "ffn_inner_dim": 4096, "share_embeddings": "ALL"},
    "TransformerBigRelative": {"num_units": 1024, "num_heads": 16, "ffn_inner_dim": 4096,
                               "position_encoder_class": "None",
                               "maximum_relative_position": 20},
    "TransformerTiny": {"num_layers": 2, "num_units": 64, "num_heads": 2, "ffn_inner_dim": 64},
}
# Constructor arguments that change no variable.
NO_SHAPE = frozenset({"dropout", "attention_dropout", "ffn_dropout", "ffn_activation",
                      "attention_reduction"})
VOCAB_NOTE = "vocabulary sizes are taken from the stored embeddings (the vocabulary files are " \
             "not read)"

HPARAMS = (
    HParam("num_encoder_layers", 6, "encoder layers (num_layers, or its first)"),
    HParam("num_decoder_layers", 6, "decoder layers (num_layers, or its second)"),
    HParam("num_units", 512, "model width"),
    HParam("num_heads", 8, "heads (must divide num_units)"),
    HParam("ffn_inner_dim", 2048, "feed-forward width"),
    HParam("mha_bias", True, "biases of the attention projections", bool),
    HParam("position_encoder", "sinusoidal", "sinusoidal (no variable), embedder (learned), "
           "none", str, ("sinusoidal", "embedder", "none")),
    HParam("maximum_position", 128, "PositionEmbedder rows - 1"),
    HParam("maximum_relative_position", 0, "relative positions (0: none)"),
    HParam("share_embeddings", 0, "EmbeddingsSharingLevel: 0 NONE, 1 SOURCE_TARGET_INPUT, "
           "2 TARGET, 3 ALL"),
    HParam("pre_norm", True, "pre-norm (input_layer_norm, final layer_norm) or post-norm", bool),
    HParam("output_layer_bias", True, "bias of the output layer", bool),
    HParam("source_vocab_size", 32, "from the stored embedding"),
    HParam("target_vocab_size", 32, "from the stored embedding"),
)


def _kwargs(ckpt: Checkpoint) -> tuple[dict[str, Any] | None, str | None]:
    """(constructor arguments, why they are unknown)."""
    desc = ckpt.hyperparameters.get(KEY)
    if not isinstance(desc, Mapping):
        return None, "no model description"
    if "catalog" in desc:
        name = desc["catalog"]
        return (dict(CATALOG[name]), None) if name in CATALOG else \
            (None, f"catalog model {name!r} is not a Transformer modelled here")
    if desc.get("class") in ("Transformer",) + tuple(CATALOG) and not desc.get("args"):
        return {**CATALOG.get(desc["class"], {}), **desc.get("kwargs", {})}, None
    return None, desc.get("unparsed") or f"model class {desc.get('class')!r} is not modelled"


def _enum(value: Any, table: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return table.get(value.rsplit(".", 1)[-1], value)
    return value


def from_description(ckpt: Checkpoint) -> dict[str, Any]:
    kw, _why = _kwargs(ckpt)
    if kw is None:
        return {}
    out: dict[str, Any] = {}
    layers = kw.get("num_layers")
    if isinstance(layers, (list, tuple)) and len(layers) == 2:
        out["num_encoder_layers"], out["num_decoder_layers"] = layers
    elif isinstance(layers, int):
        out["num_encoder_layers"] = out["num_decoder_layers"] = layers
    for k in ("num_units", "num_heads", "ffn_inner_dim", "mha_bias", "pre_norm",
              "output_layer_bias"):
        if k in kw:
            out[k] = kw[k]
    if "position_encoder_class" in kw:
        out["position_encoder"] = _enum(str(kw["position_encoder_class"]), POSITION_ENCODERS)
    if kw.get("maximum_relative_position") is not None:
        out["maximum_relative_position"] = kw["maximum_relative_position"]
    share = _enum(kw.get("share_embeddings", 0), SHARING)
    if share == SHARING["AUTO"]:
        data = (ckpt.hyperparameters.get("onmt_tf_config") or {}).get("data") or {}
        src, tgt = data.get("source_vocabulary"), data.get("target_vocabulary")
        share = SHARING["ALL"] if src is not None and src == tgt else \
            SHARING["TARGET"] if src is not None else share
    out["share_embeddings"] = share
    return out


def unmodelled(ckpt: Checkpoint) -> list[Part]:
    kw, why = _kwargs(ckpt)
    if kw is None:
        return [Part("model description", f"{why}: not modelled", ".")]
    known = {h.name for h in HPARAMS} | NO_SHAPE | {"num_layers", "position_encoder_class",
                                                    "share_embeddings"}
    parts = [Part(f"{k}={v!r}", "a constructor argument not modelled", ".")
             for k, v in kw.items() if k not in known]
    share = from_description(ckpt).get("share_embeddings")
    if share == SHARING["AUTO"]:
        parts.append(Part("share_embeddings=AUTO", "no config.yml with the vocabularies to "
                          "decide it", r"embedding$|output_layer/kernel$"))
    elif isinstance(share, str):
        parts.append(Part(f"share_embeddings={share}", "unknown sharing level",
                          r"embedding$|output_layer/kernel$"))
    return parts


def _dense(prefix: str, n_in: int, n_out: int, bias: bool = True) -> list[TensorEntry]:
    out = [blocks.param(f"{prefix}/kernel", (n_in, n_out), "dense")]
    return out + ([blocks.param(f"{prefix}/bias", (n_out,), "dense")] if bias else [])


def _norm(prefix: str, d: int) -> list[TensorEntry]:
    return blocks.layer_norm(prefix, d, sep="/", names=("gamma", "beta"))


def _wrapped(prefix: str, d: int, pre_norm: bool, inner: list[TensorEntry]) -> list[TensorEntry]:
    norm = "input_layer_norm" if pre_norm else "output_layer_norm"
    return _norm(f"{prefix}/{norm}", d) + inner


def _mha(prefix: str, hp: Mapping[str, Any], relative: bool) -> list[TensorEntry]:
    d, heads = hp["num_units"], hp["num_heads"]
    if heads < 1 or d % heads:
        raise UsageError(f"num_units {d} is not divisible by num_heads {heads}")
    out: list[TensorEntry] = []
    for n in ("linear_queries", "linear_keys", "linear_values", "linear_output"):
        out += _dense(f"{prefix}/layer/{n}", d, d, hp["mha_bias"])
    if relative and hp["maximum_relative_position"]:
        width = 2 * hp["maximum_relative_position"] + 1
        out += [blocks.param(f"{prefix}/layer/relative_position_{k}", (width, d // heads),
                             "relative_positions") for k in ("keys", "values")]
    return _wrapped(prefix, d, hp["pre_norm"], out)


def _ffn(prefix: str, hp: Mapping[str, Any]) -> list[TensorEntry]:
    d, ff = hp["num_units"], hp["ffn_inner_dim"]
    inner = _dense(f"{prefix}/layer/inner", d, ff) + _dense(f"{prefix}/layer/outer", ff, d)
    return _wrapped(prefix, d, hp["pre_norm"], inner)


def predict(hp: Mapping[str, Any]) -> Prediction:
    d = hp["num_units"]
    share = hp["share_embeddings"]
    src_emb = "model/examples_inputter/features_inputter/embedding"
    tgt_emb = "model/examples_inputter/labels_inputter/embedding"
    out = [blocks.param(src_emb, (hp["source_vocab_size"], d), "embedding"),
           blocks.param(tgt_emb, (hp["target_vocab_size"], d), "embedding")]
    if share in (SHARING["SOURCE_TARGET_INPUT"], SHARING["ALL"]):
        out = [blocks.tie([t], src_emb)[0] if t.name == tgt_emb else t for t in out]
    for side, n in (("encoder", hp["num_encoder_layers"]), ("decoder", hp["num_decoder_layers"])):
        if hp["position_encoder"] == "embedder":
            out.append(blocks.param(f"model/{side}/position_encoder/position_embedding",
                                    (hp["maximum_position"] + 1, d), "positions"))
        for i in layer_count(n, f"num_{side}_layers"):
            p = f"model/{side}/layers/{i}"
            out += _mha(f"{p}/self_attention", hp, True)
            if side == "decoder":
                out += _mha(f"{p}/attention/0", hp, False)
            out += _ffn(f"{p}/ffn", hp)
        if hp["pre_norm"]:
            out += _norm(f"model/{side}/layer_norm", d)
    vocab = hp["target_vocab_size"]
    if share in (SHARING["TARGET"], SHARING["ALL"]):  # reuse_embeddings: no kernel variable
        if hp["output_layer_bias"]:
            out.append(blocks.param("model/decoder/output_layer/bias", (vocab,), "dense"))
    else:
        out += _dense("model/decoder/output_layer", d, vocab, hp["output_layer_bias"])
    return Prediction("onmt-tf-transformer", dict(hp), out, [VOCAB_NOTE])


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    s = parameters(ckpt)
    out: dict[str, Any] = {}
    for key, name in (("source_vocab_size", "model/examples_inputter/features_inputter/embedding"),
                      ("target_vocab_size", "model/examples_inputter/labels_inputter/embedding")):
        if name in s:
            out[key] = s[name][0]
    if "target_vocab_size" not in out and "model/decoder/output_layer/bias" in s:
        out["target_vocab_size"] = s["model/decoder/output_layer/bias"][0]
    if "source_vocab_size" not in out and "target_vocab_size" in out:
        out["source_vocab_size"] = out["target_vocab_size"]  # one table shared
    return out


ONMT_TF_TRANSFORMER = register(Arch(
    name="onmt-tf-transformer",
    description="OpenNMT-tf Transformer (catalog or model file) from the model directory's "
                "model_description.py (parsed, never run)",
    hparams=HPARAMS,
    predict=predict,
    from_checkpoint=from_description,
    infer=infer,
    applies=lambda ckpt: isinstance(ckpt.hyperparameters.get(KEY), Mapping)
    and bool(parameters(ckpt)),
    modelled=(r"^model/",),
    unmodelled=unmodelled,
))
