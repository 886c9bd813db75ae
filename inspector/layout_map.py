"""Cross-layout pairing: two layouts of one model (a Hugging Face state dict and the GGUF
llama.cpp converted it to; a DCP directory and its consolidated state dict) paired by the
producers' own name mappings, kept as data in ``inspector/layout_maps/*.yaml`` (format in
docs/architecture.md, "A new layout mapping").

A map has two sides, ``a`` and ``b``. A rule pairs an ``a`` name template with a ``b`` one
(``{var}`` stands for a number); ``stack: var`` says ``b`` holds every ``a`` tensor of that
variable stacked along a new first axis in index order (llama.cpp's ``ffn_gate_exps``);
``permute_rows: [n_head, n_head_kv]`` says the converter permuted the rows with llama.cpp's
``LlamaModel.permute`` (undone on ``b``'s values before they are compared); a list of ``a``
templates with ``concat: axis`` says ``b`` is those tensors concatenated (CTranslate2's fused
q/k/v), ``squeeze: axis`` / ``transpose: true`` / ``drop_rows: n`` that the converter dropped a
size-1 axis, reversed the axes, or dropped the first rows (those are applied to ``a``'s values
before they are compared); ``offset: {var: n}`` that side a numbers that variable n higher
(Marian's layers count from 1). An ``a`` tensor that several rules match (one table the
converter wrote to several ``b`` variables) pairs by its first rule, and by a later one when
``b`` holds that variable and no first rule claims it. A side's ``roles`` keep only its
tensors of those roles (a training checkpoint's optimizer state is not converted: counted as
left out). ``same_names: true``
pairs equal names, ``strip: auto`` after finding the prefixes that pair the most names. A map
applies to two checkpoints when each side's formats and hyperparameters fit and most names of
each side fit its rules; a same-format diff is never re-paired unless a map is named.

Values (``--values``) are read per pair (a stack: every member) in their own type, block-quantized
types dequantized as ggml does (:mod:`inspector.dequantize`), and compared in float64 row blocks.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, TensorEntry

MAP_DIR = Path(__file__).resolve().parent / "layout_maps"
AUTO, NONE = "auto", "none"
_VAR = re.compile(r"\{(\w+)\}")
FIT = 0.5  # share of a side's names its rules must explain for the map to apply
STRIP_DEPTH = 3  # dotted components an automatic prefix may have


@dataclass(frozen=True)
class Rule:
    """``a`` templates (several: concatenated) paired with one ``b`` template, and what the
    converter did to the values (each transform at most once, in the order concat, squeeze,
    transpose, drop_rows)."""

    a: str
    b: str
    a_rx: re.Pattern[str]
    b_rx: re.Pattern[str]
    stack: str | None = None
    permute_rows: tuple[str, str] | None = None
    parts: tuple[tuple[str, re.Pattern[str]], ...] = ()  # concat: every a template, in order
    concat: int | None = None
    squeeze: int | None = None
    transpose: bool = False
    drop_rows: int | str | None = None
    offset: tuple[tuple[str, int], ...] = ()  # (var, n): a's number is b's plus n

    @property
    def a_rxs(self) -> tuple[re.Pattern[str], ...]:
        return tuple(rx for _, rx in self.parts) if self.parts else (self.a_rx,)

    @property
    def transforms(self) -> bool:
        return (self.concat is not None or self.squeeze is not None or self.transpose
                or self.drop_rows is not None)


@dataclass(frozen=True)
class Side:
    what: str = ""
    formats: tuple[str, ...] = ()
    hyperparameters: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    roles: tuple[str, ...] = ()  # empty: every tensor


@dataclass(frozen=True)
class LayoutMap:
    name: str
    description: str
    a: Side
    b: Side
    rules: tuple[Rule, ...] = ()
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    generated: tuple[tuple[re.Pattern[str], str], ...] = ()
    same_names: bool = False
    strip: str | None = None
    dtypes: str = "compare"  # "converted": the producer chose B's types (not a difference)
    where: str = ""


@dataclass
class Pair:
    """One record of a cross-layout pairing, oriented as the map's sides (``a``, ``b``)."""

    key: str
    a: TensorEntry | None
    b: TensorEntry | None
    op: str
    how: str | None = None
    members: tuple[TensorEntry, ...] = ()  # a stack's A tensors, in index order
    permute: tuple[int, int] | None = None  # (n_head, n_head_kv) to undo on B's rows
    rule: Rule | None = None  # a rule with value transforms (applied to A's values)
    drop: int = 0  # drop_rows resolved


