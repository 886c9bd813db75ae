"""Hydra ``_target_`` and NeMo ``target`` / ``cls``: configuration that names a callable, and
the loader calls it with the configuration's values.

* ``hydra.utils.instantiate`` (hydra-core 1.3, ``_internal/instantiate/_instantiate2.py``)
  imports the module of every ``_target_`` (``_locate``) and calls the object with the node's
  other keys as keyword arguments (``_args_`` positional), nested targets first; ``_partial_``
  wraps it in ``functools.partial``, which the program calls later.
* NeMo's ``Serialization.from_config_dict`` (``nemo/core/classes/common.py``) hands ``cls`` +
  ``params`` and ``_target_`` to Hydra, and for a top-level ``target`` imports the class by
  path and calls ``target(cfg=config)``; a model's ``__init__`` instantiates the nested
  ``_target_`` sections (encoder, decoder, optimizer) the same way.

So each named callable is called with file data. Verdicts:

* ``dangerous`` when it is on the dangerous lists (``os.system``, ``subprocess.*``,
  ``builtins.eval``, ...);
* ``safe`` when it is in :data:`VETTED` (reviewed; each entry says what its constructor does);
* otherwise ``dangerous``: an unvetted callable that the loader calls with the config's
  arguments (its import alone runs the module's top level).

NeMo 3.0 (``nemo/core/classes/common.py``, read in nemo-toolkit 3.0.0) checks every ``target``
and ``_target_`` of a model config before calling it: the name must start with one of its
``ALLOWED_TARGET_PREFIXES`` and resolve to a ``torch.nn.Module``, ``ModelPT``,
``Serialization``, dataset or optimizer subclass. Inside a NeMo model config, a class under
:data:`NEMO_MODEL_PREFIXES` (NeMo's model, module and core classes) is therefore the installed
NeMo's own model code, built from the config's values: vetted there, never in a plain Hydra
config, and never when the name is on a dangerous list.
"""

from __future__ import annotations

from . import verdicts as V
from .examination import DANGEROUS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_NODES = 1_000_000
MAX_DEPTH = 200
TARGET_KEYS = ("_target_", "target", "cls")
# Reviewed in torch 2.13.0: constructors that store numbers and tensors they allocate, read no
# file, import nothing named by their arguments, call nothing they are given (torch.optim
# optimizers take the parameters the program passes; schedulers the optimizer).
_OPTIMIZERS = ("Adam", "AdamW", "SGD", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
               "RMSprop", "Rprop", "SparseAdam", "LBFGS")
_SCHEDULERS = ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
               "CosineAnnealingWarmRestarts", "OneCycleLR", "LinearLR", "ConstantLR",
               "PolynomialLR", "ReduceLROnPlateau", "CyclicLR")
_MODULES = ("Linear", "Embedding", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "Dropout",
            "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Identity", "Conv1d", "Conv2d", "LSTM",
            "GRU", "Softmax", "LogSoftmax", "CrossEntropyLoss", "MSELoss", "L1Loss",
            "CTCLoss")
VETTED: dict[str, str] = {
    **{f"torch.optim.{n}": "torch 2.13.0 optimizer: stores hyperparameters"
       for n in _OPTIMIZERS},
    **{f"torch.optim.lr_scheduler.{n}": "torch 2.13.0 scheduler: stores hyperparameters"
       for n in _SCHEDULERS},
    **{f"torch.nn.{n}": "torch 2.13.0 module: allocates its parameters from numbers"
       for n in _MODULES},
}
# The NeMo prefixes of nemo/core/classes/common.py ALLOWED_TARGET_PREFIXES (nemo-toolkit
# 3.0.0) that hold NeMo's models and neural modules.
NEMO_MODEL_PREFIXES = ("nemo.collections.", "nemo.core.classes.")


