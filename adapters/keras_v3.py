"""Names and roles for a Keras 3 ``.weights.h5`` (also the ``model.weights.h5`` of a ``.keras``).

The file only numbers variables: ``/layers/<key>/vars/<i>``, sub-layers under attribute keys
(``cell``, ``forward_layer``, ``query_dense``, ...), nested models under their own ``layers``,
the optimizer under ``/optimizer/vars/<i>``. Each ``vars`` group's ``name`` attribute holds the
object's real name. A variable's Keras path is built as Keras builds it (``Variable.path`` =
the name scopes open when it was created): a layer opens its own name, a Sequential model opens
its name for its layers, a Functional model opens none (its layers were built when called on
symbolic inputs). Variable names come from :mod:`inspector.adapters.keras_names`, refined by
the model
config when there is one (``config.json`` of a ``.keras``). Without a config the layer class is
the key minus Keras' ``_<n>`` suffix and Sequential is told from Functional by the absence of
``input_layer`` keys; where a choice was not certain a finding says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .keras_names import (
    NON_TRAINABLE_NAMES,
    SUBLAYER_CLASS,
    SUBLAYER_ORDER,
    WRAPPED_CONFIG,
    WRAPPER_NAME_PREFIXES,
    layer_var_names,
    optimizer_blocks,
    strip_uniquifier,
    to_snake,
)
from .model import Finding, Role

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

INPUT_KEY = re.compile(r"input_layer(_\d+)?$")
# Recursion through nested groups deeper than this is refused (a real model nests a few levels).
MAX_DEPTH = 64


class Named:
    """What the adapter needs to know about one stored variable; ``guessed``: one of several
    names the file alone allows (no config)."""

    __slots__ = ("stored", "name", "role", "guessed")

    def __init__(self, stored: str, name: str, role: Role, guessed: bool = False) -> None:
        self.stored = stored
        self.name = name
        self.role = role
        self.guessed = guessed

    def __eq__(self, other: object) -> bool:
        if type(other) is not Named:
            return NotImplemented
        return (self.stored, self.name, self.role, self.guessed) == (
            other.stored, other.name, other.role, other.guessed)

    __hash__ = None  # type: ignore[assignment]  # equal by value, like the dataclass it was

    def __repr__(self) -> str:
        return (f"Named(stored={self.stored!r}, name={self.name!r}, role={self.role!r}, "
                f"guessed={self.guessed!r})")


class _State:
    """The walk's inputs and what it has found so far."""

    __slots__ = ("groups", "shapes", "children", "out", "trainable", "guessed", "unknown")

    def __init__(self, groups: Mapping[str, Mapping[str, Any]],
                 shapes: Mapping[str, tuple[int, ...]], children: dict[str, list[str]]) -> None:
        self.groups = groups
        self.shapes = shapes
        self.children = children
        self.out: list[Named] = []
        self.trainable: list[tuple[str, tuple[int, ...]]] = []
        self.guessed: list[str] = []
        self.unknown: list[str] = []


def name_variables(
    groups: Mapping[str, Mapping[str, Any]],
    shapes: Mapping[str, tuple[int, ...]],
    model_config: Mapping[str, Any] | None,
) -> tuple[list[Named], list[Finding]]:
    """Every dataset of a Keras 3 weights file with its Keras path and role.

    ``groups`` maps group paths (``/layers/dense/vars``) to their attributes, ``shapes`` dataset
    paths to shapes; ``model_config`` is the parsed ``config.json`` (or None).
    """
    st = _State(groups, shapes, _children(groups, shapes))
    cfg = model_config or {}
    root_cls = to_snake(cfg["class_name"]) if isinstance(cfg.get("class_name"), str) else None
    _layer(st, "", "", root_cls, _inner(cfg) if model_config else None, [], False, 0)
    findings = []
    if model_config is None:
        findings.append(
            Finding(
                "info",
                "no model config in the file: layer classes taken from the layer keys, "
                "Sequential told from Functional by the absence of input_layer keys",
            )
        )
    if st.guessed:
        findings.append(
            Finding(
                "warning",
                f"variable names of {len(st.guessed)} layer(s) are a guess (optional variables "
                f"not decidable without a config): {', '.join(st.guessed[:5])}",
            )
        )
    if st.unknown:
        findings.append(
            Finding(
                "warning",
                f"{len(st.unknown)} layer(s) of a class without a variable table: variables "
                f"named by their index: {', '.join(st.unknown[:5])}",
            )
        )
    compile_cfg = (model_config or {}).get("compile_config") or {}
    findings.extend(_optimizer(st, compile_cfg.get("optimizer")))
    named = {n.stored for n in st.out}
    for path in shapes:
        if path not in named:  # a dataset outside the layout Keras writes: listed, flagged
            st.out.append(Named(path, path.lstrip("/"), Role.OTHER))
            findings.append(Finding("warning", "dataset outside the Keras 3 layout", path))
    return st.out, findings


