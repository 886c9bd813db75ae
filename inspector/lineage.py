"""Which checkpoint derives from which, from the bytes: ``inspector lineage``.

Every checkpoint is fingerprinted once (:mod:`inspector.fingerprint`: a digest and position-
stable samples per tensor, cached per file). Candidate pairs come from the samples through
locality-sensitive hashing (:func:`candidates`: no pass over all pairs of bytes); each candidate
pair is compared from the fingerprints alone (:func:`compare`), and bytes are read again only to
confirm a kind that needs them (a LoRA merge's rank, a conversion's error, a resize's carried
rows), with the result cached per pair.

The kinds of edge, parent -> child:

* ``re-save``: the same values in another dtype, format or sharding (each tensor equal, or
  within the rounding of the lower-precision type);
* ``conversion``: another layout of the same model, paired by a layout map
  (:mod:`inspector.layout_map`: HF <-> GGUF, CTranslate2, DCP), every paired tensor within its
  stored type's noise;
* ``continued-training``: two steps of one run (``trainer_state.json``), ordered by step;
* ``fine-tune``: some or all tensors changed, the changed ones named, the rest identical;
* ``lora-merge``: only some matrices changed, each by a low-rank delta (the rank from a
  randomized SVD of the delta);
* ``adapter-of``: a PEFT adapter and the base it fits (names, shapes, ``adapter_config.json``);
* ``resize`` / ``prune``: a changed vocabulary or removed layers, the rest carried over.

Two checkpoints are related only by *informative* tensors (floating point, not constant, not a
0/1 mask: see :attr:`~inspector.fingerprint.TensorPrint.informative`) whose samples agree:
norms initialised to ones are identical across unrelated models and are no evidence, and
same-architecture models from different seeds stay apart.

Two runs of one seed are siblings, not parent and child, when each one's own record rules the
other out as its parent (:mod:`inspector.lineage_runs`: a run recorded as trained from its
seed; a run whose frozen tensors hold other values than the candidate's): the pair is listed
unresolved, never an edge.

Re-saves of one model form a *cluster*; its representative (the declared base, else the
highest precision, else an unsharded original) is the parent of the others, and the edges
between clusters form a maximum spanning forest of relatedness, oriented from each tree's root
(the checkpoint most others derive from, never a later training step) or by training step.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from inspector.fingerprint import CheckpointPrint, TensorPrint, is_float
from inspector.lineage_evidence import (
    Evidence,
    compare,
    fits,
    lora_pairs,
)
from inspector.lineage_runs import frozen, not_from, siblings

SCHEMA = "inspector.lineage/1"
KINDS = ("re-save", "conversion", "continued-training", "fine-tune", "lora-merge", "adapter-of",
         "resize", "prune")
BANDS, BITS = 4, 8  # LSH: bands of sign bits of random projections of the standardized samples
CROWD, HUBS = 64, 8  # a bucket above CROWD members pairs each with HUBS hubs and neighbours
_LAYER = re.compile(r"(?<=[._])(\d+)(?=[._]|$)")


# ----------------------------------------------------------------------------- candidates
def _codes(t: TensorPrint) -> list[tuple[Any, ...]]:
    """LSH keys of one informative tensor: per band, the signs of BITS random projections of
    its standardized samples (a cast or a small drift keeps most bands; unrelated tensors
    share a band by chance, 1 in 2**BITS)."""
    x = np.nan_to_num(t.samples.astype(np.float64))
    sd = float(x.std())
    if not sd:
        return []
    x = (x - x.mean()) / sd
    rng = np.random.default_rng(len(x))  # the same projections for every tensor of this length
    proj = rng.standard_normal((BANDS * BITS, len(x))) @ x
    bits = (proj > 0).reshape(BANDS, BITS)
    return [(t.shape, band, bits[band].tobytes()) for band in range(BANDS)]


def candidates(prints: Sequence[CheckpointPrint],
               among: Sequence[int] | None = None) -> set[tuple[int, int]]:
    """Index pairs (i < j) of checkpoints (``among``: only these indices) sharing an LSH bucket
    of some informative tensor, or an informative tensor digest. A bucket of more than
    :data:`CROWD` checkpoints (one base's tensor frozen in many fine-tunes) pairs each member
    with its neighbours in index order and with the bucket's first :data:`HUBS` members, not
    with every other member: linear in the bucket, and still joins each member to the rest."""
    buckets: dict[Any, set[int]] = defaultdict(set)
    for i in range(len(prints)) if among is None else among:
        for t in prints[i].informative().values():
            buckets[("digest", t.digest)].add(i)
            for code in _codes(t):
                buckets[code].add(i)
    pairs: set[tuple[int, int]] = set()
    for members in buckets.values():
        if len(members) < 2:
            continue
        ms = sorted(members)
        if len(ms) <= CROWD:
            pairs.update((ms[x], ms[y]) for x in range(len(ms)) for y in range(x + 1, len(ms)))
            continue
        for x in range(len(ms)):
            for y in (*range(HUBS), *range(x + 1, min(x + 1 + HUBS, len(ms)))):
                if y != x and y < len(ms):
                    pairs.add((min(ms[x], ms[y]), max(ms[x], ms[y])))
    return pairs


def duplicates(prints: Sequence[CheckpointPrint]) -> dict[int, int]:
    """Checkpoint index -> the first index holding exactly the same tensors (names and
    digests): byte-identical copies, compared once. A checkpoint without a float tensor that
    holds two different values (empty, values unreadable, only constants or integers) is
    nobody's copy: equal digests of nothing, or of zeros, are no evidence; one small random
    tensor equal to the last bit is."""
    first: dict[Any, int] = {}
    out = {}
    for i, p in enumerate(prints):
        if not any(_varies(t) for t in p.tensors.values()):
            out[i] = i
            continue
        sig = ("adapter" in p.info, tuple(sorted((n, t.digest) for n, t in p.tensors.items())))
        out[i] = first.setdefault(sig, i)
    return out


def _varies(t: TensorPrint) -> bool:
    if not is_float(t.dtype):
        return False
    s = t.samples[np.isfinite(t.samples)]
    return len(s) > 1 and bool(np.any(s != s[0]))


# ----------------------------------------------------------------------------- the graph
class Edge:
    """One derived-from edge: ``parent`` -> ``child`` of ``kind``, with evidence."""

    __slots__ = ("parent", "child", "kind", "confidence", "evidence", "direction")

    def __init__(self, parent: str, child: str, kind: str, confidence: str,
                 evidence: dict[str, Any], direction: str) -> None:
        self.parent, self.child, self.kind = parent, child, kind
        self.confidence, self.evidence, self.direction = confidence, evidence, direction

    def to_dict(self) -> dict[str, Any]:
        return {"parent": self.parent, "child": self.child, "kind": self.kind,
                "confidence": self.confidence, "direction": self.direction,
                "evidence": self.evidence}


class Lineage:
    """The forest: ``nodes`` (path -> facts), ``edges``, and what stayed unresolved."""

    def __init__(self, nodes: dict[str, dict[str, Any]], edges: list[Edge],
                 unresolved: list[dict[str, Any]], errors: list[dict[str, str]]) -> None:
        self.nodes, self.edges, self.unresolved, self.errors = nodes, edges, unresolved, errors

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "nodes": [dict(path=p, **n) for p, n in self.nodes.items()],
                "edges": [e.to_dict() for e in self.edges], "unresolved": self.unresolved,
                "errors": self.errors}

    def roots(self) -> list[str]:
        children = {e.child for e in self.edges}
        return [p for p in self.nodes if p not in children]


def _confidence(n: int) -> str:
    return "high" if n >= 8 else "medium" if n >= 3 else "low"


def _collapse(names: Sequence[str]) -> list[str]:
    """Names with layer numbers folded: ``model.layers.#.mlp.up_proj.weight`` (x2)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for n in names:
        groups[_LAYER.sub("#", n)].append(n)
    return sorted(f"{k} (x{len(v)})" if len(v) > 1 else v[0] for k, v in groups.items())


def _precision(p: CheckpointPrint) -> float:
    """Bits of the widest stored float type (higher: nearer an original)."""
    widths = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16}
    ds = Counter(t.dtype for t in p.tensors.values() if t.informative)
    if not ds:
        return 0.0
    dtype = ds.most_common(1)[0][0] or ""
    return widths.get(dtype, 8)


