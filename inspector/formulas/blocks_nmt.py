"""Pieces the NMT-toolkit formulas share (fairseq, OpenNMT-py, JoeyNMT, OpenNMT-tf).

- :func:`rnn_cell`: ``nn.LSTMCell`` / ``nn.GRUCell`` / ``nn.RNNCell`` (the stacked cells of
  input-feeding decoders);
- :class:`Option` and :func:`option_parts`: a toolkit's shape-changing options that a formula
  does not model, as data: set in the stored configuration, each one becomes a
  :class:`~inspector.formulas.core.Part` (``check`` says ``incomplete`` and names it, never
  ``mismatch``);
- :func:`layer_count`: a stack's layers, bounded (a hostile configuration never makes a
  prediction of millions of tensors);
- :func:`config_value`: one key of a stored configuration, with the spellings older versions
  used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import TensorEntry
from inspector.formulas import blocks_torch as bt
from inspector.formulas.core import Part

CELL_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# More layers than any real model has: a configuration that says so (damaged or hostile) is
# refused before a prediction of millions of tensors is built.
MAX_LAYERS = 4096


def layer_count(n: int, name: str) -> range:
    """``range(n)`` for a stack's layers, refused (UsageError) outside 0..MAX_LAYERS."""
    if not 0 <= n <= MAX_LAYERS:
        raise UsageError(f"{name}={n}: not a layer count this check models (0..{MAX_LAYERS})")
    return range(n)


def rnn_cell(prefix: str, mode: str, input_size: int, hidden_size: int,
             bias: bool = True) -> list[TensorEntry]:
    """``nn.LSTMCell`` / ``nn.GRUCell`` / ``nn.RNNCell``: ``weight_ih`` (gates*h, in),
    ``weight_hh`` (gates*h, h), ``bias_ih`` / ``bias_hh`` (gates*h)."""
    gate = CELL_GATES[mode] * hidden_size
    block = f"torch_{mode.lower()}_cell"
    out = [bt.param(prefix, "weight_ih", (gate, input_size), block),
           bt.param(prefix, "weight_hh", (gate, hidden_size), block)]
    if bias:
        out += [bt.param(prefix, "bias_ih", (gate,), block),
                bt.param(prefix, "bias_hh", (gate,), block)]
    return out


def _set(value: Any) -> bool:
    return value not in (None, False, 0, 0.0, "", [], (), "none", "None", "False", "false")


@dataclass(frozen=True)
class Option:
    """One configuration key whose value (when ``active``) the formula does not model; ``pattern``
    names the tensors it adds or reshapes (``"."``: it may change any of them)."""

    key: str
    reason: str
    pattern: str = "."
    active: Callable[[Any, Mapping[str, Any]], bool] = lambda value, cfg: _set(value)


def option_parts(cfg: Mapping[str, Any], options: Iterable[Option]) -> list[Part]:
    """The :class:`Part` of every option of ``options`` that ``cfg`` sets."""
    out = []
    for o in options:
        if o.key in cfg and o.active(cfg[o.key], cfg):
            out.append(Part(f"{o.key}={cfg[o.key]!r}", o.reason, o.pattern))
    return out


def config_value(cfg: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    """The first of ``keys`` that ``cfg`` holds (not None), else ``default``."""
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def as_bool(value: Any) -> bool:
    """A flag as the toolkits store it: a bool, 0/1, or a string (``"1"``, ``"True"``)."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)
