"""Keras 3 variable names as data: what ``layers/<key>/vars/<i>`` and ``optimizer/vars/<i>`` are.

A Keras 3 ``.weights.h5`` numbers each layer's variables (``_trainable_variables`` then
``_non_trainable_variables``, in creation order) and each optimizer's variables. The names come
from the layer class: ``LAYER_VARS`` lists, per snake_case class name (Keras' own
``to_snake_case``, which is also how layer keys are made), the variables ``build()`` creates, in
order, with the config flag that switches an optional one off and whether it is trainable.
Sources: ``keras/src/layers/**`` ``build()`` methods and ``keras/src/optimizers/*.py``
``build()`` (Keras 3.15).
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Mapping, Sequence
from itertools import combinations

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any


# One variable a layer class creates: its name; ``when``, config keys (the first one present
# decides) whose falsy value means the variable is not created (empty: always created);
# ``trainable``.
Var = namedtuple("Var", ("name", "when", "trainable"), defaults=((), True))


_KB = (Var("kernel"), Var("bias", ("use_bias",)))
_RNN_CELL = (Var("kernel"), Var("recurrent_kernel"), Var("bias", ("use_bias",)))
_NORM = (Var("gamma", ("scale",)), Var("beta", ("center",)))

LAYER_VARS: dict[str, tuple[Var, ...]] = {
    "dense": _KB,
    "einsum_dense": (Var("kernel"), Var("bias", ("bias_axes", "use_bias"))),
    "embedding": (Var("embeddings"),),
    **{f"conv{d}d": _KB for d in (1, 2, 3)},
    **{f"conv{d}d_transpose": _KB for d in (1, 2, 3)},
    "depthwise_conv1d": _KB,
    "depthwise_conv2d": _KB,
    "separable_conv1d": (
        Var("depthwise_kernel"),
        Var("pointwise_kernel"),
        Var("bias", ("use_bias",)),
    ),
    "separable_conv2d": (
        Var("depthwise_kernel"),
        Var("pointwise_kernel"),
        Var("bias", ("use_bias",)),
    ),
    "lstm_cell": _RNN_CELL,
    "gru_cell": _RNN_CELL,
    "simple_rnn_cell": _RNN_CELL,
    "batch_normalization": (
        *_NORM,
        Var("moving_mean", trainable=False),
        Var("moving_variance", trainable=False),
    ),
    "layer_normalization": _NORM,
    "group_normalization": _NORM,
    "prelu": (Var("alpha"),),
    "attention": (
        Var("scale", ("use_scale",)),
        Var("concat_score_weight", ("score_mode=concat",)),
    ),
    "additive_attention": (Var("scale", ("use_scale",)),),
}

# (parent class, attribute key) -> class of the sub-layer stored under that key; the sub-layer
# shares its parent's config (an LSTM's use_bias is its cell's).
SUBLAYER_CLASS: dict[tuple[str, str], str] = {
    ("lstm", "cell"): "lstm_cell",
    ("gru", "cell"): "gru_cell",
    ("simple_rnn", "cell"): "simple_rnn_cell",
    **{
        ("multi_head_attention", k): "einsum_dense"
        for k in ("query_dense", "key_dense", "value_dense", "output_dense")
    },
}
# Wrappers whose sub-layer has its own config: attribute key -> key of that config in the parent.
WRAPPED_CONFIG: dict[str, dict[str, Sequence[str]]] = {
    "bidirectional": {"forward_layer": ("layer",), "backward_layer": ("backward_layer", "layer")},
    "time_distributed": {"layer": ("layer",)},
}
# Creation order of sub-layers where it differs from the keys' alphabetical order; Keras' model
# variable order (and so the optimizer's slot order) follows it.
SUBLAYER_ORDER: dict[str, tuple[str, ...]] = {
    "bidirectional": ("forward_layer", "backward_layer"),
    "multi_head_attention": ("query_dense", "key_dense", "value_dense", "output_dense"),
}
# Prefixes Bidirectional puts before the wrapped layer's name.
WRAPPER_NAME_PREFIXES = ("forward_", "backward_")
# Variables named like these are non-trainable wherever they appear (Keras 2 and 3 BatchNorm).
NON_TRAINABLE_NAMES = frozenset({"moving_mean", "moving_variance"})


# Optimizer slots created together: one variable per name (``names``), interleaved per model
# variable; ``when``: the optimizer config key whose falsy value means the block is absent.
Block = namedtuple("Block", ("names", "when"), defaults=(None,))


# Optimizer snake_case class name -> slot blocks in creation order (after iteration and
# learning_rate). A model variable v gets ``<optimizer>/<v.path with / -> _>_<slot>``.
OPTIMIZER_SLOTS: dict[str, tuple[Block, ...]] = {
    "adam": (Block(("momentum", "velocity")), Block(("velocity_hat",), "amsgrad")),
    "adam_w": (Block(("momentum", "velocity")), Block(("velocity_hat",), "amsgrad")),
    "nadam": (Block(("momentum", "velocity")),),
    "lamb": (Block(("momentum", "velocity")),),
    "adamax": (Block(("momentum", "norm")),),
    "rmsprop": (
        Block(("velocity",)),
        Block(("momentum",), "momentum"),
        Block(("average_gradient",), "centered"),
    ),
    "sgd": (Block(("momentum",), "momentum"),),
    "adagrad": (Block(("accumulator",)),),
    "adadelta": (Block(("accumulated_grad", "accumulated_delta_var")),),
    "ftrl": (Block(("accumulator", "linear")),),
    "lion": (Block(("momentum",)),),
}
OPTIMIZER_ALIASES = {"adamw": "adam_w", "rms_prop": "rmsprop", "s_g_d": "sgd"}


def to_snake(name: str) -> str:
    """Keras' ``to_snake_case``: ``LSTMCell`` -> ``lstm_cell``, ``Conv1D`` -> ``conv1d``."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def strip_uniquifier(key: str) -> str:
    """``dense_3`` -> ``dense``: the suffix Keras adds to make keys and names unique."""
    return re.sub(r"_\d+$", "", key)


