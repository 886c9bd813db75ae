"""``sockeye-transformer``: Sockeye's Transformer in the naming of each major version.

Sockeye 1 (MXNet symbols, ``encoder_transformer_0_att_self_i2h_weight``), Sockeye 2 (Gluon,
``encoder.layers.0.self_attention.ff_in.weight``, layer norms ``gamma``/``beta``) and Sockeye 3
(PyTorch, the same paths with ``weight``/``bias`` layer norms). Shapes from each version's
``transformer.py``/``layers.py``/``model.py``, checked against ``fixtures/sockeye``. Layer norms
come from the ``n`` steps of ``transformer_preprocess``/``transformer_postprocess``; the final
process of encoder and decoder follows the preprocess sequence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas import sockeye_options as options
from inspector.formulas.blocks import (
    join,
    layer_norm,
    linear,
    mha_projections,
    param,
    tie,
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
    sockeye_args,
    sockeye_major,
)

# Names by Sockeye major version, as data: separator, layer prefixes, process blocks, attention
# leaf names and layouts, layer-norm leaves, embeddings and output layer.
NAMING: dict[str, dict[str, Any]] = {
    "1": {
        "sep": "_",
        "enc": "encoder_transformer_{i}",
        "dec": "decoder_transformer_{i}",
        "enc_final": "encoder_transformer_final_process_norm",
        "dec_final": "decoder_transformer_final_process_norm",
        "norm": ("gamma", "beta"),
        "process": {
            "self": ("att_self_pre_norm", "att_self_post_norm"),
            "dec_self": ("att_self_pre_norm", "att_self_post_norm"),
            "enc_att": ("att_enc_pre_norm", "att_enc_post_norm"),
            "ff": ("ff_pre_norm", "ff_post_norm"),
        },
        "self": ("att_self", {"qkv": "i2h", "out": "h2o"}),
        "dec_self": ("att_self", {"qkv": "i2h", "out": "h2o"}),
        "enc_att": ("att_enc", {"q": "q2h", "k": "k2h", "v": "v2h", "out": "h2o"}, "q_k_v"),
        "ff": ("ff", "i2h", "h2o"),
        "src_embed": "source_embed_weight",
        "trg_embed": "target_embed_weight",
        "shared_embed": "source_target_embed_weight",
        "pos": ("source_pos_embed_weight", "target_pos_embed_weight"),
        "pos_fixed_stored": False,
        "output": "target_output",
        "src_factor": "source_embed_factor{i}_weight",
        "lhuc": "{p}_lhuc",
        "length_ratio": "length_ratio_layer_dense{i}_",
        "length_ratio_step": 1,
    },
    "2": {
        "sep": ".",
        "enc": "encoder.layers.{i}",
        "dec": "decoder.layers.{i}",
        "enc_final": "encoder.final_process.layer_norm",
        "dec_final": "decoder.final_process.layer_norm",
        "norm": ("gamma", "beta"),
        "process": {
            "self": ("pre_self_attention.layer_norm", "post_self_attention.layer_norm"),
            "dec_self": ("pre_autoregr_layer.layer_norm", "post_autoregr_layer.layer_norm"),
            "enc_att": ("pre_enc_attention.layer_norm", "post_enc_attention.layer_norm"),
            "ff": ("pre_ff.layer_norm", "post_ff.layer_norm"),
        },
        "self": ("self_attention", {"qkv": "ff_in", "out": "ff_out"}),
        "dec_self": ("autoregr_layer", {"qkv": "ff_in", "out": "ff_out"}),
        "enc_att": ("enc_attention", {"q": "ff_q", "kv": "ff_kv", "out": "ff_out"}, "q_kv"),
        "ff": ("ff", "ff1", "ff2"),
        "src_embed": "embedding_source.embed_weight",
        "trg_embed": "embedding_target.embed_weight",
        "shared_embed": None,
        "pos": ("encoder.pos_embedding.weight", "decoder.pos_embedding.weight"),
        "pos_fixed_stored": True,
        "output": "output_layer",
        "src_factor": "embedding_source.factor{j}_weight",
        "trg_factor": "embedding_target.factor{j}_weight",
        "factor_output": "output_layer_factor{j}",
        "lhuc": "{p}.lhuc.weight",
        "ssru": ("autoregr_layer", "forget_gate", "linear"),
        "glu": "linear",
        "length_ratio": "length_ratio.layers.{i}",
        "length_ratio_step": 1,
    },
}
NAMING["3"] = {
    **NAMING["2"],
    "norm": ("weight", "bias"),
    "src_embed": "embedding_source.embedding.weight",
    "trg_embed": "embedding_target.embedding.weight",
    "src_factor": "embedding_source.factor_embeds.{i}.weight",
    "trg_factor": "embedding_target.factor_embeds.{i}.weight",
    "factor_output": "factor_output_layers.{i}",
    "length_ratio_step": 2,  # a pt.nn.Sequential with a Tanh between the Linear layers
    "nvs": "nvs.project_vocab",
}


def _process(prefix: str, steps: str, which: int, key: str, d: int, n: dict) -> list[TensorEntry]:
    """The layer norm of a pre- (which=0) or post-process (which=1) block whose steps have 'n'."""
    if "n" not in steps:
        return []
    return layer_norm(join(prefix, n["process"][key][which], n["sep"]), d, sep=n["sep"],
                      names=n["norm"])


def _ff(prefix: str, d: int, ff: int, n: dict, glu: bool = False) -> list[TensorEntry]:
    """Feed-forward block; GLU (Sockeye 2/3 ``--transformer-feed-forward-use-glu``) adds the
    gate's ``linear`` (ff, d) with bias (transformer.py ``TransformerFeedForward``)."""
    name, first, second = n["ff"]
    base = join(prefix, name, n["sep"])
    out = linear(join(base, first, n["sep"]), ff, d, sep=n["sep"], block="feed_forward")
    if glu:
        out += linear(join(base, n["glu"], n["sep"]), ff, d, sep=n["sep"], block="feed_forward")
    return out + linear(join(base, second, n["sep"]), d, ff, sep=n["sep"], block="feed_forward")


