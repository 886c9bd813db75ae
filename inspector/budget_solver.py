"""Which hyperparameters hit a parameter budget: ``predict`` run backwards, on the same engine.

Every count comes from :meth:`Arch.predict` (the formula engine); nothing here knows an
architecture. Candidate values that the architecture refuses (its predict raises, e.g.
"d_model must be divisible by num_heads") are skipped and the reasons reported.

    >>> r = solve("rau-lstm", 103_360, ["hidden_units"], {"vocab_size": 64, "num_layers": 3})
    >>> r.best.values, r.best.total
    ({'hidden_units': 64}, 103360)

Search over integers ``lo, lo+step, ..., hi``: exhaustive when the range holds at most
``EXHAUSTIVE`` values; otherwise, when the count is non-decreasing at ``PROBES`` evenly spaced
points, bisection for the last value at or under the target and the neighbours around it (a
vocabulary of 10^6 takes ~20 predictions); a range found not monotone is searched exhaustively
up to ``EXHAUSTIVE_MAX`` values. Without ``--range`` the upper end is found by doubling.
With two free hyperparameters the first is enumerated and the second solved for each value.
"""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspector.adapters.ast_parse import parse
from inspector.adapters.errors import UsageError
from inspector.formulas import core

EXHAUSTIVE = 2_000
EXHAUSTIVE_MAX = 200_000
PROBES = 33
SCAN = 4_096  # how far bisection looks for a value the architecture accepts
CEILING = 1 << 40  # doubling stops here
OUTER_MAX = 5_000  # values of the first of two free hyperparameters

Values = tuple[int, ...]


@dataclass(frozen=True)
class Candidate:
    """One assignment of the free (and tied) hyperparameters and the count it predicts."""

    values: dict[str, int]
    total: int
    deviation: float  # percent of the target, signed


@dataclass
class Result:
    """The outcome of one budget search."""

    arch: str
    target: int
    solve: tuple[str, ...]
    under: bool
    candidates: list[Candidate]
    hparams: dict[str, Any]  # every hyperparameter of the best candidate
    given: list[str]  # the hyperparameters the caller set
    ties: dict[str, str]
    method: str
    evaluations: int
    ranges: dict[str, tuple[int, int, int]]  # name -> (lo, hi, step) searched
    constraints: dict[str, int] = field(default_factory=dict)  # reason -> values skipped
    breakdown: dict[str, int] = field(default_factory=dict)
    grouping: str = "block"
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    def as_dict(self) -> dict[str, Any]:
        return {
            "arch": self.arch, "target": self.target, "solve": list(self.solve),
            "under": self.under, "method": self.method, "evaluations": self.evaluations,
            "ranges": {k: list(v) for k, v in self.ranges.items()}, "ties": self.ties,
            "constraints": self.constraints, "hparams": self.hparams, "given": self.given,
            "candidates": [vars(c) for c in self.candidates],
            "grouping": self.grouping, "breakdown": self.breakdown, "notes": self.notes,
        }


# --- ties: "feedforward_size=4*d_model" ----------------------------------------------------------

_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def parse_tie(text: str) -> tuple[str, str]:
    """``"name=expr"`` -> (name, expr), the expression checked to be integer arithmetic over
    hyperparameter names (``+ - * // % **`` and parentheses)."""
    name, sep, expr = text.partition("=")
    name, expr = name.strip(), expr.strip()
    if not sep or not name.isidentifier() or not expr:
        raise UsageError(f"--tie {text!r}: expected NAME=EXPRESSION, e.g. "
                         "feedforward_size=4*d_model")
    tie_names(expr)
    return name, expr


def tie_names(expr: str) -> set[str]:
    """The hyperparameter names an expression reads (and a check of its syntax)."""
    try:
        tree = parse(expr, mode="eval")
    except SyntaxError:
        raise UsageError(f"--tie: {expr!r} is not an expression") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.BinOp) and type(node.op) not in _OPS:
            raise UsageError(f"--tie: {expr!r}: only + - * // % ** (use // for division)")
        elif isinstance(node, ast.Constant) and not isinstance(node.value, int):
            raise UsageError(f"--tie: {expr!r}: only integer constants")
        elif not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd,
                                   ast.Name, ast.Load, ast.Constant, *_OPS)):
            raise UsageError(f"--tie: {expr!r}: only integer arithmetic over hyperparameters")
    return names