def layer_var_names(
    cls: str | None, config: Mapping[str, Any] | None, count: int
) -> tuple[list[Var], bool] | None:
    """The ``count`` variables of a layer of class ``cls``; (vars, guessed) or None if unknown.

    With a config the optional variables are decided by its flags; without one, by how many
    variables the file holds. ``guessed`` is True when several choices fit the count.
    """
    spec = LAYER_VARS.get(cls or "")
    if spec is None:
        return None
    if config is not None:
        chosen = [v for v in spec if enabled(config, v.when)]
        return (chosen, False) if len(chosen) == count else None
    fits = _subsets(spec, count)
    if not fits:
        return None
    return fits[0], len(fits) > 1


def optimizer_blocks(
    cls: str, config: Mapping[str, Any] | None, slots_per_var: int
) -> tuple[list[Block], bool] | None:
    """The slot blocks of optimizer ``cls`` holding ``slots_per_var`` slots per variable."""
    spec = OPTIMIZER_SLOTS.get(OPTIMIZER_ALIASES.get(cls, cls))
    if spec is None:
        return None
    if config is not None:
        chosen = [b for b in spec if b.when is None or config.get(b.when)]
        return (chosen, False) if sum(len(b.names) for b in chosen) == slots_per_var else None
    fits = [
        list(c)
        for n in range(len(spec), -1, -1)
        for c in combinations(spec, n)
        if all(b in c for b in spec if b.when is None)
        and sum(len(b.names) for b in c) == slots_per_var
    ]
    if not fits:
        return None
    return fits[0], len(fits) > 1


def enabled(config: Mapping[str, Any], when: Sequence[str]) -> bool:
    """False when the first of the ``when`` keys present in ``config`` is falsy (a
    ``key=value`` entry: when the key is present with another value)."""
    for key in when:
        key, eq, value = key.partition("=")
        if key in config:
            return config[key] == value if eq else bool(config[key])
    return True


def _subsets(spec: Sequence[Var], count: int) -> list[list[Var]]:
    """Subsets of ``spec`` of size ``count`` keeping every required variable, fullest first."""
    optional = [v for v in spec if v.when]
    out = []
    for dropped in range(len(optional) + 1):
        for drop in combinations(optional, dropped):
            kept = [v for v in spec if v not in drop]
            if len(kept) == count:
                out.append(kept)
    return out
