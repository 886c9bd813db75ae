"""What the Sockeye families (RNN, transformer, CNN) share: the checkpoint's recorded ``args.yaml``,
version and vocabularies, Sockeye's ``a:b`` pairs and int lists, and the blocks of Sockeye 1
encoders both the RNN and the transformer model use (conv embed, length ratio).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.formulas.blocks import linear, param
from inspector.formulas.core import Arch, HParam

TYING_TYPES = ("none", "src_trg_softmax", "src_trg", "trg_softmax")


def pair(value: Any, name: str = "value") -> tuple[int, int]:
    """Sockeye's ``a:b`` (encoder:decoder) argument as two ints; ``a`` alone means ``a:a``."""
    if isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        parts = str(value).split(":")
    if len(parts) == 1:
        parts = parts * 2
    try:
        a, b = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise UsageError(f"{name}={value!r} is not an int or an a:b pair of ints") from None
    return a, b


def pair_text(value: Any) -> Any:
    """A YAML list ``[2, 2]`` as Sockeye's command-line form ``2:2``; other values unchanged."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, str)) for v in value):
        return ":".join(str(v) for v in value)
    return value


def sockeye_args(ckpt: Checkpoint) -> dict[str, Any]:
    """The ``args.yaml`` of a Sockeye model directory (``{}`` for anything else)."""
    hyper = ckpt.hyperparameters
    args = hyper.get("args")
    return args if isinstance(args, dict) else {}


def sockeye_major(ckpt: Checkpoint) -> str | None:
    version = (ckpt.hyperparameters).get("sockeye_version")
    return str(version).split(".")[0] if version else None


def vocab_sizes(ckpt: Checkpoint) -> dict[str, int]:
    """``source_vocab_size``/``target_vocab_size`` from the vocabulary files (first factor),
    else from the model ``config``."""
    hyper = ckpt.hyperparameters
    out: dict[str, int] = {}
    for side, sizes in (hyper.get("vocab_sizes") or {}).items():
        if sizes:
            out[f"{side}_vocab_size"] = int(sizes[0])
    config = hyper.get("config") if isinstance(hyper.get("config"), dict) else {}
    for side, key in (("source", "vocab_source_size"), ("target", "vocab_target_size")):
        if f"{side}_vocab_size" not in out and isinstance(config.get(key), int):
            out[f"{side}_vocab_size"] = config[key]
    return out


def hparams_from_args(arch: Arch, ckpt: Checkpoint) -> dict[str, Any]:
    """The arch's hyperparameters that ``args.yaml`` and the vocabularies state."""
    args = sockeye_args(ckpt)
    out: dict[str, Any] = {}
    for h in arch.hparams:
        if h.name in args:
            v = args[h.name]
            if h.name == "lhuc":
                v = ",".join(v) if isinstance(v, (list, tuple)) else v
            out[h.name] = pair_text(v)
    out.update(vocab_sizes(ckpt))
    for side in ("source", "target"):
        if any(h.name == f"{side}_factor_vocab_sizes" for h in arch.hparams):
            factors = factor_vocab_sizes(ckpt, side)
            if factors is not None:
                out[f"{side}_factor_vocab_sizes"] = factors
    return out


def factor_vocab_sizes(ckpt: Checkpoint, side: str = "source") -> str | None:
    """Factor vocabularies (``vocab.src.1.json`` ...), else the ``config``'s
    ``config_embed_source.factor_configs``; comma-separated."""
    hyper = ckpt.hyperparameters
    sizes = (hyper.get("vocab_sizes") or {}).get(side) or []
    if len(sizes) > 1:
        return ",".join(str(int(s)) for s in sizes[1:])
    config = hyper.get("config") if isinstance(hyper.get("config"), dict) else {}
    embed = config.get(f"config_embed_{side}") or {}
    factors = embed.get("factor_configs") if isinstance(embed, dict) else None
    if isinstance(factors, list):
        return ",".join(str(int(f["vocab_size"])) for f in factors if isinstance(f, dict))
    return "" if sizes else None