def evaluate(expr: str, values: Mapping[str, Any]) -> int:
    """Integer value of a tie expression over ``values``."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return int(node.value)
        if isinstance(node, ast.Name):
            v = values.get(node.id)
            if not isinstance(v, int) or isinstance(v, bool):
                raise UsageError(f"--tie: {node.id} is not an integer hyperparameter")
            return v
        if isinstance(node, ast.UnaryOp):
            return -ev(node.operand) if isinstance(node.op, ast.USub) else ev(node.operand)
        if isinstance(node, ast.BinOp):
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise UsageError(f"--tie: cannot evaluate {ast.dump(node)}")

    try:
        return ev(parse(expr, mode="eval"))
    except ZeroDivisionError:
        raise ValueError(f"tie {expr} divides by zero") from None


# --- the count as a function of the free values ------------------------------------------------


class Count:
    """Memoised ``values -> total`` for one architecture; refusals recorded by reason."""

    def __init__(self, arch: core.Arch, base: Mapping[str, Any], free: Sequence[str],
                 ties: Mapping[str, str]) -> None:
        self.arch, self.base, self.free, self.ties = arch, dict(base), tuple(free), dict(ties)
        self.memo: dict[Values, int | None] = {}
        self.refused: Counter[str] = Counter()

    def hparams(self, values: Values) -> dict[str, Any]:
        hp = {**self.base, **dict(zip(self.free, values, strict=True))}
        for name, expr in self.ties.items():
            hp[name] = evaluate(expr, hp)
        return hp

    def __call__(self, values: Values) -> int | None:
        if values in self.memo:
            return self.memo[values]
        try:
            total: int | None = self.arch.predict(self.hparams(values)).total()
        except (UsageError, ValueError) as e:
            self.refused[_reason(e)] += 1
            total = None
        self.memo[values] = total
        return total


def _reason(e: Exception) -> str:
    return re.sub(r"\b\d+\b", "N", getattr(e, "message", None) or str(e))


def _key(total: int, target: int, under: bool) -> tuple[int, int] | None:
    if under:
        return None if total > target else (target - total, 0)
    return (abs(total - target), total)


def _search_1d(f: Callable[[int], int | None], target: int, lo: int, hi: int | None,
               step: int, keep: int) -> tuple[list[tuple[int, int]], str, int]:
    """Feasible (value, total) pairs worth ranking, the method used and the upper end."""
    grew = hi is None
    hi = _upper_end(f, target, lo, step) if hi is None else hi
    n = (hi - lo) // step + 1
    if n <= EXHAUSTIVE:
        pairs = [(v, t) for i in range(n) if (t := f(v := lo + i * step)) is not None]
        return pairs, "exhaustive", hi
    probes = sorted({round(i * (n - 1) / (PROBES - 1)) for i in range(PROBES)})
    seen = [t for i in probes if (t := f(lo + i * step)) is not None]
    if any(b < a for a, b in zip(seen, seen[1:], strict=False)):
        if n > EXHAUSTIVE_MAX:
            raise UsageError(f"the count is not monotone over {n:,} values; narrow --range")
        pairs = [(v, t) for i in range(n) if (t := f(v := lo + i * step)) is not None]
        return pairs, "exhaustive (count not monotone)", hi
    a = _bisect(lambda i: f(lo + i * step), target, n)
    pairs = _around(lambda i: f(lo + i * step), a, n, keep)
    how = (f"bisection (count non-decreasing at {len(probes)} probes"
           + (", upper end by doubling)" if grew else ")"))
    return [(lo + i * step, t) for i, t in pairs], how, hi


def _upper_end(f: Callable[[int], int | None], target: int, lo: int, step: int) -> int:
    """An upper end for the search: doubled from ``lo`` until the first value the architecture
    accepts there or above counts at least ``target`` (at most :data:`CEILING`)."""
    hi = lo
    while hi < CEILING:
        # the first value here or above that the architecture accepts
        k = next((k for k in range(SCAN) if f(hi + k * step) is not None), None)
        if k is not None and f(hi + k * step) >= target:  # type: ignore[operator]
            hi += k * step
            break
        hi = lo + 2 * (hi - lo + step) - step
    return min(hi, CEILING)


def _bisect(at: Callable[[int], int | None], target: int, n: int) -> int:
    """The index (of ``n``, counts non-decreasing) whose count is the last at most ``target``,
    stepping over indices the architecture refuses (up to :data:`SCAN` away)."""

    def feasible(i: int, a: int, b: int) -> int | None:
        for d in range(SCAN):
            for j in (i + d, i - d):
                if a <= j <= b and at(j) is not None:
                    return j
        return None

    a, b = 0, n - 1  # invariant: the answer's index is in [a, b]
    while b - a > 1:
        m = feasible((a + b) // 2, a, b)
        if m is None or m in (a, b):
            break
        t = at(m)
        assert t is not None
        if t <= target:
            a = m
        else:
            b = m
    return a


def _around(at: Callable[[int], int | None], a: int, n: int, keep: int) -> list[tuple[int, int]]:
    """Up to ``keep`` feasible (index, count) on each side of index ``a`` (``a`` and below,
    then above), at most :data:`SCAN` indices away."""
    pairs: list[tuple[int, int]] = []
    for direction in (-1, 1):
        i, found = a if direction < 0 else a + 1, 0
        while 0 <= i < n and found < keep and abs(i - a) < SCAN:
            t = at(i)
            if t is not None:
                pairs.append((i, t))
                found += 1
            i += direction
    return pairs


def solve(arch: str | core.Arch, target: int, free: Sequence[str],
          fixed: Mapping[str, Any] | None = None, *,
          ranges: Mapping[str, tuple[int, int | None]] | None = None, step: int = 1,
          ties: Mapping[str, str] | None = None, under: bool = False, top: int = 5,
          scheme: str | None = None) -> Result:
    """The values of the ``free`` hyperparameters (one or two) whose predicted parameter count
    is nearest to ``target`` (with ``under``: the largest at most ``target``)."""
    a = core.get(arch) if isinstance(arch, str) else arch
    ties = dict(ties or {})
    bounds = _validate(a, target, free, fixed or {}, ranges or {}, step, ties)
    count = Count(a, a.resolve(fixed or {}), free, ties)
    pairs, method, searched = _search(count, free, bounds, target, step, top + 2)
    order = _ranked(pairs, target, under)[:top]
    if not order:
        why = "; ".join(count.refused) or "no value in range"
        raise UsageError(f"{a.name}: no {', '.join(free)} in the searched range reaches the "
                         f"target{' from below' if under else ''} ({why})")
    cands = []
    for values, total in order:
        hp = count.hparams(values)
        shown = {n: hp[n] for n in (*free, *ties)}
        cands.append(Candidate(shown, total, round(100 * (total - target) / target, 4)))
    best_hp = count.hparams(order[0][0])
    pred = a.predict(best_hp)
    groups, grouping = breakdown(a, pred, scheme)
    return Result(
        arch=a.name, target=target, solve=tuple(free), under=under, candidates=cands,
        hparams=best_hp, given=list(fixed or {}), ties=ties, method=method,
        evaluations=len(count.memo),
        ranges=searched, constraints=dict(count.refused), breakdown=groups, grouping=grouping,
        notes=list(pred.notes),
    )


def _validate(a: core.Arch, target: int, free: Sequence[str], fixed: Mapping[str, Any],
              ranges: Mapping[str, tuple[int, int | None]], step: int,
              ties: Mapping[str, str]) -> dict[str, tuple[int, int | None]]:
    """The search bounds of each free hyperparameter, after every argument is checked."""
    if not 1 <= len(free) <= 2:
        raise UsageError("--solve takes one or two hyperparameters")
    if target < 1:
        raise UsageError("--target must be a positive parameter count")
    if step < 1:
        raise UsageError("--step must be at least 1")
    known = {h.name: h for h in a.hparams}
    for name in [*free, *ties, *(n for e in ties.values() for n in tie_names(e))]:
        if name not in known:
            raise UsageError(f"{a.name} has no hyperparameter {name}; it has {', '.join(known)}")
        if known[name].kind is not int:
            raise UsageError(f"{a.name}: {name} is not an integer hyperparameter")
    clash = set(free) & set(ties) or set(fixed) & (set(free) | set(ties))
    if clash:
        raise UsageError(f"{', '.join(sorted(clash))} cannot be both set and solved/tied")
    bounds: dict[str, tuple[int, int | None]] = {}
    for name in free:
        lo, hi = ranges.get(name, (step, None))
        if hi is not None and hi < lo:
            raise UsageError(f"--range for {name}: {lo}:{hi} is empty")
        bounds[name] = (lo, hi)
    return bounds


def _search(count: Count, free: Sequence[str], bounds: Mapping[str, tuple[int, int | None]],
            target: int, step: int, keep: int
            ) -> tuple[list[tuple[Values, int]], str, dict[str, tuple[int, int, int]]]:
    """(values, total) pairs near ``target``, how they were found, and the ranges searched.
    One free hyperparameter: a 1-D search; two: the first enumerated, the second searched."""
    if len(free) == 1:
        lo, hi = bounds[free[0]]
        got, method, top_hi = _search_1d(lambda v: count((v,)), target, lo, hi, step, keep)
        return [((v,), t) for v, t in got], method, {free[0]: (lo, top_hi, step)}
    (olo, ohi), (ilo, ihi) = bounds[free[0]], bounds[free[1]]
    if ohi is None:
        # the outer value's own budget with the inner at its smallest
        _, _, ohi = _search_1d(lambda v: count((v, ilo)), target, olo, None, step, 1)
    n = (ohi - olo) // step + 1
    if n > OUTER_MAX:
        raise UsageError(f"{free[0]} spans {n:,} values; narrow --range {free[0]}=LO:HI")
    pairs: list[tuple[Values, int]] = []
    methods, inner_hi = set(), ilo
    for v in range(olo, ohi + 1, step):
        try:
            got, m, h = _search_1d(lambda w, v=v: count((v, w)), target, ilo, ihi, step, keep)
        except UsageError:
            continue
        methods.add(m)
        inner_hi = max(inner_hi, h)
        pairs += [((v, w), t) for w, t in got]
    method = f"{free[0]} enumerated, {free[1]} by " + " / ".join(sorted(methods))
    return pairs, method, {free[0]: (olo, ohi, step), free[1]: (ilo, inner_hi, step)}


def _ranked(pairs: Sequence[tuple[Values, int]], target: int,
            under: bool) -> list[tuple[Values, int]]:
    """Distinct candidates, nearest to ``target`` first (ties: the smaller values)."""
    ranked: dict[Values, tuple[tuple[int, int], int]] = {}
    for values, total in pairs:
        k = _key(total, target, under)
        if k is not None:
            ranked[values] = (k, total)
    return [(v, total) for v, (_, total) in sorted(ranked.items(),
                                                    key=lambda kv: (kv[1][0], kv[0]))]


def breakdown(arch: core.Arch, pred: core.Prediction,
              scheme: str | None = None) -> tuple[dict[str, int], str]:
    """Parameters per group of ``scheme`` (default: the architecture's own, when it exists),
    else per formula block; tied tensors counted once."""
    items = [(t.name, t.numel) for t in core.counted(pred.tensors)]
    if scheme or arch.scheme:
        from inspector import grouping
        from inspector.compare import choose_scheme

        s = choose_scheme(scheme, [n for n, _ in items], default=arch.scheme)
        return grouping.group_counts(s, items), f"scheme {s.name}"
    out: dict[str, int] = {}
    for t in core.counted(pred.tensors):
        block = core.block_of(t) or "other"
        out[block] = out.get(block, 0) + t.numel
    return out, "block"


def compare(archs: Sequence[str], target: int, solve_any: Sequence[str],
            fixed: Mapping[str, Any] | None = None,
            scoped: Mapping[str, Mapping[str, Any]] | None = None, *,
            ranges: Mapping[str, tuple[int, int | None]] | None = None, step: int = 1,
            ties: Mapping[str, str] | None = None, under: bool = False, top: int = 1,
            scheme: str | None = None) -> list[Result]:
    """One :func:`solve` per architecture at the same ``target``: each solves the first of
    ``solve_any`` it has; ``fixed`` values and ``ties`` apply where the architecture has every
    name they mention, ``scoped[arch]`` values to that architecture only."""
    results = []
    used: set[str] = set()
    for name in archs:
        a = core.get(name)
        have = {h.name for h in a.hparams}
        free = next((p for p in solve_any if p in have), None)
        if free is None:
            raise UsageError(f"{a.name} has none of {', '.join(solve_any)} to solve for")
        values = {k: v for k, v in (fixed or {}).items() if k in have and k != free}
        values.update((scoped or {}).get(name, {}))
        used.update(values)
        mine = {k: e for k, e in (ties or {}).items()
                if k in have and k != free and k not in values and tie_names(e) <= have}
        r = solve(a, target, [free], values, ranges=ranges, step=step, ties=mine, under=under,
                  top=top, scheme=scheme)
        ignored = sorted(set(fixed or {}) - have)
        if ignored:
            r.notes.append(f"not a hyperparameter of {a.name}: {', '.join(ignored)}")
        results.append(r)
    unused = set(fixed or {}) - used - set(solve_any)
    if unused:
        raise UsageError(f"no compared architecture has {', '.join(sorted(unused))}")
    return results


_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9}


def parse_target(text: str) -> int:
    """``--target``: ``103360``, ``103,360``, ``150k``, ``1.5M``, ``1e6`` as a count."""
    m = re.fullmatch(r"\s*([0-9][0-9_,]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kKmMgGbB]?)\s*", text)
    if m is None:
        raise UsageError(f"--target {text!r}: expected a count such as 103360, 150k or 1.5M")
    number = float(m.group(1).replace(",", "").replace("_", ""))
    return round(number * _SUFFIX[m.group(2).lower()])


def parse_range(text: str) -> tuple[str | None, tuple[int, int | None]]:
    """``"lo:hi"`` or ``"name=lo:hi"`` (``hi`` may be empty: found by doubling)."""
    name, _, span = text.rpartition("=")
    lo, sep, hi = span.partition(":")
    try:
        bounds = (int(lo), int(hi) if hi.strip() else None)
    except ValueError:
        bounds = None
    if not sep or bounds is None or bounds[0] < 0:
        raise UsageError(f"--range {text!r}: expected LO:HI or NAME=LO:HI (integers)")
    return (name.strip() or None), bounds