# --- reading maps ------------------------------------------------------------------------------


def _template(t: str, where: str, star: bool = False) -> re.Pattern[str]:
    if not isinstance(t, str) or not t:
        raise UsageError(f"a tensor template must be a non-empty string, not {t!r}", where)
    parts = _VAR.split(t)

    def lit(x: str) -> str:  # generated templates: * is any text
        return ".*".join(re.escape(y) for y in x.split("*")) if star else re.escape(x)

    rx = "".join(lit(p) if i % 2 == 0 else f"(?P<{p}>\\d+)" for i, p in enumerate(parts))
    try:
        return re.compile(rx + r"\Z")
    except re.error as e:  # a variable used twice
        raise UsageError(f"bad template {t!r} ({e})", where) from None


def _side(d: Any, where: str) -> Side:
    if d is None:
        return Side()
    if not isinstance(d, dict):
        raise UsageError("a side must be a mapping (what, formats, hyperparameters)", where)
    hp = d.get("hyperparameters") or {}
    formats = d.get("formats") or []
    if not isinstance(hp, dict) or not isinstance(formats, list) or not all(
            isinstance(f, str) for f in formats):
        raise UsageError("a side's formats is a list of names, its hyperparameters a mapping",
                         where)
    roles = d.get("roles") or []
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise UsageError("a side's roles is a list of role names (parameter, buffer, ...)", where)
    return Side(str(d.get("what", "")), tuple(d.get("formats") or ()),
                {k: tuple(v if isinstance(v, list) else [v]) for k, v in hp.items()},
                tuple(roles))


def _axis(r: dict, key: str, where: str) -> int | None:
    v = r.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise UsageError(f"{key} is an axis (an integer >= 0), not {v!r}", where)
    return v