class _Union:
    def __init__(self, n: int) -> None:
        self.up = list(range(n))

    def find(self, i: int) -> int:
        while self.up[i] != i:
            self.up[i] = self.up[self.up[i]]
            i = self.up[i]
        return i

    def join(self, i: int, j: int) -> bool:
        ri, rj = self.find(i), self.find(j)
        if ri == rj:
            return False
        self.up[max(ri, rj)] = min(ri, rj)
        return True


def _join_equal(union: _Union, prints: Sequence[CheckpointPrint],
                equal: dict[tuple[int, int], Evidence]) -> None:
    """Joins the re-save clusters of equal pairs. Equality within a quantization's noise is no
    equivalence (a quantized copy can be within its noise of a base and of a fine-tune that
    moved less than twice that noise, and two quantized copies add their noises), so: unquantized
    pairs join first; each quantized copy joins the one unquantized checkpoint it matches best
    (the smallest error relative to the noise, then the smallest drift); two quantized copies
    join each other only when neither matched an unquantized one here."""
    def quantized(i: int) -> bool:
        return "quantized" in prints[i].info

    best: dict[int, tuple[tuple[float, float], int]] = {}
    for (i, j), ev in sorted(equal.items()):
        if not quantized(i) and not quantized(j):
            union.join(i, j)
        elif quantized(i) != quantized(j):
            k, other = (j, i) if quantized(j) else (i, j)
            score = (max(ev.dequantized.values(), default=0.0), ev.distance)
            if k not in best or score < best[k][0]:
                best[k] = (score, other)
    for k, (_, other) in sorted(best.items()):
        union.join(k, other)
    for (i, j), _ev in sorted(equal.items()):
        if quantized(i) and quantized(j) and i not in best and j not in best:
            union.join(i, j)


