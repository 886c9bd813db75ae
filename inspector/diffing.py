"""Compare two checkpoints of any formats: a pure function returning typed records.

>>> from inspector.diffing import diff
>>> result = diff("before.pt", "after.safetensors", values=True)  # doctest: +SKIP
>>> [(r.name, r.op) for r in result.records if r.op != "unchanged"]  # doctest: +SKIP

Tensors are aligned by the shared engine (:mod:`inspector.compare`, also behind ``check``), by
canonical name after normalisation (:func:`normalise`: MXNet ``arg:`` /
``aux:``, wrapper prefixes ``module.``, ``_orig_mod.``, ``model.``, user prefixes, then regex
renames applied to both sides), never by position; ``align="shapes"`` then pairs the leftovers
whose shape is unique on both sides. Each aligned pair or lone tensor is one :class:`TensorDiff`
whose ``op`` is one of :data:`OPS`. With ``values=True`` aligned tensors of equal element count are
compared chunk by chunk (:mod:`inspector.values`): ``changed`` when some element differs by more
than ``atol + rtol * |b|``. :func:`collapse` folds records that repeat across layers into patterns
(``encoder.layers.#.ff.weight`` x12); group deltas use the shared grouping scheme.

Two layouts of one model (a Hugging Face state dict and the GGUF llama.cpp made of it; a DCP
directory and its consolidated state dict) are paired by the producers' name mappings instead
(:mod:`inspector.layout_map`, ``layout=``): each record's ``how`` says what the producer did
(renamed, rows permuted, experts stacked), values are compared in A's layout, and
:func:`layout_summary` gives the conversion error per group and stored type.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector import compare as engine
from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.compare import (  # noqa: F401  (the shared vocabulary, re-exported)
    ADDED,
    ALIGN_MODES,
    BUILTIN_PREFIXES,
    REMOVED,
    RESHAPED,
    RETYPED,
    UNCHANGED,
    Keys,
    Rename,
    rename,
)

SCHEMA = "inspector.diff/1"
CHANGED = "changed"  # diff's own op: aligned, same structure, contents differ (--values)
OPS = (REMOVED, ADDED, RESHAPED, RETYPED, CHANGED, UNCHANGED)
STRUCTURAL = (ADDED, REMOVED, RESHAPED, RETYPED)
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class TensorDiff:
    """One aligned pair (or a tensor on one side only) and what happened to it."""

    name: str  # the aligned (normalised) name
    op: str  # one of OPS
    a: TensorEntry | None
    b: TensorEntry | None
    aligned_by: str | None = None  # "name" | "shape" (None for a lone tensor)
    values: Any = None  # inspector.values.ValueStats when values were compared
    note: str | None = None  # why values were not compared
    how: str | None = None  # cross-layout: what the producer's mapping did to this tensor


@dataclass(frozen=True, slots=True)
class GroupDelta:
    """Elements of one group on each side (tied tensors once) and the tensors that changed."""

    group: str
    a: int
    b: int
    tensors: dict[str, int] = field(default_factory=dict)  # op -> tensor count

    @property
    def delta(self) -> int:
        return self.b - self.a


@dataclass(frozen=True, slots=True)
class Collapsed:
    """Records with one op that differ only in one or more layer numbers: ``pattern`` has
    ``#`` where the numbers were; ``members`` in input order."""

    pattern: str
    op: str
    members: tuple[TensorDiff, ...]

    @property
    def count(self) -> int:
        return len(self.members)