def parse(data: Any, where: str) -> LayoutMap:
    """A validated :class:`LayoutMap` from a map file's YAML data."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise UsageError("a layout map is a mapping with a name", where)
    if not isinstance(data.get("tensors") or [], list):
        raise UsageError("tensors must be a list of rules", where)
    params = data.get("params") or {}
    if not isinstance(params, dict) or not all(
            isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
            for v in params.values()):
        raise UsageError("params maps a name to {a: key, b: key, default: name}", where)
    if data.get("strip") not in (None, AUTO) or data.get("dtypes", "compare") not in (
            "compare", "converted"):
        raise UsageError("strip is auto (or absent); dtypes is compare or converted", where)
    generated_list = data.get("generated") or []
    if not isinstance(generated_list, list) or not all(
            isinstance(g, dict) and "b" in g for g in generated_list):
        raise UsageError("generated is a list of {b: template, why: text}", where)
    rules = []
    for i, r in enumerate(data.get("tensors") or ()):
        w = f"{where}: tensors[{i}]"
        if not isinstance(r, dict) or "a" not in r or "b" not in r:
            raise UsageError("a rule needs a and b templates", w)
        unknown = set(r) - {"a", "b", "stack", "permute_rows", "concat", "squeeze", "transpose",
                            "drop_rows", "offset"}
        if unknown:
            raise UsageError(f"unknown rule keys {sorted(unknown)}", w)
        concat = _axis(r, "concat", w)
        if isinstance(r["a"], list) != (concat is not None) or (
                isinstance(r["a"], list) and len(r["a"]) < 2):
            raise UsageError("a list of a templates (two or more) goes with concat: axis, and "
                             "concat with a list", w)
        a_list = r["a"] if isinstance(r["a"], list) else [r["a"]]
        parts = tuple((t, _template(t, w)) for t in a_list)
        a_rx, b_rx = parts[0][1], _template(r["b"], w)
        va, vb = set(a_rx.groupindex), set(b_rx.groupindex)
        if any(set(rx.groupindex) != va for _, rx in parts):
            raise UsageError("concatenated a templates must share their variables", w)
        drop = r.get("drop_rows")
        if drop is not None and not (isinstance(drop, str) or (
                isinstance(drop, int) and not isinstance(drop, bool) and drop >= 0)):
            raise UsageError("drop_rows is a row count (>= 0) or a parameter name", w)
        if r.get("transpose") not in (None, True, False):
            raise UsageError("transpose is true or false", w)
        stack = r.get("stack")
        if stack is not None and (stack not in va or stack in vb):
            raise UsageError(f"stack {stack!r} must be a variable of a only", w)
        if va - {stack} != vb:
            raise UsageError(f"a and b must share their variables ({sorted(va)} / {sorted(vb)})",
                             w)
        perm = r.get("permute_rows")
        if perm is not None and (not isinstance(perm, list) or len(perm) != 2):
            raise UsageError("permute_rows is [n_head, n_head_kv] (two parameter names)", w)
        squeeze, transpose = _axis(r, "squeeze", w), bool(r.get("transpose"))
        if stack is not None and (concat is not None or squeeze is not None or transpose
                                  or drop is not None or perm):
            raise UsageError("stack takes no other transform", w)
        offset = r.get("offset") or {}
        if not isinstance(offset, dict) or not all(
                k in vb and isinstance(v, int) and not isinstance(v, bool)
                for k, v in offset.items()):
            raise UsageError("offset maps a variable of both sides to the number added on a's "
                             "side (Marian numbers layers from 1: {i: 1})", w)
        rules.append(Rule(a_list[0], r["b"], a_rx, b_rx, stack, tuple(perm) if perm else None,
                          parts if len(parts) > 1 else (), concat, squeeze, transpose, drop,
                          tuple(sorted(offset.items()))))
    for p in (q for r in rules if r.permute_rows for q in r.permute_rows):
        if p not in params:
            raise UsageError(f"permute_rows names {p!r}, which params does not define", where)
    for r in rules:
        if isinstance(r.drop_rows, str) and r.drop_rows not in params:
            raise UsageError(f"drop_rows names {r.drop_rows!r}, which params does not define",
                             where)
    generated = tuple((_template(g["b"], where, star=True), str(g.get("why", "")))
                      for g in generated_list)
    if not rules and not data.get("same_names"):
        raise UsageError("a layout map needs tensors rules or same_names: true", where)
    return LayoutMap(data["name"], str(data.get("description", "")), _side(data.get("a"), where),
                     _side(data.get("b"), where), tuple(rules), params, generated,
                     bool(data.get("same_names")), data.get("strip"),
                     str(data.get("dtypes", "compare")), where)


def _read(path: Path) -> LayoutMap:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise UsageError(f"cannot read layout map ({e})", str(path)) from None
    return parse(data, str(path))


@cache
def builtin() -> tuple[LayoutMap, ...]:
    """The maps shipped in ``inspector/layout_maps/``."""
    from dataclasses import replace

    return tuple(replace(_read(p), where=f"built-in {p.name}")
                 for p in sorted(MAP_DIR.glob("*.yaml")))


def get(spec: str) -> LayoutMap:
    """A built-in map by name, or a YAML file."""
    for m in builtin():
        if m.name == spec:
            return m
    p = Path(spec)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return _read(p)
    names = ", ".join(m.name for m in builtin())
    raise UsageError(f"unknown layout map {spec!r}; built-in: {names} (or a YAML file)")


# --- which map applies -------------------------------------------------------------------------


def _names(ckpt: Checkpoint) -> list[str]:
    return [t.name for t in ckpt.tensors]


def kept(side: Side, ckpt: Checkpoint) -> list[TensorEntry]:
    """The tensors of ``ckpt`` the side's ``roles`` keep (all when it names none)."""
    if not side.roles:
        return list(ckpt.tensors)
    return [t for t in ckpt.tensors if _role(t) in side.roles]


def _role(t: TensorEntry) -> str:
    return str(getattr(t.role, "value", t.role))


def left_out(side: Side, ckpt: Checkpoint) -> dict[str, int]:
    """How many tensors per role the side's ``roles`` leave out of the pairing."""
    if not side.roles:
        return {}
    return dict(Counter(_role(t) for t in ckpt.tensors if _role(t) not in side.roles))


def format_fits(side: Side, fmt: str) -> bool:
    """Whether a checkpoint of format ``fmt`` can be the side (``marian`` fits ``marian-npz``)."""
    return not side.formats or any(fmt.startswith(f) for f in side.formats)


