"""The shared blocks Hugging Face families are described with, and the interpreter that turns a
family's description (:mod:`inspector.formulas.hf_families`) into an :class:`Arch`.

A family is data: its ``config.json`` keys with transformers' defaults, a few named dimensions
and flags written as expressions over those keys (``"num_key_value_heads or
num_attention_heads"``), the base model as an ordered tuple of parts, and one :class:`Head` per
model class. Parts are the shared blocks: :class:`Emb`, :class:`Lin`, :class:`Norm`,
:class:`Vec`, :class:`Param`, :class:`Buf`, :class:`Attn` (separate or fused q/k/v, GQA,
biases), :class:`Mlp`
(plain, gated or fused gate/up), :class:`Layers` (a repeated block), :class:`Tie` and
:class:`Unsaved`. Names are the ``state_dict`` names transformers gives, relative to the base
model; a head puts the base model under its ``base`` prefix.

Expressions are parsed with :mod:`ast` and evaluated over a closed vocabulary: names (config
keys, dimensions, the layer index ``i``), numbers, strings, ``+ - * //``, comparisons, ``in``,
``is None``, ``and``/``or``/``not`` and ``x if c else y``. Nothing else is evaluated.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from inspector.adapters.ast_parse import parse
from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, Role, TensorEntry
from inspector.adapters.side_files import HF_CONFIG
from inspector.formulas import blocks_torch as bt
from inspector.formulas.core import (
    Arch,
    HParam,
    Prediction,
    expected,
    register,
    side_config,
    tied_to,
    total_of,
)

# --- expressions -------------------------------------------------------------------------------

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
           ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}


@cache
def _parse(expr: str) -> ast.expr:
    return parse(expr, mode="eval").body


def evaluate(expr: str | int | bool, env: Mapping[str, Any]) -> Any:
    """``expr`` over ``env`` (see the module docstring for what is allowed)."""
    if not isinstance(expr, str):
        return expr
    return _eval(_parse(expr), env, expr)


def _eval(node: ast.expr, env: Mapping[str, Any], src: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        if node.id not in env:
            raise KeyError(f"{src!r}: unknown name {node.id!r}")
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env, src), _eval(node.right, env, src))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        v = _eval(node.operand, env, src)
        return (not v) if isinstance(node.op, ast.Not) else -v
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            v = True
            for n in node.values:
                v = _eval(n, env, src)
                if not v:
                    return v
            return v
        v = None
        for n in node.values:
            v = _eval(n, env, src)
            if v:
                return v
        return v
    if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
        left = _eval(node.left, env, src)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env, src)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        branch = node.body if _eval(node.test, env, src) else node.orelse
        return _eval(branch, env, src)
    raise ValueError(f"{src!r}: {type(node).__name__} is not allowed in a family expression")


# --- parts (the shared blocks) -----------------------------------------------------------------

Expr = str | int | bool


@dataclass(frozen=True)
class Emb:
    """``nn.Embedding``: ``name.weight`` (rows, cols)."""

    name: str
    rows: Expr
    cols: Expr = "d"
    when: Expr = True


@dataclass(frozen=True)
class Lin:
    """``nn.Linear``: ``name.weight`` (n_out, n_in) and, when ``bias``, ``name.bias``."""

    name: str
    n_in: Expr
    n_out: Expr
    bias: Expr = True
    when: Expr = True


@dataclass(frozen=True)
class Norm:
    """A layer norm of ``width``: ``weight`` when ``norm_affine``, ``bias`` too when
    ``norm_bias`` (RMSNorm families set it False)."""

    name: str
    width: Expr = "d"
    when: Expr = True


@dataclass(frozen=True)
class Vec:
    """A bare ``nn.Parameter`` vector ``name`` (size,), e.g. BERT's ``cls.predictions.bias``."""

    name: str
    size: Expr
    when: Expr = True


@dataclass(frozen=True)
class Param:
    """A bare ``nn.Parameter`` ``name`` of any ``shape``, e.g. transformers 5's fused experts
    ``experts.gate_up_proj`` (experts, 2 ff, d)."""

    name: str
    shape: tuple[Expr, ...]
    when: Expr = True


@dataclass(frozen=True)
class Buf:
    """A persistent buffer ``name`` of ``shape`` (counted by no ``num_parameters()``)."""

    name: str
    shape: tuple[Expr, ...]
    when: Expr = True


@dataclass(frozen=True)
class Attn:
    """Attention projections under ``prefix``: ``names`` maps ``q``/``k``/``v``/``o`` (or fused
    ``qkv`` and ``o``) to module names, in the order the model registers them. Widths: q and o
    ``H * hd``, k and v ``KV * hd`` (grouped-query attention), fused ``(H + 2 KV) * hd``; biases
    from the flags ``qkv_bias`` and ``o_bias``."""

    prefix: str
    names: Mapping[str, str]
    when: Expr = True


