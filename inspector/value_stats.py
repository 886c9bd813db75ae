"""Value statistics of one checkpoint or of a training run: typed records, no printing.

>>> from inspector.value_stats import file_stats, run_stats
>>> result = file_stats("model.safetensors")  # doctest: +SKIP
>>> [f.message for f in result.findings]  # doctest: +SKIP

Values are streamed chunk by chunk through :mod:`inspector.values` (wherever the adapter says they
are: a byte range, a stream, an HDF5 dataset), reduced to :class:`~inspector.partial.Partial`
records and merged: per tensor, per group of the grouping scheme, per layer. Norms of groups are
combined from sums of squares, never averaged. Tensors are spread over threads (numpy releases
the GIL); peak memory is a few chunks per thread.

What the numbers are over: floats as stored (bfloat16 and float8 decoded exactly), integers and
bool as their stored values, quantized types as their stored integers (scale and zero point not
applied), complex numbers as their magnitudes. Min, max, mean, std and L2 are over the finite
values; NaN, +Inf, -Inf, zeros and subnormals are counted over all.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector import fused
from inspector.adapters.model import Checkpoint, Role, TensorEntry
from inspector.grouping import numbered_layer
from inspector.partial import Partial, fast_reduce, merge_all, reduce

SCHEMA = "inspector.stats/1"
RUN_SCHEMA = "inspector.stats-run/1"
ERROR, WARNING = "error", "warning"
# Elements per chunk: 1 MiB of float32, 2 MiB as float64 (see chunk_pass); 4 MiB of float32
# when the compiled kernels do the work (one pass, no float64 copy: fewer, larger chunks cost
# less per byte).
CHUNK = (1 << 20) if fused.installed() else (1 << 18)
OUTLIER_FACTOR = 10.0  # a layer's norm this many times off the median of its kind is flagged
JUMP_FACTOR = 10.0  # a group's relative change this many times its earlier median is flagged
# What the statistics of each kind of dtype are computed over.
KIND_NOTE = {
    "float": "values",
    "integer": "stored integers",
    "quantized": "stored integers (scale and zero point not applied)",
    "bool": "0 and 1",
    "complex": "magnitudes |z|",
}
_TINY = {"float16": 2.0**-14, "bfloat16": 2.0**-126, "float32": 2.0**-126, "float64": 2.0**-1022,
         "float8_e4m3fn": 2.0**-6, "float8_e4m3fnuz": 2.0**-7, "float8_e5m2": 2.0**-14,
         "float8_e5m2fnuz": 2.0**-15}


def entry_kind(entry: TensorEntry) -> str:
    """:func:`kind` of a tensor; an integer tensor its reader dequantizes with its scale
    (``extra["quantization_scale"]``: CTranslate2 int8/int16) reads as float values."""
    return "float" if entry.extra.get("quantization_scale") else kind(entry.dtype)


def kind(dtype: str) -> str:
    """float, integer, quantized, bool or complex."""
    if dtype == "bool":
        return "bool"
    if dtype.startswith("complex"):
        return "complex"
    if dtype.startswith(("qint", "quint")):
        return "quantized"
    if "int" in dtype:
        return "integer"
    return "float"


@dataclass(frozen=True, slots=True)
class Finding:
    """Something a value pass found: ``severity`` error or warning, ``code`` what kind
    (nonfinite, zeros, constant, outlier, frozen, first_nonfinite, jump), ``subject`` the tensor,
    layer or group, ``checkpoint`` the file (runs)."""

    severity: str
    code: str
    message: str
    subject: str
    checkpoint: str | None = None


@dataclass(frozen=True, slots=True)
class TensorStats:
    """One tensor's statistics (``stats`` None and ``note`` set when its values cannot be read)."""

    entry: TensorEntry
    group: str
    layer: str | None
    stats: Partial | None
    note: str | None = None
    delta_ss: float | None = None  # runs: sum of squared differences from the previous file

    @property
    def kind(self) -> str:
        return entry_kind(self.entry)


