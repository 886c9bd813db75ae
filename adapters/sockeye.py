"""Sockeye model directories (Sockeye 1 and 2 on MXNet, Sockeye 3 on PyTorch).

A directory with ``config`` and ``params.best`` (or ``params.NNNNN``) is a Sockeye model
(``sockeye/constants.py``: PARAMS_BEST_NAME, CONFIG_NAME, ARGS_STATE_NAME = ``args.yaml``,
VOCAB_SRC_NAME = ``vocab.src``, VERSION_NAME). The params file is read by the adapter its content
calls for (MXNet NDArray for Sockeye 1/2, torch for Sockeye 3); ``config`` and ``args.yaml``
become the checkpoint's hyperparameters, parsed without Sockeye and without building objects;
vocabulary sizes come from the ``vocab.{src,trg}[.N].json`` files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .errors import FormatError
from .model import Checkpoint
from .registry import Adapter, detect
from .yaml_safe import load_yaml

NAME = "sockeye"
PARAMS_RE = re.compile(r"params\.(\d+)")
VOCAB_RE = re.compile(r"vocab\.(src|trg)(?:\.(\d+))?\.json")
MAX_VOCAB_BYTES = 200_000_000
# args.yaml entries that change a parameter shape or count, shown as the summary (all versions).
SUMMARY_KEYS = (
    "encoder",
    "decoder",
    "num_layers",
    "num_embed",
    "rnn_cell_type",
    "rnn_num_hidden",
    "rnn_attention_type",
    "rnn_attention_num_hidden",
    "rnn_attention_mhdot_heads",
    "rnn_attention_coverage_type",
    "rnn_attention_coverage_num_hidden",
    "rnn_decoder_state_init",
    "rnn_context_gating",
    "rnn_residual_connections",
    "rnn_first_residual_layer",
    "rnn_encoder_reverse_input",
    "rnn_attention_in_upper_layers",
    "rnn_enc_last_hidden_concat_to_embedding",
    "layer_normalization",
    "lhuc",
    "cnn_num_hidden",
    "cnn_kernel_width",
    "cnn_positional_embedding_type",
    "transformer_model_size",
    "transformer_attention_heads",
    "transformer_feed_forward_num_hidden",
    "transformer_positional_embedding_type",
    "transformer_preprocess",
    "transformer_postprocess",
    "weight_tying",
    "weight_tying_type",
    "source_factors_num_embed",
    "num_words",
    "max_seq_len",
)


def params_file(directory: Path) -> Path | None:
    """``params.best``, else the newest ``params.NNNNN``."""
    best = directory / "params.best"
    if best.is_file():
        return best
    numbered = [p for p in directory.iterdir() if PARAMS_RE.fullmatch(p.name) and p.is_file()]
    return max(numbered, key=lambda p: int(p.name.split(".")[1]), default=None)


def sniff(head: bytes, path: Path) -> str | None:
    if path.is_dir() and (path / "config").is_file() and params_file(path) is not None:
        return "model-dir"
    return None


def _vocab_sizes(directory: Path) -> dict[str, list[int]]:
    sizes: dict[str, dict[int, int]] = {}
    for p in sorted(directory.iterdir()):
        m = VOCAB_RE.fullmatch(p.name)
        if not m:
            continue
        if p.stat().st_size > MAX_VOCAB_BYTES:
            raise FormatError(f"vocabulary file exceeds {MAX_VOCAB_BYTES} bytes", str(p))
        try:
            vocab = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise FormatError(f"vocabulary is not readable JSON ({e})", str(p)) from None
        if not isinstance(vocab, dict):
            raise FormatError("vocabulary is not a JSON object of token -> id", str(p))
        side = "source" if m.group(1) == "src" else "target"
        sizes.setdefault(side, {})[int(m.group(2) or 0)] = len(vocab)
    return {side: [n for _, n in sorted(by_factor.items())] for side, by_factor in sizes.items()}


def _flavour(version: str | None, inner_format: str) -> str:
    if inner_format.startswith("torch"):
        return "sockeye3-pytorch"
    if version and version.startswith("1."):
        return "sockeye1-mxnet-symbolic"
    if version and version.startswith("2."):
        return "sockeye2-mxnet-gluon"
    return "mxnet"


def open_checkpoint(path: Path, variant: str) -> Checkpoint:
    if variant != "model-dir":
        raise FormatError(f"unsupported Sockeye variant {variant!r}", str(path))
    params = params_file(path)
    assert params is not None  # sniff checked
    adapter, inner_variant = detect(params)
    if adapter.name == NAME:
        raise FormatError("params file is itself a directory", str(params))
    inner = adapter.open(params, inner_variant)
    version_file = path / "version"
    version = version_file.read_text(encoding="utf-8").strip() if version_file.is_file() else None
    hyper: dict[str, Any] = {"sockeye_version": version}
    hyper["config"] = load_yaml(path / "config")
    if (path / "args.yaml").is_file():
        hyper["args"] = load_yaml(path / "args.yaml")
    vocab = _vocab_sizes(path)
    if vocab:
        hyper["vocab_sizes"] = vocab
    args = hyper.get("args") if isinstance(hyper.get("args"), dict) else {}
    # Options of the architectures this model does not use are defaults, not facts about it.
    kinds = {str(args.get(side, "")).split("-")[0] for side in ("encoder", "decoder")}
    unused = tuple(f"{k}_" for k in ("rnn", "cnn", "transformer") if k not in kinds)
    summary = {
        "sockeye_version": version,
        **{k: args[k] for k in SUMMARY_KEYS if k in args and not (kinds and k.startswith(unused))},
    }
    if vocab:
        summary["vocab_sizes"] = vocab
    hyper["summary"] = summary
    metadata = {
        "sockeye_version": version,
        "flavour": _flavour(version, inner.format),
        "params_file": params.name,
        "params_target": params.resolve().name,
        "params_format": inner.format,
        "params_metadata": inner.metadata,
    }
    return Checkpoint(
        paths=(str(path), str(params)),
        format=NAME,
        tensors=inner.tensors,
        metadata=metadata,
        hyperparameters=hyper,
        findings=inner.findings,
    )


ADAPTER = Adapter(
    name=NAME,
    description="Sockeye model directory (params.best + config + args.yaml + vocabs)",
    extensions=("<directory>",),
    sniff=sniff,
    open=open_checkpoint,
)
