"""The formula engine's vocabulary: hyperparameters, expected tensors, predictions, architectures.

An architecture turns hyperparameters (named as its producer names them) into a
:class:`Prediction`: the expected ``name -> shape`` list in the framework's own naming. Every
count (per group through the shared grouping scheme, total, closed form) is derived from that
list, so no formula is written twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.adapters.errors import UsageError


@dataclass(frozen=True)
class HParam:
    """One hyperparameter of an architecture, under its producer's name."""

    name: str
    default: Any
    help: str = ""
    kind: type = int  # int, float, str or bool; "a:b" encoder:decoder pairs are str
    choices: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Expected:
    """One tensor an architecture predicts. ``tied_to`` names the tensor it shares storage with
    (counted once); ``block`` names the formula block that produced it."""

    name: str
    shape: tuple[int, ...]
    role: str = "parameter"
    block: str = ""
    tied_to: str | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class Prediction:
    """What an architecture expects, for one set of hyperparameters."""

    arch: str
    hparams: dict[str, Any]
    tensors: list[Expected]
    notes: list[str] = field(default_factory=list)

    def total(self, role: str | None = "parameter") -> int:
        """Elements over tensors of ``role`` (all roles when None), tied tensors counted once."""
        return sum(
            t.numel
            for t in self.tensors
            if t.tied_to is None and (role is None or t.role == role)
        )

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {t.name: t.shape for t in self.tensors}


@dataclass(frozen=True)
class Symbol:
    """A variable of an architecture's closed form (see :mod:`inspector.formulas.closed_form`).

    ``targets`` are the hyperparameters it sets: a name, or ``"name:i"`` for part ``i`` of an
    ``a:b`` pair (``"num_layers:0"`` is the encoder's). The total must be a polynomial of degree
    at most ``degree`` in it for values ``start, start + step, ...``.
    """

    name: str
    targets: tuple[str, ...]
    degree: int = 2
    start: int = 1
    step: int = 1
    help: str = ""


@dataclass(frozen=True)
class Arch:
    """A named architecture: its hyperparameters and the function that predicts its tensors.

    ``from_checkpoint`` returns the hyperparameters a checkpoint carries (embedded config or
    sidecar), ``infer`` those its shapes determine; both may return a partial dict. ``applies``
    says whether a checkpoint looks like this architecture (used by ``check`` without
    ``--arch``); ``symbols`` are the integer hyperparameters the closed form is written in.
    """

    name: str
    description: str
    hparams: tuple[HParam, ...]
    predict: Callable[[Mapping[str, Any]], Prediction]
    scheme: str | None = None
    from_checkpoint: Callable[[Any], dict[str, Any]] | None = None
    infer: Callable[[Any], dict[str, Any]] | None = None
    applies: Callable[[Any], bool] | None = None
    symbols: tuple[Symbol, ...] = ()

    def defaults(self) -> dict[str, Any]:
        return {h.name: h.default for h in self.hparams}

    def resolve(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with ``values``, each coerced to its declared kind."""
        known = {h.name: h for h in self.hparams}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise UsageError(
                f"{self.name} has no hyperparameter {', '.join(unknown)}; "
                f"it has {', '.join(known)}"
            )
        out = self.defaults()
        for k, v in values.items():
            out[k] = coerce(known[k], v)
        return out


def coerce(h: HParam, value: Any) -> Any:
    """``value`` (often a command-line string) as ``h``'s kind, checked against its choices."""
    try:
        if value is None:
            v = None
        elif h.kind is bool and isinstance(value, str):
            if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(value)
            v = value.lower() in ("1", "true", "yes")
        else:
            v = h.kind(value)
    except (TypeError, ValueError):
        raise UsageError(f"{h.name}={value!r} is not a {h.kind.__name__}") from None
    if h.choices is not None and v not in h.choices:
        raise UsageError(f"{h.name}={v!r}: choose from {', '.join(map(str, h.choices))}")
    return v


_ARCHS: dict[str, Arch] = {}
# The built-in grouping schemes an architecture may name (inspector/schemes/<name>.yaml).
_SCHEMES = Path(__file__).resolve().parent.parent / "schemes"


def register(arch: Arch) -> Arch:
    """Add ``arch`` to the registry; a duplicate name or a scheme that does not exist is an
    error at import time, never a silent fallback to another grouping."""
    if arch.name in _ARCHS:
        raise ValueError(f"architecture {arch.name!r} registered twice")
    if arch.scheme is not None and not _SCHEMES.joinpath(f"{arch.scheme}.yaml").is_file():
        raise ValueError(
            f"architecture {arch.name!r} names the grouping scheme {arch.scheme!r}, which does "
            f"not exist in {_SCHEMES}"
        )
    _ARCHS[arch.name] = arch
    return arch


def archs() -> list[Arch]:
    _load_builtins()
    return list(_ARCHS.values())


def get(name: str) -> Arch:
    _load_builtins()
    try:
        return _ARCHS[name]
    except KeyError:
        raise UsageError(
            f"unknown architecture {name!r}; known: {', '.join(sorted(_ARCHS))}"
        ) from None


# Modules under inspector.formulas that register architectures when imported.
BUILTIN_MODULES: tuple[str, ...] = (
    "keras", "sockeye_rnn", "sockeye_transformer", "sockeye_cnn", "seed001", "torch_nn", "hf", "rau"
)


def _load_builtins() -> None:
    from importlib import import_module

    for m in BUILTIN_MODULES:
        import_module(f"inspector.formulas.{m}")


def total_of(tensors: Iterable[Expected]) -> int:
    return sum(t.numel for t in tensors if t.tied_to is None)
