"""Architectures for bare ``torch.nn`` modules: ``torch-rnn`` (``nn.LSTM``/``nn.GRU``/``nn.RNN``),
``torch-mha`` (``nn.MultiheadAttention``) and ``torch-transformer`` (``nn.TransformerEncoderLayer``,
``nn.TransformerDecoderLayer``, ``nn.TransformerEncoder``/``Decoder`` stacks, ``nn.Transformer``).

Hyperparameters are the constructors' keyword arguments; ``prefix`` is the module's path when it
sits inside a larger model (``rnn`` for ``rnn.weight_ih_l0``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from inspector.adapters.errors import InspectorError
from inspector.adapters.model import Checkpoint, Role
from inspector.formulas import blocks_torch as bt
from inspector.formulas.core import Arch, HParam, Prediction, Symbol, counted, register, tied_to

# Where a training dict keeps its constructor arguments (torch.save({"model": ..., "args": ...})).
CONFIG_KEYS = ("args", "hparams", "hyper_parameters", "config")


def hparams_from(ckpt: Checkpoint, names: Iterable[str]) -> dict[str, Any]:
    """The values of ``names`` a checkpoint carries at its top level or in a training dict's
    ``args``/``hparams``/``config`` (an argparse Namespace arrives as a dict)."""
    wanted = set(names)
    found: dict[str, Any] = {}
    hyper = ckpt.hyperparameters
    sources = [hyper] + [hyper[k] for k in CONFIG_KEYS if isinstance(hyper.get(k), Mapping)]
    for src in sources:
        for k, v in src.items():
            if k in wanted and (v is None or isinstance(v, (int, float, str, bool))):
                found.setdefault(k, v)
    return found


def parameters(ckpt: Checkpoint) -> dict[str, tuple[int, ...]]:
    """Canonical name -> shape of a checkpoint's parameters (no buffers, no optimizer state)."""
    return {t.name: tuple(t.shape) for t in ckpt.tensors if t.role is Role.PARAMETER}


def explained_by(
    infer: Callable[[Checkpoint], dict[str, Any]], arch: Callable[[], Arch]
) -> Callable[[Checkpoint], bool]:
    """An ``applies`` test: the prediction from what the shapes determine (defaults elsewhere)
    names every stored parameter, and each of its tensors is stored under one of its names."""

    def applies(ckpt: Checkpoint) -> bool:
        hp = infer(ckpt)
        if not hp:
            return False
        a = arch()
        try:
            pred = a.predict(a.resolve(hp))
        except InspectorError:
            return False
        found = set(parameters(ckpt))
        named = {t.name for t in pred.tensors if t.role == "parameter"}
        return found <= named and all(group & found for group in tie_groups(pred))

    return applies


def tie_groups(pred: Prediction) -> list[set[str]]:
    """Each counted parameter with its tied aliases: a file needs one name of each group
    (``save_pretrained`` and ``safetensors.torch.save_model`` keep only one)."""
    groups = {t.name: {t.name} for t in counted(pred.tensors)}
    for t in pred.tensors:
        if tied_to(t) in groups:
            groups[tied_to(t)].add(t.name)
    return list(groups.values())


def _prefix_of(name: str, leaf: str) -> str:
    return name[: -len(leaf)].rstrip(".")


# --- torch-rnn ---------------------------------------------------------------------------------

RNN_HPARAMS = (
    HParam("mode", "LSTM", "torch.nn class: LSTM, GRU or RNN (tanh/relu alike)", str,
           tuple(bt.RNN_GATES)),
    HParam("input_size", 1, "features of the input"),
    HParam("hidden_size", 1, "features of the hidden state"),
    HParam("num_layers", 1, "stacked layers"),
    HParam("bias", True, "bias_ih/bias_hh vectors", bool),
    HParam("bidirectional", False, "a _reverse copy of every layer", bool),
    HParam("proj_size", 0, "LSTM only: hidden-state projection (weight_hr_l{k})"),
    HParam("prefix", "", "module path inside a larger model", str),
)
_RNN_W = re.compile(r"(?:^|\.)weight_(ih|hh|hr)_l(\d+)(_reverse)?$")


def predict_rnn(hp: Mapping[str, Any]) -> Prediction:
    tensors = bt.rnn(
        hp["prefix"], hp["mode"], hp["input_size"], hp["hidden_size"], hp["num_layers"],
        hp["bias"], hp["bidirectional"], hp["proj_size"],
    )
    return Prediction("torch-rnn", dict(hp), tensors)


