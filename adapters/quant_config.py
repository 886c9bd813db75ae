"""Whether a checkpoint is a quantized Hugging Face one, found without importing the
quantization models: every listing asks, few checkpoints are (:mod:`.quantized` reads those)."""

from __future__ import annotations

from .errors import InspectorError
from .side_files import HF_CONFIG
from .source import LocalSource

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def hf_config(ckpt: Any) -> Mapping[str, Any] | None:
    """The config.json of a quantized HF checkpoint: the one an HF directory read as its
    hyperparameters, else (a lone local safetensors file) the one beside it; None without one.
    A sibling config.json that cannot be read is no quantization config."""
    cfg = ckpt.hyperparameters.get("config")
    if isinstance(cfg, dict) and "quantization_config" in cfg:
        return cfg
    src = ckpt.source
    # local files only: a listing of a remote file spends no request on a guess
    if not isinstance(src, LocalSource) or not str(ckpt.format).startswith("safetensors") \
            or len(ckpt.paths) != 1:
        return None

    try:  # the side config the registry attached (side_files.beside), read now
        side = None if ckpt.side_configs is None else ckpt.side_configs.get(HF_CONFIG)
    except (InspectorError, OSError, ValueError):
        return None
    return side if isinstance(side, dict) else None


def is_quantized(ckpt: Any) -> bool:
    """Whether ``ckpt`` has an HF ``quantization_config`` (:func:`.quantized.summary` has
    something to say about it)."""
    config = hf_config(ckpt)
    return bool(config) and isinstance(config.get("quantization_config"), dict)
