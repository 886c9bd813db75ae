"""Block dequantization of ggml's quantized types, exactly as ggml defines it.

ggml ``ggml-quants.c``: ``dequantize_row_q8_0`` (a block is an fp16 scale ``d`` and 32 int8
``qs``; ``y[j] = qs[j] * d``) and ``dequantize_row_q4_0`` (an fp16 ``d`` and 16 bytes of
nibbles; ``y[j] = ((qs[j] & 0x0F) - 8) * d`` and ``y[j + 16] = ((qs[j] >> 4) - 8) * d``). The
scale is widened from fp16 to fp32 and each product is one fp32 multiplication, as in C, so the
values are bit-identical to llama.cpp's (and to gguf-py's ``quants.dequantize``).

Only little-endian blocks are decoded; the other block types are named, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from inspector.adapters.dtypes import BLOCKS


def _scale(blocks: Any) -> Any:
    """The fp16 scale at the start of each block, as an (n, 1) float32 column."""
    return np.ascontiguousarray(blocks[:, :2]).view("<f2").astype(np.float32)


def q8_0(raw: bytes) -> Any:
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, BLOCKS["q8_0"][1])
    qs = blocks[:, 2:].view(np.int8).astype(np.float32)
    return (qs * _scale(blocks)).reshape(-1)


def q4_0(raw: bytes) -> Any:
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, BLOCKS["q4_0"][1])
    qs = blocks[:, 2:]
    x = np.concatenate([(qs & 0x0F).astype(np.int8) - 8, (qs >> 4).astype(np.int8) - 8], axis=1)
    return (x.astype(np.float32) * _scale(blocks)).reshape(-1)


# block type -> decoder of whole blocks (bytes -> float32 elements)
DECODERS: dict[str, Callable[[bytes], Any]] = {"q8_0": q8_0, "q4_0": q4_0}