def _declared_by(prints: Sequence[CheckpointPrint]) -> set[str]:
    """Paths some other checkpoint declares as its base (by path, or by directory name)."""
    out = set()
    names = {p.path.rstrip("/").rsplit("/", 1)[-1]: p.path for p in prints}
    for p in prints:
        d = p.info.get("declared")
        if not d:
            continue
        d = str(d).rstrip("/")
        for candidate in (d, d.rsplit("/", 1)[-1]):
            if candidate in names:
                out.add(names[candidate])
    return out


def _representative(members: list[int], prints: Sequence[CheckpointPrint],
                    declared: set[str], mtime: Callable[[str], float]) -> int:
    def rank(i: int) -> tuple:
        p = prints[i]
        sharded = p.info.get("shards", 1) > 1
        return (p.path not in declared, "quantized" in p.info, -_precision(p), "step" in p.info,
                sharded,
                -len(p.tensors), mtime(p.path), len(p.path), p.path)

    return min(members, key=rank)


def build(prints: Sequence[CheckpointPrint], confirm: Any = None,
          mtime: Callable[[str], float] | None = None) -> Lineage:
    """The lineage forest of fingerprinted checkpoints. ``confirm`` reads bytes where a kind
    needs them (:class:`Confirm`); without it those kinds are named from fingerprints only."""
    mtime = mtime or (lambda path: 0.0)
    n = len(prints)
    adapters = [i for i, p in enumerate(prints) if "adapter" in p.info]
    dup = duplicates(prints)
    leaders = [i for i in range(n) if dup[i] == i and i not in set(adapters)]
    evidence: dict[tuple[int, int], Evidence] = {}
    for i, j in sorted(candidates(prints, leaders)):
        ev = compare(prints[i], prints[j])
        if ev.related:
            evidence[(i, j)] = ev
    models = leaders
    # conversions: another layout of one model, found from metadata and confirmed on bytes
    conversions: dict[int, tuple[int, dict[str, Any]]] = {}
    if confirm is not None:
        for i in models:
            for j in models:
                if i == j or prints[i].format == prints[j].format:
                    continue
                got = confirm.conversion(prints[i], prints[j])
                if got is not None and (j not in conversions
                                        or got["rel_l2"] < conversions[j][1]["rel_l2"]):
                    conversions[j] = (i, got)
    # re-save clusters (a byte-identical copy joins its first copy's, or its conversion)
    union = _Union(n)
    for i in range(n):
        if dup[i] != i and i not in adapters:
            if dup[i] in conversions:
                conversions[i] = conversions[dup[i]]
            else:
                union.join(dup[i], i)
    _join_equal(union, prints, {k: ev for k, ev in evidence.items() if ev.equal
                                and k[0] not in conversions and k[1] not in conversions})
    clusters: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        if i not in adapters and i not in conversions:
            clusters[union.find(i)].append(i)
    declared = _declared_by(prints)
    rep = {c: _representative(ms, prints, declared, mtime) for c, ms in clusters.items()}
    edges: list[Edge] = []
    for c, ms in clusters.items():
        r = rep[c]
        for m in ms:
            if m == r:
                continue
            ev = evidence.get((min(r, m), max(r, m))) or compare(prints[r], prints[m])
            edges.append(_resave(prints[r], prints[m], ev, declared))
    # between clusters: a maximum spanning forest of relatedness
    held = frozen(prints)
    links: dict[tuple[int, int], tuple[float, int, int]] = {}
    untyped: dict[tuple[int, int], tuple[Evidence, str]] = {}
    for (i, j), ev in evidence.items():
        ci, cj = union.find(i), union.find(j)
        if ci == cj or i in conversions or j in conversions:
            continue
        why = _no_derivation(ev, held)
        if why:
            untyped[(min(ci, cj), max(ci, cj))] = (ev, why)
            continue
        key = (min(ci, cj), max(ci, cj))
        # the distance between the representatives decides; an evidence pair stands in
        ri, rj = rep[ci], rep[cj]
        e2 = evidence.get((min(ri, rj), max(ri, rj)))
        dist = e2.distance if e2 is not None else ev.distance + 1e-9
        if key not in links or dist < links[key][0]:
            links[key] = (dist, ri, rj)
    forest = _Union(n)
    tree_links: list[tuple[int, int]] = []
    for _dist, ri, rj in sorted(links.values()):
        if forest.join(ri, rj):
            tree_links.append((ri, rj))
    degree = Counter()
    for (i, j) in evidence:
        degree[union.find(i)] += 1
        degree[union.find(j)] += 1
    unresolved: list[dict[str, Any]] = []
    for parent, child, why in _orient(tree_links, prints, degree, union, mtime):
        ev = evidence.get((min(parent, child), max(parent, child))) or compare(
            prints[parent], prints[child])
        if ev.a is not prints[parent]:
            ev = compare(prints[parent], prints[child])
        excluded = not_from(prints[parent], prints[child], ev, held)
        if excluded:  # the direction no evidence decided is one the child's run rules out
            unresolved.append(_shared(ev, "values shared, and the child of the only direction "
                                      f"drawn cannot derive from the parent: {excluded}"))
            continue
        edges.append(_derived(prints[parent], prints[child], ev, why, confirm))
    for j, (i, got) in sorted(conversions.items()):
        src = rep[union.find(i)]
        edges.append(Edge(prints[src].path, prints[j].path, "conversion",
                          _confidence(got["tensors"]), got, "from the source layout"))
    for (ci, cj), (ev, why) in sorted(untyped.items(), key=lambda kv: kv[0]):
        if forest.find(rep[ci]) != forest.find(rep[cj]):
            unresolved.append(_shared(ev, why))
    for a in adapters:
        found = _adapter_edge(prints[a], [prints[r] for r in sorted(rep.values())], confirm)
        if isinstance(found, Edge):
            edges.append(found)
        elif found:
            unresolved.append(found)
    nodes = {p.path: {"format": p.format, "tensors": len(p.tensors),
                      **{k: p.info[k] for k in ("step", "declared") if k in p.info}}
             for p in prints}
    return Lineage(nodes, sorted(edges, key=lambda e: (e.parent, e.child)), unresolved, [])