def _children(groups: Mapping[str, Any], shapes: Mapping[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in list(groups) + list(shapes):
        if path != "/":
            parent, _, key = path.rpartition("/")
            out.setdefault(parent, []).append(key)
    return out


def _inner(layer_cfg: Any) -> dict | None:
    """The ``config`` dict of a serialized layer ``{"class_name", "config"}``."""
    if isinstance(layer_cfg, Mapping) and isinstance(layer_cfg.get("config"), Mapping):
        return dict(layer_cfg["config"])
    return None


def _class_of(layer_cfg: Any) -> str | None:
    if isinstance(layer_cfg, Mapping) and isinstance(layer_cfg.get("class_name"), str):
        return to_snake(layer_cfg["class_name"])
    return None


def _layer(
    st: _State,
    path: str,
    key: str,
    cls: str | None,
    cfg: Mapping[str, Any] | None,
    scope: list[str],
    frozen: bool,
    depth: int,
) -> None:
    if depth > MAX_DEPTH:
        return
    name = str(st.groups.get(f"{path}/vars", {}).get("name") or key)
    frozen = frozen or (cfg is not None and cfg.get("trainable") is False)
    kids = st.children.get(path, [])
    if "layers" in kids:  # a Sequential / Functional model (also the file's root)
        layer_keys = st.children.get(f"{path}/layers", [])
        if cls in ("sequential", "functional"):
            sequential = cls == "sequential"
        else:
            sequential = not any(INPUT_KEY.match(k) for k in layer_keys)
        own = [*scope, name] if sequential else []
        _own_vars(st, path, None, None, [*scope, name], frozen)
        by_name = _configs_by_name(cfg)
        order = _config_order(st, f"{path}/layers", layer_keys, by_name)
        for k in order:
            sub = by_name.get(_vars_name(st, f"{path}/layers/{k}"))
            sub_cls = _class_of(sub) or strip_uniquifier(k)
            _layer(st, f"{path}/layers/{k}", k, sub_cls, _inner(sub), own, frozen, depth + 1)
        rest = [k for k in kids if k not in ("layers", "vars", "optimizer")]
        _sublayers(st, path, cls, cfg, rest, own, frozen, depth)
        return
    own_scope = [*scope, name] if path else scope
    _own_vars(st, path, cls, cfg, own_scope, frozen)
    rest = [k for k in kids if k not in ("vars", "optimizer")]
    _sublayers(st, path, cls, cfg, rest, own_scope, frozen, depth)


def _sublayers(st, path, cls, cfg, keys, scope, frozen, depth) -> None:
    order = SUBLAYER_ORDER.get(cls or "", ())
    keys = sorted(keys, key=lambda k: (order.index(k) if k in order else len(order), k))
    for k in keys:
        sub_path = f"{path}/{k}"
        if sub_path in st.shapes:
            continue  # a stray dataset: reported by the caller
        if f"{sub_path}/vars" not in st.groups:  # a container (list of layers): keys are classes
            for kk in sorted(st.children.get(sub_path, [])):
                sp = f"{sub_path}/{kk}"
                if sp not in st.shapes:
                    _layer(st, sp, kk, strip_uniquifier(kk), None, scope, frozen, depth + 2)
            continue
        sub_cls, sub_cfg = None, None
        wrapped = WRAPPED_CONFIG.get(cls or "", {}).get(k)
        if (cls, k) in SUBLAYER_CLASS:
            sub_cls, sub_cfg = SUBLAYER_CLASS[(cls, k)], cfg
        elif wrapped and cfg is not None:
            raw = next((cfg[w] for w in wrapped if isinstance(cfg.get(w), Mapping)), None)
            sub_cls, sub_cfg = _class_of(raw), _inner(raw)
        if sub_cls is None:
            sub_cls = _class_from_name(_vars_name(st, sub_path) or k)
        _layer(st, sub_path, k, sub_cls, sub_cfg, scope, frozen, depth + 1)


def _own_vars(st, path, cls, cfg, scope, frozen) -> None:
    vpath = f"{path}/vars"
    keys = [k for k in st.children.get(vpath, []) if f"{vpath}/{k}" in st.shapes]
    if not keys:
        return
    keys.sort(key=lambda k: (0, int(k), "") if k.isdigit() else (1, 0, k))
    names = layer_var_names(cls, cfg, len(keys)) if cls else None
    if names is None:
        st.unknown.append(vpath)
        specs = [(k, k not in NON_TRAINABLE_NAMES) for k in keys]
    else:
        if names[1]:
            st.guessed.append(vpath)
        specs = [(v.name, v.trainable) for v in names[0]]
    for k, (vname, trainable) in zip(keys, specs, strict=True):
        stored = f"{vpath}/{k}"
        name = "/".join([*scope, vname])
        trainable = trainable and not frozen
        st.out.append(Named(stored, name, Role.PARAMETER if trainable else Role.BUFFER,
                            bool(names and names[1])))
        if trainable:
            st.trainable.append((name, st.shapes[stored]))


def _vars_name(st: _State, path: str) -> str | None:
    value = st.groups.get(f"{path}/vars", {}).get("name")
    return str(value) if value is not None else None


def _class_from_name(name: str) -> str:
    for prefix in WRAPPER_NAME_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return strip_uniquifier(name)


def _configs_by_name(cfg: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    layers = (cfg or {}).get("layers")
    if not isinstance(layers, list):
        return {}
    out = {}
    for layer in layers:
        inner = _inner(layer)
        if inner is not None and isinstance(inner.get("name"), str):
            out[inner["name"]] = layer
    return out


def _config_order(st, container, keys, by_name) -> list[str]:
    """Layer keys in the model's layer order when the config gives it, else as stored."""
    rank = {n: i for i, n in enumerate(by_name)}
    return sorted(keys, key=lambda k: (rank.get(_vars_name(st, f"{container}/{k}"), len(rank)), k))


def _optimizer(st: _State, opt_cfg: Any) -> list[Finding]:
    vpath = "/optimizer/vars"
    keys = [k for k in st.children.get(vpath, []) if f"{vpath}/{k}" in st.shapes]
    if not keys:
        return []
    keys.sort(key=lambda k: (0, int(k), "") if k.isdigit() else (1, 0, k))
    opt_name = str(st.groups.get(vpath, {}).get("name") or "optimizer")
    cls = _class_of(opt_cfg) or strip_uniquifier(to_snake(opt_name))
    cfg = _inner(opt_cfg)
    paths = [f"{vpath}/{k}" for k in keys]
    names, finding = _slot_names(st, opt_name, cls, cfg, [st.shapes[p] for p in paths])
    for p, n in zip(paths, names, strict=True):
        st.out.append(Named(p, n, Role.OPTIMIZER))
    return [finding] if finding else []


def _slot_names(st, opt_name, cls, cfg, shapes) -> tuple[list[str], Finding | None]:
    """Keras names of the optimizer variables: iteration, learning_rate, then the slots."""
    n, model_vars = len(shapes), st.trainable
    lr_candidates = (2, 1) if cfg is None else (2 if _lr_is_variable(cfg) else 1,)
    for base in lr_candidates:
        if n < base or not model_vars or (n - base) % len(model_vars):
            continue
        if n == base:  # no slots (SGD without momentum): iteration and learning rate only
            return [f"{opt_name}/iteration", f"{opt_name}/learning_rate"][:base], None
        blocks = optimizer_blocks(cls, cfg, (n - base) // len(model_vars))
        if blocks is None or not blocks[0]:
            continue
        order, ambiguous = _match_by_shape(model_vars, shapes[base:], len(blocks[0][0].names))
        if order is None:
            continue
        head = [f"{opt_name}/iteration", f"{opt_name}/learning_rate"][:base]
        slots = [
            f"{opt_name}/{model_vars[i][0].replace('/', '_')}_{slot}"
            for block in blocks[0]
            for i in order
            for slot in block.names
        ]
        guessed = blocks[1] or (ambiguous and cfg is None)
        finding = None
        if guessed:
            finding = Finding(
                "warning",
                "optimizer slot names are a guess (equal-shaped variables or optional slots "
                "without a config)",
                "/optimizer/vars",
            )
        return head + slots, finding
    finding = Finding(
        "warning",
        f"optimizer '{opt_name}': its {n} variables do not match a known slot layout for the "
        f"model's {len(model_vars)} trainable variables; named by index",
        "/optimizer/vars",
    )
    return [f"{opt_name}/{i}" for i in range(n)], finding


def _lr_is_variable(cfg: Mapping[str, Any]) -> bool:
    """A float learning rate is a variable; a schedule (a dict in the config) is not."""
    return isinstance(cfg.get("learning_rate"), int | float)


def _match_by_shape(model_vars, slot_shapes, per_var) -> tuple[list[int] | None, bool]:
    """Model variable order implied by the first slot block's shapes (None if impossible).

    The candidate order is the walk's (the config's layer order when there is one); a slot
    takes the first unused model variable of its shape, ``ambiguous`` when several fit.
    """
    count = len(model_vars)
    if len(slot_shapes) < count * per_var:
        return None, False
    used: set[int] = set()
    order, ambiguous = [], False
    for j in range(count):
        shape = tuple(slot_shapes[j * per_var])
        if any(tuple(s) != shape for s in slot_shapes[j * per_var : (j + 1) * per_var]):
            return None, False
        fits = [i for i, (_, s) in enumerate(model_vars) if i not in used and tuple(s) == shape]
        if not fits:
            return None, False
        ambiguous = ambiguous or len(fits) > 1
        used.add(fits[0])
        order.append(fits[0])
    return order, ambiguous