@dataclass(frozen=True, slots=True)
class GroupStats:
    """A group (or one layer of it) merged over its tensors; ``delta_ss`` in runs."""

    name: str
    tensors: int
    stats: Partial
    layer: str | None = None
    kind: tuple = ()  # what layers of the same kind share (group, block, direction)
    delta_ss: float | None = None


@dataclass
class FileStats:
    """Everything :func:`file_stats` found in one checkpoint."""

    ckpt: Checkpoint
    scheme: str
    tensors: list[TensorStats]
    groups: list[GroupStats]
    layers: list[GroupStats]
    findings: list[Finding] = field(default_factory=list)
    match: str | None = None

    @property
    def total(self) -> Partial:
        return merge_all(t.stats for t in self.tensors if t.stats is not None)

    @property
    def not_read(self) -> int:
        return sum(1 for t in self.tensors if t.stats is None)

    @property
    def errors(self) -> bool:
        return any(f.severity == ERROR for f in self.findings)


@dataclass
class RunStats:
    """:func:`run_stats`: one :class:`FileStats` per checkpoint in order, and the run's findings."""

    files: list[FileStats]
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> bool:
        return any(f.severity == ERROR for f in self.findings) or any(
            f.errors for f in self.files)


# ---------------------------------------------------------------------------------------------
# One tensor


def tensor_partial(ckpt: Checkpoint, entry: TensorEntry, chunk: int = CHUNK,
                   advance: Callable[[int], None] | None = None,
                   prev: tuple[Checkpoint, TensorEntry] | None = None
                   ) -> tuple[Partial, float | None]:
    """The tensor's :class:`Partial`, read chunk by chunk; with ``prev`` (the same tensor in an
    earlier checkpoint, same element count) also the sum of squared differences from it."""
    from inspector import values

    k, tiny, f16 = _how(entry)
    itemsize = (entry.nbytes or 0) / max(1, entry.numel)
    out = Partial()
    delta: float | None = None
    chunks = values.iter_values(ckpt, entry, chunk, stored=True)
    olds = values.iter_values(prev[0], prev[1], chunk, stored=True) if prev else None
    if olds is not None:
        delta = 0.0
    for x in chunks:
        y = next(olds) if olds is not None else None
        part, d = stored_chunk_result(x, y, entry.dtype, k, tiny, f16, ("stats.x.wide",
                                                                          "stats.y.wide"))
        out = out.merge(part)
        if d is not None:
            delta += d  # type: ignore[operator]
        if advance is not None:
            advance(int(x.size * itemsize))
    if olds is not None:
        for _ in olds:  # equal element counts: nothing is left; closes the reader
            pass
    return out, delta


def _how(entry: TensorEntry) -> tuple[str, float | None, bool]:
    """What a tensor's chunks are reduced as: its kind, the smallest normal number of its float
    format, whether float16 overflows are counted."""
    k = entry_kind(entry)
    f16 = k == "float" and entry.dtype not in ("float16",) and not entry.dtype.startswith("float8")
    return k, _TINY.get(entry.dtype), f16


def stored_chunk_result(x: Any, y: Any, dtype: str, k: str, tiny: float | None, f16: bool,
                        slots: tuple[str, str]) -> tuple[Partial, float | None]:
    """:func:`chunk_result` of a chunk as stored (and ``y``, the previous checkpoint's, as
    stored): float32, bfloat16 and float16 in one compiled pass when numba is installed
    (:mod:`inspector.fused`), else widened (into this thread's scratch buffers ``slots``) and
    reduced by NumPy."""

    part = fused.stats(x, dtype, tiny, f16) if k == "float" else None
    if part is not None and y is None:
        return part, None
    if part is not None:  # the sum of squared differences in one compiled pass too
        got = fused.difference(x, y, dtype)
        if got is not None:  # (None: NaN or Inf on either side, which NumPy places)
            return part, got[1]
    wy = widened(y, dtype, slots[1]) if y is not None else None
    return chunk_result(widened(x, dtype, slots[0]), wy, k, tiny, f16, part)


