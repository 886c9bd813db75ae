"""JoeyNMT encoder-decoder models (``joeynmt``), predicted from the ``model`` section of the
``config.yaml`` beside the checkpoint, which the ``joeynmt`` adapter attaches as
``hyperparameters["joeynmt_config"]`` (a JoeyNMT checkpoint stores none).

One architecture covers JoeyNMT 2.x's ``build_model``: a ``transformer`` or ``recurrent``
encoder with a ``transformer`` or ``recurrent`` decoder (JoeyNMT's defaults: a recurrent
encoder, a Transformer decoder). Hyperparameters are the config's own paths
(``encoder.hidden_size``, ``decoder.embeddings.embedding_dim``, ``tied_softmax``); values the
config leaves out take JoeyNMT's constructor defaults. Vocabulary sizes come from the stored
embeddings (the vocabularies are separate files).

Tensors follow JoeyNMT 2.3's code (model.py, encoders.py, decoders.py, transformer_layers.py,
attention.py, embeddings.py):

- embeddings ``src_embed.lut`` / ``trg_embed.lut`` (``tied_embeddings``: one table);
- Transformer layers: ``layer_norm``, ``src_src_att`` / ``trg_trg_att`` / ``src_trg_att``
  (``k_layer``, ``v_layer``, ``q_layer``, ``output_layer``, biased), ``feed_forward``
  (``layer_norm``, ``pwff_layer.0`` and ``.3``), the decoder's ``x_layer_norm`` and
  ``dec_layer_norm``; the sinusoidal ``pe.pe`` buffer (1, 5000, d) of each stack; a final
  ``layer_norm`` when the stack's ``layer_norm`` is ``pre`` (as written in the config: the
  stacks test ``kwargs.get("layer_norm", "post")``);
- recurrent: ``encoder.rnn`` (``nn.GRU``/``nn.LSTM``, bidirectional by default); the decoder's
  ``rnn`` reads embedding + hidden with input feeding, ``att_vector_layer`` (hidden + encoder
  output -> hidden), ``attention`` (``bahdanau``: key/query/energy layers; ``luong``: key
  layer), ``bridge_layer`` with ``init_hidden: bridge``;
- ``decoder.output_layer`` (vocab, hidden) without bias, the target embedding with
  ``tied_softmax``.

An option of the model section that JoeyNMT 2.3 does not read is named and ``incomplete``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import blocks
from inspector.formulas import blocks_torch as bt
from inspector.formulas.blocks_nmt import layer_count
from inspector.formulas.core import Arch, HParam, Part, Prediction, expected, register
from inspector.formulas.torch_nn import parameters

KEY = "joeynmt_config"
PE_MAX_LEN = 5000
VOCAB_NOTE = "vocabulary sizes are taken from the stored embeddings (src_vocab.txt / " \
             "trg_vocab.txt are not read)"

# The keys JoeyNMT 2.3 reads in each part of the model section (build_model, the encoders',
# decoders' and Embeddings' constructors and their kwargs.get, initialize_model).
MODEL_KEYS = frozenset({"initializer", "init_gain", "bias_initializer", "bias_init_gain",
                        "embed_initializer", "embed_init_gain", "init_rnn_orthogonal",
                        "lstm_forget_gate", "tied_embeddings", "tied_softmax", "encoder",
                        "decoder"})
STACK_KEYS = frozenset({"type", "num_layers", "num_heads", "hidden_size", "ff_size", "dropout",
                        "emb_dropout", "hidden_dropout", "freeze", "embeddings", "layer_norm",
                        "alpha", "activation", "rnn_type", "bidirectional", "attention",
                        "init_hidden", "input_feeding"})
EMBEDDING_KEYS = frozenset({"embedding_dim", "scale", "freeze", "dropout", "load_pretrained"})


def model_config(ckpt: Checkpoint) -> dict[str, Any]:
    cfg = ckpt.hyperparameters.get(KEY)
    model = cfg.get("model") if isinstance(cfg, Mapping) else None
    return dict(model) if isinstance(model, Mapping) else {}


def _section(model: Mapping[str, Any], name: str) -> dict[str, Any]:
    v = model.get(name)
    return dict(v) if isinstance(v, Mapping) else {}


HPARAMS = (
    HParam("encoder.type", "recurrent", "transformer or recurrent", str,
           ("transformer", "recurrent")),
    HParam("decoder.type", "transformer", "transformer or recurrent", str,
           ("transformer", "recurrent")),
    HParam("encoder.embeddings.embedding_dim", 64, "source embedding width"),
    HParam("decoder.embeddings.embedding_dim", 64, "target embedding width"),
    HParam("encoder.hidden_size", None, "encoder width (null: JoeyNMT's default for the type: "
           "512 Transformer, 1 recurrent)"),
    HParam("decoder.hidden_size", None, "decoder width (null: 512 Transformer, 0 recurrent)"),
    HParam("encoder.num_layers", None, "encoder layers (null: 8 Transformer, 1 recurrent)"),
    HParam("decoder.num_layers", None, "decoder layers (null: 4 Transformer, 1 recurrent)"),
    HParam("encoder.num_heads", 4, "encoder heads (must divide the width)"),
    HParam("decoder.num_heads", 8, "decoder heads (must divide the width)"),
    HParam("encoder.ff_size", 2048, "encoder feed-forward width"),
    HParam("decoder.ff_size", 2048, "decoder feed-forward width"),
    HParam("encoder.layer_norm", "post", "pre: a final encoder.layer_norm", str),
    HParam("decoder.layer_norm", "post", "pre: a final decoder.layer_norm", str),
    HParam("encoder.rnn_type", "gru", "gru or lstm", str, ("gru", "lstm")),
    HParam("decoder.rnn_type", "gru", "gru or lstm", str, ("gru", "lstm")),
    HParam("encoder.bidirectional", True, "bidirectional recurrent encoder", bool),
    HParam("decoder.attention", "bahdanau", "bahdanau or luong", str, ("bahdanau", "luong")),
    HParam("decoder.init_hidden", "bridge", "bridge (a bridge_layer), last or zero", str,
           ("bridge", "last", "zero")),
    HParam("decoder.input_feeding", True, "the decoder RNN reads embedding + attention vector",
           bool),
    HParam("tied_embeddings", False, "one embedding for source and target", bool),
    HParam("tied_softmax", False, "output layer = target embedding", bool),
    HParam("frozen", "", "the parts with freeze: true (stored, but left out of JoeyNMT's "
           "logged Total params)", str),
    HParam("src_vocab_size", 32, "source vocabulary (from the stored embedding)"),
    HParam("trg_vocab_size", 32, "target vocabulary (from the stored embedding)"),
)
NAMES = tuple(h.name for h in HPARAMS)
# JoeyNMT's constructor defaults that differ between stack types.
TYPE_DEFAULTS = {
    ("encoder", "transformer"): {"hidden_size": 512, "num_layers": 8},
    ("encoder", "recurrent"): {"hidden_size": 1, "num_layers": 1},
    ("decoder", "transformer"): {"hidden_size": 512, "num_layers": 4},
    ("decoder", "recurrent"): {"hidden_size": 0, "num_layers": 1},
}


def from_config(ckpt: Checkpoint) -> dict[str, Any]:
    model = model_config(ckpt)
    out: dict[str, Any] = {}
    for k in ("tied_embeddings", "tied_softmax"):
        if model.get(k) is not None:
            out[k] = model[k]
    frozen = []
    for side in ("encoder", "decoder"):
        sec = _section(model, side)
        frozen += [side] if sec.get("freeze") else []
        frozen += [f"{side}.embeddings"] if _section(sec, "embeddings").get("freeze") else []
        for k, v in sec.items():
            if f"{side}.{k}" in NAMES and v is not None:
                out[f"{side}.{k}"] = v
        emb = _section(sec, "embeddings")
        if emb.get("embedding_dim") is not None:
            out[f"{side}.embeddings.embedding_dim"] = emb["embedding_dim"]
    if frozen:
        out["frozen"] = ",".join(frozen)
    return out


def _stack(hp: Mapping[str, Any], side: str) -> tuple[str, int, int]:
    kind = hp[f"{side}.type"]
    d = TYPE_DEFAULTS[(side, kind)]
    hidden = hp[f"{side}.hidden_size"]
    layers = hp[f"{side}.num_layers"]
    return (kind, d["hidden_size"] if hidden is None else hidden,
            d["num_layers"] if layers is None else layers)


def mha(prefix: str, d: int, heads: int) -> list[TensorEntry]:
    """JoeyNMT's ``MultiHeadedAttention``: k/v/q layers and output_layer, biased."""
    if heads < 1 or d % heads:
        raise UsageError(f"width {d} is not divisible by {heads} heads")
    return [t for n in ("k_layer", "v_layer", "q_layer", "output_layer")
            for t in bt.linear(f"{prefix}.{n}", d, d)]