@dataclass(frozen=True)
class Mlp:
    """Feed-forward under ``prefix``: ``names`` maps ``up``/``down`` (plain), ``gate``/``up``/
    ``down`` (gated) or ``gate_up``/``down`` (fused gated) to module names, widths ``d`` and
    ``ff``, biases from the flag ``mlp_bias``."""

    prefix: str
    names: Mapping[str, str]
    when: Expr = True


@dataclass(frozen=True)
class Layers:
    """``count`` copies of ``parts`` under ``template`` (``{i}`` is the layer index, also a name
    in expressions); ``bind`` overrides dimensions for this stack (an encoder's ``ff``)."""

    template: str
    count: Expr
    parts: tuple[Any, ...]
    bind: Mapping[str, Expr] = field(default_factory=dict)
    when: Expr = True


@dataclass(frozen=True)
class Tie:
    """``alias`` shares its ``nn.Parameter`` with ``target`` (counted once; ``save_pretrained``
    writes one of them)."""

    alias: str
    target: str
    when: Expr = True


@dataclass(frozen=True)
class Unsaved:
    """Parts the model owns but ``save_pretrained`` never writes (rebuilt at load, e.g.
    sinusoidal position tables): predicted aside, named in a note, never expected in a file."""

    parts: tuple[Any, ...]
    why: str
    when: Expr = True


@dataclass(frozen=True)
class Head:
    """One model class: the base model under ``base`` (``""`` for the bare model), the head's own
    ``parts`` (full names) and flag overrides ``set`` (BertForMaskedLM has no pooler)."""

    base: str
    parts: tuple[Any, ...] = ()
    set: Mapping[str, Expr] = field(default_factory=dict)


# Flags every family has, with the value a family that does not mention them gets.
FLAG_DEFAULTS: dict[str, Expr] = {
    "qkv_bias": True, "o_bias": "qkv_bias", "mlp_bias": True, "norm_bias": True,
    "norm_affine": True,
}


@dataclass(frozen=True)
class Family:
    """A Hugging Face family as data (see the module docstring)."""

    name: str
    description: str
    config: Mapping[str, Any]  # config.json key -> transformers' default
    dims: Mapping[str, Expr]
    body: tuple[Any, ...]
    heads: Mapping[str, Head]
    default_head: str
    model_types: tuple[str, ...] = ()
    helps: Mapping[str, str] = field(default_factory=dict)
    scheme: str | None = "transformer-lm"
    # flags the file itself tells (what a transformers version saved): name -> (regex searched in
    # the stored names, default without a file, help)
    file_flags: Mapping[str, tuple[str, bool, str]] = field(default_factory=dict)

    def types(self) -> tuple[str, ...]:
        return self.model_types or (self.name,)


# --- prediction --------------------------------------------------------------------------------


