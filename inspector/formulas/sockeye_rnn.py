"""``sockeye-rnn``: Sockeye 1 (MXNet) RNN encoder-decoder with attention (seed 000, finished).

Shapes follow Sockeye 1.18's own code (encoder.py ``get_recurrent_encoder``, decoder.py
``RecurrentDecoder``, rnn_attention.py, coverage.py, model.py weight tying), checked against the
real models in ``fixtures/sockeye``. Hyperparameters carry Sockeye's argument names; ``a:b`` pairs
are encoder:decoder. With ``h = rnn_num_hidden``, the encoder is one bi-directional layer of two
``h/2`` cells on the source embedding plus ``sn - 1`` uni-directional layers of width ``h``; the
decoder's first layer reads the previous word's embedding concatenated with the previous
attentional hidden state (``te + h``), the others read ``h`` (``+ h`` context with
``rnn_attention_in_upper_layers``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import sockeye_options as options
from inspector.formulas.blocks import (
    MX_GATES,
    MX_LN_CELLS,
    embedding,
    layer_norm,
    linear,
    mx_rnn_cell,
    param,
)
from inspector.formulas.core import Arch, HParam, Prediction, Symbol, register
from inspector.formulas.sockeye_common import (
    CONV_HPARAMS,
    TYING_TYPES,
    conv_embed,
    hparams_from_args,
    infer_conv_embed,
    ints,
    length_ratio,
    pair,
    require,
    sockeye_args,
    sockeye_major,
)

CELL_TYPES = ("lstm", "lnlstm", "lnglstm", "gru", "lngru", "lnggru")
ATTENTION_TYPES = ("bilinear", "dot", "mhdot", "fixed", "location", "mlp", "coverage")
COVERAGE_TYPES = ("tanh", "sigmoid", "relu", "softrelu", "gru", "count", "fertility")
STATE_INIT = ("zero", "last", "avg")
LHUC = ("encoder", "decoder", "state_init", "all")
DEC = "decoder_rnn_"
ATT = DEC + "att_"


def tying(hp: Mapping[str, Any]) -> str:
    """The effective tying type (``none`` when ``weight_tying`` is off)."""
    return str(hp["weight_tying_type"]) if hp["weight_tying"] else "none"


def _lhuc(hp: Mapping[str, Any], part: str) -> bool:
    chosen = {p.strip() for p in str(hp.get("lhuc") or "").split(",") if p.strip()}
    unknown = chosen - set(LHUC)
    if unknown:
        from inspector.adapters.errors import UsageError

        raise UsageError(f"lhuc: unknown part(s) {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(LHUC)}")
    return part in chosen or "all" in chosen


def _cell(prefix: str, hp: Mapping[str, Any], h: int, inp: int, lhuc: bool) -> list[TensorEntry]:
    out = mx_rnn_cell(prefix, hp["rnn_cell_type"], h, inp)
    if lhuc:  # LHUCCell shares its base cell's parameter prefix
        out.append(param(prefix + "lhuc", (h,), "lhuc"))
    return out


def factor_dims(hp: Mapping[str, Any], se: int) -> tuple[list[int], list[int], int]:
    """Sockeye 1 source factors (train.py ``create_model_config``): (vocabularies, embedding
    sizes, embedding width the encoder reads). ``sum`` gives every factor the source embedding
    size; ``concat`` takes ``source_factors_num_embed`` and widens the encoder input."""
    vocabs = ints(hp.get("source_factor_vocab_sizes"))
    if not vocabs:
        return [], [], se
    if hp["source_factors_combine"] == "sum":
        return vocabs, [se] * len(vocabs), se
    dims = ints(hp["source_factors_num_embed"])
    require(len(dims) == len(vocabs), f"{len(vocabs)} source factor vocabularies but "
             f"source_factors_num_embed gives {len(dims)} sizes")
    return vocabs, dims, se + sum(dims)


def embeddings(hp: Mapping[str, Any], se: int, te: int, out_dim: int,
               wn: bool = False) -> list[TensorEntry]:
    """Source/target embeddings (and source factor embeddings) and the output layer under
    Sockeye 1's tying rules (model.py); with ``attention_based_copying`` the target vocabulary
    holds one ``<ptrN>`` per source position that the output layer leaves out; weight
    normalisation adds a (vocabulary, 1) scale to the output layer (layers.py)."""
    vs, vt, t = hp["source_vocab_size"], hp["target_vocab_size"], tying(hp)
    out: list[TensorEntry] = []
    if "src" in t and "trg" in t:
        require(vs == vt and se == te, "src_trg tying needs equal vocabularies and embeddings")
        out += embedding("source_target_embed", vs, se)
    else:
        out += embedding("source_embed", vs, se)
        out += embedding("target_embed", vt, te)
    vocabs, dims, _ = factor_dims(hp, se)
    for i, (v, d) in enumerate(zip(vocabs, dims, strict=True)):
        out += embedding(f"source_embed_factor{i}", v, d, block="source_factors")
    if hp.get("attention_based_copying"):  # num_pointers = max_seq_len_source (+1 for EOS)
        vt -= pair(hp["max_seq_len"], "max_seq_len")[0] + 1
        require(vt > 0, "attention_based_copying: the target vocabulary must hold the pointers")
    if "softmax" in t:
        require(te == out_dim, "softmax tying needs the target embedding size = output input size")
    else:
        out += linear("target_output", vt, out_dim, bias=False, block="output")
    if wn:
        out.append(param("target_output_wn_scale", (vt, 1), "output"))
    out.append(param("target_output_bias", (vt,), "output"))
    return out


def attention(hp: Mapping[str, Any], h: int, ctx: int, query: int) -> list[TensorEntry]:
    """Attention parameters (rnn_attention.py) and coverage (coverage.py); ``query`` is the
    attention query's width, ``ctx`` the encoder's output width."""
    kind = hp["rnn_attention_type"]
    a = hp["rnn_attention_num_hidden"] or h
    ln = hp["layer_normalization"]
    out: list[TensorEntry] = []
    if kind == "bilinear":  # projects the source to the query width; ignores the previous word
        out += linear(ATT + "s2t", h, ctx, bias=False, block="attention")
    elif kind == "dot":  # projections only where sizes differ (query_num_hidden is h)
        if ctx != a:
            out += linear(ATT + "s2h", a, ctx, bias=False, block="attention")
        if h != a:
            out += linear(ATT + "t2h", a, query, bias=False, block="attention")
    elif kind == "mhdot":  # keys+values from the source, width = encoder width
        heads = hp["rnn_attention_mhdot_heads"]
        require(heads is None or ctx % heads == 0, "mhdot heads must divide the encoder width")
        out += linear(ATT + "s2h", 2 * ctx, ctx, block="attention")
        out += linear(ATT + "t2h", ctx, query, block="attention")
    elif kind == "location":
        length = pair(hp["max_seq_len"], "max_seq_len")[0] + 1  # + C.SPACE_FOR_XOS
        out += linear(ATT + "loc", length, query, block="attention")
    elif kind in ("mlp", "coverage"):
        cov = _coverage_hidden(hp)
        if kind == "coverage":
            out += linear(ATT + "c2h", a, cov, bias=False, block="attention")
        out += linear(ATT + "e2h", a, ctx, bias=False, block="attention")
        out += linear(ATT + "q2h", a, query, bias=False, block="attention")
        out += linear(ATT + "h2s", 1, a, bias=False, block="attention")
        if ln:
            out += layer_norm(ATT + "norm", a)
        if kind == "coverage":
            out += coverage(hp, ctx, query, cov)
    return out


def _coverage_hidden(hp: Mapping[str, Any]) -> int:
    if hp["rnn_attention_coverage_type"] in ("count", "fertility"):
        return 1  # Sockeye requires coverage_num_hidden == 1 for these
    return int(hp["rnn_attention_coverage_num_hidden"])


def coverage(hp: Mapping[str, Any], ctx: int, query: int, c: int) -> list[TensorEntry]:
    kind, ln = hp["rnn_attention_coverage_type"], hp["layer_normalization"]
    if kind == "count":
        return []
    if kind == "fertility":
        return linear("cov_e2f", 1, ctx, bias=False, block="coverage")
    if kind == "gru":  # input: source states, attention query, attention probability
        return mx_rnn_cell("cov_gru", "lnggru" if ln else "gru", c, ctx + query + 1, sep="")
    out = linear("cov_e2h", c, ctx, bias=False, block="coverage")
    out += linear("cov_i2h", c, query, bias=False, block="coverage")
    out += linear("cov_prev2h", c, c, bias=False, block="coverage")
    out += linear("cov_a2h", c, 1, bias=False, block="coverage")
    if ln and c == 1:  # coverage.py: `layer_normalization and not self.num_hidden != 1`
        out += layer_norm("cov_norm", c)
    return out


def predict(values: Mapping[str, Any]) -> Prediction:
    hp = ARCH.resolve(values)
    sn, tn = pair(hp["num_layers"], "num_layers")
    se, te = pair(hp["num_embed"], "num_embed")
    h = hp["rnn_num_hidden"]
    require(h % 2 == 0, "rnn_num_hidden must be even (the bi-RNN halves it)")
    require(sn >= 1 and tn >= 1, "num_layers must be at least 1:1")
    ctx = h  # encoder output width: bi-RNN 2 * h/2, then h
    transformer_encoder = hp["encoder"] == "transformer"
    if transformer_encoder:  # train.py: encoder_num_hidden = transformer_model_size[0]
        ctx = pair(hp["transformer_model_size"], "transformer_model_size")[0]
        require(se == ctx, "the transformer encoder's num_embed must equal its model size")
    upper = hp["rnn_attention_in_upper_layers"] and tn > 1
    require(not (upper and hp["rnn_context_gating"]),
             "context gating is not supported with attention in upper layers")

    if hp["decoder_only"]:  # train.py: an empty encoder; Sockeye forces these two
        hp = {**hp, "rnn_attention_type": "fixed", "rnn_decoder_state_init": "zero"}
    t: list[TensorEntry] = embeddings(hp, se, te, h, hp["weight_normalization"])
    lhuc_enc = _lhuc(hp, "encoder")
    inp = factor_dims(hp, se)[2]
    if transformer_encoder and not hp["decoder_only"]:
        from inspector.formulas.sockeye_transformer import sockeye1_encoder

        t += sockeye1_encoder(hp, ctx, lhuc_enc)
        t += length_ratio(hp, ctx, "length_ratio_layer_dense{i}_")
    elif not hp["decoder_only"]:
        if hp["encoder"] == "rnn-with-conv-embed":
            conv, inp = conv_embed(hp, se, None)
            t += conv
        for direction in ("forward", "reverse"):
            t += _cell(f"encoder_birnn_{direction}_l0_", hp, h // 2, inp, lhuc_enc)
        for i in range(sn - 1):
            t += _cell(f"encoder_rnn_l{i}_", hp, h, h, lhuc_enc)
        t += length_ratio(hp, ctx, "length_ratio_layer_dense{i}_")

    word = te + (ctx if hp["rnn_enc_last_hidden_concat_to_embedding"] else 0)
    lhuc_dec = _lhuc(hp, "decoder")
    for i in range(tn):
        inp = word + h if i == 0 else h + (ctx if upper else 0)
        t += _cell(f"{DEC}l{i}_", hp, h, inp, lhuc_dec)

    if hp["rnn_decoder_state_init"] != "zero":
        base = MX_LN_CELLS.get(hp["rnn_cell_type"], (hp["rnn_cell_type"], ()))[0]
        states = tn * (2 if base == "lstm" else 1)  # LSTM: hidden and memory cell per layer
        for k in range(states):
            t += linear(f"{DEC}enc2decinit_{k}", h, ctx, block="state_init")
            if hp["layer_normalization"]:
                t += layer_norm(f"{DEC}enc2decinit_{k}_norm", h)
            if _lhuc(hp, "state_init"):
                t.append(param(f"{DEC}enc2decinit_{k}_lhuc", (h,), "lhuc"))

    query = h + (word if hp["rnn_attention_use_prev_word"] else 0)
    t += attention(hp, h, ctx, query)

    if hp["rnn_context_gating"]:
        t += linear(DEC + "gate", h, h + ctx, block="context_gate")
        t += linear(DEC + "mapped_rnn_output", h, h, block="context_gate")
        t += linear(DEC + "mapped_context", h, ctx, block="context_gate")
    else:
        t += linear(DEC + "hidden", h, h + ctx, block="hidden")
    if hp["layer_normalization"]:
        t += layer_norm(DEC + "hidden_norm", h)
    notes = []
    if hp["rnn_cell_type"] not in MX_GATES:
        notes.append(f"{hp['rnn_cell_type']} shapes are from Sockeye's source, not a fixture")
    return Prediction("sockeye-rnn", hp, t, notes)


def applies(ckpt: Checkpoint) -> bool:
    args = sockeye_args(ckpt)
    if args:
        return sockeye_major(ckpt) == "1" and args.get("decoder", "rnn") == "rnn" \
            and args.get("encoder") in ("rnn", "rnn-with-conv-embed", "transformer")
    # No args.yaml (a bare params file): the sockeye-rnn scheme's detector decides.
    from inspector.grouping import detects

    return detects("sockeye-rnn", [t.name for t in ckpt.tensors], ckpt.format)


# The tensor that gives each attention / coverage type away (first match wins); activation
# coverages (tanh, sigmoid, relu, softrelu) share their shapes, so they read as tanh.
ATTENTION_SIGNATURES = (("c2h_weight", "coverage"), ("h2s_weight", "mlp"),
                        ("s2t_weight", "bilinear"), ("loc_weight", "location"),
                        ("s2h_bias", "mhdot"))
COVERAGE_SIGNATURES = (("cov_grui2h_weight", "gru"), ("cov_e2f_weight", "fertility"),
                       ("cov_e2h_weight", "tanh"))


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    """What the stored shapes determine: vocabularies, embeddings, hidden size, cell type,
    layer counts, attention type, state init, context gating, tying."""
    shapes = {t.name: t.shape for t in ckpt.tensors}
    out: dict[str, Any] = {}
    emb = shapes.get("source_target_embed_weight")
    src, trg = shapes.get("source_embed_weight", emb), shapes.get("target_embed_weight", emb)
    if src and trg:
        out["source_vocab_size"], out["target_vocab_size"] = src[0], trg[0]
        out["num_embed"] = f"{src[1]}:{trg[1]}"
    h2h = shapes.get(DEC + "l0_h2h_weight")
    if h2h and len(h2h) == 2 and h2h[1]:
        out["rnn_num_hidden"] = h2h[1]
        gates = h2h[0] // h2h[1]
        out["rnn_cell_type"] = {4: "lstm", 3: "gru"}.get(gates, "lstm")
    sn = 1 + sum(1 for n in shapes if n.startswith("encoder_rnn_l") and n.endswith("_h2h_weight"))
    tn = sum(1 for n in shapes if n.startswith(DEC + "l") and n.endswith("_h2h_weight"))
    if tn:
        out["num_layers"] = f"{sn}:{tn}"
    att = {n[len(ATT):]: shape for n, shape in shapes.items() if n.startswith(ATT)}
    kind = next((k for leaf, k in ATTENTION_SIGNATURES if leaf in att), "dot")
    out["rnn_attention_type"] = kind  # no attention tensors: dot (or fixed: the same shapes)
    if kind in ("mlp", "coverage"):
        out["rnn_attention_num_hidden"] = att["e2h_weight"][0]
    if kind == "coverage":
        out["rnn_attention_coverage_num_hidden"] = att["c2h_weight"][1]
        cov = next((k for leaf, k in COVERAGE_SIGNATURES if leaf in shapes), "count")
        out["rnn_attention_coverage_type"] = cov
    if kind == "location":
        n = att["loc_weight"][0] - 1
        out["max_seq_len"] = f"{n}:{n}"
    if not any("enc2decinit" in n for n in shapes):
        out["rnn_decoder_state_init"] = "zero"
    out["rnn_context_gating"] = DEC + "gate_weight" in shapes
    out.update(_infer_options(shapes, out))
    if "target_output_weight" not in shapes:
        out["weight_tying"] = True
        out["weight_tying_type"] = "src_trg_softmax" if emb else "trg_softmax"
    elif emb:
        out["weight_tying"], out["weight_tying_type"] = True, "src_trg"
    return out


# --encoder transformer --decoder rnn: the transformer encoder's settings (Sockeye 1 names)
TRANSFORMER_ENCODER_HPARAMS = (
    HParam("transformer_model_size", "512:512", "transformer encoder model size", str),
    HParam("transformer_attention_heads", "8:8", "transformer encoder heads (no shape change)",
           str),
    HParam("transformer_feed_forward_num_hidden", "2048:2048", "transformer encoder "
           "feed-forward size", str),
    HParam("transformer_positional_embedding_type", "fixed", "transformer encoder positions",
           str, ("fixed", "learned", "none")),
    HParam("transformer_preprocess", "n:n", "pre-process steps (n = layer norm)", str),
    HParam("transformer_postprocess", "dr:dr", "post-process steps (n = layer norm)", str),
)

def _infer_options(shapes: Mapping[str, Any], found: Mapping[str, Any]) -> dict[str, Any]:
    """The shape-changing options the stored names and widths state: cell variants, layer
    norm, LHUC, factors, length task, weight norm, copying, decoder-only, conv-embed or
    transformer encoder, and the decoder's extra inputs. Shapes cannot tell the length task's
    ratio from length; they read as ratio."""
    names = list(shapes)
    out: dict[str, Any] = {**_infer_cells(shapes, found), **_infer_factors(shapes, found)}
    layers = sum(1 for x in names if x.startswith("length_ratio_layer_") and x.endswith("weight"))
    if layers:
        out["length_task"], out["length_task_layers"] = "ratio", layers
    out["weight_normalization"] = "target_output_wn_scale" in shapes
    out.update(_infer_copying(shapes))
    if any(x.startswith("encoder_transformer_") for x in names):
        out.update(_infer_transformer_encoder(shapes, found))
    elif not any(x.startswith(("encoder_birnn_", "encoder_char_")) for x in names):
        out["decoder_only"] = True
    out.update(infer_conv_embed(shapes, "rnn-with-conv-embed"))
    out.update(_infer_decoder_inputs(shapes, found, out))
    return out


def _infer_cells(shapes: Mapping[str, Any], found: Mapping[str, Any]) -> dict[str, Any]:
    """Cell variant (layer-normalised, gated), hidden-state norm and LHUC parts."""
    names = list(shapes)
    out: dict[str, Any] = {}
    base = found.get("rnn_cell_type", "lstm")
    if any(x.endswith(("_z_scale", "_o_scale")) for x in names):
        out["rnn_cell_type"] = "lng" + base
    elif any(x.endswith("_i2h_scale") for x in names):
        out["rnn_cell_type"] = "ln" + base
    out["layer_normalization"] = DEC + "hidden_norm_gamma" in shapes
    parts = [part for part, pat in (("encoder", "encoder_"), ("decoder", DEC + "l"),
                                    ("state_init", DEC + "enc2decinit_"))
             if any(x.startswith(pat) and x.endswith("_lhuc") for x in names)]
    out["lhuc"] = ",".join(parts) or None
    return out


def _infer_factors(shapes: Mapping[str, Any], found: Mapping[str, Any]) -> dict[str, Any]:
    """Source factors: their vocabularies, and summed or concatenated (with their widths)."""
    se = pair(found.get("num_embed", "0:0"))[0]
    factors = []
    while (f := shapes.get(f"source_embed_factor{len(factors)}_weight")):
        factors.append(f)
    if not factors:
        return {}
    summed = all(f[1] == se for f in factors)
    return {"source_factor_vocab_sizes": ",".join(str(f[0]) for f in factors),
            "source_factors_combine": "sum" if summed else "concat",
            "source_factors_num_embed": "" if summed else ",".join(str(f[1]) for f in factors)}


def _infer_copying(shapes: Mapping[str, Any]) -> dict[str, Any]:
    """Attention-based copying: the target embedding holds the pointers too
    (max_seq_len_source = max_seq_len + 1 rows more than the output layer)."""
    trg, outw = shapes.get("target_embed_weight"), shapes.get("target_output_weight")
    if not (trg and outw and trg[0] > outw[0]):
        return {}
    n = trg[0] - outw[0] - 1
    return {"attention_based_copying": True, "target_vocab_size": trg[0],
            "max_seq_len": f"{n}:{n}"}


def _infer_transformer_encoder(shapes: Mapping[str, Any],
                               found: Mapping[str, Any]) -> dict[str, Any]:
    """``--encoder transformer``: its width, feed-forward size, layers, pre/post-processing and
    positions (heads change no shape)."""
    ff = shapes.get("encoder_transformer_0_ff_i2h_weight")
    if not ff:
        return {}
    names = list(shapes)
    sn = len({x.split("_")[2] for x in names
              if x.startswith("encoder_transformer_") and x.split("_")[2].isdigit()})
    tn = pair(found.get("num_layers", "1:1"))[1]
    pre = any("_pre_norm_" in x for x in names)
    post = any("_post_norm_" in x for x in names)
    return {
        "encoder": "transformer",
        "transformer_model_size": f"{ff[1]}:{ff[1]}",
        "transformer_feed_forward_num_hidden": f"{ff[0]}:{ff[0]}",
        "transformer_attention_heads": "1:1",  # no shape change
        "num_layers": f"{sn}:{tn}",
        "transformer_preprocess": "n:n" if pre else ":",
        "transformer_postprocess": "drn:drn" if post else "dr:dr",
        "transformer_positional_embedding_type":
            "learned" if "source_pos_embed_weight" in shapes else "fixed",
    }


def _infer_decoder_inputs(shapes: Mapping[str, Any], found: Mapping[str, Any],
                          options: Mapping[str, Any]) -> dict[str, Any]:
    """What the decoder's layers read besides the embedding and hidden state, from their
    input widths: the encoder's last hidden state, attention in upper layers, the previous
    word in the attention query."""
    out: dict[str, Any] = {}
    h = found.get("rnn_num_hidden")
    te = pair(found.get("num_embed", "0:0"))[1]
    ctx = pair(options["transformer_model_size"])[0] if "transformer_model_size" in options else h
    l0 = shapes.get(DEC + "l0_i2h_weight")
    if h and ctx and l0 and l0[1] == te + ctx + h:
        out["rnn_enc_last_hidden_concat_to_embedding"] = True
    l1 = shapes.get(DEC + "l1_i2h_weight")
    if h and ctx and l1 and l1[1] == h + ctx:
        out["rnn_attention_in_upper_layers"] = True
    q2h = shapes.get(ATT + "q2h_weight")
    if h and q2h and q2h[1] > h:
        out["rnn_attention_use_prev_word"] = True
    return out


HPARAMS = (
    HParam("source_vocab_size", 49410, "source vocabulary size (vocab.src.0.json; seed 000)"),
    HParam("target_vocab_size", 42767, "target vocabulary size (vocab.trg.0.json; seed 000)"),
    HParam("rnn_cell_type", "lstm", "RNN cell type", str, CELL_TYPES),
    HParam("num_layers", "6:6", "layers encoder:decoder (the first encoder layer is the bi-RNN)",
           str),
    HParam("num_embed", "512:512", "embedding sizes source:target", str),
    HParam("rnn_num_hidden", 1024, "RNN hidden units h (each bi-RNN direction has h/2)"),
    HParam("rnn_attention_type", "mlp", "attention type", str, ATTENTION_TYPES),
    HParam("rnn_attention_num_hidden", None, "attention hidden size (default h)"),
    HParam("rnn_attention_mhdot_heads", None, "mhdot heads (must divide h; no shape change)"),
    HParam("rnn_attention_coverage_type", "count", "coverage type", str, COVERAGE_TYPES),
    HParam("rnn_attention_coverage_num_hidden", 1, "coverage hidden size"),
    HParam("rnn_attention_use_prev_word", False, "previous word feeds the attention query", bool),
    HParam("rnn_attention_in_upper_layers", False, "context feeds decoder layers 2..n", bool),
    HParam("rnn_decoder_state_init", "last", "decoder state init", str, STATE_INIT),
    HParam("rnn_context_gating", False, "context gate instead of the hidden layer", bool),
    HParam("rnn_residual_connections", False, "residual connections (no shape change)", bool),
    HParam("rnn_enc_last_hidden_concat_to_embedding", False,
           "last encoder state concatenated to the target embedding", bool),
    HParam("layer_normalization", False, "layer norm on hidden, state init, attention", bool),
    HParam("lhuc", None, "LHUC parts, comma-separated: encoder,decoder,state_init,all", str),
    HParam("weight_tying", False, "tie weights (--weight-tying)", bool),
    HParam("weight_tying_type", "trg_softmax", "what is tied", str, TYING_TYPES),
    HParam("max_seq_len", "99:99", "max lengths source:target (location attention, copying)",
           str),
    HParam("encoder", "rnn", "encoder type", str, ("rnn", "rnn-with-conv-embed", "transformer")),
    HParam("decoder_only", False, "--decoder-only: no encoder, fixed attention, zero init", bool),
    HParam("source_factor_vocab_sizes", "", "source factor vocabularies (vocab.src.1.json, ...),"
           " comma-separated", str),
    HParam("source_factors_combine", "concat", "how factor embeddings join the word's", str,
           ("concat", "sum")),
    HParam("source_factors_num_embed", "", "factor embedding sizes (concat), comma-separated",
           str),
    HParam("length_task", None, "auxiliary length task (LengthRatio layers)", str,
           (None, "ratio", "length")),
    HParam("length_task_layers", 1, "length task layers"),
    HParam("length_task_weight", 1.0, "length task loss weight (0: no layers)", float),
    HParam("weight_normalization", False, "weight-normalised output layer (wn_scale)", bool),
    HParam("attention_based_copying", False, "target vocabulary holds max_seq_len_source "
           "pointers the output layer leaves out", bool),
) + CONV_HPARAMS + TRANSFORMER_ENCODER_HPARAMS

SYMBOLS = (
    Symbol("vs", ("source_vocab_size",), degree=1, help="source vocabulary"),
    Symbol("vt", ("target_vocab_size",), degree=1, help="target vocabulary"),
    Symbol("se", ("num_embed:0",), degree=1, help="source embedding size"),
    Symbol("te", ("num_embed:1",), degree=1, help="target embedding size"),
    Symbol("h", ("rnn_num_hidden",), degree=2, start=2, step=2, help="rnn_num_hidden"),
    Symbol("sn", ("num_layers:0",), degree=1, help="encoder layers"),
    Symbol("tn", ("num_layers:1",), degree=1, help="decoder layers"),
)

ARCH = register(
    Arch(
        name="sockeye-rnn",
        description="Sockeye 1 (MXNet) RNN encoder-decoder with attention (seed 000)",
        hparams=HPARAMS,
        predict=predict,
        scheme="sockeye-rnn",
        from_checkpoint=lambda ckpt: hparams_from_args(ARCH, ckpt),
        infer=infer,
        applies=applies,
        symbols=SYMBOLS,
        modelled=options.MODELLED["sockeye-rnn"],
        unmodelled=lambda ckpt: options.unmodelled("sockeye-rnn", ckpt),
        aliases=options.ALIASES,
    )
)