def ffn(prefix: str, d: int, ff: int) -> list[TensorEntry]:
    return (bt.layer_norm(f"{prefix}.layer_norm", d) + bt.linear(f"{prefix}.pwff_layer.0", d, ff)
            + bt.linear(f"{prefix}.pwff_layer.3", ff, d))


def pe(prefix: str, d: int) -> TensorEntry:
    if d % 2:
        raise UsageError(f"sinusoidal positions need an even width, not {d}")
    return expected(f"{prefix}.pe.pe", (1, PE_MAX_LEN, d), "buffer", "positions")


def predict(hp: Mapping[str, Any]) -> Prediction:
    ekind, eh, el = _stack(hp, "encoder")
    dkind, dh, dl = _stack(hp, "decoder")
    layer_count(el, "encoder.num_layers")
    layer_count(dl, "decoder.num_layers")
    src_e = hp["encoder.embeddings.embedding_dim"]
    trg_e = hp["decoder.embeddings.embedding_dim"]
    out = bt.embedding("src_embed.lut", hp["src_vocab_size"], src_e)
    vocab = hp["src_vocab_size"] if hp["tied_embeddings"] else hp["trg_vocab_size"]
    out += bt.embedding("trg_embed.lut", vocab, trg_e)
    if hp["tied_embeddings"]:
        out = bt.tie(out, "trg_embed.lut.weight", "src_embed.lut.weight")
    if ekind == "transformer":
        for i in layer_count(el, "encoder.num_layers"):
            p = f"encoder.layers.{i}"
            out += bt.layer_norm(f"{p}.layer_norm", eh)
            out += mha(f"{p}.src_src_att", eh, hp["encoder.num_heads"])
            out += ffn(f"{p}.feed_forward", eh, hp["encoder.ff_size"])
        out.append(pe("encoder", eh))
        if hp["encoder.layer_norm"] == "pre":
            out += bt.layer_norm("encoder.layer_norm", eh)
        enc_out = eh
    else:
        bidir = hp["encoder.bidirectional"]
        out += bt.rnn("encoder.rnn", hp["encoder.rnn_type"].upper(), src_e, eh, el,
                      bidirectional=bidir)
        enc_out = 2 * eh if bidir else eh
    if dkind == "transformer":
        for i in layer_count(dl, "decoder.num_layers"):
            p = f"decoder.layers.{i}"
            out += mha(f"{p}.trg_trg_att", dh, hp["decoder.num_heads"])
            out += mha(f"{p}.src_trg_att", dh, hp["decoder.num_heads"])
            out += ffn(f"{p}.feed_forward", dh, hp["decoder.ff_size"])
            out += bt.layer_norm(f"{p}.x_layer_norm", dh)
            out += bt.layer_norm(f"{p}.dec_layer_norm", dh)
        out.append(pe("decoder", dh))
        if hp["decoder.layer_norm"] == "pre":
            out += bt.layer_norm("decoder.layer_norm", dh)
    else:
        feed = hp["decoder.input_feeding"]
        out += bt.rnn("decoder.rnn", hp["decoder.rnn_type"].upper(), trg_e + dh if feed else trg_e,
                      dh, dl)
        out += bt.linear("decoder.att_vector_layer", dh + enc_out, dh)
        out += bt.linear("decoder.attention.key_layer", enc_out, dh, bias=False)
        if hp["decoder.attention"] == "bahdanau":
            out += bt.linear("decoder.attention.query_layer", dh, dh, bias=False)
            out += bt.linear("decoder.attention.energy_layer", dh, 1, bias=False)
        if hp["decoder.init_hidden"] == "bridge":
            out += bt.linear("decoder.bridge_layer", enc_out, dh)
    out += bt.linear("decoder.output_layer", dh, hp["trg_vocab_size"], bias=False)
    if hp["tied_softmax"]:
        if trg_e != dh:
            raise UsageError(f"tied_softmax needs decoder.embeddings.embedding_dim {trg_e} == "
                             f"decoder.hidden_size {dh}")
        owner = "src_embed.lut.weight" if hp["tied_embeddings"] else "trg_embed.lut.weight"
        out = [blocks.tie([t], owner)[0] if t.name == "decoder.output_layer.weight" else t
               for t in out]
    notes = [VOCAB_NOTE]
    if hp["frozen"]:
        notes.append(f"frozen ({hp['frozen']}): their parameters are stored and counted here, "
                     "JoeyNMT's logged Total params counts trainable ones only")
    return Prediction("joeynmt", dict(hp), out, notes)


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    s = parameters(ckpt)
    out: dict[str, Any] = {}
    if "src_embed.lut.weight" in s:
        out["src_vocab_size"], out["encoder.embeddings.embedding_dim"] = s["src_embed.lut.weight"]
    if "trg_embed.lut.weight" in s:
        out["trg_vocab_size"], out["decoder.embeddings.embedding_dim"] = s["trg_embed.lut.weight"]
    return out


