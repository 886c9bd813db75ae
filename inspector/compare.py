"""One comparison engine for ``check`` (expected vs found) and ``diff`` (A vs B).

Two lists of :class:`~inspector.adapters.model.TensorEntry` records (a prediction is the same
record as a stored tensor, with ``dtype`` None: see :func:`inspector.formulas.core.expected`) are
aligned by a key computed from each
name (:class:`Keys`: wrapper prefixes stripped, regex renames applied), never by position;
``by_shape`` then pairs leftovers whose shape is unique on both sides. Every aligned pair or lone
record is one :class:`Op`, in one vocabulary:

==============  ===================================  ==================================
op              diff A -> B                          check (A = expected, B = found)
==============  ===================================  ==================================
``removed``     only in A                            ``missing``: predicted, not stored
``added``       only in B                            ``unexpected``: stored, not predicted
``reshaped``    both, shapes differ                  ``wrong_shape``
``retyped``     both, same shape, dtypes differ      (a prediction has no dtype)
``unchanged``   both, same shape and dtype           as predicted
==============  ===================================  ==================================

``check`` reports keep their historical words in ``status`` (:data:`CHECK_WORDS`) and carry the
engine's in ``op``. :func:`choose_scheme` is the one place a grouping scheme is picked for a
report (``check``, ``diff``, ``budget``, ``show``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Record

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

ADDED, REMOVED, RESHAPED, RETYPED, UNCHANGED = (
    "added", "removed", "reshaped", "retyped", "unchanged")
OPS = (REMOVED, ADDED, RESHAPED, RETYPED, UNCHANGED)
# The words a check report used before the engine was shared (kept in its ``status`` field).
CHECK_WORDS = {REMOVED: "missing", ADDED: "unexpected", RESHAPED: "wrong_shape"}
# Stripped from the start of every name, repeatedly, in this order. The torch and MXNet
# adapters already strip ``module.``/``_orig_mod.`` and ``arg:``/``aux:`` where a whole file
# carries them; formats that keep names verbatim (safetensors, npz, HF ``model.``) rely on this.
BUILTIN_PREFIXES = ("arg:", "aux:", "module.", "_orig_mod.", "model.")
ALIGN_MODES = ("names", "shapes")


class Rename(Record):
    """One rename rule: ``re.sub(pattern, replacement, name)``."""

    __slots__ = ("pattern", "replacement")

    def __init__(self, pattern: re.Pattern[str], replacement: str) -> None:
        self.pattern = pattern
        self.replacement = replacement


def rename(pattern: str, replacement: str, where: str = "rename") -> Rename:
    """A validated :class:`Rename` (bad regexes and group references raise UsageError)."""
    try:
        rx = re.compile(pattern)
        rx.sub(replacement, "")  # validates group references in the replacement
    except (re.error, IndexError) as e:
        raise UsageError(f"bad rename {pattern!r} -> {replacement!r} ({e})", where) from None
    return Rename(rx, replacement)


class Keys(Record):
    """How a name becomes the key both sides are aligned by."""

    __slots__ = ("prefixes", "renames")

    def __init__(self, prefixes: tuple[str, ...] = BUILTIN_PREFIXES,
                 renames: tuple[Rename, ...] = ()) -> None:
        self.prefixes = prefixes
        self.renames = renames

    def __call__(self, name: str) -> str:
        changed = True
        while changed:
            changed = False
            for p in self.prefixes:
                if p and name.startswith(p) and len(name) > len(p):
                    name, changed = name[len(p):], True
        for r in self.renames:
            name = r.pattern.sub(r.replacement, name)
        return name


class Op(Record):
    """One aligned pair (or a record on one side only) and what differs: ``key`` (the aligned
    name, ``"a ~ b"`` for a pair aligned by shape), ``op`` (one of OPS), ``a`` and ``b`` (the
    A-side record -- expected, for check -- and the B-side one -- found --, or None),
    ``aligned_by`` ("name" | "shape"; None for a lone record)."""

    __slots__ = ("key", "op", "a", "b", "aligned_by")

    def __init__(self, key: str, op: str, a: Any, b: Any, aligned_by: str | None = None) -> None:
        self.key = key
        self.op = op
        self.a = a
        self.b = b
        self.aligned_by = aligned_by

    @property
    def name(self) -> str:
        """The record's own name (A's when both sides have one)."""
        return (self.a if self.a is not None else self.b).name


def keyed(records: Iterable[Any], keys: Keys) -> dict[str, Any]:
    """Key -> record. Two records whose names give one key keep their own names (nothing is
    silently merged)."""
    records = list(records)
    ks = [keys(r.name) for r in records]
    clash = {k for k, n in Counter(ks).items() if n > 1}
    return {(r.name if k in clash else k): r for r, k in zip(records, ks, strict=True)}


def classify(key: str, a: Any, b: Any, how: str) -> Op:
    """The op of an aligned pair: shape first, then dtype (when both sides have one)."""
    if tuple(a.shape) != tuple(b.shape):
        return Op(key, RESHAPED, a, b, how)
    da, db = getattr(a, "dtype", None), getattr(b, "dtype", None)
    if da is not None and db is not None and da != db:
        return Op(key, RETYPED, a, b, how)
    return Op(key, UNCHANGED, a, b, how)


def align(a: Sequence[Any], b: Sequence[Any], keys: Keys | None = None,
          mode: str = "names") -> list[Op]:
    """Every record of A and B in one op: A's order, then B's additions."""
    if mode not in ALIGN_MODES:
        raise UsageError(f"unknown alignment {mode!r}; choose from {', '.join(ALIGN_MODES)}")
    keys = keys or Keys()
    ka, kb = keyed(a, keys), keyed(b, keys)
    paired: dict[str, tuple[str, str]] = {k: (k, "name") for k in ka if k in kb}
    if mode == "shapes":
        left_a = [k for k in ka if k not in kb]
        left_b = [k for k in kb if k not in ka]
        shapes_a = Counter(tuple(ka[k].shape) for k in left_a)
        shapes_b = Counter(tuple(kb[k].shape) for k in left_b)
        by_shape_b = {tuple(kb[k].shape): k for k in left_b}
        for k in left_a:
            s = tuple(ka[k].shape)
            if shapes_a[s] == 1 and shapes_b.get(s) == 1:
                paired[k] = (by_shape_b[s], "shape")
    used_b = {kb_key for kb_key, _ in paired.values()}
    out = []
    for k, ra in ka.items():
        if k in paired:
            kb_key, how = paired[k]
            out.append(classify(k if how == "name" else f"{k} ~ {kb_key}", ra, kb[kb_key], how))
        else:
            out.append(Op(k, REMOVED, ra, None))
    out.extend(Op(k, ADDED, None, rb) for k, rb in kb.items() if k not in used_b)
    return out


def choose_scheme(spec: str | None, names: Sequence[str], format: str | None = None,
                  default: str | None = None, params: dict[str, int] | None = None):
    """The grouping scheme of a report: ``spec`` (a built-in name or a YAML file) when given,
    else ``default`` (an architecture's own scheme) when it exists, else the best built-in for
    ``names`` (``auto``)."""
    from inspector import grouping

    if spec in (None, grouping.AUTO) and default:
        return grouping.get_scheme(default)
    return grouping.resolve(spec, names, format, params)