def _side_fits(side: Side, ckpt: Checkpoint) -> bool:
    if not format_fits(side, ckpt.format):
        return False
    hp = ckpt.hyperparameters
    return all(hp.get(k) in allowed for k, allowed in side.hyperparameters.items())


def _rules_fit(m: LayoutMap, ckpt: Checkpoint, side: str) -> bool:
    names = [t.name for t in kept(getattr(m, side), ckpt)]
    if not names:
        return False
    rxs = [rx for r in m.rules for rx in (r.a_rxs if side == "a" else (r.b_rx,))]
    if side == "b":
        rxs += [g for g, _ in m.generated]
    hits = sum(1 for n in names if any(rx.match(_strip_any(rx, n)) for rx in rxs))
    return hits >= FIT * len(names)


def _strip_any(rx: re.Pattern[str], name: str) -> str:
    """``name``, or the shortest tail of it (after whole dotted components) ``rx`` matches."""
    if rx.match(name):
        return name
    parts = name.split(".")
    for i in range(1, min(STRIP_DEPTH, len(parts) - 1) + 1):
        tail = ".".join(parts[i:])
        if rx.match(tail):
            return tail
    return name


def fits(m: LayoutMap, a: Checkpoint, b: Checkpoint) -> bool:
    """Whether ``m`` applies with ``a`` as its side a and ``b`` as its side b."""
    if not (_side_fits(m.a, a) and _side_fits(m.b, b)):
        return False
    if m.same_names:
        return bool(m.a.formats or m.b.formats)  # names are checked by the pairing itself
    return _rules_fit(m, a, "a") and _rules_fit(m, b, "b")


def choose(spec: str | None, a: Checkpoint, b: Checkpoint) -> tuple[LayoutMap, bool] | None:
    """(map, swapped) for ``diff A B``: ``swapped`` when A is the map's side b. ``auto`` (the
    default) looks only when A and B are of different formats; ``none`` never; a name or file
    is used whichever way round fits (refused when neither does)."""
    if spec in (None, AUTO):
        if a.format == b.format:
            return None
        for m in builtin():
            if fits(m, a, b):
                return m, False
            if fits(m, b, a):
                return m, True
        return None
    if spec == NONE:
        return None
    m = get(spec)
    if fits(m, a, b):
        return m, False
    if fits(m, b, a):
        return m, True
    raise UsageError(f"layout map {m.name!r} does not fit these two checkpoints ({a.format} "
                     f"and {b.format}: {m.a.what or 'side a'} <-> {m.b.what or 'side b'})")


# --- parameters ----------------------------------------------------------------------------------


def _config(ckpt: Checkpoint) -> Mapping[str, Any]:
    """Where a side's hyperparameters are: an HF config.json, else the file's own."""
    from inspector.formulas.hf import sidecar_config

    try:
        cfg = sidecar_config(ckpt)
    except Exception:  # noqa: BLE001  (a bad config.json is reported by check, not here)
        cfg = {}
    return cfg or ckpt.hyperparameters


def params(m: LayoutMap, a: Checkpoint, b: Checkpoint) -> tuple[dict[str, int], list[str]]:
    """Each parameter's value (side b's metadata first, then a's config, then its default) and
    one message per parameter the two sides disagree on."""
    cfg = {"a": _config(a), "b": _config(b)}
    out: dict[str, int] = {}
    problems = []
    for name, spec in m.params.items():
        got = {s: cfg[s].get(spec[s]) for s in ("b", "a") if isinstance(spec.get(s), str)}
        got = {s: v for s, v in got.items() if isinstance(v, int) and not isinstance(v, bool)}
        if len(set(got.values())) > 1:
            problems.append(f"{name}: {m.b.what or 'B'} says {got['b']} ({spec['b']}), "
                            f"{m.a.what or 'A'} says {got['a']} ({spec['a']})")
        if got:
            out[name] = next(iter(got.values()))
        elif isinstance(spec.get("default"), str) and spec["default"] in out:
            out[name] = out[spec["default"]]
    return out, problems


# --- pairing -------------------------------------------------------------------------------------


def _shape_op(a: TensorEntry, b: TensorEntry, dtypes: str) -> str:
    from inspector.compare import RESHAPED, RETYPED, UNCHANGED

    if tuple(a.shape) != tuple(b.shape):
        return RESHAPED
    if dtypes == "compare" and a.dtype != b.dtype:
        return RETYPED
    return UNCHANGED