def infer_rnn(ckpt: Checkpoint) -> dict[str, Any]:
    """Cell type, sizes, layer count, direction, bias and projection from the weight shapes."""
    shapes = parameters(ckpt)
    hits = {n: _RNN_W.search(n) for n in shapes}
    hits = {n: m for n, m in hits.items() if m}
    first = next((n for n, m in hits.items() if m.group(1) == "ih" and m.group(2) == "0"), None)
    if first is None:
        return {}
    prefix = _prefix_of(first, "weight_ih_l0")
    p = f"{prefix}." if prefix else ""
    out: dict[str, Any] = {
        "prefix": prefix,
        "input_size": shapes[first][1],
        "num_layers": 1 + max(int(m.group(2)) for m in hits.values()),
        "bidirectional": any(m.group(3) for m in hits.values()),
        "bias": f"{p}bias_ih_l0" in shapes,
        "proj_size": 0,
    }
    if f"{p}weight_hr_l0" in shapes:
        out["proj_size"], hidden = shapes[f"{p}weight_hr_l0"]
    else:
        hidden = shapes.get(f"{p}weight_hh_l0", (0, 0))[1]
    out["hidden_size"] = hidden
    gates = {g * hidden: mode for mode, g in bt.RNN_GATES.items()}
    if hidden and shapes[first][0] in gates:
        out["mode"] = gates[shapes[first][0]]
    return out


TORCH_RNN = register(Arch(
    name="torch-rnn",
    description="torch.nn.LSTM / GRU / RNN (num_layers, bias, bidirectional, proj_size)",
    hparams=RNN_HPARAMS,
    predict=predict_rnn,
    scheme="torch-rnn",
    from_checkpoint=lambda ckpt: hparams_from(ckpt, (h.name for h in RNN_HPARAMS)),
    infer=infer_rnn,
    applies=explained_by(infer_rnn, lambda: TORCH_RNN),
    symbols=(
        Symbol("i", ("input_size",), degree=1, help="input_size"),
        Symbol("h", ("hidden_size",), degree=2, help="hidden_size"),
        Symbol("n", ("num_layers",), degree=1, help="num_layers"),
    ),
))


# --- torch-mha ---------------------------------------------------------------------------------

MHA_HPARAMS = (
    HParam("embed_dim", 8, "model width E"),
    HParam("num_heads", 1, "heads (changes no shape; must divide embed_dim)"),
    HParam("bias", True, "in_proj_bias and out_proj.bias", bool),
    HParam("add_bias_kv", False, "bias_k and bias_v (1, 1, E)", bool),
    HParam("kdim", None, "key width (default embed_dim); != E splits in_proj_weight"),
    HParam("vdim", None, "value width (default embed_dim); != E splits in_proj_weight"),
    HParam("prefix", "", "module path inside a larger model", str),
)


def predict_mha(hp: Mapping[str, Any]) -> Prediction:
    tensors = bt.multihead_attention(
        hp["prefix"], hp["embed_dim"], hp["num_heads"], hp["bias"], hp["add_bias_kv"],
        hp["kdim"], hp["vdim"],
    )
    return Prediction("torch-mha", dict(hp), tensors,
                      notes=["num_heads changes no shape: it is not checked by shapes"])


def infer_mha(ckpt: Checkpoint) -> dict[str, Any]:
    shapes = parameters(ckpt)
    leaf = next((n for n in shapes if n.endswith("out_proj.weight")), None)
    if leaf is None:
        return {}
    prefix = _prefix_of(leaf, "out_proj.weight")
    p = f"{prefix}." if prefix else ""
    e = shapes[leaf][0]
    out: dict[str, Any] = {
        "prefix": prefix,
        "embed_dim": e,
        "bias": f"{p}out_proj.bias" in shapes,
        "add_bias_kv": f"{p}bias_k" in shapes,
    }
    if f"{p}k_proj_weight" in shapes:
        out["kdim"] = shapes[f"{p}k_proj_weight"][1]
    if f"{p}v_proj_weight" in shapes:
        out["vdim"] = shapes[f"{p}v_proj_weight"][1]
    return out


TORCH_MHA = register(Arch(
    name="torch-mha",
    description="torch.nn.MultiheadAttention (packed or separate q/k/v, bias, add_bias_kv)",
    hparams=MHA_HPARAMS,
    predict=predict_mha,
    from_checkpoint=lambda ckpt: hparams_from(ckpt, (h.name for h in MHA_HPARAMS)),
    infer=infer_mha,
    applies=explained_by(infer_mha, lambda: TORCH_MHA),
    symbols=(Symbol("E", ("embed_dim",), degree=2, help="embed_dim"),),
))


# --- torch-transformer -------------------------------------------------------------------------