def _ssru(prefix: str, d: int, n: dict) -> list[TensorEntry]:
    """SSRU, the ``ssru_transformer`` decoder's autoregressive layer (layers.py ``SSRU``):
    ``forget_gate`` (d, d) with bias, ``linear`` (d, d) without."""
    name, gate, lin = n["ssru"]
    base = join(prefix, name, n["sep"])
    return (linear(join(base, gate, n["sep"]), d, d, sep=n["sep"], block="ssru")
            + linear(join(base, lin, n["sep"]), d, d, bias=False, sep=n["sep"], block="ssru"))


def _texts(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return str(value).replace(",", " ").replace(":", " ").split()


def factors(hp: Mapping[str, Any], side: str, num_embed: int,
            major: str) -> tuple[list[tuple[int, int, bool]], int]:
    """Source or target factors: ((vocabulary, size, shares the word embedding) per factor,
    width the concatenated ones add). Sockeye 1 has one combine for all source factors, sum
    giving every factor ``num_embed``; Sockeye 2/3 one combine per factor (one value applies to
    all), sum and average giving ``num_embed`` (train.py ``create_model_config``)."""
    vocabs = ints(hp[f"{side}_factor_vocab_sizes"])
    if not vocabs:
        return [], 0
    combine = _texts(hp[f"{side}_factors_combine"]) or ["concat" if major == "1" else "sum"]
    if len(combine) == 1:
        combine = combine * len(vocabs)
    share = [v.lower() in ("1", "true", "yes")
             for v in _texts(hp[f"{side}_factors_share_embedding"])]
    share = (share * len(vocabs)) if len(share) == 1 else (share or [False] * len(vocabs))
    dims = ints(hp[f"{side}_factors_num_embed"])
    _check(len(combine) == len(vocabs) == len(share),
           f"{len(vocabs)} {side} factors but {side}_factors_combine/_share_embedding do not match")
    if all(c in ("sum", "average") for c in combine):
        dims = dims or [num_embed] * len(vocabs)
    _check(len(dims) == len(vocabs), f"{len(vocabs)} {side} factors but "
           f"{side}_factors_num_embed gives {len(dims)} sizes")
    out, extra = [], 0
    for v, d, c, sh in zip(vocabs, dims, combine, share, strict=True):
        d = num_embed if c in ("sum", "average") else d
        out.append((v, d, sh))
        extra += d if c == "concat" else 0
    return out, extra


def _check(ok: bool, message: str) -> None:
    if not ok:
        from inspector.adapters.errors import UsageError

        raise UsageError(f"inconsistent hyperparameters: {message}")


def _attention(prefix: str, spec: tuple, d: int, kv: int, n: dict) -> list[TensorEntry]:
    name, names, *layout = spec
    return mha_projections(join(prefix, name, n["sep"]), d, kv_dim=kv,
                           layout=layout[0] if layout else "qkv", names=names, sep=n["sep"])


def _embeddings(hp: Mapping[str, Any], se: int, te: int, dd: int, n: dict, major: str,
                src_factors: list, trg_factors: list) -> list[TensorEntry]:
    """Embeddings, factor embeddings and output layers under the tying rules. What is stored
    under which name differs: Sockeye 1 names a shared source/target table
    ``source_target_embed_weight`` and drops the output weight when it is tied; Sockeye 2 saves
    each shared Gluon parameter once, under the last of its structural names
    (``save_parameters(deduplicate=True)``); Sockeye 3 stores every alias of one storage. A
    factor that shares the word embedding (``--source-factors-share-embedding``) is one more
    alias of the source table."""
    vs, vt = hp["source_vocab_size"], hp["target_vocab_size"]
    t = hp["weight_tying_type"] if (hp["weight_tying"] or major != "1") else "none"
    share_embed, share_out = "src" in t and "trg" in t, "softmax" in t
    out_w, out_b = (join(n["output"], leaf, n["sep"]) for leaf in ("weight", "bias"))
    src, trg, out = (n["src_embed"], (vs, se)), (n["trg_embed"], (vt, te)), (out_w, (vt, dd))
    sf = [(n["src_factor"].format(i=i, j=i + 1), (v, d), sh)
          for i, (v, d, sh) in enumerate(src_factors)]
    src_group = [src] + [(name, shape) for name, shape, sh in sf if sh]
    # the tensors that are one storage each, in Sockeye's registration order
    groups = [src_group + [trg]] if share_embed else [src_group, [trg]]
    if share_out:
        groups[-1].append(out)
    else:
        groups.append([out])
    groups += [[(name, shape)] for name, shape, sh in sf if not sh]
    result: list[TensorEntry] = []
    for g in groups:
        if len({shape for _, shape in g}) > 1:
            _check(False, f"weight tying {t} joins tensors of shapes "
                          f"{sorted({shape for _, shape in g})}")
        block = "output" if g[0][0] == out_w else "embedding"
        if major == "1":
            name = n["shared_embed"] if share_embed and g[0] is src else g[0][0]
            result.append(param(name, g[0][1], block))
        elif major == "2":
            result.append(param(g[-1][0], g[-1][1], "output" if g[-1] is out else "embedding"))
        else:
            first = param(g[0][0], g[0][1], block)
            rest = [param(nm, s, "output" if nm == out_w else "embedding") for nm, s in g[1:]]
            result += [first, *tie(rest, first.name)]
    result.append(param(out_b, (vt,), "output"))
    for i, (v, d, sh) in enumerate(trg_factors):
        _check(not sh, "target factors sharing the target embedding are not modelled")
        result.append(param(n["trg_factor"].format(i=i, j=i + 1), (v, d), "embedding"))
        result += linear(n["factor_output"].format(i=i, j=i + 1), v, dd, sep=n["sep"],
                         block="output")
    return result


def predict(values: Mapping[str, Any]) -> Prediction:
    hp = ARCH.resolve(values)
    major = str(hp["sockeye_version"])
    n = NAMING[major]
    sep = n["sep"]
    ln, dn = pair(hp["num_layers"], "num_layers")
    de, dd = pair(hp["transformer_model_size"], "transformer_model_size")
    fe, fd = pair(hp["transformer_feed_forward_num_hidden"], "transformer_feed_forward_num_hidden")
    he, hd = pair(hp["transformer_attention_heads"], "transformer_attention_heads")
    ne, nt = pair(hp["num_embed"], "num_embed")
    decoder = hp["decoder"]
    _check(major != "1" or decoder == "transformer",
           f"Sockeye {major} has no {decoder} decoder (Sockeye 1: use sockeye-rnn)")
    _check(major != "1" or not (hp["transformer_feed_forward_use_glu"]
                                or hp["neural_vocab_selection"] or hp["target_factor_vocab_sizes"]),
           "Sockeye 1 has no GLU feed-forward, neural vocabulary selection or target factors")
    _check(major == "3" or not hp["neural_vocab_selection"],
           "neural vocabulary selection is Sockeye 3 only")
    _check(decoder in ("transformer", "ssru_transformer"), f"decoder {decoder} is not modelled")
    se = de  # the source embedding is the model size; concatenated factors widen the encoder
    src_f, src_extra = factors(hp, "source", se, major)
    de += src_extra
    trg_f, trg_extra = factors(hp, "target", nt if major != "1" else dd, major)
    te = dd - trg_extra  # Sockeye 2/3: model size = num_embed target + concatenated factors
    _check(te > 0, "target factors wider than the decoder model size")
    if de % he or dd % hd:
        _check(False, "heads must divide the model size")
    pre_e, pre_d = _steps(hp["transformer_preprocess"])
    post_e, post_d = _steps(hp["transformer_postprocess"])
    glu = bool(hp["transformer_feed_forward_use_glu"])
    lhuc_e, lhuc_d = _lhuc(hp, "encoder"), _lhuc(hp, "decoder")
    t = _embeddings(hp, se, te, dd, n, major, src_f, trg_f)
    if hp["encoder"] == "transformer-with-conv-embed":
        _check(major == "1", "transformer-with-conv-embed is Sockeye 1 only")
        t += conv_embed(hp, se, se)[0]  # train.py: output_dim = num_embed_source
    pos = hp["transformer_positional_embedding_type"]
    if pos == "learned" or (pos == "fixed" and n["pos_fixed_stored"]):
        ls, lt = pair(hp["max_seq_len"], "max_seq_len")
        t.append(param(n["pos"][0], (ls + 1, de), "positional"))
        t.append(param(n["pos"][1], (lt + 1, dd), "positional"))
    t += encoder_stack(n, ln, de, fe, pre_e, post_e, glu, lhuc_e)
    for i in range(dn):
        p = n["dec"].format(i=i)
        t += _process(p, pre_d, 0, "dec_self", dd, n)
        t += _ssru(p, dd, n) if decoder == "ssru_transformer" else \
            _attention(p, n["dec_self"], dd, dd, n)
        t += _process(p, post_d, 1, "dec_self", dd, n)
        t += _process(p, pre_d, 0, "enc_att", dd, n) + _attention(p, n["enc_att"], dd, de, n)
        t += _process(p, post_d, 1, "enc_att", dd, n)
        t += _process(p, pre_d, 0, "ff", dd, n) + _ff(p, dd, fd, n, glu)
        t += _process(p, post_d, 1, "ff", dd, n)
        if lhuc_d:
            t.append(param(n["lhuc"].format(p=p), (dd,), "lhuc"))
    if "n" in pre_d:
        t += layer_norm(n["dec_final"], dd, sep=sep, names=n["norm"])
    t += length_ratio(hp, de, n["length_ratio"], sep, n["length_ratio_step"])
    if hp["neural_vocab_selection"]:  # nvs.py: Linear(encoder model size, target vocabulary)
        t += linear(n["nvs"], hp["target_vocab_size"], de, sep=sep, block="nvs")
    return Prediction("sockeye-transformer", hp, t)


def encoder_stack(n: dict, layers: int, d: int, ff: int, pre: str, post: str, glu: bool,
                  lhuc: bool) -> list[TensorEntry]:
    """The encoder's layers and final layer norm (no embeddings) in naming ``n``."""
    t: list[TensorEntry] = []
    for i in range(layers):
        p = n["enc"].format(i=i)
        t += _process(p, pre, 0, "self", d, n) + _attention(p, n["self"], d, d, n)
        t += _process(p, post, 1, "self", d, n)
        t += _process(p, pre, 0, "ff", d, n) + _ff(p, d, ff, n, glu)
        t += _process(p, post, 1, "ff", d, n)
        if lhuc:
            t.append(param(n["lhuc"].format(p=p), (d,), "lhuc"))
    if "n" in pre:
        t += layer_norm(n["enc_final"], d, sep=n["sep"], names=n["norm"])
    return t


def sockeye1_encoder(hp: Mapping[str, Any], d: int, lhuc: bool) -> list[TensorEntry]:
    """Sockeye 1's transformer encoder of width ``d`` under another decoder (``--encoder
    transformer --decoder rnn``): layers, final norm and learned positions, if any."""
    n = NAMING["1"]
    ln = pair(hp["num_layers"], "num_layers")[0]
    fe = pair(hp["transformer_feed_forward_num_hidden"], "transformer_feed_forward_num_hidden")[0]
    pre, post = _steps(hp["transformer_preprocess"])[0], _steps(hp["transformer_postprocess"])[0]
    t: list[TensorEntry] = []
    if hp["transformer_positional_embedding_type"] == "learned":
        ls = pair(hp["max_seq_len"], "max_seq_len")[0]
        t.append(param(n["pos"][0], (ls + 1, d), "positional"))
    return t + encoder_stack(n, ln, d, fe, pre, post, False, lhuc)


def _lhuc(hp: Mapping[str, Any], part: str) -> bool:
    chosen = set(_texts(hp["lhuc"]))
    _check(chosen <= {"encoder", "decoder", "state_init", "all"},
           f"lhuc: unknown part(s) {', '.join(sorted(chosen))}")
    return part in chosen or "all" in chosen


def _steps(value: Any) -> tuple[str, str]:
    parts = value if isinstance(value, (list, tuple)) else str(value).split(":")
    parts = list(parts) * 2 if len(parts) == 1 else list(parts)
    return str(parts[0]), str(parts[1])


def applies(ckpt: Checkpoint) -> bool:
    args = sockeye_args(ckpt)
    if args:
        return sockeye_major(ckpt) in NAMING and args.get("decoder", "transformer") != "rnn" \
            and args.get("encoder") in ("transformer", "transformer-with-conv-embed")
    names = [t.name for t in ckpt.tensors]
    return any(x.startswith(("encoder_transformer_0_", "encoder.layers.0.self_attention."))
               for x in names)


def from_checkpoint(ckpt: Checkpoint) -> dict[str, Any]:
    out = hparams_from_args(ARCH, ckpt)
    major = sockeye_major(ckpt)
    if major in NAMING:
        out["sockeye_version"] = major
    return out


def _layer_count(shapes: Mapping[str, Any], base: str, sep: str) -> int:
    return len({x[len(base):].split(sep)[0] for x in shapes
                if x.startswith(base) and x[len(base):].split(sep)[0].isdigit()})


def _version(shapes: Mapping[str, Any]) -> str | None:
    """Naming version: MXNet underscores (1), Gluon ``gamma``/``embed_weight`` (2), PyTorch
    ``weight``/``embedding.weight`` (3)."""
    names = list(shapes)
    if any(x.startswith("encoder_transformer_0_") for x in names):
        return "1"
    if not any(x.startswith("encoder.layers.0.") for x in names):
        return None
    if any(x.endswith((".gamma", ".embed_weight")) for x in names):
        return "2"
    return "3"


def infer(ckpt: Checkpoint) -> dict[str, Any]:
    """What the stored shapes determine: naming version, layer counts, model and feed-forward
    sizes per side, vocabularies, tying, positions, pre/post layer norms, factors (sum when a
    factor has the word embedding's size, else concat), LHUC, GLU, SSRU, length task, NVS, conv
    embed. Shapes cannot tell average from sum, ratio from length, or fixed from learned
    positions in Sockeye 2/3; each pair has the same tensors."""
    shapes = {t.name: t.shape for t in ckpt.tensors}
    major = _version(shapes)
    if major is None:
        return {}
    n = NAMING[major]
    sep = n["sep"]
    out: dict[str, Any] = {"sockeye_version": major}

    def ff1(side: str) -> Any:
        return shapes.get(join(join(join(n[side].format(i=0), n["ff"][0], sep), n["ff"][1], sep),
                               "weight", sep))

    enc, dec = ff1("enc"), ff1("dec")
    if not enc or not dec:
        return out
    (fe, de), (fd, dd) = enc, dec
    out["transformer_feed_forward_num_hidden"] = f"{fe}:{fd}"
    ne = _layer_count(shapes, n["enc"].replace("{i}", ""), sep)
    nd = _layer_count(shapes, n["dec"].replace("{i}", ""), sep)
    out["num_layers"] = f"{ne}:{nd}"
    bias = shapes.get(join(n["output"], "bias", sep))
    if bias:
        out["target_vocab_size"] = out["source_vocab_size"] = bias[0]
    out.update(_infer_tying(ckpt, shapes, n, major))
    out_w = shapes.get(join(n["output"], "weight", sep))
    src = shapes.get(n["src_embed"]) or shapes.get(n.get("shared_embed") or "") or out_w
    trg = shapes.get(n["trg_embed"]) or shapes.get(n.get("shared_embed") or "") or out_w
    se, te = (src[1] if src else de), (trg[1] if trg else dd)
    out.update(_infer_factors(ckpt, shapes, n, major, se, te))
    out["transformer_model_size"] = f"{se}:{dd}"
    out["num_embed"] = f"{se}:{te}"
    # heads change no shape; the default 8 must only divide the model sizes the file shows
    out["transformer_attention_heads"] = ":".join(
        str(next(h for h in (8, 4, 2, 1) if d % h == 0)) for d in (de, dd))
    out.update(_infer_options(shapes, n, major))
    out.update(infer_conv_embed(shapes, "transformer-with-conv-embed"))
    return out


def _infer_factors(ckpt: Checkpoint, shapes: Mapping[str, Any], n: dict, major: str,
                   se: int, te: int) -> dict[str, Any]:
    """Source/target factors from their embedding tables: vocabularies, widths, and combine
    (sum when a factor has the word embedding's size, else concat); Sockeye 3's sharing."""
    out: dict[str, Any] = {}
    src_f = _factor_shapes(shapes, n["src_factor"])
    trg_f = _factor_shapes(shapes, n.get("trg_factor", "")) if major != "1" else []
    for side, found, width in (("source", src_f, se), ("target", trg_f, te)):
        if not found:
            continue
        out[f"{side}_factor_vocab_sizes"] = ",".join(str(v) for v, _ in found)
        out[f"{side}_factors_combine"] = ",".join("sum" if d == width else "concat"
                                                  for _, d in found)
        out[f"{side}_factors_num_embed"] = ",".join(str(d) for _, d in found)
    if major == "3" and src_f:
        tied = {k: set(v) for k, v in ckpt.shared_with().items()}
        by_name = {e.stored_name: e.name for e in ckpt.tensors}
        joined = {by_name.get(x) for k, v in tied.items() for x in [k, *v]}
        out["source_factors_share_embedding"] = ",".join(
            str(n["src_factor"].format(i=i) in joined and n["src_embed"] in joined).lower()
            for i in range(len(src_f)))
    return out


def _infer_options(shapes: Mapping[str, Any], n: dict, major: str) -> dict[str, Any]:
    """The options whose tensors are present or absent: positions, pre/post layer norms, LHUC,
    GLU, SSRU, length task, NVS."""
    out: dict[str, Any] = {}
    pos = shapes.get(n["pos"][0])
    if pos:
        out["transformer_positional_embedding_type"] = "fixed" if major != "1" else "learned"
        out["max_seq_len"] = f"{pos[0] - 1}:{shapes.get(n['pos'][1], pos)[0] - 1}"
    elif major != "1":
        out["transformer_positional_embedding_type"] = "none"
    pre = any(k in x for x in shapes for k in ("_pre_norm_", ".pre_"))
    post = any(k in x for x in shapes for k in ("_post_norm_", ".post_"))
    out["transformer_preprocess"] = "n:n" if pre else ":"
    out["transformer_postprocess"] = "drn:drn" if post else "dr:dr"
    lhuc = sorted({side for side in ("encoder", "decoder")
                   if any(x.startswith(side) and "lhuc" in x for x in shapes)})
    out["lhuc"] = ",".join(lhuc) or None
    out["transformer_feed_forward_use_glu"] = any(x.endswith(".ff.linear.weight") for x in shapes)
    if any(".autoregr_layer.forget_gate." in x for x in shapes):
        out["decoder"] = "ssru_transformer"
    layers = [x for x in shapes if x.startswith("length_ratio") and x.endswith("weight")]
    if layers:
        out["length_task"], out["length_task_layers"] = "ratio", len(layers)
    if any(x.startswith("nvs.") for x in shapes):
        out["neural_vocab_selection"] = "logit_max"
    return out


def _factor_shapes(shapes: Mapping[str, Any], fmt: str) -> list[tuple[int, int]]:
    found = []
    while fmt and (s := shapes.get(fmt.format(i=len(found), j=len(found) + 1))):
        found.append((s[0], s[1]))
    return found


def _infer_tying(ckpt: Checkpoint, shapes: Mapping[str, Any], n: dict,
                 major: str) -> dict[str, Any]:
    """Tying type (and the source vocabulary) from which tables are stored, or, for Sockeye 3,
    which of them share storage."""
    src, trg, out = n["src_embed"], n["trg_embed"], join(n["output"], "weight", n["sep"])
    if major == "1":
        shared = n["shared_embed"] in shapes
        soft = out not in shapes
        t = ("src_trg_softmax" if soft else "src_trg") if shared else \
            ("trg_softmax" if soft else "none")
        vs = shapes.get(n["shared_embed"] if shared else src)
    elif major == "2":
        present = tuple(x in shapes for x in (src, trg, out))
        t = {(False, False, True): "src_trg_softmax", (True, False, True): "trg_softmax",
             (False, True, True): "src_trg"}.get(present, "none")
        vs = shapes.get(src)
    else:
        # one tie group per tensor (linear: a tensor stored under 100,000 names stays cheap)
        groups = ckpt.tie_groups()
        stored = {e.name: e.stored_name for e in ckpt.tensors}

        def same(a: str, b: str) -> bool:
            ga = groups.get(stored.get(a, ""))
            return ga is not None and ga is groups.get(stored.get(b, ""))

        st, so = same(src, trg), same(trg, out)
        t = "src_trg_softmax" if st and so else "src_trg" if st else "trg_softmax" if so else "none"
        vs = shapes.get(src)
    result: dict[str, Any] = {"weight_tying": t != "none", "weight_tying_type": t}
    if vs:
        result["source_vocab_size"] = vs[0]
    return result


HPARAMS = (
    HParam("sockeye_version", "3", "Sockeye major version: tensor naming (1 MXNet, 2 Gluon, "
           "3 PyTorch)", str, tuple(NAMING)),
    HParam("source_vocab_size", 32000, "source vocabulary size (vocab.src.0.json)"),
    HParam("target_vocab_size", 32000, "target vocabulary size (vocab.trg.0.json)"),
    HParam("num_layers", "6:6", "layers encoder:decoder", str),
    HParam("num_embed", "512:512", "embedding sizes (= model size)", str),
    HParam("transformer_model_size", "512:512", "model size d encoder:decoder", str),
    HParam("transformer_attention_heads", "8:8", "heads (must divide d; no shape change)", str),
    HParam("transformer_feed_forward_num_hidden", "2048:2048", "feed-forward size", str),
    HParam("transformer_positional_embedding_type", "fixed", "positional embeddings (Sockeye "
           "2/3 store fixed ones as a parameter)", str, ("fixed", "learned", "none")),
    HParam("transformer_preprocess", "n:n", "pre-process steps (n = layer norm)", str),
    HParam("transformer_postprocess", "dr:dr", "post-process steps (n = layer norm)", str),
    HParam("weight_tying", False, "Sockeye 1 --weight-tying (2 and 3 use the type alone)", bool),
    HParam("weight_tying_type", "src_trg_softmax", "what is tied", str, TYING_TYPES),
    HParam("max_seq_len", "95:95", "max lengths source:target (positional tables hold +1)", str),
    HParam("encoder", "transformer", "encoder type", str,
           ("transformer", "transformer-with-conv-embed")),
    HParam("decoder", "transformer", "decoder type (ssru_transformer: Sockeye 2/3)", str,
           ("transformer", "ssru_transformer", "rnn")),
    HParam("transformer_feed_forward_use_glu", False, "GLU feed-forward (Sockeye 2/3)", bool),
    HParam("lhuc", None, "LHUC parts: encoder, decoder, all", str),
    HParam("length_task", None, "auxiliary length task (LengthRatio layers)", str,
           (None, "ratio", "length")),
    HParam("length_task_layers", 1, "length task layers"),
    HParam("length_task_weight", 1.0, "length task loss weight (0: no layers)", float),
    HParam("neural_vocab_selection", None, "Sockeye 3 neural vocabulary selection", str,
           (None, "logit_max", "eos")),
    HParam("source_factor_vocab_sizes", "", "source factor vocabularies (vocab.src.1.json, ...),"
           " comma-separated", str),
    HParam("source_factors_combine", "", "sum, concat or average (2/3: one per factor); "
           "default concat (1), sum (2/3)", str),
    HParam("source_factors_num_embed", "", "source factor sizes (concat), comma-separated", str),
    HParam("source_factors_share_embedding", "", "factors sharing the source embedding (2/3)",
           str),
    HParam("target_factor_vocab_sizes", "", "target factor vocabularies (vocab.trg.1.json, ...)"
           ", comma-separated (2/3)", str),
    HParam("target_factors_combine", "", "sum, concat or average per target factor", str),
    HParam("target_factors_num_embed", "", "target factor sizes (concat), comma-separated", str),
    HParam("target_factors_share_embedding", "", "target factors sharing the target embedding",
           str),
) + CONV_HPARAMS

SYMBOLS = (
    Symbol("v", ("source_vocab_size", "target_vocab_size"), degree=1,
           help="vocabulary (shared: the default tying joins source, target and output)"),
    Symbol("d", ("transformer_model_size:0", "transformer_model_size:1", "num_embed:0",
                 "num_embed:1"), degree=2, start=8, step=8, help="model size"),
    Symbol("f", ("transformer_feed_forward_num_hidden:0",
                 "transformer_feed_forward_num_hidden:1"), degree=1, help="feed-forward size"),
    Symbol("ne", ("num_layers:0",), degree=1, help="encoder layers"),
    Symbol("nd", ("num_layers:1",), degree=1, help="decoder layers"),
)

ARCH = register(
    Arch(
        name="sockeye-transformer",
        description="Sockeye Transformer (1: MXNet names, 2: Gluon, 3: PyTorch)",
        hparams=HPARAMS,
        predict=predict,
        scheme="sockeye-transformer",
        from_checkpoint=from_checkpoint,
        infer=infer,
        applies=applies,
        symbols=SYMBOLS,
        modelled=options.MODELLED["sockeye-transformer"],
        unmodelled=lambda ckpt: options.unmodelled("sockeye-transformer", ckpt),
        aliases=options.ALIASES,
    )
)