def chunk_result(x: Any, y: Any, k: str, tiny: float | None, f16: bool,
                 part: Partial | None = None) -> tuple[Partial, float | None]:
    """One chunk's partial (``part`` when already known), and (``y``: the same chunk of the
    previous checkpoint) its sum of squared differences from it, None when the two are
    equal."""
    import numpy as np

    from inspector import kernels

    delta = None
    with np.errstate(all="ignore"):  # overflow to inf is counted, never printed
        if y is not None and not np.array_equal(x, y):  # a frozen tensor costs one comparison
            if k == "complex":
                d = np.abs(x.astype(np.complex128) - y)
            else:
                if k == "bool":
                    x, y = x.view(np.uint8), y.view(np.uint8)
                d = np.subtract(x, y, dtype=np.float64)
            d = d[~np.isnan(d)] if np.isnan(d).any() else d  # NaN is counted elsewhere
            delta = kernels.dot(d, d)
    return (part if part is not None else _reduce(x, k, tiny, f16)), delta


def chunk_partial(x: Any, dtype: str) -> Partial:
    """The :class:`Partial` of one chunk of a tensor of ``dtype`` (a canonical dtype name), as
    :func:`inspector.values.iter_values` yields it: what a worker computes for its shard before
    the partials are merged."""
    import numpy as np

    k = kind(dtype)
    f16 = k == "float" and dtype != "float16" and not dtype.startswith("float8")
    with np.errstate(all="ignore"):
        return _reduce(x, k, _TINY.get(dtype), f16)


def _reduce(x: Any, k: str, tiny: float | None, f16: bool) -> Partial:
    import numpy as np

    from inspector import values

    if k == "float" and x.dtype.kind == "f" and x.dtype.itemsize <= 4 and x.dtype.isnative:
        fast = fast_reduce(x, tiny, f16)  # no NaN, Inf or overflow: nothing to silence
        if fast is not None:
            return fast
    with np.errstate(all="ignore"):  # overflow to inf is counted, never printed
        return _general(np, values, x, k, tiny, f16)


def _general(np: Any, values: Any, x: Any, k: str, tiny: float | None, f16: bool) -> Partial:
    if k == "complex":
        x = np.abs(x.astype(np.complex128))
    elif x.dtype.kind == "f" and x.dtype.itemsize == 2 and not x.dtype.isnative:
        x = values.float32(x)  # a big-endian float16: exact as float32
    return reduce(x, tiny, f16)


# ---------------------------------------------------------------------------------------------
# One checkpoint


def _load(path: str | Path | Checkpoint, input_format: str | None = None) -> Checkpoint:
    if isinstance(path, Checkpoint):
        return path
    from inspector.adapters.registry import load

    return load(path, input_format)


def selected(ckpt: Checkpoint, match: str | None = None) -> list[TensorEntry]:
    """The tensors a pass reads: tied aliases once, filtered by ``match`` (a regex searched in
    the canonical and the stored name)."""
    rx = re.compile(match) if match else None
    return [t for t in ckpt.unique()
            if rx is None or rx.search(t.name) or rx.search(t.stored_name)]


# What a value pass yields per tensor: its partial, the sum of squared differences from the
# previous checkpoint of a run, and why its values could not be read (partial None then).
TensorResult = tuple[Partial | None, float | None, str | None]
# A pass over many checkpoints at once (a Dask cluster, :mod:`inspector.cluster`): for each
# (checkpoint, selected tensors, previous checkpoint or None), one result per tensor, in order.
TensorPass = Callable[[list[tuple[Checkpoint, list[TensorEntry], Checkpoint | None]]],
                      list[list[TensorResult]]]