MODULES = ("encoder_layer", "decoder_layer", "encoder", "decoder", "transformer")
TRANSFORMER_HPARAMS = (
    HParam("module", "encoder_layer", "TransformerEncoderLayer, TransformerDecoderLayer, "
           "TransformerEncoder/Decoder stacks, or the full Transformer", str, MODULES),
    HParam("d_model", 512, "model width"),
    HParam("nhead", 1, "heads (changes no shape; must divide d_model; torch has no default)"),
    HParam("dim_feedforward", 2048, "feed-forward width"),
    HParam("bias", True, "biases of the linears and layer norms", bool),
    HParam("num_layers", 1, "layers of an encoder/decoder stack"),
    HParam("norm", False, "encoder/decoder stack built with a final LayerNorm", bool),
    HParam("num_encoder_layers", 6, "Transformer only"),
    HParam("num_decoder_layers", 6, "Transformer only"),
    HParam("prefix", "", "module path inside a larger model", str),
)


def predict_transformer(hp: Mapping[str, Any]) -> Prediction:
    p, module = hp["prefix"], hp["module"]
    args = (hp["d_model"], hp["nhead"], hp["dim_feedforward"], hp["bias"])
    if module == "encoder_layer":
        tensors = bt.transformer_encoder_layer(p, *args)
    elif module == "decoder_layer":
        tensors = bt.transformer_decoder_layer(p, *args)
    elif module in ("encoder", "decoder"):
        tensors = bt.transformer_stack(p, module, hp["num_layers"], *args, norm=hp["norm"])
    else:  # nn.Transformer always builds both stacks with a final LayerNorm each
        tensors = bt.transformer_stack(
            bt.join(p, "encoder"), "encoder", hp["num_encoder_layers"], *args, norm=True
        ) + bt.transformer_stack(
            bt.join(p, "decoder"), "decoder", hp["num_decoder_layers"], *args, norm=True
        )
    return Prediction("torch-transformer", dict(hp), tensors,
                      notes=["nhead changes no shape: it is not checked by shapes"])


_LAYER = re.compile(r"(?:^|\.)(encoder\.|decoder\.)?layers\.(\d+)\.")


def infer_transformer(ckpt: Checkpoint) -> dict[str, Any]:
    shapes = parameters(ckpt)
    lin1 = next((n for n in shapes if n.endswith("linear1.weight")), None)
    if lin1 is None:
        return {}
    ff, d = shapes[lin1]
    bias = lin1[: -len("weight")] + "bias" in shapes
    out: dict[str, Any] = {"d_model": d, "dim_feedforward": ff, "bias": bias}
    counts: dict[str, int] = {}
    for n in shapes:
        m = _LAYER.search(n)
        if m:
            key = (m.group(1) or "").rstrip(".")
            counts[key] = max(counts.get(key, 0), int(m.group(2)) + 1)
    decoder = any(".multihead_attn." in f".{n}" for n in shapes)
    if "encoder" in counts and "decoder" in counts:
        out.update(module="transformer", num_encoder_layers=counts["encoder"],
                   num_decoder_layers=counts["decoder"])
        out["prefix"] = lin1[: lin1.index("encoder.layers.")].rstrip(".")
    elif "" in counts:
        out.update(module="decoder" if decoder else "encoder", num_layers=counts[""])
        out["norm"] = any(n == "norm.weight" or n.endswith(".norm.weight") for n in shapes)
        out["prefix"] = lin1[: _LAYER.search(lin1).start()]
    else:
        out["module"] = "decoder_layer" if decoder else "encoder_layer"
        out["prefix"] = _prefix_of(lin1, "linear1.weight")
    return out


TORCH_TRANSFORMER = register(Arch(
    name="torch-transformer",
    description="torch.nn.TransformerEncoderLayer/DecoderLayer, their stacks, nn.Transformer",
    hparams=TRANSFORMER_HPARAMS,
    predict=predict_transformer,
    from_checkpoint=lambda ckpt: hparams_from(ckpt, (h.name for h in TRANSFORMER_HPARAMS)),
    infer=infer_transformer,
    applies=explained_by(infer_transformer, lambda: TORCH_TRANSFORMER),
    symbols=(
        Symbol("d", ("d_model",), degree=2, help="d_model"),
        Symbol("f", ("dim_feedforward",), degree=1, help="dim_feedforward"),
        Symbol("n", ("num_layers",), degree=1, help="num_layers (stacks)"),
        Symbol("ne", ("num_encoder_layers",), degree=1, help="num_encoder_layers (Transformer)"),
        Symbol("nd", ("num_decoder_layers",), degree=1, help="num_decoder_layers (Transformer)"),
    ),
))
