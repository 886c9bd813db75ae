"""Closed forms: an architecture's total (and per-group counts) as an exact polynomial in its
integer hyperparameters, derived from the same ``predict`` function that lists the tensors.

Exact multivariate interpolation over an integer grid: for symbols ``x_1..x_k`` with degree
bounds ``d_i`` the count is evaluated on the tensor grid of ``d_i + 1`` values per symbol, turned
into monomial coefficients axis by axis (Vandermonde solves in :class:`fractions.Fraction`, so
nothing is rounded), and then checked at extra points off the grid. A bound that is too low, or a
count that is not polynomial there (a branch on ``n == 1``), fails that check and the grid
moves up one step, so the form returned is valid for every value from its symbols' ``start``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.formulas.core import Arch, Prediction, Symbol

Monomial = tuple[int, ...]
Poly = dict[Monomial, Fraction]
CHECK_POINTS = 4
MAX_SHIFTS = 2


@dataclass(frozen=True)
class ClosedForm:
    """A polynomial in ``symbols``; ``valid_from`` gives each symbol's smallest valid value."""

    symbols: tuple[Symbol, ...]
    poly: Poly
    valid_from: dict[str, int]

    def __call__(self, **values: int) -> Fraction:
        total = Fraction(0)
        for mono, c in self.poly.items():
            term = c
            for s, e in zip(self.symbols, mono, strict=True):
                term *= values[s.name] ** e
            total += term
        return total

    def text(self) -> str:
        """``8*h^2 + 2*h*vt + ...``: highest total degree first, exact rational coefficients."""
        names = [s.name for s in self.symbols]
        terms = sorted(self.poly.items(), key=lambda kv: (-sum(kv[0]), [-e for e in kv[0]]))
        out = []
        for mono, c in terms:
            if c == 0:
                continue
            factors = [n if e == 1 else f"{n}^{e}" for n, e in zip(names, mono, strict=True) if e]
            mag = abs(c)
            coef = "" if mag == 1 and factors else (str(mag) if mag.denominator == 1
                                                    else f"({mag})")
            body = "*".join(([coef] if coef else []) + factors)
            out.append(("- " if c < 0 else "+ ") + body)
        if not out:
            return "0"
        text = " ".join(out)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]


def _set(arch: Arch, base: Mapping[str, Any], symbols: Sequence[Symbol],
         point: Sequence[int]) -> dict[str, Any]:
    """Hyperparameters with each symbol's targets set to its value at ``point``."""
    values = dict(base)
    kinds = {h.name: h for h in arch.hparams}
    for sym, x in zip(symbols, point, strict=True):
        for target in sym.targets:
            name, _, part = target.partition(":")
            if name not in kinds:
                raise UsageError(f"symbol {sym.name}: {arch.name} has no hyperparameter {name}")
            if part:
                cur = str(values.get(name, kinds[name].default) or "").split(":")
                cur = (cur * 2)[:2] if len(cur) == 1 else cur
                cur[int(part)] = str(x)
                values[name] = ":".join(cur)
            else:
                values[name] = x
    return values