def previous(prev: Checkpoint | None, entry: TensorEntry) -> TensorEntry | None:
    """The same tensor in the previous checkpoint of a run, when a change can be measured (same
    element count and dtype)."""
    before = prev.get(entry.name) if prev is not None else None
    if before is not None and before.numel == entry.numel and before.dtype == entry.dtype:
        return before
    return None


def tensor_result(ckpt: Checkpoint, entry: TensorEntry, chunk: int = CHUNK,
                  advance: Callable[[int], None] | None = None,
                  prev: tuple[Checkpoint, TensorEntry] | None = None) -> TensorResult:
    """:func:`tensor_partial`, with values that cannot be read as a note instead of an error."""
    from inspector import values

    try:
        part, delta = tensor_partial(ckpt, entry, chunk, advance, prev)
    except values.ValuesUnavailable as e:
        return None, None, e.why
    return part, delta, None


def file_stats(path: str | Path | Checkpoint, *, match: str | None = None,
               scheme: str | None = None, chunk: int = CHUNK, threads: int | None = None,
               progress: Any = None, prev: Checkpoint | None = None,
               input_format: str | None = None,
               results: Sequence[TensorResult] | None = None) -> FileStats:
    """Statistics of every selected tensor, group and layer of one checkpoint, and findings.

    ``progress``: an object with ``advance(nbytes)`` (see :mod:`inspector.progress`). ``prev``:
    the previous checkpoint of a run, for per-tensor and per-group changes. ``results``: the
    tensors' results computed elsewhere (a cluster), one per selected tensor in order; nothing
    is read here then.
    """
    from inspector import compare, values

    ckpt = _load(path, input_format)
    entries = selected(ckpt, match)
    sch = compare.choose_scheme(scheme, [t.name for t in ckpt.tensors], ckpt.format)
    advance = progress.advance if progress is not None else None

    if results is None:
        ckpts = [ckpt] if prev is None else [ckpt, prev]
        workers = threads if threads is not None else values.threads_for(entries, ckpts)
        results = _pass(ckpt, entries, prev, chunk, workers, advance)
    rows = []
    for t, (part, delta, note) in zip(entries, results, strict=True):
        a = sch.assign(t.name)
        rows.append(TensorStats(t, a.group, a.layer, part, note, None if note else delta))
    groups, layers = _groups(sch, rows)
    result = FileStats(ckpt, sch.name, rows, groups, layers, match=match)
    result.findings = tensor_findings(result) + outlier_findings(layers)
    return result


def _pass(ckpt: Checkpoint, entries: list[TensorEntry], prev: Checkpoint | None, chunk: int,
          threads: int, advance: Callable[[int], None] | None) -> list[TensorResult]:
    """Every tensor's result, on ``threads`` threads: a tensor that is a plain byte range of a
    local file (and so is its previous version) by chunks (:mod:`inspector.chunk_pass`), any
    other whole. The chunks' partials are merged in order, as :func:`tensor_partial` merges
    them, so the numbers are the same on any number of threads."""
    from inspector import chunk_pass, scratch

    plans: list[tuple[TensorEntry, TensorEntry | None, Any, Any]] = []
    for t in entries:
        before = previous(prev, t)
        span = chunk_pass.locate(ckpt, t)
        old = chunk_pass.locate(prev, before) if span is not None and before else None
        if span is not None and before is not None and old is None:
            span = None  # the previous version is read in order: so is this one
        plans.append((t, before, span, old))

    def units() -> Any:
        for i, (t, _, span, old) in enumerate(plans):
            if span is None:
                yield i, -1, 0
            else:
                sides = span.itemsize * (1 if old is None else 2)
                yield from ((i, k, m) for k, m in chunk_pass.runs(t, chunk, sides))

    with chunk_pass.Files() as files, _released(scratch):
        def unit(item: tuple[int, int, int]) -> Any:
            i, k, m = item
            t, before, span, old = plans[i]
            if span is None:
                return tensor_result(ckpt, t, chunk, advance,
                                     None if before is None else (prev, before))
            x = files.read(span, k, chunk, "stats.x", m)
            y = files.read(old, k, chunk, "stats.y", m) if old is not None else None
            how = _how(t)
            got = []
            for j in range(0, x.size, chunk):  # the run's chunks, each reduced on its own
                got.append(stored_chunk_result(
                    x[j:j + chunk], None if y is None else y[j:j + chunk], t.dtype, *how,
                    ("stats.x.wide", "stats.y.wide")))
            if advance is not None:
                advance(x.size * span.itemsize)
            return got

        results: list[Any] = [None] * len(plans)
        for (i, k, _), got in chunk_pass.ordered(unit, units(), threads):
            if k < 0:
                results[i] = got
                continue
            if k == 0:
                results[i] = (Partial(), None if plans[i][3] is None else 0.0, None)
            total, delta, _ = results[i]
            for part, d in got:  # in chunk order, as tensor_partial folds them
                if d is not None:
                    delta += d
                total = total.merge(part)
            results[i] = (total, delta, None)
            if k + len(got) == chunk_pass.count(plans[i][0], chunk):
                for span in plans[i][2:]:
                    if span is not None:
                        files.check(span)
    return results