@dataclass
class _Out:
    tensors: list[TensorEntry] = field(default_factory=list)
    ties: list[tuple[str, str]] = field(default_factory=list)
    unsaved: list[TensorEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _env(family: Family, hp: Mapping[str, Any], head: Head) -> dict[str, Any]:
    env: dict[str, Any] = dict(hp)
    env["transformers_major"] = major_version(hp.get("transformers_version"))
    for k, e in {**FLAG_DEFAULTS, **family.dims, **head.set}.items():
        if k in hp:
            raise ValueError(f"{family.name}: dimension {k!r} shadows a hyperparameter")
        env[k] = evaluate(e, env)
    return env


def major_version(version: Any) -> int | None:
    """``4`` for ``"4.57.6"``; None when the file does not say (or says it oddly)."""
    head = str(version).split(".", 1)[0] if version is not None else ""
    return int(head) if head.isdigit() else None


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix and name else prefix or name


def _int(e: Expr, env: Mapping[str, Any], what: str) -> int:
    v = evaluate(e, env)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise UsageError(f"{what}: {e} = {v!r} is not a size")
    return v


def _emit(parts: tuple[Any, ...], prefix: str, env: dict[str, Any], out: _Out) -> None:
    for p in parts:
        if not evaluate(p.when, env):
            continue
        if isinstance(p, Emb):
            out.tensors += bt.embedding(_join(prefix, p.name), _int(p.rows, env, p.name),
                                        _int(p.cols, env, p.name))
        elif isinstance(p, Lin):
            out.tensors += bt.linear(_join(prefix, p.name), _int(p.n_in, env, p.name),
                                     _int(p.n_out, env, p.name), bool(evaluate(p.bias, env)))
        elif isinstance(p, Norm):
            if env["norm_affine"]:
                out.tensors += bt.layer_norm(_join(prefix, p.name), _int(p.width, env, p.name),
                                             bias=bool(env["norm_bias"]))
        elif isinstance(p, Vec):
            out.tensors.append(bt.param(prefix, p.name, (_int(p.size, env, p.name),), "vector"))
        elif isinstance(p, Param):
            shape = tuple(_int(s, env, p.name) for s in p.shape)
            out.tensors.append(expected(_join(prefix, p.name), shape, "parameter", "experts"))
        elif isinstance(p, Buf):
            shape = tuple(_int(s, env, p.name) for s in p.shape)
            out.tensors.append(expected(_join(prefix, p.name), shape, "buffer", "buffer"))
        elif isinstance(p, Attn):
            _attn(p, _join(prefix, p.prefix), env, out)
        elif isinstance(p, Mlp):
            _mlp(p, _join(prefix, p.prefix), env, out)
        elif isinstance(p, Layers):
            n = _int(p.count, env, p.template)
            for i in range(n):
                local = dict(env, i=i)
                for k, e in p.bind.items():
                    local[k] = evaluate(e, local)
                _emit(p.parts, _join(prefix, p.template.format(i=i)), local, out)
        elif isinstance(p, Tie):
            out.ties.append((_join(prefix, p.alias), _join(prefix, p.target)))
        elif isinstance(p, Unsaved):
            aside = _Out()
            _emit(p.parts, prefix, env, aside)
            out.unsaved += aside.tensors
            out.notes.append(f"not saved ({p.why}): "
                             + ", ".join(f"{t.name} {list(t.shape)}" for t in aside.tensors))
        else:
            raise TypeError(f"unknown part {p!r}")


def _attn(p: Attn, prefix: str, env: Mapping[str, Any], out: _Out) -> None:
    d, hd = _int("d", env, prefix), _int("hd", env, prefix)
    q, kv = _int("H", env, prefix) * hd, _int("KV", env, prefix) * hd
    widths = {"q": (d, q), "k": (d, kv), "v": (d, kv), "qkv": (d, q + 2 * kv), "o": (q, d)}
    for role, name in p.names.items():
        n_in, n_out = widths[role]
        bias = env["o_bias"] if role == "o" else env["qkv_bias"]
        out.tensors += bt.linear(_join(prefix, name), n_in, n_out, bool(bias))


def _mlp(p: Mlp, prefix: str, env: Mapping[str, Any], out: _Out) -> None:
    d, ff = _int("d", env, prefix), _int("ff", env, prefix)
    widths = {"up": (d, ff), "gate": (d, ff), "gate_up": (d, 2 * ff), "down": (ff, d)}
    for role, name in p.names.items():
        n_in, n_out = widths[role]
        out.tensors += bt.linear(_join(prefix, name), n_in, n_out, bool(env["mlp_bias"]))


def layout(family: Family, hp: Mapping[str, Any]) -> _Out:
    """Every tensor of the model class ``hp["architecture"]`` names, ties applied."""
    head = family.heads[hp["architecture"]]
    env = _env(family, hp, head)
    out = _Out()
    _emit(family.body, head.base, env, out)
    _emit(head.parts, "", env, out)
    names = {t.name for t in out.tensors}
    for alias, target in out.ties:
        if alias in names and target in names:
            out.tensors = bt.tie(out.tensors, alias, target)
    return out


def predict(family: Family, hp: Mapping[str, Any]) -> Prediction:
    out = layout(family, hp)
    pred = Prediction(family.name, dict(hp), out.tensors, list(out.notes))
    if out.unsaved:
        pred.notes.append(f"num_parameters() counts them too: {pred.total():,} + "
                          f"{total_of(out.unsaved):,} = {pred.total() + total_of(out.unsaved):,}")
    return pred


# --- reading a checkpoint ----------------------------------------------------------------------


# Formats whose tensors follow Flax's layout, not PyTorch's, whatever config.json says.
FLAX_LAYOUTS = ("flax-msgpack",)


def hf_config(ckpt: Checkpoint) -> dict[str, Any]:
    """The checkpoint's ``config.json``, as the adapters attached it (``hf_config``: the one a
    Hugging Face directory read, else the one beside a weights file); ``{}`` when there is none.
    A Flax model's config beside it is not read: its names (kernel, scale, embedding) and
    (in, out) kernels are not the PyTorch layout modelled here."""
    if ckpt.format in FLAX_LAYOUTS and ckpt.metadata.get("config_file") != "config.json":
        return {}
    return side_config(ckpt, HF_CONFIG)


def _config(ckpt: Checkpoint) -> dict[str, Any]:
    return hf_config(ckpt)


def model_type(ckpt: Checkpoint) -> str | None:
    """``config.json``'s ``model_type`` beside the checkpoint, if any."""
    mt = _config(ckpt).get("model_type")
    return mt if isinstance(mt, str) else None


def from_config(family: Family, ckpt: Checkpoint) -> dict[str, Any]:
    """The family's keys in ``config.json``, and the model class from ``architectures``."""
    cfg = _config(ckpt)
    out = {k: v for k, v in cfg.items() if k in family.config}
    # PretrainedConfig.num_labels is len(id2label); config.json stores only id2label
    if "num_labels" in family.config and "num_labels" not in cfg \
            and isinstance(cfg.get("id2label"), dict):
        out["num_labels"] = len(cfg["id2label"])
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        out["architecture"] = archs[0]
    return out


def _shape_free(name: str) -> str:
    """``name`` with its layer indices masked (``layers.3.fc1`` -> ``layers.#.fc1``)."""
    return re.sub(r"\.\d+(?=\.)", ".#", name)


def infer(family: Family, ckpt: Checkpoint) -> dict[str, Any]:
    """What the stored names determine: the model class whose names explain the stored ones,
    each stack's layer count and the family's file flags (buffers an older transformers saved).
    Sizes are left to ``config.json`` and the defaults."""
    # parameters and buffers: a torch file labels position_ids, inv_freq and masks as buffers
    stored = {t.name for t in ckpt.tensors if t.role in (Role.PARAMETER, Role.BUFFER)}
    if not stored:
        return {}
    out: dict[str, Any] = {}
    best = None
    for cls, head in family.heads.items():
        hp = {**{h.name: h.default for h in hparams_of(family)}, "architecture": cls}
        try:
            tensors = layout(family, hp).tensors
        except (UsageError, KeyError, ValueError, ZeroDivisionError):
            continue
        plain = {_shape_free(t.name) for t in tensors}
        owners = {_shape_free(t.name) for t in tensors if tied_to(t) is None}
        found = {_shape_free(n) for n in stored}
        # most stored names explained, then fewest predicted (untied) names absent
        score = (len(found & plain), -len(owners - found))
        if best is None or score > best[0]:
            best = (score, cls, head)
    if best is None or not best[0][0]:
        return {}
    out["architecture"], head = best[1], best[2]
    for flag, (pattern, _, _) in family.file_flags.items():
        out[flag] = any(re.search(pattern, n) for n in stored)
    for part in family.body:
        if isinstance(part, Layers) and isinstance(part.count, str) and part.count in family.config:
            pat = re.escape(_join(head.base, part.template)).replace(r"\{i\}", r"(\d+)")
            idx = [int(m.group(1)) for n in stored if (m := re.match(pat + r"\.", n))]
            if idx:
                out[part.count] = max(idx) + 1
    return out


# config.json keys that are text whatever their default, with their help
STRING_KEYS = {"transformers_version": "the transformers release that saved the file (its "
                                       "layout can depend on it)"}


def int_list(value: Any) -> list[int]:
    """A config list of integers (Qwen2-MoE's ``mlp_only_layers``), also from ``--set 1,3``."""
    if isinstance(value, str):
        value = [v for v in value.replace("[", "").replace("]", "").split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
        raise TypeError(value)
    if any(isinstance(v, (bool, float)) for v in value):
        raise TypeError(value)
    return [int(v) for v in value]


def _kind(default: Any) -> Any:
    if isinstance(default, (list, tuple)):
        return int_list
    if isinstance(default, bool):
        return bool
    if isinstance(default, float):
        return float
    if isinstance(default, str):
        return str
    return int


def hparams_of(family: Family) -> tuple[HParam, ...]:
    out = [HParam("architecture", family.default_head,
                  "model class (config.json architectures[0])", str,
                  tuple(family.heads))]
    for k, v in family.config.items():
        kind = str if k in STRING_KEYS else _kind(v)
        out.append(HParam(k, v, family.helps.get(k, STRING_KEYS.get(k, "")), kind))
    for k, (_, default, help_) in family.file_flags.items():
        out.append(HParam(k, default, help_ + " (from the stored names)", bool))
    return tuple(out)


def register_family(family: Family) -> Arch:
    """Register ``family`` as an architecture named after it."""
    types = family.types()

    def applies(ckpt: Checkpoint) -> bool:
        # a Trainer's optimizer.pt or scheduler.pt beside config.json holds no model tensors
        return model_type(ckpt) in types and any(
            t.role is Role.PARAMETER for t in ckpt.tensors)

    return register(Arch(
        name=family.name,
        description=family.description,
        hparams=hparams_of(family),
        predict=lambda hp: predict(family, hp),
        scheme=family.scheme,
        from_checkpoint=lambda ckpt: from_config(family, ckpt),
        infer=lambda ckpt: infer(family, ckpt),
        applies=applies,
    ))


def unsaved(family: Family, hp: Mapping[str, Any]) -> list[TensorEntry]:
    """The tensors the model owns but ``save_pretrained`` does not write."""
    return layout(family, hp).unsaved
