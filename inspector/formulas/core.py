"""The formula engine's vocabulary: hyperparameters, expected tensors, predictions, architectures.

An architecture turns hyperparameters (named as its producer names them) into a
:class:`Prediction`: the expected ``name -> shape`` list in the framework's own naming. Every
count (per group through the shared grouping scheme, total, closed form) is derived from that
list, so no formula is written twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, Role, TensorEntry


@dataclass(frozen=True)
class HParam:
    """One hyperparameter of an architecture, under its producer's name."""

    name: str
    default: Any
    help: str = ""
    kind: type = int  # int, float, str or bool; "a:b" encoder:decoder pairs are str
    choices: tuple[Any, ...] | None = None


def expected(name: str, shape: Iterable[int], role: str = "parameter", block: str = "",
             tied_to: str | None = None) -> TensorEntry:
    """One tensor an architecture predicts, as the same record an adapter makes for a stored
    one (:class:`~inspector.adapters.model.TensorEntry`): ``stored_name`` = ``name``, no dtype
    (a prediction does not say one), ``storage`` = the name of the tensor whose memory it uses
    (its own, or ``tied_to``'s: tied tensors share an identity and are counted once, as stored
    ones are). ``extra["block"]`` names the formula block that produced it."""
    extra: dict[str, Any] = {"block": block} if block else {}
    if tied_to:
        extra["tied_to"] = tied_to
    return TensorEntry(stored_name=name, name=name, shape=tuple(int(d) for d in shape),
                       dtype=None, role=Role(role), storage=tied_to or name, extra=extra)


def tied_to(t: TensorEntry) -> str | None:
    """The predicted tensor ``t`` shares storage with, None when it owns its storage."""
    return t.extra.get("tied_to")


def block_of(t: TensorEntry) -> str:
    """The formula block that predicted ``t`` ("" when none was named)."""
    return t.extra.get("block", "")


def revised(t: TensorEntry, *, name: str | None = None, role: str | None = None,
            block: str | None = None, tie: str | None = None) -> TensorEntry:
    """A predicted tensor with some of its facts changed (``tie``: the tensor it now shares
    storage with)."""
    return expected(t.name if name is None else name, t.shape,
                    str(t.role) if role is None else role,
                    block_of(t) if block is None else block,
                    tied_to(t) if tie is None else tie)


def side_config(ckpt: Checkpoint, key: str) -> dict[str, Any]:
    """The side configuration ``key`` the adapters attached to ``ckpt`` (``hf_config``,
    ``rau_kwargs``, ... :mod:`inspector.adapters.side_files`); ``{}`` when there is none."""
    found = None if ckpt.side_configs is None else ckpt.side_configs.get(key)
    return found if isinstance(found, dict) else {}


def counted(tensors: Iterable[TensorEntry], role: str | None = "parameter") -> list[TensorEntry]:
    """The tensors of ``role`` (every role when None) that own their storage: the ones a
    parameter count adds up (a tied alias is counted once, through its owner)."""
    return [t for t in tensors if "tied_to" not in t.extra and (role is None or t.role == role)]


@dataclass(frozen=True)
class Part:
    """A part of a checkpoint that an architecture does not model (an option it does not know,
    an unknown layer type, ...): ``check`` reports the tensors whose names ``pattern`` matches
    (``re.search``) as ``not modelled`` with ``reason``, never as a mismatch."""

    name: str
    reason: str
    pattern: str | None = None
    ops: tuple[str, ...] = ("removed", "added", "reshaped")  # which differences it explains

    def covers(self, name: str, op: str = "added") -> bool:
        return (self.pattern is not None and op in self.ops
                and re.search(self.pattern, name) is not None)


