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

from inspector.formulas import sockeye_options as options
from inspector.formulas.blocks import (
    join,
    layer_norm,
    linear,
    mha_projections,
    param,
    tie,
)
from inspector.formulas.core import Arch, Expected, HParam, Prediction, Symbol, register
from inspector.formulas.sockeye_rnn import (
    TYING_TYPES,
    hparams_from_args,
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
    },
}
NAMING["3"] = {
    **NAMING["2"],
    "norm": ("weight", "bias"),
    "src_embed": "embedding_source.embedding.weight",
    "trg_embed": "embedding_target.embedding.weight",
}


def _process(prefix: str, steps: str, which: int, key: str, d: int, n: dict) -> list[Expected]:
    """The layer norm of a pre- (which=0) or post-process (which=1) block whose steps have 'n'."""
    if "n" not in steps:
        return []
    return layer_norm(join(prefix, n["process"][key][which], n["sep"]), d, sep=n["sep"],
                      names=n["norm"])


def _ff(prefix: str, d: int, ff: int, n: dict) -> list[Expected]:
    name, first, second = n["ff"]
    base = join(prefix, name, n["sep"])
    return (linear(join(base, first, n["sep"]), ff, d, sep=n["sep"], block="feed_forward")
            + linear(join(base, second, n["sep"]), d, ff, sep=n["sep"], block="feed_forward"))


def _attention(prefix: str, spec: tuple, d: int, kv: int, n: dict) -> list[Expected]:
    name, names, *layout = spec
    return mha_projections(join(prefix, name, n["sep"]), d, kv_dim=kv,
                           layout=layout[0] if layout else "qkv", names=names, sep=n["sep"])


def _embeddings(hp: Mapping[str, Any], de: int, dd: int, n: dict, major: str) -> list[Expected]:
    """Embeddings and output weight under the tying rules. What is stored under which name
    differs: Sockeye 1 names a shared source/target table ``source_target_embed_weight`` and drops
    the output weight when it is tied; Sockeye 2 saves each shared Gluon parameter once, under
    the last of its structural names (``save_parameters(deduplicate=True)``); Sockeye 3 stores
    every alias of one storage."""
    vs, vt = hp["source_vocab_size"], hp["target_vocab_size"]
    t = hp["weight_tying_type"] if (hp["weight_tying"] or major != "1") else "none"
    share_embed, share_out = "src" in t and "trg" in t, "softmax" in t
    out_w, out_b = (join(n["output"], leaf, n["sep"]) for leaf in ("weight", "bias"))
    src, trg, out = (n["src_embed"], (vs, de)), (n["trg_embed"], (vt, dd)), (out_w, (vt, dd))
    # the tensors that are one storage each, in Sockeye's registration order
    groups = [[src, trg]] if share_embed else [[src], [trg]]
    if share_out:
        groups[-1].append(out)
    else:
        groups.append([out])
    result: list[Expected] = []
    for g in groups:
        if len({shape for _, shape in g}) > 1:
            from inspector.adapters.errors import UsageError

            raise UsageError(f"inconsistent hyperparameters: weight tying {t} joins tensors of "
                             f"shapes {sorted({shape for _, shape in g})}")
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
    if de % he or dd % hd:
        from inspector.adapters.errors import UsageError

        raise UsageError("inconsistent hyperparameters: heads must divide the model size")
    pre_e, pre_d = _steps(hp["transformer_preprocess"])
    post_e, post_d = _steps(hp["transformer_postprocess"])
    t = _embeddings(hp, de, dd, n, major)
    pos = hp["transformer_positional_embedding_type"]
    if pos == "learned" or (pos == "fixed" and n["pos_fixed_stored"]):
        ls, lt = pair(hp["max_seq_len"], "max_seq_len")
        t.append(param(n["pos"][0], (ls + 1, de), "positional"))
        t.append(param(n["pos"][1], (lt + 1, dd), "positional"))
    for i in range(ln):
        p = n["enc"].format(i=i)
        t += _process(p, pre_e, 0, "self", de, n) + _attention(p, n["self"], de, de, n)
        t += _process(p, post_e, 1, "self", de, n)
        t += _process(p, pre_e, 0, "ff", de, n) + _ff(p, de, fe, n)
        t += _process(p, post_e, 1, "ff", de, n)
    if "n" in pre_e:
        t += layer_norm(n["enc_final"], de, sep=sep, names=n["norm"])
    for i in range(dn):
        p = n["dec"].format(i=i)
        t += _process(p, pre_d, 0, "dec_self", dd, n) + _attention(p, n["dec_self"], dd, dd, n)
        t += _process(p, post_d, 1, "dec_self", dd, n)
        t += _process(p, pre_d, 0, "enc_att", dd, n) + _attention(p, n["enc_att"], dd, de, n)
        t += _process(p, post_d, 1, "enc_att", dd, n)
        t += _process(p, pre_d, 0, "ff", dd, n) + _ff(p, dd, fd, n)
        t += _process(p, post_d, 1, "ff", dd, n)
    if "n" in pre_d:
        t += layer_norm(n["dec_final"], dd, sep=sep, names=n["norm"])
    return Prediction("sockeye-transformer", hp, t)


