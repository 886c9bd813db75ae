"""One layer call of the Keras graph walk (:mod:`keras_graph`) and what every layer rule uses
(:mod:`keras_graph`'s and :mod:`keras_layers`'): the walk's context, the call, emitting a layer's
variables, the shape checks and the pooling rules both modules register."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspector.adapters.model import TensorEntry

from .core import Part, revised

Shape = tuple[int | None, ...]  # batch dimension first; None where unknown


class Cannot(Exception):
    """This layer's variables or output shape cannot be predicted (the message says why)."""


@dataclass
class Ctx:
    keras3: bool
    cell_scope: bool = True  # RNN weights under the cell's name (Keras >= 2.4, tf.keras 2)
    tensors: list[TensorEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)  # layers whose variables are not predicted
    # shapes of the variables the checkpoint stores, by name: only read to continue after a
    # layer whose output shape is unknown (see _borrow)
    stored: Mapping[str, Sequence[int]] = field(default_factory=dict)


@dataclass
class Call:
    """One call of a layer: its config, where its variables live and what it receives."""

    cls: str
    cfg: dict[str, Any]
    name: str
    scope: str  # name scope the layer is built in: "" or "outer/" ...
    args: list[Any]  # positional arguments, tensors replaced by their shapes
    kwargs: dict[str, Any]
    build: bool  # first call: the layer creates its variables
    trainable: bool
    module: str = ""  # Keras 3 configs: where the class lives (keras.src.ops.* are operations)

    @property
    def prefix(self) -> str:
        return f"{self.scope}{self.name}/"

    @property
    def x(self) -> Any:
        if not self.args:
            raise Cannot("it is called without an input")
        return self.args[0]

    def get(self, key: str, default: Any = None) -> Any:
        v = self.cfg.get(key, default)
        return default if v is None else v


def emit(ctx: Ctx, call: Call, variables: list[TensorEntry]) -> None:
    if not call.build:
        return
    for v in variables:
        role = v.role if call.trainable else "buffer"
        ctx.tensors.append(revised(v, name=call.prefix + v.name, role=str(role)))


def shape_str(s: Shape | None) -> str:
    if s is None:
        return "unknown"
    return "(" + ", ".join("None" if d is None else "..." if d is Ellipsis else str(d)
                           for d in s) + ")"


def ranked(x: Any, rank: int, what: str = "input") -> Shape:
    """``x`` as a rank-``rank`` shape: a shape of unknown rank (``(..., 6)``, after a layer
    whose output was taken from stored weights) gets None for its unknown axes."""
    s = tensor(x, what)
    if s and s[0] is Ellipsis:
        known = s[1:]
        if len(known) > rank - 1:
            raise Cannot(f"its {what} {shape_str(s)} has more axes than {rank}")
        return (None,) * (rank - len(known)) + known
    if len(s) != rank:
        raise Cannot(f"it needs a rank-{rank} {what}, got {shape_str(s)}")
    return s


def tensor(x: Any, what: str = "input") -> Shape:
    if x is None:
        raise Cannot(f"its {what} shape is unknown")
    if isinstance(x, list):
        raise Cannot(f"it expects one {what} tensor, got {len(x)}")
    return x


def last(x: Any, what: str = "input") -> int:
    s = tensor(x, what)
    if len(s) < 2 or s[-1] is None:
        raise Cannot(f"the last dimension of its {what} {shape_str(s)} is unknown")
    return s[-1]


def global_pool(rank: int) -> Callable[[Ctx, Call], list[Shape]]:
    def rule(_ctx: Ctx, c: Call) -> list[Shape]:
        x = ranked(c.x, rank + 2)
        first = c.get("data_format", "channels_last") == "channels_first"
        ch = x[1] if first else x[-1]
        if c.get("keepdims", False):
            return [(x[0], ch, *([1] * rank)) if first else (x[0], *([1] * rank), ch)]
        return [(x[0], ch)]

    return rule


def pool(rank: int) -> Callable[[Ctx, Call], list[Shape]]:
    def rule(_ctx: Ctx, c: Call) -> list[Shape]:
        x = ranked(c.x, rank + 2)
        first = c.get("data_format", "channels_last") == "channels_first"
        size = tuple_of(c.get("pool_size", 2), rank)
        strides = tuple_of(c.get("strides") or size, rank)
        spatial = x[2:] if first else x[1:-1]
        pad = c.get("padding", "valid")
        windows = zip(spatial, size, strides, strict=True)
        new = tuple(window(n, k, s, 1, pad) for n, k, s in windows)
        return [(x[0], x[1], *new) if first else (x[0], *new, x[-1])]

    return rule


def tuple_of(v: Any, rank: int | None) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * (rank or 1)
    return tuple(int(d) for d in v)


def window(n: int | None, k: int, s: int, d: int, padding: str) -> int | None:
    if n is None:
        return None
    if padding in ("same", "causal"):
        return -(-n // s)
    out = (n - d * (k - 1) - 1) // s + 1
    if out <= 0:
        raise Cannot(f"window {k} does not fit an input of length {n}")
    return out