def _auto_prefix(names: Sequence[str]) -> list[str]:
    """Candidate prefixes of a side: "" and each dotted head (up to :data:`STRIP_DEPTH`
    components) that at least half the names share."""
    heads: Counter[str] = Counter()
    for n in names:
        parts = n.split(".")
        for i in range(1, min(STRIP_DEPTH, len(parts) - 1) + 1):
            heads[".".join(parts[:i]) + "."] += 1
    return [""] + [h for h, k in heads.items() if k * 2 >= len(names)]


def strip_prefixes(names_a: Sequence[str], names_b: Sequence[str]) -> tuple[str, str]:
    """The prefixes (one per side) whose removal pairs the most names; "" when none helps."""
    best = (0, 0, "", "")
    for pa in _auto_prefix(names_a):
        ka = {n[len(pa):] for n in names_a if n.startswith(pa)}
        for pb in _auto_prefix(names_b):
            kb = {n[len(pb):] for n in names_b if n.startswith(pb)}
            score = (len(ka & kb), -(len(pa) + len(pb)))
            if score > best[:2]:
                best = (*score, pa, pb)
    return best[2], best[3]


def _same_names(m: LayoutMap, a: Checkpoint, b: Checkpoint) -> list[Pair]:
    from inspector.compare import ADDED, REMOVED

    pa, pb = strip_prefixes(_names(a), _names(b)) if m.strip == AUTO else ("", "")

    def keyed(ckpt: Checkpoint, p: str) -> dict[str, TensorEntry]:
        return {(t.name[len(p):] if p and t.name.startswith(p) else t.name): t
                for t in ckpt.tensors}

    ka, kb = keyed(a, pa), keyed(b, pb)
    how = None
    if pa or pb:
        how = "prefix " + " / ".join(f"{s} {p!r} stripped" for s, p in (("A", pa), ("B", pb)) if p)
    out = [Pair(k, t, kb[k], _shape_op(t, kb[k], m.dtypes), how) if k in kb
           else Pair(k, t, None, REMOVED) for k, t in ka.items()]
    out += [Pair(k, None, t, ADDED) for k, t in kb.items() if k not in ka]
    return out