@dataclass
class DiffResult:
    """Everything :func:`diff` found; ``records`` in A's order, then B's additions."""

    a: Checkpoint
    b: Checkpoint
    records: list[TensorDiff]
    groups: list[GroupDelta]
    scheme: str | None
    values: bool
    atol: float = 0.0
    rtol: float = 0.0
    filter: dict[str, Any] | None = None  # match / roles and how many records they kept
    # cross-layout diffs: the map, its parameters and their disagreements (layout_map)
    layout: dict[str, Any] | None = None
    # cross-layout values: record name -> (||a||^2, ||a - b||^2), for the group summaries
    sums: dict[str, tuple[float, float]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        c = Counter(r.op for r in self.records)
        return {op: c.get(op, 0) for op in OPS}

    @property
    def structural(self) -> bool:
        """True when tensors were added, removed, reshaped or retyped (a tensor a converter
        generates, such as llama.cpp's ``rope_freqs``, is not a difference)."""
        return any(r.op in STRUCTURAL and not (r.how or "").startswith("generated")
                   for r in self.records)

    @property
    def values_changed(self) -> int:
        """Aligned tensors whose contents differ beyond the tolerance (any op)."""
        return sum(1 for r in self.records if r.values is not None and r.values.changed)

    @property
    def different(self) -> bool:
        """What the exit code reports: structure, and with values also changed contents."""
        return self.structural or self.values_changed > 0


def load_map(path: str | Path) -> list[Rename]:
    """``--map FILE``: one rule per line, ``REGEX -> REPLACEMENT`` (``#`` starts a comment line,
    ``\\1`` / ``\\g<name>`` refer to groups)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read rename map ({e})", str(p)) from None
    rules = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if " -> " not in line:
            raise UsageError("expected 'REGEX -> REPLACEMENT'", str(p), f"line {n}")
        pattern, replacement = (s.strip() for s in line.split(" -> ", 1))
        rules.append(rename(pattern, replacement, f"{p}:{n}"))
    return rules


def normalise(name: str, prefixes: Sequence[str] = BUILTIN_PREFIXES,
              renames: Sequence[Rename] = ()) -> str:
    """The name both sides are aligned by: prefixes stripped (repeatedly), renames applied."""
    return Keys(tuple(prefixes), tuple(renames))(name)


def align(a: Sequence[TensorEntry], b: Sequence[TensorEntry], *,
          strip_prefixes: Sequence[str] = (), renames: Sequence[Rename] = (),
          align_mode: str = "names") -> list[TensorDiff]:
    """Structural records, values not looked at: A's order, then B's additions
    (the shared engine, :func:`inspector.compare.align`)."""
    keys = Keys((*BUILTIN_PREFIXES, *strip_prefixes), tuple(renames))
    return [TensorDiff(o.key, o.op, o.a, o.b, o.aligned_by)
            for o in engine.align(a, b, keys, align_mode)]


def compare_values(ckpt_a: Checkpoint, ckpt_b: Checkpoint, records: Sequence[TensorDiff],
                   atol: float = 0.0, rtol: float = 0.0,
                   chunk: int | None = None, progress: Any = None,
                   threads: int | None = None) -> list[TensorDiff]:
    """Records with values compared where both sides hold the same number of elements;
    ``unchanged`` becomes ``changed`` when the contents differ beyond the tolerance. The pass
    runs on ``threads`` threads (default: by size and cores), large tensors shared out by chunks
    (:mod:`inspector.chunk_pass`; the same numbers on any number of threads); ``progress`` gets
    ``advance(nbytes)``."""
    from dataclasses import replace

    from inspector import chunk_pass, scratch, values

    size = values.CHUNK_ELEMENTS if chunk is None else max(1, chunk)
    advance = progress.advance if progress is not None else None
    plans: list[Any] = []
    for r in records:
        spans = None
        if comparable(r):
            pair = (chunk_pass.locate(ckpt_a, r.a), chunk_pass.locate(ckpt_b, r.b))
            try:
                integral = values.check_pair(ckpt_a, r.a, r.b, atol, rtol)
            except values.ValuesUnavailable:
                pair = (None, None)
            if pair[0] is not None and pair[1] is not None:
                spans = (*pair, integral)
        plans.append(spans)

    def units() -> Any:
        for i, (r, spans) in enumerate(zip(records, plans, strict=True)):
            if spans is None:
                yield i, -1, 0
            else:
                sides = spans[0].itemsize + spans[1].itemsize
                yield from ((i, k, m) for k, m in chunk_pass.runs(r.a, size, sides))

    def unit(item: tuple[int, int, int]) -> Any:
        i, k, m = item
        r = records[i]
        if plans[i] is None:
            if not comparable(r):
                return r
            try:
                got = values.compare(ckpt_a, r.a, ckpt_b, r.b, atol, rtol, size, advance)
            except values.ValuesUnavailable as e:
                return replace(r, note=e.why)
            return with_values(r, got)
        span_a, span_b, integral = plans[i]
        xa = files.read(span_a, k, size, "diff.a", m)
        xb = files.read(span_b, k, size, "diff.b", m)
        got = [values.compare_chunk(xa[j:j + size], xb[j:j + size], r.a.dtype, r.b.dtype,
                                    integral, atol, rtol, ("diff.a.wide", "diff.b.wide"))
               for j in range(0, xa.size, size)]  # the run's chunks, each on its own
        if advance is not None:
            advance(xa.size * (span_a.itemsize + span_b.itemsize))
        return got

    workers = threads if threads is not None else values.threads_for(
        [r.a for r in records if r.a is not None and r.b is not None], [ckpt_a, ckpt_b])
    out: list[Any] = list(records)
    sums: Any = None
    try:
        with chunk_pass.Files() as files:
            for (i, k, m), got in chunk_pass.ordered(unit, units(), workers):
                if k < 0:
                    out[i] = got
                    continue
                for j, acc in enumerate(got):  # added in chunk order (sums are not associative)
                    sums = acc if k + j == 0 else sums.add(acc)
                if k + m == chunk_pass.count(records[i].a, size):
                    files.check(plans[i][0])
                    files.check(plans[i][1])
                    out[i] = with_values(records[i], values.finish(sums))
    finally:
        scratch.release()
    return out


def comparable(r: TensorDiff) -> bool:
    """Whether a record's values are compared: both sides, same element count."""
    return r.a is not None and r.b is not None and r.a.numel == r.b.numel


def with_values(r: TensorDiff, stats: Any = None, note: str | None = None) -> TensorDiff:
    """The record with its value comparison (``unchanged`` becomes ``changed`` when the
    contents differ), or with the note saying why its values could not be read."""
    from dataclasses import replace

    if note is not None:
        return replace(r, note=note)
    op = CHANGED if r.op == UNCHANGED and stats.changed else r.op
    return replace(r, op=op, values=stats)


def group_deltas(ckpt_a: Checkpoint, ckpt_b: Checkpoint, records: Sequence[TensorDiff],
                 scheme: str | None = None) -> tuple[str, list[GroupDelta]]:
    """Per-group element counts of A and B (tied tensors once) and tensor ops per group, with
    one scheme chosen over both sides' names (``scheme``: a built-in name or YAML file)."""
    from inspector import grouping

    names = [r.name for r in records]
    fmt = ckpt_a.format if ckpt_a.format == ckpt_b.format else None
    sch = engine.choose_scheme(scheme, names, fmt)
    ua = {id(t) for t in ckpt_a.unique()}
    ub = {id(t) for t in ckpt_b.unique()}
    def counted(t: TensorEntry, unique: set[int]) -> int:
        # a cross-layout pair's virtual entry (stacked, concatenated, as converted) counts
        return t.numel if id(t) in unique or {"stack", "concat", "stored_shape"} & set(
            t.extra) else 0

    counts_a = grouping.group_counts(
        sch, [(r.name, counted(r.a, ua)) for r in records if r.a is not None])
    counts_b = grouping.group_counts(
        sch, [(r.name, counted(r.b, ub)) for r in records if r.b is not None])
    ops: dict[str, Counter] = {}
    for r in records:
        ops.setdefault(sch.assign(r.name).group, Counter())[r.op] += 1
    order = grouping.ordered_groups(sch, names)
    rows = [
        GroupDelta(g, counts_a.get(g, 0), counts_b.get(g, 0),
                   {op: ops[g][op] for op in OPS if ops[g][op]})
        for g in order
    ]
    return sch.name, rows


def select(records: Sequence[TensorDiff], match: str | None = None,
           roles: Sequence[str] = ()) -> list[TensorDiff]:
    """The records whose aligned or stored name (either side) matches the regex ``match`` and
    whose role (either side) is one of ``roles`` (``parameter``, ``buffer``, ``optimizer``,
    ``other``); no filter keeps all."""
    rx = None
    if match:
        try:
            rx = re.compile(match)
        except re.error as e:
            raise UsageError(f"--match {match!r} is not a valid regex ({e})") from None

    def names(r: TensorDiff) -> list[str]:
        return [r.name, *(t.stored_name for t in (r.a, r.b) if t is not None)]

    wanted = set(roles)
    return [r for r in records
            if (rx is None or any(rx.search(n) for n in names(r)))
            and (not wanted or any(t is not None and t.role.value in wanted
                                   for t in (r.a, r.b)))]


def diff(a: str | Path | Checkpoint, b: str | Path | Checkpoint, *,
         strip_prefixes: Sequence[str] = (), renames: Sequence[Rename] | str | Path = (),
         align_mode: str = "names", values: bool = False, atol: float = 0.0,
         rtol: float = 0.0, scheme: str | None = None, groups: bool = True,
         chunk: int | None = None, match: str | None = None,
         roles: Sequence[str] = (), progress: Any = None,
         values_pass: Any = None, layout: str | None = "auto") -> DiffResult:
    """Diff two checkpoints (paths or loaded :class:`Checkpoint`); see the module docstring.
    ``match`` / ``roles`` keep only some records (:func:`select`) before values are read, so
    counts, groups and the verdict are over those. ``values_pass``: what compares values
    (default :func:`compare_values`; same arguments, e.g. a Dask cluster's). ``layout``: a
    layout map's name or YAML file, ``"auto"`` (a built-in map when A and B are two layouts it
    knows, and no ``renames`` are given) or ``"none"``."""
    from inspector.adapters.registry import load

    ckpt_a = a if isinstance(a, Checkpoint) else load(a)
    ckpt_b = b if isinstance(b, Checkpoint) else load(b)
    if isinstance(renames, (str, Path)):
        renames = load_map(renames)
    chosen = None
    if layout not in (None, "auto") or not (renames or strip_prefixes) and align_mode == "names":
        from inspector import layout_map

        chosen = layout_map.choose(layout, ckpt_a, ckpt_b)
    if chosen is not None:
        return _cross(ckpt_a, ckpt_b, *chosen, values=values, atol=atol, rtol=rtol,
                      scheme=scheme, groups=groups, match=match, roles=roles,
                      progress=progress)
    records = align(ckpt_a.tensors, ckpt_b.tensors, strip_prefixes=strip_prefixes,
                    renames=renames, align_mode=align_mode)
    kept = None
    if match or roles:
        of = len(records)
        records = select(records, match, roles)
        kept = {"match": match, "roles": list(roles), "kept": len(records), "of": of}
    if values:
        records = (values_pass or compare_values)(ckpt_a, ckpt_b, records, atol, rtol, chunk,
                                                  progress)
    scheme_name, rows = (group_deltas(ckpt_a, ckpt_b, records, scheme) if groups
                         else (None, []))
    return DiffResult(ckpt_a, ckpt_b, records, rows, scheme_name, values, atol, rtol, kept)


# ---------------------------------------------------------------------------------------------
# Two layouts of one model (inspector.layout_map)

_FLIP = {REMOVED: ADDED, ADDED: REMOVED}
UNRELATED = 0.5  # a relative L2 error no conversion makes (Q2_K is about 0.1)


def _cross(ckpt_a: Checkpoint, ckpt_b: Checkpoint, m: Any, swapped: bool, *, values: bool,
           atol: float, rtol: float, scheme: str | None, groups: bool, match: str | None,
           roles: Sequence[str], progress: Any) -> DiffResult:
    """The diff of two layouts paired by the layout map ``m`` (``swapped``: A is its side b)."""
    from inspector import layout_map

    side_a, side_b = (ckpt_b, ckpt_a) if swapped else (ckpt_a, ckpt_b)
    params, problems = layout_map.params(m, side_a, side_b)
    pairs = layout_map.pair(m, side_a, side_b, params)
    if scheme is None:  # groups by the names of the records' first (the map's a) side
        scheme = engine.choose_scheme(None, [p.key for p in pairs if p.a is not None]).name
    records = []
    by_key = {}
    for p in pairs:
        a, b, op = (p.b, p.a, _FLIP.get(p.op, p.op)) if swapped else (p.a, p.b, p.op)
        records.append(TensorDiff(p.key, op, a, b, "layout" if a and b else None, how=p.how))
        by_key[p.key] = p
    kept = None
    if match or roles:
        of = len(records)
        records = select(records, match, roles)
        kept = {"match": match, "roles": list(roles), "kept": len(records), "of": of}
    sums: dict[str, tuple[float, float]] = {}
    if values:
        if atol < 0 or rtol < 0:
            raise UsageError("--atol and --rtol must be >= 0")
        out = []
        for r in records:
            p = by_key[r.name]
            if r.a is None or r.b is None or r.op not in (UNCHANGED, RETYPED):
                out.append(r)
                continue
            try:
                xa, xb = layout_map.arrays(p, side_a, side_b)
            except (ValueError, UsageError) as e:  # ValuesUnavailable is a FormatError
                out.append(with_values(r, note=str(e)))
                continue
            except Exception as e:  # noqa: BLE001  (an unreadable tensor is a note, not a stop)
                out.append(with_values(r, note=f"values not read ({e})"))
                continue
            if swapped:
                xa, xb = xb, xa
            st, ss_a, ss_d = layout_map.stats(xa, xb, atol, rtol)
            sums[r.name] = (ss_a, ss_d)
            if progress is not None:
                progress.advance((r.a.nbytes or 0) + (r.b.nbytes or 0))
            out.append(with_values(r, st))
        records = out
    info = {"map": m.name, "description": m.description, "file": m.where,
            "a": (m.b if swapped else m.a).what, "b": (m.a if swapped else m.b).what,
            "swapped": swapped, "params": params, "problems": problems,
            # tensors of roles the conversion does not carry, per role, as diff's A and B
            "left_out": {s: n for s, n in zip(
                ("b", "a") if swapped else ("a", "b"),
                (layout_map.left_out(m.a, side_a), layout_map.left_out(m.b, side_b)),
                strict=True) if n},
            "names": sorted({p.how for p in pairs if p.how}) if m.same_names else []}
    scheme_name, rows = (group_deltas(ckpt_a, ckpt_b, records, scheme) if groups
                         else (None, []))
    return DiffResult(ckpt_a, ckpt_b, records, rows, scheme_name, values, atol, rtol, kept,
                      info, sums)


def layout_summary(result: DiffResult) -> list[dict[str, Any]]:
    """Per group and per stored type of the converted side: tensors compared, the largest
    max |a-b| and the group's relative L2 error (sqrt of summed ||a-b||^2 over summed ||a||^2),
    over the tensors whose values were compared."""
    if not result.sums:
        return []
    sch = engine.choose_scheme(result.scheme, [r.name for r in result.records])
    conv = "a" if result.layout and result.layout["swapped"] else "b"
    acc: dict[tuple[str, str], list[float]] = {}
    order: list[tuple[str, str]] = []
    for r in result.records:
        if r.name not in result.sums:
            continue
        side = r.a if conv == "a" else r.b
        key = (sch.assign(r.name).group, side.dtype or "")
        if key not in acc:
            acc[key] = [0, 0.0, 0.0, 0.0]
            order.append(key)
        ss_a, ss_d = result.sums[r.name]
        row = acc[key]
        row[0] += 1
        row[1] = max(row[1], r.values.max_abs)
        row[2] += ss_a
        row[3] += ss_d
    return [{"group": g, "dtype": d, "tensors": acc[(g, d)][0], "max_abs": acc[(g, d)][1],
             "rel_l2": (math.sqrt(acc[(g, d)][3] / acc[(g, d)][2]) if acc[(g, d)][2]
                        else (0.0 if not acc[(g, d)][3] else math.inf))}
            for g, d in order]


def layout_findings(result: DiffResult) -> list[dict[str, Any]]:
    """The map's parameters the two sides disagree on, and paired tensors whose values no
    conversion explains (relative L2 >= :data:`UNRELATED`: another model or checkpoint)."""
    if result.layout is None:
        return []
    out = [{"severity": "error", "tensor": None,
            "message": f"the two sides disagree on {p}"} for p in result.layout["problems"]]
    far = [r.name for r in result.records
           if r.values is not None and not math.isnan(r.values.rel_l2)
           and r.values.rel_l2 >= UNRELATED]
    if far:
        out.append({"severity": "error", "tensor": far[0],
                    "message": f"{len(far)} paired tensors differ by a relative L2 of "
                               f"{UNRELATED} or more (e.g. {far[0]}): not a conversion of the "
                               "same weights (another model or checkpoint)"})
    return out


# ---------------------------------------------------------------------------------------------
# Collapsing repeats


def _signature(r: TensorDiff) -> tuple:
    """What must agree for two records to share a row: the op, shapes, dtypes and the result
    of the value comparison (its numbers and note): a row never stands for members whose
    results differ."""
    a = None if r.a is None else (r.a.shape, r.a.dtype)
    b = None if r.b is None else (r.b.shape, r.b.dtype)
    v = r.values
    if v is None:
        result = None
    elif v.identical:  # equal contents: the same result whatever rounding did to the cosine
        result = ("identical",)
    else:
        result = (v.max_abs, v.rel_l2, v.cosine, v.changed)
    how = None if r.how is None else _DIGITS.sub("#", r.how)
    return (r.op, a, b, result, r.note, how)


def _variants(pattern: str) -> list[str]:
    """The pattern with each one of its numbers replaced by ``#``."""
    return [pattern[: m.start()] + "#" + pattern[m.end():] for m in _DIGITS.finditer(pattern)]


def collapse(records: Sequence[TensorDiff]) -> list[Collapsed]:
    """Fold records that differ only in numbers (layer indices) into one row per pattern.

    Greedy: in each round the largest set of rows sharing a pattern with one more number
    replaced by ``#`` (and the same op, shapes and dtypes) merges; rounds repeat until nothing
    merges, so ``layers.#.heads.#`` forms from two levels. Row order follows first appearance.
    """
    rows: list[Collapsed] = [Collapsed(r.name, r.op, (r,)) for r in records]
    while True:
        buckets: dict[tuple, list[int]] = {}
        for i, row in enumerate(rows):
            sig = _signature(row.members[0])
            for v in _variants(row.pattern):
                buckets.setdefault((sig, v), []).append(i)
        merges = sorted(
            ((k, idx) for k, idx in buckets.items() if len(idx) > 1),
            key=lambda kv: (-sum(rows[i].count for i in kv[1]), kv[1][0]),
        )
        if not merges:
            return rows
        taken: set[int] = set()
        merged: dict[int, Collapsed] = {}
        for (_, pattern), idx in merges:
            free = [i for i in idx if i not in taken]
            if len(free) < 2:
                continue
            taken.update(free)
            members = tuple(m for i in free for m in rows[i].members)
            merged[free[0]] = Collapsed(pattern, rows[free[0]].op, members)
        rows = [merged.get(i, row) for i, row in enumerate(rows) if i not in taken or i in merged]


# ---------------------------------------------------------------------------------------------
# The JSON-ready report


def _side(t: TensorEntry | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"name": t.name, "stored_name": t.stored_name, "shape": list(t.shape),
            "dtype": t.dtype, "numel": t.numel, "role": t.role.value}


def _values(v: Any) -> dict[str, Any] | None:
    if v is None:
        return None
    out = {"identical": v.identical, "max_abs": v.max_abs, "rel_l2": v.rel_l2,
           "cosine": v.cosine, "changed": v.changed}
    if v.nonfinite:
        out["nan_inf"] = v.nonfinite
    return out


def _counted(counts: dict[str, int]) -> str:
    words = [f"{k} {'NaN' if w == 'nan' else w.replace('inf', 'Inf')}"
             for w, k in counts.items() if k]
    return ", ".join(words)


def nonfinite_findings(records: Sequence[TensorDiff]) -> list[dict[str, Any]]:
    """One finding per tensor holding NaN or Inf on either side: how many, and that its
    numbers are NumPy's (a NaN in a - b makes max |a-b| and rel L2 NaN; cosine is NaN)."""
    out = []
    for r in records:
        v = r.values
        if v is None or not v.nonfinite:
            continue
        sides = "; ".join(f"{side.upper()} has {_counted(c)}" for side, c in v.nonfinite.items())
        nan_in = [k for k, x in (("max |a-b|", v.max_abs), ("rel L2", v.rel_l2),
                                 ("cosine", v.cosine)) if x is not None and math.isnan(x)]
        tail = f": {', '.join(nan_in)} NaN (as NumPy computes them)" if nan_in else ""
        if v.identical:
            tail += "; the values are identical (NaN and Inf at the same places)"
        severity = "error" if any(c.get("nan") for c in v.nonfinite.values()) else "warning"
        out.append({"severity": severity, "tensor": r.name,
                    "message": f"{r.name}: {sides}{tail}", "nan_inf": v.nonfinite})
    return out


def report(result: DiffResult, all_records: bool = False,
           expand: bool = False) -> dict[str, Any]:
    """The JSON-ready report (schema ``inspector.diff/1``): every record (``unchanged`` ones
    only with ``all_records``), the collapsed rows (none with ``expand``), group deltas and the
    summary counts."""
    # a tensor whose values could not be read is shown, never hidden among the unchanged
    shown = [r for r in result.records if all_records or r.op != UNCHANGED or r.note]
    not_compared = sum(1 for r in result.records if r.note) if result.values else None
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "a": {"path": result.a.path, "format": result.a.format,
              "tensors": len(result.a.tensors), "elements": result.a.totals()["all"]},
        "b": {"path": result.b.path, "format": result.b.format,
              "tensors": len(result.b.tensors), "elements": result.b.totals()["all"]},
        "values": result.values,
        "tolerance": {"atol": result.atol, "rtol": result.rtol} if result.values else None,
        "summary": result.counts(),
        "values_changed": result.values_changed if result.values else None,
        "values_not_compared": not_compared,
        "structural_difference": result.structural,
        "different": result.different,
        "tensors": [
            {"name": r.name, "op": r.op, "aligned_by": r.aligned_by, "a": _side(r.a),
             "b": _side(r.b), "values": _values(r.values),
             **({"note": r.note} if r.note else {}), **({"how": r.how} if r.how else {})}
            for r in shown
        ],
        "collapsed": [
            {"pattern": c.pattern, "op": c.op, "count": c.count,
             "members": [m.name for m in c.members]}
            for c in ([] if expand else collapse(shown)) if c.count > 1
        ],
        "scheme": result.scheme,
        "groups": [
            {"group": g.group, "a": g.a, "b": g.b, "delta": g.delta, "tensors": g.tensors}
            for g in result.groups
        ],
    }
    if result.values:
        out["findings"] = nonfinite_findings(result.records)
    if result.layout is not None:
        out["layout"] = {**result.layout, "summary": layout_summary(result)}
        out["findings"] = out.get("findings", []) + layout_findings(result)
    if result.filter is not None:
        out["filter"] = result.filter
    return out