@contextmanager
def _released(scratch: Any) -> Any:
    """This thread's scratch buffers dropped after the pass (the pool's go with its threads)."""
    try:
        yield
    finally:
        scratch.release()


def widened(x: Any, dtype: str, slot: str) -> Any:
    """A chunk as stored, as the numbers its statistics are over: bfloat16 widened to float32
    (into this thread's scratch buffer ``slot``, in :func:`inspector.kernels.paired` order: the
    statistics do not depend on order, and both passes of a tensor, in order or by chunks,
    widen it alike), float8 and complex32 decoded; others unchanged."""
    import numpy as np

    from inspector import kernels, scratch, values

    if x.dtype.kind not in "ui":
        return x
    if dtype == "bfloat16" and x.dtype.isnative:
        return kernels.bfloat16_to_float32(x, scratch.buffer(slot, x.size, np.float32))
    if dtype == "bfloat16" or dtype in values.FLOAT8 or dtype == "complex32":
        return values.widen(x, dtype)
    return x


def _groups(sch: Any, rows: list[TensorStats]) -> tuple[list[GroupStats], list[GroupStats]]:
    """Per group, and per layer of a group (the scheme's ``layer`` capture), merged exactly:
    over the parameters when the checkpoint has any (buffers, index tensors and optimizer state
    never enter a parameter norm), else over every tensor."""
    by_group: dict[str, list[TensorStats]] = {}
    by_layer: dict[tuple, list[TensorStats]] = {}
    params = [r for r in rows if r.entry.role is Role.PARAMETER]
    for r in params or rows:
        if r.stats is None:
            continue
        by_group.setdefault(r.group, []).append(r)
        a = sch.assign(r.entry.name)
        if a.layer is not None:
            by_layer.setdefault((r.group, a.block, a.direction, a.layer), []).append(r)
            continue
        numbered = numbered_layer(r.entry.name)
        if numbered is not None:
            by_layer.setdefault((r.group, numbered[0], None, numbered[1]), []).append(r)
    groups = [GroupStats(g, len(rs), merge_all(r.stats for r in rs), None, (g,), _dss(rs))
              for g, rs in by_group.items()]
    layers = [GroupStats(g, len(rs), merge_all(r.stats for r in rs), layer,
                         (g, block, direction), _dss(rs))
              for (g, block, direction, layer), rs in by_layer.items()]
    return groups, layers



def _dss(rows: list[TensorStats]) -> float | None:
    if any(r.delta_ss is None for r in rows):
        return None
    return sum(r.delta_ss for r in rows)  # type: ignore[misc]