def pair(m: LayoutMap, a: Checkpoint, b: Checkpoint, values: Mapping[str, int]) -> list[Pair]:
    """Every tensor of ``a`` (the map's side a) and ``b`` in one :class:`Pair` (only those
    the sides' ``roles`` keep): A's order, then B's tensors no rule claimed."""
    if m.same_names:
        return _same_names(m, a, b)
    from inspector.compare import ADDED, REMOVED, RESHAPED

    b_by_name = {t.name: t for t in kept(m.b, b)}
    # key -> (rule, [(index, tensor)]): a stack's index, a concatenation's part number
    groups: dict[str, tuple[Rule, list[tuple[int, TensorEntry]]]] = {}
    order: list[tuple[str, str | None, TensorEntry | None]] = []  # (key, b name, lone a)
    more: list[tuple[Rule, str, TensorEntry]] = []  # later rules an A tensor also matches
    targeted: set[str] = set()
    for t in kept(m.a, a):
        matched = False
        for r in m.rules:
            part, hit = next(((i, h) for i, rx in enumerate(r.a_rxs)
                              if (h := rx.match(_strip_any(rx, t.name))) is not None),
                             (0, None))
            if hit is None:
                continue
            v = hit.groupdict()
            b_name = _b_name(r, v)
            if matched:
                if r.stack is None and not r.parts:
                    more.append((r, b_name, t))
                continue
            matched = True
            targeted.add(b_name)
            if r.stack is None and not r.parts:
                groups[f"{b_name}\0{t.name}"] = (r, [(0, t)])
                order.append((f"{b_name}\0{t.name}", b_name, None))
            else:
                if b_name not in groups:
                    groups[b_name] = (r, [])
                    order.append((b_name, b_name, None))
                groups[b_name][1].append((int(v[r.stack]) if r.stack else part, t))
        if not matched:
            order.append((t.name, None, t))
    # one A tensor the converter wrote to several B variables (Marian's one embedding table
    # shared by encoder, decoder and output layer): a later rule pairs it with a B variable
    # that B holds and no A tensor's first rule claims
    for r, b_name, t in more:
        if b_name in b_by_name and b_name not in targeted:
            targeted.add(b_name)
            groups[f"{b_name}\0{t.name}"] = (r, [(0, t)])
            order.append((f"{b_name}\0{t.name}", b_name, None))
    out: list[Pair] = []
    claimed: set[str] = set()
    for key, b_name, lone in order:
        if b_name is None:
            out.append(Pair(lone.name, lone, None, REMOVED, f"no rule of {m.name} maps it"))
            continue
        r, members = groups[key]
        bt = b_by_name.get(b_name)
        if bt is not None:
            claimed.add(b_name)
        if r.parts:
            out.append(_concat_pair(r, members, bt, b_name, m.dtypes, values))
            continue
        perm = None
        if r.permute_rows:
            nh, nkv = (values.get(p) for p in r.permute_rows)
            if nh is not None and nkv is not None:
                perm = (nh, nkv)
        if r.stack is None:
            at = members[0][1]
            if r.transforms:
                out.append(_transformed_pair(r, at, (), bt, b_name, m.dtypes, values))
                continue
            how = f"{at.name} -> {b_name}" + (f"; rows permuted (n_head {perm[0]}, n_head_kv "
                                               f"{perm[1]})" if perm else "")
            op = REMOVED if bt is None else _shape_op(at, bt, m.dtypes)
            out.append(Pair(at.name, at, bt, op, how, (), perm))
            continue
        members.sort(key=lambda x: x[0])
        idx = [i for i, _ in members]
        tensors = tuple(t for _, t in members)
        first = tensors[0]
        stack_name = r.a.replace("{" + r.stack + "}", "*")
        for k, x in r.a_rx.match(_strip_any(r.a_rx, first.name)).groupdict().items():
            if k != r.stack:
                stack_name = stack_name.replace("{" + k + "}", x)
        shape = (len(tensors), *first.shape)
        stacked = TensorEntry(stack_name, stack_name, shape, first.dtype, first.role,
                              nbytes=sum(t.nbytes or 0 for t in tensors),
                              extra={"stack": [t.name for t in tensors]})
        how = f"{len(tensors)} tensors stacked -> {b_name}"
        if idx != list(range(len(idx))) or any(t.shape != first.shape for t in tensors):
            out.append(Pair(stack_name, stacked, bt, RESHAPED if bt is not None else REMOVED,
                            how + f" (indices {idx}, shapes differ or are not 0..n-1)", tensors))
            continue
        op = REMOVED if bt is None else _shape_op(stacked, bt, m.dtypes)
        out.append(Pair(stack_name, stacked, bt, op, how, tensors, perm))
    seen: set[str] = set()
    for p in out:  # an A tensor paired twice: its later pairs are keyed by their B name too
        if p.key in seen and p.b is not None:
            p.key = f"{p.key} -> {p.b.name}"
        seen.add(p.key)
    for t in b_by_name.values():
        if t.name in claimed:
            continue
        why = next((w for rx, w in m.generated if rx.match(t.name)), None)
        out.append(Pair(t.name, None, t, ADDED,
                        f"generated: {why}" if why is not None else f"no rule of {m.name} "
                        "maps it"))
    return out


def _b_name(r: Rule, v: Mapping[str, str]) -> str:
    """B's name for A's variables ``v`` (a stack's variable left out, offsets undone)."""
    shift = dict(r.offset)
    return r.b.format(**{k: str(int(x) - shift[k]) if k in shift else x
                         for k, x in v.items() if k != r.stack})


def _joined(names: Sequence[str]) -> str:
    """One name for concatenated tensors: their common dotted head and tail around the parts
    that differ (``x.{q,k,v}.weight``)."""
    split = [n.split(".") for n in names]
    head = 0
    while all(len(s) > head + 1 for s in split) and len({s[head] for s in split}) == 1:
        head += 1
    tail = 0
    while all(len(s) > head + tail + 1 for s in split) and len({s[-1 - tail] for s in split}) == 1:
        tail += 1
    mid = ",".join(".".join(s[head:len(s) - tail]) for s in split)
    return ".".join([*split[0][:head], "{" + mid + "}", *split[0][len(split[0]) - tail:]])