def _interpolate_axis(xs: Sequence[int], ys: Sequence[Fraction]) -> list[Fraction]:
    """Monomial coefficients c_0..c_d of the polynomial through (xs, ys): solve Vandermonde."""
    n = len(xs)
    rows = [[Fraction(x) ** j for j in range(n)] + [Fraction(y)] for x, y in zip(xs, ys,
                                                                                  strict=True)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        p = rows[col][col]
        rows[col] = [v / p for v in rows[col]]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                f = rows[r][col]
                rows[r] = [a - f * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [rows[j][n] for j in range(n)]


def _fit(count: Callable[[tuple[int, ...]], int], grids: list[list[int]]) -> Poly:
    """Tensor-product interpolation of ``count`` over ``grids`` into monomial coefficients."""
    shape = [len(g) for g in grids]
    table: dict[tuple[int, ...], Fraction] = {
        idx: Fraction(count(tuple(g[i] for g, i in zip(grids, idx, strict=True))))
        for idx in itertools.product(*(range(n) for n in shape))
    }
    # Replace grid indices by exponents one axis at a time.
    for axis, grid in enumerate(grids):
        new: dict[tuple[int, ...], Fraction] = {}
        others = [range(n) for n in shape]
        others[axis] = range(1)
        for idx in itertools.product(*others):
            line = [table[idx[:axis] + (j,) + idx[axis + 1:]] for j in range(len(grid))]
            for e, c in enumerate(_interpolate_axis(grid, line)):
                new[idx[:axis] + (e,) + idx[axis + 1:]] = c
        table = new
    return {m: c for m, c in table.items() if c != 0}


def closed_form(arch: Arch, base: Mapping[str, Any] | None = None,
                symbols: Sequence[Symbol] | None = None,
                count: Callable[[Prediction], int] | None = None,
                seed: int = 0) -> ClosedForm:
    """The closed form of ``count`` (default: the parameter total) in ``symbols`` (default: the
    arch's), the other hyperparameters fixed at ``base`` (over the arch's defaults)."""
    syms = tuple(symbols if symbols is not None else arch.symbols)
    if not syms:
        raise UsageError(f"{arch.name} declares no symbols for a closed form")
    base = dict(base or {})
    measure = count or (lambda p: p.total())

    def at(point: tuple[int, ...]) -> int:
        return measure(arch.predict(_set(arch, base, syms, point)))

    rng = random.Random(seed)
    for shifts in _shift_vectors(len(syms)):
        moved = tuple(replace(s, start=s.start + k * s.step) for s, k in zip(syms, shifts,
                                                                            strict=True))
        grids = [[s.start + s.step * j for j in range(s.degree + 1)] for s in moved]
        form = ClosedForm(moved, _fit(at, grids), {s.name: s.start for s in moved})
        checks = [tuple(s.start + s.step * rng.randint(0, 3 * s.degree + 7) for s in moved)
                  for _ in range(CHECK_POINTS)]
        if all(form(**dict(zip((s.name for s in moved), p, strict=True))) == at(p)
               for p in checks):
            return replace(form, symbols=syms)
    raise UsageError(f"{arch.name}: the count is not a polynomial of the declared degrees in "
                     f"{', '.join(s.name for s in syms)}")


def _shift_vectors(k: int) -> list[tuple[int, ...]]:
    """Grid shifts to try, fewest steps first: none, each symbol by one step, ... (a branch such
    as ``n == 1`` moves only that symbol's grid)."""
    vectors = [v for v in itertools.product(range(MAX_SHIFTS + 1), repeat=k)
               if sum(v) <= MAX_SHIFTS]
    return sorted(vectors, key=lambda v: (sum(v), [-x for x in v]))


def parse_symbol(spec: str) -> Symbol:
    """``NAME=HP[,HP...][@DEGREE]`` as a :class:`Symbol` (``HP`` may be ``name:i``)."""
    name, eq, rest = spec.partition("=")
    if not eq or not name.isidentifier() or not rest:
        raise UsageError(f"--symbol {spec!r}: expected NAME=HPARAM[,HPARAM...][@DEGREE]")
    targets, _, degree = rest.partition("@")
    try:
        deg = int(degree) if degree else 2
    except ValueError:
        raise UsageError(f"--symbol {spec!r}: degree must be an int") from None
    return Symbol(name, tuple(t.strip() for t in targets.split(",") if t.strip()), degree=deg)


def merge_symbols(arch: Arch, extra: Sequence[Symbol]) -> tuple[Symbol, ...]:
    """The arch's symbols with ``extra`` replacing those that set the same hyperparameters."""
    taken = {t for s in extra for t in s.targets}
    kept = [s for s in arch.symbols if not taken & set(s.targets)]
    step = {t: s for s in arch.symbols for t in s.targets}
    fixed = []
    for s in extra:  # inherit start/step of the symbols they replace (e.g. h even)
        old = [step[t] for t in s.targets if t in step]
        if old:
            s = replace(s, start=max(s.start, *(o.start for o in old)),
                        step=max(s.step, *(o.step for o in old)))
        fixed.append(s)
    return (*fixed, *kept)