def tensor_findings(result: FileStats) -> list[Finding]:
    """NaN/Inf (error); a floating parameter all zeros or constant (warning)."""
    out = []
    for r in result.tensors:
        s, name = r.stats, r.entry.name
        if s is None:
            continue
        if s.nonfinite:
            what = ", ".join(f"{n:,} {label}" for n, label in
                             ((s.nan, "NaN"), (s.posinf, "+Inf"), (s.neginf, "-Inf")) if n)
            out.append(Finding(ERROR, "nonfinite", f"{name}: {what} of {s.count:,} values", name))
        if r.entry.role != Role.PARAMETER or r.kind != "float" or s.count < 2:
            continue
        if s.zeros == s.count:
            out.append(Finding(WARNING, "zeros", f"{name}: all {s.count:,} values are zero",
                               name))
        elif s.finite == s.count and s.min == s.max:
            out.append(Finding(WARNING, "constant",
                               f"{name}: all {s.count:,} values are {s.min:g}", name))
    return out


def outlier_findings(layers: Sequence[GroupStats], factor: float = OUTLIER_FACTOR
                     ) -> list[Finding]:
    """A layer whose L2 norm is more than ``factor`` times above or below the median of the
    layers of its kind (same group, block and direction; at least three layers)."""
    kinds: dict[tuple, list[GroupStats]] = {}
    for g in layers:
        kinds.setdefault(g.kind, []).append(g)
    out = []
    for members in kinds.values():
        if len(members) < 3:
            continue
        med = statistics.median(m.stats.l2 for m in members)
        if not med > 0:
            continue
        for m in members:
            ratio = m.stats.l2 / med
            if ratio > factor or ratio < 1 / factor:
                label = f"{m.name} layer {m.layer}"
                out.append(Finding(
                    WARNING, "outlier",
                    f"{label}: L2 norm {m.stats.l2:.4g} is {ratio:.3g}x the median "
                    f"{med:.4g} of its {len(members)} layers", label))
    return out


# ---------------------------------------------------------------------------------------------
# Training runs

_RUN_MEMBER = re.compile(r"^(params\.\d+|epoch=.*\.ckpt|checkpoint-\d+)$")