def _steps(value: Any) -> tuple[str, str]:
    parts = value if isinstance(value, (list, tuple)) else str(value).split(":")
    parts = list(parts) * 2 if len(parts) == 1 else list(parts)
    return str(parts[0]), str(parts[1])


def applies(ckpt: Any) -> bool:
    args = sockeye_args(ckpt)
    if args:
        return sockeye_major(ckpt) in NAMING and args.get("encoder") in (
            "transformer", "transformer-with-conv-embed")
    names = [t.name for t in ckpt.tensors]
    return any(x.startswith(("encoder_transformer_0_", "encoder.layers.0.self_attention."))
               for x in names)


def from_checkpoint(ckpt: Any) -> dict[str, Any]:
    out = hparams_from_args(ARCH, ckpt)
    major = sockeye_major(ckpt)
    if major in NAMING:
        out["sockeye_version"] = major
    return out


def _layer_count(shapes: Mapping[str, Any], base: str, sep: str) -> int:
    return len({x[len(base):].split(sep)[0] for x in shapes
                if x.startswith(base) and x[len(base):].split(sep)[0].isdigit()})


def infer(ckpt: Any) -> dict[str, Any]:
    """Naming version, layer counts, model and feed-forward sizes, vocabularies from shapes."""
    shapes = {t.name: t.shape for t in ckpt.tensors}
    out: dict[str, Any] = {}
    for major, n in NAMING.items():
        sep = n["sep"]
        ff1 = join(join(join(n["enc"].format(i=0), n["ff"][0], sep), n["ff"][1], sep), "weight",
                   sep)
        norm = join(n["enc_final"], n["norm"][0], sep)
        if ff1 not in shapes or (major != "1" and norm not in shapes):
            continue
        f, d = shapes[ff1]
        out.update(sockeye_version=major, transformer_model_size=f"{d}:{d}", num_embed=f"{d}:{d}",
                   transformer_feed_forward_num_hidden=f"{f}:{f}")
        ne = _layer_count(shapes, n["enc"].replace("{i}", ""), sep)
        nd = _layer_count(shapes, n["dec"].replace("{i}", ""), sep)
        out["num_layers"] = f"{ne}:{nd}"
        bias = shapes.get(join(n["output"], "bias", sep))
        if bias:
            out["target_vocab_size"] = out["source_vocab_size"] = bias[0]
        out.update(_infer_tying(ckpt, shapes, n, major))
        pos = shapes.get(n["pos"][0])
        if pos:
            out["transformer_positional_embedding_type"] = "fixed" if major != "1" else "learned"
            out["max_seq_len"] = f"{pos[0] - 1}:{shapes.get(n['pos'][1], pos)[0] - 1}"
        elif major != "1":
            out["transformer_positional_embedding_type"] = "none"
        break
    return out


def _infer_tying(ckpt: Any, shapes: Mapping[str, Any], n: dict, major: str) -> dict[str, Any]:
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
        tied = {k: set(v) for k, v in ckpt.shared_with().items()}
        by_name = {e.stored_name: e.name for e in ckpt.tensors}
        joined = {(by_name.get(k), by_name.get(x)) for k, v in tied.items() for x in v}
        st, so = (src, trg) in joined, (trg, out) in joined
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
)

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
