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

from .errors import FormatError
from .model import Checkpoint
from .registry import Adapter, load
from .side_files import SOCKEYE_CONFIG
from .source import Source
from .yaml_safe import load_yaml

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

NAME = "sockeye"
PARAMS_RE = re.compile(r"params\.(\d+)")
VOCAB_RE = re.compile(r"vocab\.(src|trg)(?:\.(\d+))?\.json")
MAX_VOCAB_BYTES = 200_000_000
MAX_SIDE_FILE = 1 << 20
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


def params_file(directory: Source) -> Source | None:
    """``params.best``, else the newest ``params.NNNNN``."""
    names = directory.list()
    if "params.best" in names and directory.child("params.best").is_file():
        return directory.child("params.best")
    numbered = [n for n in names if PARAMS_RE.fullmatch(n) and directory.child(n).is_file()]
    newest = max(numbered, key=lambda n: int(n.split(".")[1]), default=None)
    return None if newest is None else directory.child(newest)


def sniff(head: bytes, source: Source) -> str | None:
    if (
        source.is_dir()
        and "config" in source.list()
        and source.child("config").is_file()
        and params_file(source) is not None
    ):
        return "model-dir"
    return None


def _vocab_sizes(directory: Source) -> dict[str, list[int]]:
    sizes: dict[str, dict[int, int]] = {}
    for name in directory.list():
        m = VOCAB_RE.fullmatch(name)
        if not m:
            continue
        p = directory.child(name)
        if p.size > MAX_VOCAB_BYTES:
            raise FormatError(f"vocabulary file exceeds {MAX_VOCAB_BYTES} bytes", p.where)
        try:
            vocab = json.loads(p.read_text(MAX_VOCAB_BYTES))
        except ValueError as e:
            raise FormatError(f"vocabulary is not readable JSON ({e})", p.where) from None
        if not isinstance(vocab, dict):
            raise FormatError("vocabulary is not a JSON object of token -> id", p.where)
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


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    if variant != "model-dir":
        raise FormatError(f"unsupported Sockeye variant {variant!r}", source.where)
    params = params_file(source)
    assert params is not None  # sniff checked
    inner = load(params)
    if inner.format == NAME:
        raise FormatError("params file is itself a directory", params.where)
    names = source.list()
    version = None
    if "version" in names and source.child("version").is_file():
        version = source.child("version").read_text(MAX_SIDE_FILE).strip()
    hyper: dict[str, Any] = {"sockeye_version": version}
    hyper["config"] = load_yaml(source.child("config"))
    if "args.yaml" in names:
        hyper["args"] = load_yaml(source.child("args.yaml"))
    vocab = _vocab_sizes(source)
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
        "params_target": _target_name(params),
        "params_format": inner.format,
        "params_metadata": inner.metadata,
    }
    return Checkpoint(
        paths=(source.where, params.where),
        format=NAME,
        tensors=inner.tensors,
        metadata=metadata,
        hyperparameters=hyper,
        findings=inner.findings,
        source=source,
        reader=inner.reader,
        side_configs={SOCKEYE_CONFIG: hyper["config"]},
    )


def _target_name(params: Source) -> str:
    """The file name ``params.best`` points to when it is a symlink (Sockeye's own layout)."""
    local = params.local_path
    return local.resolve().name if local is not None else params.name


ADAPTER = Adapter(
    name=NAME,
    description="Sockeye model directory (params.best + config + args.yaml + vocabs)",
    extensions=("<directory>",),
    sniff=sniff,
    open=open_checkpoint,
)