@dataclass
class Prediction:
    """What an architecture expects, for one set of hyperparameters; ``parts`` are what the
    prediction leaves out (see :class:`Part`)."""

    arch: str
    hparams: dict[str, Any]
    tensors: list[TensorEntry]
    notes: list[str] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)

    def total(self, role: str | None = "parameter") -> int:
        """Elements over tensors of ``role`` (all roles when None), tied tensors counted once."""
        return sum(t.numel for t in counted(self.tensors, role))

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

    What ``check`` may call a mismatch: ``modelled`` are regexes (``re.search``) of the tensor
    names the architecture models; a stored tensor nobody predicted whose name matches none of
    them is ``not modelled`` (an unrecognised tensor), not ``unexpected``. Empty: every name is
    modelled. ``unmodelled`` names the parts of a checkpoint (options from its config, ...) the
    architecture does not model. ``aliases`` map a producer's other names for a hyperparameter
    (its config keys, its command-line names) to the name used here; a command-line form
    (``--rnn-num-hidden``, ``rnn-num-hidden``) of a hyperparameter's name is accepted too.
    """

    name: str
    description: str
    hparams: tuple[HParam, ...]
    predict: Callable[[Mapping[str, Any]], Prediction]
    scheme: str | None = None
    from_checkpoint: Callable[[Checkpoint], dict[str, Any]] | None = None
    infer: Callable[[Checkpoint], dict[str, Any]] | None = None
    applies: Callable[[Checkpoint], bool] | None = None
    symbols: tuple[Symbol, ...] = ()
    modelled: tuple[str, ...] = ()
    unmodelled: Callable[[Checkpoint], list[Part]] | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)

    def canonical(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` with aliases replaced by the hyperparameter names (a name given twice,
        once by alias, raises UsageError)."""
        out: dict[str, Any] = {}
        given: dict[str, str] = {}
        known = {h.name for h in self.hparams}
        for k, v in values.items():
            dashed = k.lstrip("-").replace("-", "_")  # --rnn-num-hidden as on the command line
            name = self.aliases.get(k, dashed if dashed in known else k)
            if name in out:
                raise UsageError(f"{given[name]} and {k} are one hyperparameter ({name}); "
                                 "give it once")
            out[name], given[name] = v, k
        return out

    def defaults(self) -> dict[str, Any]:
        return {h.name: h.default for h in self.hparams}

    def resolve(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with ``values``, each coerced to its declared kind."""
        known = {h.name: h for h in self.hparams}
        values = self.canonical(values)
        unknown = sorted(set(values) - set(known))
        if unknown:
            also = f" (also as {', '.join(self.aliases)})" if self.aliases else ""
            raise UsageError(
                f"{self.name} has no hyperparameter {', '.join(unknown)}; "
                f"it has {', '.join(known)}{also}"
            )
        out = self.defaults()
        for k, v in values.items():
            out[k] = coerce(known[k], v)
        return Recorded(out)


_used: ContextVar[set[str] | None] = ContextVar("inspector_hparams_used", default=None)


class Recorded(dict):
    """Resolved hyperparameters that note which ones a prediction reads (``hp[k]``,
    ``hp.get(k)``) while :func:`reading` runs, so ``check`` shows those the formula used."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        used = _used.get()
        if used is not None:
            used.add(key)
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        used = _used.get()
        if used is not None and key in self:
            used.add(key)
        return dict.get(self, key, default)


def reading(fn: Callable[..., Any], *args: Any) -> tuple[Any, set[str]]:
    """``fn(*args)`` and the names of the hyperparameters it read from a :class:`Recorded`."""
    token = _used.set(set())
    try:
        result = fn(*args)
        return result, _used.get() or set()
    finally:
        _used.reset(token)


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
    "keras", "sockeye_rnn", "sockeye_transformer", "sockeye_cnn", "seed001", "fairseq", "onmt",
    "joeynmt", "onmt_tf", "torch_nn", "hf",
    "rau", "gguf", "ctranslate2", "marian", "megatron",
)


def _load_builtins() -> None:
    from importlib import import_module

    for m in BUILTIN_MODULES:
        import_module(f"inspector.formulas.{m}")


def total_of(tensors: Iterable[TensorEntry]) -> int:
    return sum(t.numel for t in counted(tensors, None))