def _transformed_shape(r: Rule, shape: tuple[int, ...], drop: int) -> tuple[int, ...] | str:
    """B's shape after the rule's squeeze, transpose and drop_rows, or why it cannot be."""
    if r.squeeze is not None:
        if r.squeeze >= len(shape) or shape[r.squeeze] != 1:
            return f"axis {r.squeeze} of {shape} is not of size 1"
        shape = shape[:r.squeeze] + shape[r.squeeze + 1:]
    if r.transpose:
        shape = shape[::-1]
    if drop:
        if not shape or shape[0] < drop:
            return f"{shape} has fewer than {drop} rows"
        shape = (shape[0] - drop, *shape[1:])
    return shape


def _steps(r: Rule, drop: int) -> str:
    steps = ([f"axis {r.squeeze} squeezed"] if r.squeeze is not None else []) + (
        ["transposed"] if r.transpose else []) + ([f"first {drop} rows dropped"] if drop else [])
    return "; ".join(steps)


def _drop(r: Rule, values: Mapping[str, int]) -> int | None:
    if r.drop_rows is None:
        return 0
    if isinstance(r.drop_rows, int):
        return r.drop_rows
    return values.get(r.drop_rows)


def _transformed_pair(r: Rule, at: TensorEntry, members: tuple[TensorEntry, ...],
                      bt: TensorEntry | None, b_name: str, dtypes: str,
                      values: Mapping[str, int], how: str | None = None) -> Pair:
    """A pair whose A side is ``at`` as the converter wrote it: a virtual entry of B's shape."""
    from inspector.compare import REMOVED, RESHAPED

    drop = _drop(r, values)
    how = how or f"{at.name} -> {b_name}"
    if drop is None:
        return Pair(at.name, at, bt, RESHAPED if bt is not None else REMOVED,
                    how + f" (parameter {r.drop_rows} unknown: rows to drop not known)")
    shape = _transformed_shape(r, tuple(at.shape), drop)
    steps = _steps(r, drop)
    how += f"; {steps}" if steps else ""
    if isinstance(shape, str):
        return Pair(at.name, at, bt, RESHAPED if bt is not None else REMOVED,
                    how + f" ({shape})", members)
    conv = TensorEntry(at.name, at.stored_name, shape, at.dtype, at.role, nbytes=at.nbytes,
                       extra={**(at.extra or {}), "stored_shape": list(at.shape)})
    op = REMOVED if bt is None else _shape_op(conv, bt, dtypes)
    return Pair(at.name, conv, bt, op, how, members, None, r, drop)


def _concat_pair(r: Rule, members: list[tuple[int, TensorEntry]], bt: TensorEntry | None,
                 b_name: str, dtypes: str, values: Mapping[str, int]) -> Pair:
    from inspector.compare import REMOVED, RESHAPED

    members.sort(key=lambda x: x[0])
    tensors = tuple(t for _, t in members)
    name = _joined([t.name for t in tensors]) if len(tensors) > 1 else tensors[0].name
    how = f"{len(tensors)} tensors concatenated along axis {r.concat} -> {b_name}"
    missing = [r.parts[i][0] for i in range(len(r.parts)) if i not in {k for k, _ in members}]
    first = tensors[0]
    rest = {tuple(s for i, s in enumerate(t.shape) if i != r.concat) for t in tensors}
    if missing or len(rest) != 1 or r.concat >= len(first.shape):
        why = (f"missing {', '.join(missing)}" if missing
               else f"shapes {[tuple(t.shape) for t in tensors]} do not concatenate")
        lone = TensorEntry(name, name, tuple(first.shape), first.dtype, first.role,
                           nbytes=sum(t.nbytes or 0 for t in tensors),
                           extra={"concat": [t.name for t in tensors]})
        return Pair(name, lone, bt, RESHAPED if bt is not None else REMOVED,
                    f"{how} ({why})", tensors)
    shape = list(first.shape)
    shape[r.concat] = sum(t.shape[r.concat] for t in tensors)
    joined = TensorEntry(name, name, tuple(shape), first.dtype, first.role,
                         nbytes=sum(t.nbytes or 0 for t in tensors),
                         extra={"concat": [t.name for t in tensors]})
    return _transformed_pair(r, joined, tensors, bt, b_name, dtypes, values, how)


# --- values --------------------------------------------------------------------------------------