def unmodelled(ckpt: Checkpoint) -> list[Part]:
    """Keys of the model section JoeyNMT 2.3 does not read: named, the check incomplete; and
    frozen parts (their parameters are stored, but JoeyNMT's logged count leaves them out)."""
    model = model_config(ckpt)
    unknown = [k for k in model if k not in MODEL_KEYS]
    for side in ("encoder", "decoder"):
        sec = _section(model, side)
        unknown += [f"{side}.{k}" for k in sec if k not in STACK_KEYS]
        unknown += [f"{side}.embeddings.{k}" for k in _section(sec, "embeddings")
                    if k not in EMBEDDING_KEYS]
    return [Part(f"model.{k}", "an option JoeyNMT 2.3 does not read: not modelled", ".")
            for k in unknown]


def _applies(ckpt: Checkpoint) -> bool:
    return bool(model_config(ckpt)) and bool(parameters(ckpt))


JOEYNMT = register(Arch(
    name="joeynmt",
    description="JoeyNMT Transformer / recurrent encoder-decoder from the config.yaml beside "
                "the checkpoint (attached by the joeynmt adapter)",
    hparams=HPARAMS,
    predict=predict,
    from_checkpoint=from_config,
    infer=infer,
    applies=_applies,
    modelled=(r"^(src|trg)_embed\.", r"^(encoder|decoder)\."),
    unmodelled=unmodelled,
))