def target_items(config: Any, nemo: bool = False) -> list[tuple[str, str, str]]:
    """``(level, text, config path)`` for every callable the config names; ``nemo``: the
    config is a NeMo model config (its top-level ``target`` is NeMo's model class)."""
    out: list[tuple[str, str, str]] = []
    stack: list[tuple[Any, str, int]] = [(config, "", 0)]
    nodes = 0
    while stack:
        node, path, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES or depth > MAX_DEPTH:
            out.append((DANGEROUS, "config too large or deep to examine: its targets are "
                                   "not all known", path))
            break
        if isinstance(node, str):
            out += _text_targets(node, path, nemo)
            continue
        if isinstance(node, list):
            stack.extend((v, f"{path}.{i}", depth + 1) for i, v in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        keys = [k for k in TARGET_KEYS if isinstance(node.get(k), str)]
        if "cls" in keys and "params" not in node and "_target_" not in node:
            keys.remove("cls")  # NeMo hands cls to Hydra only together with params
        if "target" in keys and not (nemo and path == ""):
            keys.remove("target")  # only NeMo's model config uses a plain "target"
        for key in keys:
            here = f"{path}.{key}" if path else key
            level, text = judge(node[key], key, nemo)
            if level is not None:
                out.append((level, text, here))
        for k, v in node.items():
            if isinstance(v, (dict, list)) or isinstance(v, str) and (
                    "_target_" in v or "oc.create" in v or "oc.decode" in v):
                stack.append((v, f"{path}.{k}" if path else str(k), depth + 1))
    return out


# oc.create / oc.decode of an argument that is itself interpolated: its text (and any
# _target_ key spelled in pieces, "${a}${b}") exists only at resolve time.
_BUILT = __import__("re").compile(r"\$\{\s*oc\.(?:create|decode)\s*:[^}]*\$\{")


def _text_targets(text: str, path: str, nemo: bool) -> list[tuple[str, str, str]]:
    """A string spelling a ``_target_`` node: OmegaConf's ``${oc.create:...}`` parses text (an
    inline mapping, or another value it interpolates) into config nodes when the value is
    read, and ``instantiate`` calls their targets. Each spelled target is judged."""
    import re

    if _BUILT.search(text[:100_000]):
        return [(DANGEROUS, "an interpolation that builds config nodes from text computed when "
                            "it is read (${oc.create:${...}}, ${oc.decode:${...}}): the "
                            "_target_ it may spell is not known before then", path)]
    if "_target_" not in text:
        return []
    names = re.findall(r"_target_['\"]?\s*:\s*['\"]?([^\s'\",}\]]+)", text[:100_000])
    if not names:
        return [(DANGEROUS, "a string spelling a _target_ that was not read (an interpolation "
                            "such as ${oc.create:...} makes it a node instantiate calls)", path)]
    out = []
    for name in names[:1000]:
        level, why = judge(name, "_target_", nemo)
        if level is not None:
            out.append((level, f"{why} (spelled in a string: an interpolation such as "
                               "${oc.create:...} makes it a node)", path))
    return out


def judge(target: str, key: str, nemo: bool) -> tuple[str | None, str]:
    """(level or None for safe, text) for one named callable (``nemo``: in a NeMo model
    config)."""
    who = ("NeMo's restore_from imports it and calls it with cfg=the config" if key == "target"
           else "hydra.utils.instantiate imports it and calls it with the config's arguments")
    module, _, name = target.rpartition(".")
    why = V.listed(module, name) if module else V.listed("builtins", target)
    parts = target.split(".")
    for i in range(1, len(parts) - 1):  # hydra's _locate: a module, then attributes
        why = why or V.listed(".".join(parts[:i]), ".".join(parts[i:]))
    if why:
        return DANGEROUS, f"{key} {target!r} ({why}): {who}"
    if target in VETTED:
        return None, ""
    if nemo and target.startswith(NEMO_MODEL_PREFIXES):
        return None, ""
    return DANGEROUS, f"{key} {target!r}: an unvetted callable; {who}"