def natural_key(name: str) -> tuple:
    """``params.00010`` after ``params.00009``, ``checkpoint-1000`` after ``checkpoint-200``."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in re.split(r"(\d+)", name))


def run_members(directory: Any) -> list[Any]:
    """The checkpoints of one run in a directory, ordered naturally: Sockeye's ``params.NNNNN``,
    Lightning's ``epoch=*.ckpt``, the HF Trainer's ``checkpoint-N/`` (empty: not a run). A
    directory URL (``s3://bucket/run/``) gives its members as sources."""
    from inspector.adapters.source import Source, is_url

    if isinstance(directory, Source) or is_url(str(directory)):
        return _remote_members(directory)
    d = Path(directory)
    if not d.is_dir():
        return []
    found = [p for p in d.iterdir() if _RUN_MEMBER.match(p.name)]
    return sorted(found, key=lambda p: natural_key(p.name))


def _remote_members(directory: Any) -> list[Any]:
    from inspector.adapters.errors import InspectorError
    from inspector.adapters.source import as_source

    try:
        src = as_source(directory)
        if not src.is_dir():
            return []
        names = [n.rstrip("/") for n in src.list()]
        return [src.child(n) for n in sorted((n for n in names if _RUN_MEMBER.match(n)),
                                             key=natural_key)]
    except InspectorError:
        return []  # opened as given: its error is said there


def expand(paths: Sequence[str | Path]) -> list[str | Path]:
    """The checkpoints the command line names: a run directory becomes its members (when it
    holds at least two), anything else stays as given."""
    out: list[str | Path] = []
    for p in paths:
        members = run_members(p)
        out.extend(members if len(members) >= 2 else [p])
    return out


def run_stats(paths: Sequence[str | Path | Checkpoint], *, match: str | None = None,
              scheme: str | None = None, chunk: int = CHUNK, threads: int | None = None,
              progress: Any = None, input_format: str | None = None,
              jump: float = JUMP_FACTOR, loader: Callable[[Any], Checkpoint] | None = None,
              tensor_pass: TensorPass | None = None) -> RunStats:
    """Statistics of each checkpoint in order, each compared with the one before: per group the
    norm and the relative change ||W_k - W_{k-1}|| / ||W_{k-1}||, and the run's findings.
    ``tensor_pass``: values read by it (all checkpoints at once, e.g. on a cluster), not here."""
    files: list[FileStats] = []
    prev: Checkpoint | None = None
    done: list[list[TensorResult]] | None = None
    if tensor_pass is not None:
        paths = [loader(p) if loader is not None else _load(p, input_format) for p in paths]
        jobs = [(c, selected(c, match), paths[i - 1] if i else None)
                for i, c in enumerate(paths)]
        done = tensor_pass(jobs)  # type: ignore[arg-type]
    for i, p in enumerate(paths):
        ckpt = loader(p) if loader is not None and done is None else _load(p, input_format)
        fs = file_stats(ckpt, match=match, scheme=scheme or (files[0].scheme if files else None),
                        chunk=chunk, threads=threads, progress=progress, prev=prev,
                        results=None if done is None else done[i])
        files.append(fs)
        prev = ckpt
    return RunStats(files, run_findings(files, jump))


def relative_change(cur: GroupStats, before: GroupStats | None) -> float | None:
    """||Δ|| / ||W_prev|| of a group (None without a previous file; inf from zero)."""
    if cur.delta_ss is None or before is None:
        return None
    d = math.sqrt(cur.delta_ss)
    base = before.stats.l2
    if base > 0:
        return d / base
    return 0.0 if d == 0 else math.inf


def run_findings(files: Sequence[FileStats], jump: float = JUMP_FACTOR) -> list[Finding]:
    """Groups that never changed; the first checkpoint with NaN/Inf; sudden jumps in change."""
    out: list[Finding] = []
    if len(files) < 2:
        return out
    first_bad = next((f for f in files if any(t.stats is not None and t.stats.nonfinite
                                              for t in f.tensors)), None)
    if first_bad is not None:
        bad = [t.entry.name for t in first_bad.tensors if t.stats is not None
               and t.stats.nonfinite]
        out.append(Finding(ERROR, "first_nonfinite",
                           f"NaN/Inf first appears in {first_bad.ckpt.path} "
                           f"({', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''})",
                           bad[0], first_bad.ckpt.path))
    names = list(dict.fromkeys(g.name for f in files for g in f.groups))
    for g in names:
        series = [next((x for x in f.groups if x.name == g), None) for f in files]
        changes = [relative_change(series[i], series[i - 1])
                   if series[i] is not None else None for i in range(1, len(files))]
        known = [c for c in changes if c is not None]
        if known and len(known) == len(changes) and all(c == 0 for c in known):
            out.append(Finding(WARNING, "frozen",
                               f"{g}: never changed over {len(files)} checkpoints "
                               "(frozen, intended or not)", g))
            continue
        for i, c in enumerate(changes):
            earlier = [x for x in changes[:i] if x is not None and x > 0]
            if c is None or not earlier:
                continue
            med = statistics.median(earlier)
            if c > jump * med:
                path = files[i + 1].ckpt.path
                out.append(Finding(WARNING, "jump",
                                   f"{g}: relative change {c:.3g} in {path} is {c / med:.3g}x "
                                   f"its earlier median {med:.3g}", g, path))
    return out


# ---------------------------------------------------------------------------------------------
# The JSON-ready reports


def _num(x: float | None) -> float | str | None:
    """JSON has no inf or NaN: they are written as strings."""
    if x is None or math.isfinite(x):
        return x
    return str(x)


def _stats_dict(p: Partial, k: str | None = None) -> dict[str, Any]:
    d = {key: _num(v) if isinstance(v, float) else v for key, v in p.as_dict().items()}
    if k is not None and k != "float":
        d["subnormal"] = d["f16_overflow"] = None  # floating formats only
    return d


def _finding(f: Finding) -> dict[str, Any]:
    out = {"severity": f.severity, "code": f.code, "message": f.message, "subject": f.subject}
    if f.checkpoint:
        out["checkpoint"] = f.checkpoint
    return out


def report(result: FileStats) -> dict[str, Any]:
    """The JSON-ready report of one checkpoint (schema ``inspector.stats/1``)."""
    ckpt = result.ckpt
    total = result.total
    return {
        "schema": SCHEMA,
        "path": ckpt.path,
        "format": ckpt.format,
        "match": result.match,
        "scheme": result.scheme,
        "complete": result.not_read == 0,
        "summary": {
            "tensors": len(result.tensors),
            "values_not_read": result.not_read,
            "elements": total.count,
            "nan": total.nan, "posinf": total.posinf, "neginf": total.neginf,
            "errors": sum(1 for f in result.findings if f.severity == ERROR),
            "warnings": sum(1 for f in result.findings if f.severity == WARNING),
        },
        "tensors": [
            {"name": r.entry.name, "stored_name": r.entry.stored_name,
             "shape": list(r.entry.shape), "dtype": r.entry.dtype, "role": r.entry.role.value,
             "group": r.group, "layer": r.layer, "of": KIND_NOTE[r.kind],
             "stats": None if r.stats is None else _stats_dict(r.stats, r.kind),
             **({"note": r.note} if r.note else {})}
            for r in result.tensors
        ],
        "groups": [{"group": g.name, "tensors": g.tensors, "stats": _stats_dict(g.stats)}
                   for g in result.groups],
        "layers": [{"group": g.name, "block": g.kind[1], "direction": g.kind[2],
                    "layer": g.layer, "tensors": g.tensors, "l2": _num(g.stats.l2)}
                   for g in result.layers],
        "findings": [_finding(f) for f in result.findings],
    }


def run_report(run: RunStats) -> dict[str, Any]:
    """The JSON-ready report of a run (schema ``inspector.stats-run/1``): per checkpoint and
    group the norm and the relative change from the previous checkpoint."""
    steps = []
    prev: FileStats | None = None
    for f in run.files:
        before = {g.name: g for g in prev.groups} if prev is not None else {}
        steps.append({
            "path": f.ckpt.path,
            "format": f.ckpt.format,
            "complete": f.not_read == 0,
            "nan": f.total.nan, "posinf": f.total.posinf, "neginf": f.total.neginf,
            "groups": [
                {"group": g.name, "tensors": g.tensors, "l2": _num(g.stats.l2),
                 "delta_l2": None if g.delta_ss is None else _num(math.sqrt(g.delta_ss)),
                 "relative_change": _num(relative_change(g, before.get(g.name)))}
                for g in f.groups
            ],
        })
        prev = f
    return {
        "schema": RUN_SCHEMA,
        "checkpoints": [f.ckpt.path for f in run.files],
        "scheme": run.files[0].scheme if run.files else None,
        "complete": all(f.not_read == 0 for f in run.files),
        "steps": steps,
        "findings": [_finding(f) for f in run_all_findings(run)],
    }


def run_all_findings(run: RunStats) -> list[Finding]:
    """Each checkpoint's own findings where they first appear (a tensor all zeros in every
    checkpoint is said once, with the first checkpoint), then the run's."""
    seen: set[tuple[str, str]] = set()
    out = []
    for fs in run.files:
        for f in fs.findings:
            if (f.code, f.subject) not in seen:
                seen.add((f.code, f.subject))
                out.append(Finding(f.severity, f.code, f.message, f.subject, fs.ckpt.path))
    return out + run.findings