def _shared(ev: Evidence, why: str) -> dict[str, Any]:
    """An unresolved ``shared-values`` pair: related values, no derivation, and why."""
    only_a, only_b = ev.structural()
    return {"path": ev.a.path, "other": ev.b.path, "kind": "shared-values", "why": why,
            "agreeing": ev.agreeing, "changed": len(ev.changed) + len(ev.unrelated),
            "only_here": len(only_a), "only_there": len(only_b)}


def _untyped(ev: Evidence) -> bool:
    """Changed values and parameters on each side that the other lacks: no derivation kind
    (a fine-tune keeps the architecture, a resize or prune keeps the values) explains such a
    pair; two models of different configurations trained from one seed look like this."""
    only_a, only_b = ev.structural()
    if ev.changed or ev.unrelated:
        if only_a and only_b:
            return True
        # parameters of one name in another shape and no value carried over (a GRU and an
        # LSTM layer of one seed): a fine-tune keeps the shapes, a resize the other values
        return bool(ev.reshaped) and not (ev.identical or ev.cast or ev.carried)
    # nothing changed, but each side has informative parameters the other lacks: the same
    # values in another layout (experts fused into one tensor) hold as many elements on each
    # side; a few shared tensors (one seeded embedding in two architectures) are no derivation
    here = [ev.a.tensors[n] for n in only_a if ev.a.tensors[n].informative]
    there = [ev.b.tensors[n] for n in only_b if ev.b.tensors[n].informative]
    return bool(here) and bool(there) and sum(t.numel for t in here) != sum(
        t.numel for t in there)