def ints(value: Any) -> list[int]:
    """A list of ints from a YAML list, ``"4,2"``/``"4 2"`` text, one int, or nothing."""
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(v) for v in str(value).replace(",", " ").replace(":", " ").split()]


def length_ratio(hp: Mapping[str, Any], hidden: int, fmt: str, sep: str = "_",
                 step: int = 1) -> list[TensorEntry]:
    """``--length-task``: Sockeye's ``LengthRatio`` MLP on the mean encoder state, ``layers - 1``
    tanh layers of the encoder width, then one unit (layers.py); no layers at weight 0.
    ``fmt`` names layer ``i`` (``step``: index stride, 2 where activations are modules)."""
    if not hp["length_task"] or not hp["length_task_weight"]:
        return []
    n = int(hp["length_task_layers"])
    require(n >= 1, "length_task_layers must be at least 1")
    out: list[TensorEntry] = []
    for i in range(n):
        out += linear(fmt.format(i=i * step), hidden if i < n - 1 else 1, hidden, sep=sep,
                      block="length_ratio")
    return out


def conv_embed(hp: Mapping[str, Any], num_embed: int,
               output_dim: int | None) -> tuple[list[TensorEntry], int]:
    """``rnn-with-conv-embed`` / ``transformer-with-conv-embed``: Sockeye 1's
    ``ConvolutionalEmbeddingEncoder`` (encoder.py): one convolution per filter width 1..max over
    the source embedding, weight (filters, 1, width, num_embed); a projection to ``output_dim``
    when that differs from the filter total; then ``gate_i``/``transform_i`` highway layers.
    train.py gives the transformer encoder ``output_dim = num_embed`` and the RNN encoder none
    (the filter total: ``--conv-embed-output-dim`` does not reach the model in 1.18). Returns
    the tensors and the output width."""
    filters = ints(hp["conv_embed_num_filters"])
    require(len(filters) == int(hp["conv_embed_max_filter_width"]),
             "conv_embed_num_filters must have conv_embed_max_filter_width elements")
    total = sum(filters)
    out_dim = total if output_dim is None else output_dim
    p = "encoder_char_"
    t: list[TensorEntry] = []
    for width, n in enumerate(filters, 1):
        t.append(param(f"{p}conv_{width}_weight", (n, 1, width, num_embed), "conv_embed"))
        t.append(param(f"{p}conv_{width}_bias", (n,), "conv_embed"))
    if out_dim != total:
        t += linear(p + "project", out_dim, total, block="conv_embed")
    for i in range(int(hp["conv_embed_num_highway_layers"])):
        t += linear(f"{p}gate_{i}", out_dim, out_dim, block="conv_embed")
        t += linear(f"{p}transform_{i}", out_dim, out_dim, block="conv_embed")
    return t, out_dim


def infer_conv_embed(shapes: Mapping[str, Any], encoder: str) -> dict[str, Any]:
    """The conv-embed settings its stored convolutions and highway layers state."""
    filters = []
    while (w := shapes.get(f"encoder_char_conv_{len(filters) + 1}_weight")):
        filters.append(w[0])
    if not filters:
        return {}
    hw = sum(1 for x in shapes if x.startswith("encoder_char_gate_") and x.endswith("_weight"))
    return {"encoder": encoder, "conv_embed_max_filter_width": len(filters),
            "conv_embed_num_filters": ",".join(map(str, filters)),
            "conv_embed_num_highway_layers": hw}


def require(ok: bool, message: str) -> None:
    """A UsageError naming the inconsistency unless ``ok``."""
    if not ok:
        raise UsageError(f"inconsistent hyperparameters: {message}")

CONV_HPARAMS = (
    HParam("conv_embed_max_filter_width", 8, "conv embed: filter widths 1..max"),
    HParam("conv_embed_num_filters", "200,200,250,250,300,300,300,300",
           "conv embed: filters per width, comma-separated", str),
    HParam("conv_embed_num_highway_layers", 4, "conv embed: highway layers"),
)
