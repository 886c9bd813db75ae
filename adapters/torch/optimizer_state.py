"""Optimizer state named after its parameter, not after a key that changes from run to run.

``Optimizer.state_dict()`` is ``{"state": {key: {...tensors}}, "param_groups": [{"params":
[key, ...], ...}]}`` (``torch/optim/optimizer.py``). torch >= 0.4 numbers the keys 0, 1, ... in
``param_groups`` order; older torch (and code that copied its layout) used ``id(param)``, a memory
address that differs between two runs of the same model. Each state key is mapped to its
parameter through ``param_groups`` order: the canonical name becomes
``<optimizer>.state.<index>.<slot>`` or, when the groups carry ``param_names`` (torch >= 2.6 with
named parameters), ``<optimizer>.state.<parameter name>.<slot>``. Stored names stay as stored.
"""

from __future__ import annotations

from typing import Any

from ..model import TensorEntry
from .constants import OPTIMIZER_KEYS


def _optimizers(obj: Any) -> list[tuple[str, dict]]:
    """(name prefix, optimizer state dict) found at the top of a checkpoint: the checkpoint
    itself (a bare ``optimizer.state_dict()``, SpeechBrain's ``optimizer.ckpt``), or under an
    ``OPTIMIZER_KEYS`` entry, directly (fairseq's ``last_optimizer_state``), in a list (Lightning's
    ``optimizer_states``) or inside a wrapper's dict (OpenNMT-py's ``optim``: ``{"training_step",
    "decay_step", "optimizer": state dict}``), at most :data:`MAX_NESTING` levels down."""
    out: list[tuple[str, dict]] = []
    if is_optimizer(obj):
        out.append(("", obj))
    elif isinstance(obj, dict):
        for key in OPTIMIZER_KEYS:
            if key in obj:
                _collect(obj[key], key, 0, out)
    return out


MAX_NESTING = 2


def _collect(value: Any, prefix: str, depth: int, out: list[tuple[str, dict]]) -> None:
    if is_optimizer(value):
        out.append((prefix, value))
    elif depth < MAX_NESTING:
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str) and isinstance(v, (dict, list, tuple)):
                    _collect(v, f"{prefix}.{k}", depth + 1, out)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                _collect(v, f"{prefix}.{i}", depth + 1, out)


def is_optimizer(value: Any) -> bool:
    """``value`` has the layout of ``torch.optim.Optimizer.state_dict()``."""
    return (isinstance(value, dict) and isinstance(value.get("state"), dict)
            and isinstance(value.get("param_groups"), (list, tuple)))


def state_names(optimizer: dict) -> dict[str, str]:
    """str(state key) -> the parameter's index or name, in ``param_groups`` order; {} when the
    keys are already those indices (nothing to rename) or the groups do not list the keys."""
    keys: list[Any] = []
    names: list[Any] = []
    for group in optimizer["param_groups"]:
        if not isinstance(group, dict) or not isinstance(group.get("params"), (list, tuple)):
            return {}
        keys.extend(group["params"])
        pn = group.get("param_names")
        names.extend(pn if isinstance(pn, (list, tuple)) and len(pn) == len(group["params"])
                     else [None] * len(group["params"]))
    if len(set(map(str, keys))) != len(keys):
        return {}
    out = {str(k): str(n) if isinstance(n, str) else str(i)
           for i, (k, n) in enumerate(zip(keys, names, strict=True))}
    return {} if all(k == v for k, v in out.items()) else out


def align(obj: Any, entries: list[TensorEntry]) -> list[TensorEntry]:
    """``entries`` with optimizer-state names mapped to their parameters (see the module doc)."""
    renames: list[tuple[str, dict[str, str]]] = []
    for prefix, optimizer in _optimizers(obj):
        mapping = state_names(optimizer)
        if mapping:
            renames.append((f"{prefix}.state." if prefix else "state.", mapping))
    if not renames:
        return entries
    out = []
    for t in entries:
        for head, mapping in renames:
            if t.name.startswith(head):
                key, dot, rest = t.name[len(head):].partition(".")
                if key in mapping:
                    t = t.replace(name=head + mapping[key] + dot + rest)
                break
        out.append(t)
    return out