def _no_derivation(ev: Evidence, held: dict[str, dict[str, str]]) -> str | None:
    """Why no kind of derivation explains a related pair (then it is listed unresolved, never
    an edge), or None. ``held``: each run's frozen tensors (:func:`inspector.lineage_runs.
    frozen`)."""
    if _untyped(ev):
        return ("values shared (a common initialisation?) but another architecture on each "
                "side: no kind of derivation explains the pair")
    return siblings(ev, held)


def _orient(links: list[tuple[int, int]], prints: Sequence[CheckpointPrint], degree: Counter,
            union: _Union, mtime: Callable[[str], float]) -> list[tuple[int, int, str]]:
    """Each tree's links as (parent, child, why): from the root (no training step, the most
    related checkpoint, the oldest), except two steps of one run, ordered by step."""
    adj: dict[int, list[int]] = defaultdict(list)
    for i, j in links:
        adj[i].append(j)
        adj[j].append(i)
    seen: set[int] = set()
    out: list[tuple[int, int, str]] = []
    for start in sorted(adj):
        if start in seen:
            continue
        comp, stack = [], [start]
        seen.add(start)
        while stack:
            x = stack.pop()
            comp.append(x)
            for y in adj[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        def order_key(i: int) -> tuple:
            return ("step" in prints[i].info, -degree[union.find(i)], mtime(prints[i].path))

        root = min(comp, key=lambda i: (order_key(i), prints[i].path))
        tied = sum(1 for i in comp if order_key(i) == order_key(root)) > 1
        from_root = ("unknown: no training step, relatedness or modification time tells which "
                     "came first (drawn from the first by path)" if tied else
                     "from the root of its tree (the checkpoint the others derive from)")
        order, parent = [root], {root: -1}
        for x in order:
            for y in adj[x]:
                if y not in parent:
                    parent[y] = x
                    order.append(y)
        for y in order[1:]:
            x = parent[y]
            sx, sy = prints[x].info.get("step"), prints[y].info.get("step")
            same_run = prints[x].info.get("run") == prints[y].info.get("run")
            if sx is not None and sy is not None and same_run and sx > sy:
                out.append((y, x, "training step"))
            elif sx is not None and sy is not None and same_run:
                out.append((x, y, "training step"))
            else:
                out.append((x, y, from_root))
    return out


def _resave(p: CheckpointPrint, c: CheckpointPrint, ev: Evidence, declared: set[str]) -> Edge:
    what = []
    dp = Counter(t.dtype for t in p.tensors.values())
    dc = Counter(t.dtype for t in c.tensors.values())
    if dp != dc:
        what.append(f"dtype {'/'.join(sorted(map(str, dp)))} -> "
                    f"{'/'.join(sorted(map(str, dc)))}")
    if p.format != c.format:
        what.append(f"format {p.format} -> {c.format}")
    if p.info.get("shards", 1) != c.info.get("shards", 1):
        what.append(f"shards {p.info.get('shards', 1)} -> {c.info.get('shards', 1)}")
    if ev.carried:
        what.append(f"{len(ev.carried)} tensors renamed")
    if ev.requantized:
        what.append(f"{len(ev.requantized)} modules stored another way "
                    f"({_scheme(p)} -> {_scheme(c)}: {_dequantized(ev)})")
    elif ev.dequantized or ev.not_dequantized:  # quantized alike, packed to other values
        what.append(f"repacked ({_scheme(c)}): {_dequantized(ev)}")
    dropped = [n for n in ev.only_a if n not in {x for x, _ in ev.carried}]
    added = [n for n in ev.only_b if n not in {y for _, y in ev.carried}]
    if dropped:
        what.append(f"left out {len(dropped)} tensors ({', '.join(_collapse(dropped)[:3])})")
    if added:
        what.append(f"added {len(added)} tensors ({', '.join(_collapse(added)[:3])})")
    evidence = {"identical": len(ev.identical), "within_cast": len(ev.cast),
                "changes": what or ([f"{len(ev.cast)} tensors equal within the rounding of "
                                     "one computation, not bit for bit"] if ev.cast else
                                    ["none: a byte-identical copy"]),
                "max_drift": max(ev.drifts.values(), default=0.0), **_packed(ev)}
    direction = ("declared base" if p.path in declared else
                 "higher precision" if _precision(p) > _precision(c) else
                 "unknown (the same values: either could be the original)")
    return Edge(p.path, c.path, "re-save", _confidence(ev.agreeing), evidence, direction)


def _dequantized(ev: Evidence) -> str:
    """What the comparison of the packed values found, for a re-save's changes."""
    parts = []
    if ev.dequantized:
        worst = max(ev.dequantized.values())
        spread = any(t.spread for side in (ev.a, ev.b) for n, t in side.dequantized.items()
                     if n in ev.dequantized)
        parts.append(f"{len(ev.dequantized)} packed weights dequantized and compared, error at "
                     f"most {worst:.2f} of the scheme's noise"
                     + (" (root mean square)" if spread else ""))
    if ev.not_dequantized:
        whys = Counter(ev.not_dequantized.values())
        parts.append(f"packed values of {len(ev.not_dequantized)} not compared: "
                     + "; ".join(f"{w} ({n})" for w, n in whys.most_common(3)))
    return ", ".join(parts) or "packed values not compared"


def _packed(ev: Evidence) -> dict[str, Any]:
    """The evidence's record of the packed values compared (empty when none was set aside)."""
    if not (ev.requantized or ev.dequantized or ev.not_dequantized):
        return {}
    return {"packed": {"compared": len(ev.dequantized),
                       "max_noise_ratio": max(ev.dequantized.values(), default=None),
                       "within_noise": sum(1 for r in ev.dequantized.values() if r <= 1.0),
                       "not_compared": dict(sorted(ev.not_dequantized.items()))}}


def _scheme(p: CheckpointPrint) -> str:
    q = p.info.get("quantized")
    return str(q["label"]) if q else "not quantized"


def _derived(p: CheckpointPrint, c: CheckpointPrint, ev: Evidence, why: str,
             confirm: Any) -> Edge:
    conf = _confidence(ev.agreeing)
    changed = ev.changed + ev.unrelated  # within related checkpoints: trained on, or replaced
    base: dict[str, Any] = {"identical": len(ev.identical) + len(ev.cast),
                            "changed": len(changed), "mean_drift": round(ev.distance, 6)}
    if ev.unrelated:
        base["replaced"] = _collapse(ev.unrelated)
    base.update(_packed(ev))
    sp, sc = p.info.get("step"), c.info.get("step")
    if ev.reshaped:
        kept = ev.identical + ev.cast
        info = {**base, "reshaped": {n: [list(p.tensors[n].shape), list(c.tensors[n].shape)]
                                     for n in ev.reshaped}}
        if confirm is not None:
            info["carried_rows"] = confirm.carried_rows(p, c, ev.reshaped)
        kind = "resize" if not changed and kept else "fine-tune"
        return Edge(p.path, c.path, kind, conf, info, why)
    only_a, only_b = ev.structural()
    if not changed and (not only_a and not only_b or only_a and only_b):
        # no value changed: the same weights, maybe stored another way (another quantization's
        # side tensors on each side)
        edge = _resave(p, c, ev, set())
        edge.direction = why
        return edge
    if only_a and not changed and not only_b:
        return Edge(p.path, c.path, "prune", conf,
                    {**base, "removed": _collapse(only_a), "removed_tensors": len(only_a),
                     "carried_by_digest": len(ev.carried)}, why)
    if only_b and not changed and not only_a:
        return Edge(p.path, c.path, "resize", conf,
                    {**base, "added": _collapse(only_b)}, why)
    if sp is not None and sc is not None and p.info.get("run") == c.info.get("run"):
        return Edge(p.path, c.path, "continued-training", conf,
                    {**base, "steps": [sp, sc]}, why)
    info = {**base, "changed_tensors": _collapse(changed)}
    if ev.only_a or ev.only_b:
        info["removed"], info["added"] = _collapse(ev.only_a), _collapse(ev.only_b)
    partial = bool(ev.identical or ev.cast)
    # a packed weight's rank is not read (only its sampled elements were dequantized)
    if partial and confirm is not None and not any(n in ev.dequantized for n in changed):
        ranks = confirm.lora_ranks(p, c, changed)
        if ranks and all(r["low_rank"] for r in ranks.values()):
            rank = max(r["rank"] for r in ranks.values())
            modules = sorted({n.rsplit(".", 2)[-2] for n in ranks})
            return Edge(p.path, c.path, "lora-merge", conf,
                        {**info, "rank": rank, "target_modules": modules,
                         "targets": _collapse(list(ranks))}, why)
        if ranks:
            info["delta_ranks"] = {n: r["rank"] for n, r in ranks.items()}
    info["partial"] = partial
    return Edge(p.path, c.path, "fine-tune", conf, info, why)


def _adapter_edge(adapter: CheckpointPrint, bases: Sequence[CheckpointPrint],
                  confirm: Any) -> Edge | dict[str, Any] | None:
    fitting = [b for b in bases if fits(adapter, b)]
    pairs = lora_pairs(adapter)
    info = adapter.info.get("adapter") or {}
    declared = str(info.get("base_model_name_or_path") or "").rstrip("/")
    evidence: dict[str, Any] = {"targets": len(pairs), "r": info.get("r"),
                                "declared": declared or None}
    if confirm is not None:  # a merged copy of base + B @ A is the strongest evidence
        for b in fitting:
            got = confirm.adapter_merged(adapter, b, bases)
            if got:
                return Edge(b.path, adapter.path, "adapter-of", "high",
                            {**evidence, "merged_copy": got,
                             "declaration": _agrees(declared, b.path)}, "an adapter's base")
    named = [b for b in fitting if declared and _agrees(declared, b.path) == "agrees"]
    if len(named) == 1:
        return Edge(named[0].path, adapter.path, "adapter-of", "medium",
                    {**evidence, "shapes_fit": True, "declaration": "agrees"},
                    "an adapter's base")
    if not fitting:
        return {"path": adapter.path, "kind": "adapter-of",
                "why": "no checkpoint here fits the adapter's targets", **evidence}
    return {"path": adapter.path, "kind": "adapter-of",
            "why": f"fits {len(fitting)} checkpoints and nothing tells them apart",
            "fits": [b.path for b in fitting], **evidence}


def _agrees(declared: str, path: str) -> str:
    if not declared:
        return "none declared"
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return "agrees" if declared in (path, last) or declared.endswith("/" + last) else \
        f"disagrees (declared {declared!r})"


# ----------------------------------------------------------------------------- running it
def run(paths: Sequence[str], *, cache_dir: str | None = None, use_cache: bool = True,
        jobs: int = 1, allow_unsafe: bool = False, mapper: Any = None,
        progress: Any = None) -> tuple[Lineage, dict[str, int]]:
    """Lineage of every checkpoint below ``paths`` (files, directories, prefixes, URLs):
    fingerprints from the cache where the files are unchanged, else one value pass each (here,
    or on a Dask cluster through ``mapper``: :mod:`inspector.inventory_dask`). Returns the
    forest and counters (``fingerprinted``, ``cached``, ``tensor_reads``)."""
    from inspector.adapters.errors import InspectorError
    from inspector.adapters.registry import load
    from inspector.fingerprint import Cache, file_key, fingerprint
    from inspector.fleet import expand, run_ordered
    from inspector.lineage_bytes import Confirm

    cache = Cache((cache_dir or Cache.default_dir()) if use_cache else None)
    opened: dict[str, Any] = {}
    errors: list[dict[str, str]] = []

    def head(t: Any) -> tuple[Any, str, CheckpointPrint | None]:
        ckpt = load(t.source, allow_unsafe=allow_unsafe)
        opened[ckpt.path] = ckpt
        key = file_key(ckpt)
        return ckpt, key, cache.get(key)

    heads: list[tuple[Any, str, CheckpointPrint | None]] = []
    targets = []
    for t in expand(paths):
        if t.error is not None:
            errors.append({"path": t.label, "error": str(t.error)})
        else:
            targets.append(t)
    for t, got in run_ordered(targets, head, jobs):
        if isinstance(got, Exception):
            message = str(got) if isinstance(got, InspectorError) else \
                f"{t.label}: {type(got).__name__}: {got}"
            errors.append({"path": t.label, "error": message})
        else:
            heads.append(got)
    heads = _whole(heads)
    todo = [(ckpt, key) for ckpt, key, fp in heads if fp is None]
    if mapper is not None:
        from inspector.inventory_dask import remote_print

        fresh = mapper(remote_print, [ckpt.path for ckpt, _ in todo], allow_unsafe)
        done = ((ckpt, key, arrays) for (ckpt, key), arrays in zip(todo, fresh, strict=True))
        computed = {}
        for ckpt, key, arrays in done:
            if isinstance(arrays, Exception):
                errors.append({"path": ckpt.path, "error": str(arrays)})
                continue
            fp = CheckpointPrint.from_arrays(arrays)
            fp.key = key
            computed[ckpt.path] = fp
    else:
        computed = {}
        for (ckpt, _key), got in run_ordered(todo, lambda ck: fingerprint(ck[0], ck[1]), jobs):
            if isinstance(got, Exception):
                errors.append({"path": ckpt.path, "error": str(got)})
            else:
                computed[ckpt.path] = got
    prints: list[CheckpointPrint] = []
    for ckpt, _key, fp in heads:
        if fp is None:
            fp = computed.get(ckpt.path)
            if fp is None:
                continue
            cache.misses += 1
            cache.put(fp)
        prints.append(fp)
        if progress is not None:
            progress.advance(1)

    def opener(path: str) -> Any:
        if path not in opened:
            opened[path] = load(path, allow_unsafe=allow_unsafe)
        return opened[path]

    confirm = Confirm(opener, cache)
    forest = build(prints, confirm, mtime=_mtime)
    forest.errors = errors
    counts = {"checkpoints": len(prints), "fingerprinted": cache.misses, "cached": cache.hits,
              "tensor_reads": confirm.reads}
    return forest, counts


def _whole(heads: list[tuple[Any, str, Any]]) -> list[tuple[Any, str, Any]]:
    """Without the parts of a multi-file checkpoint listed on their own (a split GGUF's later
    files, each also read as part of its first): a part is no model of its own."""
    import os

    def norm(p: str) -> str:
        return os.path.normpath(str(p))

    parts = {norm(p) for ckpt, _, _ in heads if len(ckpt.paths) > 1 for p in ckpt.paths}
    return [h for h in heads
            if not (len(h[0].paths) == 1 and norm(h[0].paths[0]) in parts)]


def _mtime(path: str) -> float:
    import os

    try:
        return os.stat(path).st_mtime
    except (OSError, ValueError):
        return 0.0