def unpermute_rows(x: Any, n_head: int, n_head_kv: int) -> Any:
    """The inverse of llama.cpp's ``LlamaModel.permute(w, n_head, n_head_kv)`` along axis 0:
    the converter reshaped rows to (n, 2, rows / n / 2) and swapped the last two (n is n_head_kv
    when it differs from n_head)."""
    n = n_head_kv if n_head_kv != n_head else n_head
    rows = x.shape[0]
    if n <= 0 or rows % (2 * n):
        raise ValueError(f"{rows} rows do not split into {n} heads of rotary pairs")
    return x.reshape(n, rows // n // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


def arrays(p: Pair, a: Checkpoint, b: Checkpoint) -> tuple[Any, Any]:
    """Side a's values (a stack: its members stacked) and side b's, in side a's layout (rows
    un-permuted), each in its own type (block-quantized types decoded to float32). A rule with
    value transforms (concat, squeeze, transpose, drop_rows) is applied to side a's values, as
    the converter applied it: both are then in side b's layout."""
    import numpy as np

    from inspector.arrays import get_tensor

    r = p.rule
    if r is not None and r.parts:
        xa = np.concatenate([np.asarray(get_tensor(a, t.name)) for t in p.members], r.concat)
    elif p.members:
        xa = np.stack([np.asarray(get_tensor(a, t.name)) for t in p.members])
    else:
        xa = np.asarray(get_tensor(a, p.a.name))
    if r is not None:
        if r.squeeze is not None:
            xa = np.squeeze(xa, r.squeeze)
        if r.transpose:
            xa = xa.T
        if p.drop:
            xa = xa[p.drop:]
    xb = np.asarray(get_tensor(b, p.b.name)).reshape(xa.shape)
    if p.permute is not None:
        xb = unpermute_rows(xb, *p.permute)
    return xa, xb


CHUNK = 1 << 20  # elements widened to float64 at a time


def stats(x: Any, y: Any, atol: float, rtol: float) -> tuple[Any, float, float]:
    """(:class:`inspector.values.ValueStats` of ``x`` against ``y``, ||x||^2, ||x - y||^2):
    float64 arithmetic over row blocks of at most :data:`CHUNK` elements (NaN and Inf
    propagate as in NumPy's whole-array numbers)."""
    import numpy as np

    from inspector.values import ValueStats

    n = x.shape[0] if x.ndim else 1
    xa, xb = x.reshape(n, -1), y.reshape(n, -1)
    step = max(1, CHUNK // max(1, xa.shape[1]))
    ss_a = ss_b = ss_d = dot = 0.0
    max_abs = 0.0
    identical, changed = True, False
    bad = {"a": [0, 0, 0], "b": [0, 0, 0]}
    for i in range(0, n, step):
        u = np.asarray(xa[i:i + step], dtype=np.float64).ravel()
        v = np.asarray(xb[i:i + step], dtype=np.float64).ravel()
        d = u - v
        ss_a += float(u @ u)
        ss_b += float(v @ v)
        ss_d += float(d @ d)
        dot += float(u @ v)
        if d.size:
            m = float(np.max(np.abs(d)))
            max_abs = m if math.isnan(m) or math.isnan(max_abs) else max(max_abs, m)
        both_nan = np.isnan(u) & np.isnan(v)
        identical = identical and bool(np.all((u == v) | both_nan))
        changed = changed or bool(np.any(~(np.abs(d) <= atol + rtol * np.abs(v)) & ~both_nan))
        for side, w in (("a", u), ("b", v)):
            if not np.all(np.isfinite(w)):
                c = bad[side]
                c[0] += int(np.isnan(w).sum())
                c[1] += int(np.isposinf(w).sum())
                c[2] += int(np.isneginf(w).sum())
    rel = math.sqrt(ss_d) / math.sqrt(ss_a) if ss_a > 0 else (0.0 if ss_d == 0 else math.inf)
    cos = None
    if ss_a > 0 and ss_b > 0:
        cos = max(-1.0, min(1.0, dot / math.sqrt(ss_a * ss_b)))
    nonfinite = {side: dict(zip(("nan", "+inf", "-inf"), c, strict=True))
                 for side, c in bad.items() if any(c)} or None
    return ValueStats(identical, max_abs, rel, cos, changed, nonfinite), ss_a, ss_d
