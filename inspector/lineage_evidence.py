"""The evidence lineage weighs for one pair of checkpoints, from their fingerprints alone:
which informative tensors are identical, equal up to a cast, drifted (trained on) or
unrelated, which are renamed copies, and which exist on one side only; and the PEFT adapter
facts (its LoRA pairs and the base weights they fit). Shared by :mod:`inspector.lineage` and the
byte checks of :mod:`inspector.lineage_bytes`."""

from __future__ import annotations

import math
import re
from collections import defaultdict

import numpy as np

from inspector.fingerprint import MIN_DISTINCT, MIN_NUMEL, CheckpointPrint, TensorPrint

RELATED = 1.0  # centred sample drift below this (correlation above ~0.5): one tensor, trained on
MAJORITY = 0.5  # share of informative tensors that must agree for two checkpoints to relate
# Unit roundoff of a stored type: a cast moves each element by at most this much, relatively.
ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11,
            "bfloat16": 2.0 ** -8, "float8_e4m3fn": 2.0 ** -4, "float8_e5m2": 2.0 ** -3}
CARRIED_CANDIDATES = 8  # same-shape tensors tried as the source of a renamed, cast one
RECOMPUTED = 64  # units of roundoff two runs of one float32 computation may differ by
# Relative L2 error of a block-quantized type's dequantized values (ggml: q8_0 ~ 0.4%, the
# 4-5 bit kinds ~ 3-8%); a conversion or re-save into it is judged by this bound.
QUANT_NOISE = {"q8_0": 0.02, "q8_1": 0.02, "q6_k": 0.05, "q5_0": 0.08, "q5_1": 0.08,
               "q5_k": 0.08, "q4_0": 0.15, "q4_1": 0.15, "q4_k": 0.15, "q3_k": 0.3,
               "q2_k": 0.5}

# ----------------------------------------------------------------------------- pair evidence
def _noise(dtype: str | None) -> float | None:
    """The relative error a cast into ``dtype`` may cause (None: not a known lossy cast)."""
    d = (dtype or "").lower()
    if d in ROUNDOFF:
        return ROUNDOFF[d]
    return QUANT_NOISE.get(d)


def cast_equal(a: TensorPrint, b: TensorPrint) -> bool:
    """The samples agree up to the rounding of the lower-precision of the two stored types; two
    float32/float64 tensors, up to :data:`RECOMPUTED` units of roundoff (the same computation
    run by another version of a library, its operations in another order: the root mean square
    of the difference within that many roundoffs of the values' own)."""
    if a.dtype == b.dtype and a.dtype in ("float32", "float64") and a.digest != b.digest:
        return drift(a, b) <= RECOMPUTED * ROUNDOFF[str(a.dtype)]
    if a.dtype == b.dtype and not _noise(a.dtype) or a.dtype == b.dtype and a.dtype in ROUNDOFF:
        return a.digest == b.digest
    ua, ub = _noise(a.dtype), _noise(b.dtype)
    if ua is None or ub is None:
        return False
    x, y = a.samples, b.samples
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return False
    x, y = x[ok], y[ok]
    u = max(ua, ub)
    if (a.dtype or "").lower() in QUANT_NOISE or (b.dtype or "").lower() in QUANT_NOISE:
        scale = float(np.max(np.abs(x))) or 1.0  # block scales: error relative to the block max
        return bool(np.all(np.abs(x - y) <= u * scale + 1e-12))
    # one unit in the last place of the narrower type, 2u |x| (+ its subnormal floor): round
    # to nearest stays within u, and a writer that truncates or rounds twice (float32 ->
    # float16 -> bfloat16, as gptqmodel's CPU path does) within 2u
    # (a value that passed through float16 keeps at most its subnormal spacing, 2**-24)
    floor = 2.0 ** -24 if u >= ROUNDOFF["float16"] else 1e-30
    return bool(np.all(np.abs(x - y) <= 2.02 * u * np.maximum(np.abs(x), np.abs(y)) + floor))


def drift(a: TensorPrint, b: TensorPrint) -> float:
    """||a' - b'|| / sqrt((||a'||^2 + ||b'||^2) / 2) over the samples centred on their means
    (so norms near one in two unrelated models do not look alike; symmetric in a and b): 0 for
    equal samples, about sqrt(2) for independent ones; inf when they cannot be compared."""
    x, y = a.samples, b.samples
    if len(x) != len(y):
        return math.inf
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return math.inf
    x, y = x[ok] - x[ok].mean(), y[ok] - y[ok].mean()
    den = math.sqrt((float(x @ x) + float(y @ y)) / 2)
    num = float(np.linalg.norm(x - y))
    return num / den if den else (0.0 if not num else math.inf)


class Evidence:
    """What the fingerprints say about two checkpoints (``a`` the first given)."""

    __slots__ = ("a", "b", "identical", "cast", "changed", "unrelated", "carried", "reshaped",
                 "only_a", "only_b", "drifts", "uninformative", "requantized", "dequantized",
                 "not_dequantized")

    def __init__(self, a: CheckpointPrint, b: CheckpointPrint) -> None:
        self.a, self.b = a, b
        self.identical: list[str] = []  # informative, same digest
        self.cast: list[str] = []  # informative, equal up to the cast
        self.changed: list[str] = []  # informative, drifted but related
        self.unrelated: list[str] = []  # informative, uncorrelated
        self.carried: list[tuple[str, str]] = []  # b's tensor equal to a's under another name
        self.reshaped: list[str] = []
        self.only_a: list[str] = []
        self.only_b: list[str] = []
        self.drifts: dict[str, float] = {}
        self.uninformative = 0
        # modules stored another way on each side (quantized by one scheme, by another or not
        # at all): their tensors are set aside, not compared by name
        self.requantized: list[str] = []
        # of those, the weights compared dequantized: name -> error relative to the noise
        # (:func:`noise_ratio`), and the modules whose packed values were not compared: why
        self.dequantized: dict[str, float] = {}
        self.not_dequantized: dict[str, str] = {}

    @property
    def informative(self) -> int:
        return (len(self.identical) + len(self.cast) + len(self.changed) + len(self.unrelated)
                + len(self.carried))

    @property
    def agreeing(self) -> int:
        return len(self.identical) + len(self.cast) + len(self.changed) + len(self.carried)

    @property
    def related(self) -> bool:
        n = self.informative
        return n > 0 and self.agreeing >= max(1, MAJORITY * n)

    def structural(self) -> tuple[list[str], list[str]]:
        """The parameters on one side only (a's, b's) that no renaming explains: optimizer
        state, buffers and other non-parameters do not count (a weights-only save drops them),
        nor tensors carried under another name."""
        moved_a = {x for x, _ in self.carried}
        moved_b = {y for _, y in self.carried}
        only_a = [n for n in self.only_a
                  if self.a.tensors[n].role == "parameter" and n not in moved_a]
        only_b = [n for n in self.only_b
                  if self.b.tensors[n].role == "parameter" and n not in moved_b]
        return only_a, only_b

    @property
    def equal(self) -> bool:
        """The same parameters (some maybe renamed), same shapes, values equal up to a cast;
        only non-parameters (optimizer state, buffers) may be on one side only."""
        if not self.related or self.changed or self.unrelated or self.reshaped:
            return False
        only_a, only_b = self.structural()
        if self.carried:  # renamed: every informative parameter of either side accounted for
            return not any(self.a.tensors[n].informative for n in only_a) and not any(
                self.b.tensors[n].informative for n in only_b)
        return not only_a and not only_b

    @property
    def distance(self) -> float:
        """Mean relative drift over the informative tensors of either side: those compared by
        name count their drift, those on one side only (removed, added, reshaped) count 1."""
        alone = (sum(1 for n in self.only_a if self.a.tensors[n].informative)
                 + sum(1 for n in self.only_b if self.b.tensors[n].informative)
                 - len(self.carried) + len(self.reshaped))
        total = len(self.drifts) + max(0, alone)
        if not total:
            return math.inf
        return (sum(min(d, 2.0) for d in self.drifts.values()) + max(0, alone)) / total


def quantized_modules(p: CheckpointPrint) -> set[str]:
    """The modules a quantized checkpoint stores packed (see
    :func:`inspector.fingerprint.quantization`)."""
    return set((p.info.get("quantized") or {}).get("modules") or ())


def module_of(name: str, modules: set[str]) -> str | None:
    parts = name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        m = ".".join(parts[:k])
        if m in modules:
            return m
    return None


def _stored_form(p: CheckpointPrint, module: str) -> tuple:
    cut = len(module) + 1
    return tuple(sorted((n[cut:], t.shape, str(t.dtype)) for n, t in p.tensors.items()
                        if n.startswith(module + ".") and not n.endswith(".bias")))


def _repacked(a: CheckpointPrint, b: CheckpointPrint, module: str) -> bool:
    """Some tensor of ``module`` (stored alike on both sides) holds other bytes."""
    prefix = module + "."
    return any(n.startswith(prefix) and not n.endswith(".bias") and n in b.tensors
               and b.tensors[n].digest != t.digest for n, t in a.tensors.items())


def requantized(a: CheckpointPrint, b: CheckpointPrint) -> set[str]:
    """The modules quantized on either side whose stored forms differ (another scheme, or
    quantized on one side only): their packed weights and quantization state are no values to
    compare by name with the other side's (a bias kept as it is still compares)."""
    either = quantized_modules(a) | quantized_modules(b)
    return {m for m in either if _stored_form(a, m) != _stored_form(b, m)}


def _weight(p: CheckpointPrint, module: str) -> TensorPrint | str:
    """A set-aside module's weight on one side as values to compare: its dequantized print,
    its stored float weight when the module is not quantized there, else why not."""
    name = f"{module}.weight"
    if module in quantized_modules(p):
        got = p.dequantized.get(name)
        if got is not None:
            return got
        why = ((p.info.get("quantized") or {}).get("not_dequantized") or {}).get(module)
        return why or f"{(p.info.get('quantized') or {}).get('label')}: not dequantized"
    t = p.tensors.get(name)
    if t is None or str(t.dtype) not in ROUNDOFF:
        return "no float weight to compare"
    return t


def noise_ratio(x: TensorPrint, y: TensorPrint) -> float:
    """The samples' difference relative to what the two storages' noise allows (each
    dequantized side's half step and roundings, each float side's rounding): the largest
    element's ratio, or for a scheme that spreads its rounding error (GPTQ) the ratio of the
    root mean squares. At most 1: within the noise; inf when nothing compares."""
    xs, ys = x.samples, y.samples
    if len(xs) != len(ys):
        return math.inf
    tol = np.zeros(len(xs))
    for t, other in ((x, ys), (y, xs)):
        if t.noise is not None:
            tol = tol + t.noise
        else:  # a float side: its own rounding, as cast_equal allows it
            tol = tol + 2.02 * ROUNDOFF[str(t.dtype)] * np.maximum(np.abs(t.samples),
                                                                   np.abs(other))
    ok = np.isfinite(xs) & np.isfinite(ys) & np.isfinite(tol)
    if not ok.any():
        return math.inf
    err, tol = np.abs(xs[ok] - ys[ok]), tol[ok] + 1e-30
    if x.spread or y.spread:
        return float(np.sqrt(np.sum(err ** 2) / np.sum(tol ** 2)))
    return float(np.max(err / tol))


def _varied(t: TensorPrint) -> bool:
    s = t.samples[np.isfinite(t.samples)]
    return t.numel >= MIN_NUMEL and len(np.unique(s)) >= MIN_DISTINCT


def _compare_dequantized(ev: Evidence, aside: set[str]) -> None:
    """Each set-aside module's weight compared dequantized where both sides give values."""
    for module in sorted(aside):
        xa, xb = _weight(ev.a, module), _weight(ev.b, module)
        if isinstance(xa, str) or isinstance(xb, str):
            ev.not_dequantized[module] = xa if isinstance(xa, str) else str(xb)
            continue
        name = f"{module}.weight"
        if xa.shape != xb.shape:
            ev.not_dequantized[module] = f"shapes {list(xa.shape)} and {list(xb.shape)}"
            continue
        if not (_varied(xa) and _varied(xb)):
            ev.uninformative += 1
            continue
        ratio = noise_ratio(xa, xb)
        ev.dequantized[name] = ratio
        d = drift(xa, xb)
        ev.drifts[name] = d
        if ratio <= 1.0:
            ev.cast.append(name)
        else:
            (ev.changed if d < RELATED else ev.unrelated).append(name)


def compare(a: CheckpointPrint, b: CheckpointPrint) -> Evidence:
    """The evidence of two fingerprints (no bytes read)."""
    ev = Evidence(a, b)
    aside = requantized(a, b)
    ev.requantized = sorted(aside)
    # quantized alike on both sides but packed to other values: an int packed weight is no
    # evidence as stored, its dequantized values are
    aside |= {m for m in (quantized_modules(a) & quantized_modules(b)) - aside
              if _repacked(a, b, m)}
    if aside:
        _compare_dequantized(ev, aside)

    def set_aside(name: str) -> bool:
        return bool(aside) and not name.endswith(".bias") and module_of(name, aside) is not None

    digests_a = {t.digest: n for n, t in a.tensors.items() if t.informative
                 and not set_aside(n)}
    shapes_a: dict[tuple[int, ...], list[TensorPrint]] = defaultdict(list)
    for n, t in a.tensors.items():
        if t.informative and not set_aside(n) and len(shapes_a[t.shape]) < CARRIED_CANDIDATES:
            shapes_a[t.shape].append(t)
    for name, tb in b.tensors.items():
        if set_aside(name):
            continue
        ta = a.tensors.get(name)
        if ta is None:
            ev.only_b.append(name)
            if tb.informative and tb.digest in digests_a:
                ev.carried.append((digests_a[tb.digest], name))
            elif tb.informative:  # renamed and cast (a tied head saved as its own tensor)
                same = next((t for t in shapes_a.get(tb.shape, ()) if cast_equal(t, tb)), None)
                if same is not None:
                    ev.carried.append((same.name, name))
            continue
        if ta.shape != tb.shape:
            ev.reshaped.append(name)
            continue
        if not (ta.informative and tb.informative):
            ev.uninformative += 1  # a constant on either side: its agreement proves nothing
            continue
        if ta.digest == tb.digest:
            ev.identical.append(name)
            ev.drifts[name] = 0.0
        elif cast_equal(ta, tb):
            ev.cast.append(name)
            ev.drifts[name] = drift(ta, tb)
        else:
            d = drift(ta, tb)
            ev.drifts[name] = d
            (ev.changed if d < RELATED else ev.unrelated).append(name)
    ev.only_a = [n for n in a.tensors if n not in b.tensors and not set_aside(n)]
    return ev


def lora_pairs(adapter: CheckpointPrint) -> dict[str, tuple[TensorPrint, TensorPrint]]:
    """Target module name (as the base names it, without ``.weight``) -> (lora_A, lora_B)."""
    out: dict[str, dict[str, TensorPrint]] = defaultdict(dict)
    for name, t in adapter.tensors.items():
        m = re.match(r"^(?:base_model\.model\.)?(.*)\.(lora_[AB])(?:\.[^.]+)?\.weight$", name)
        if m:
            out[m.group(1)][m.group(2)] = t
    return {k: (v["lora_A"], v["lora_B"]) for k, v in out.items()
            if "lora_A" in v and "lora_B" in v}


def base_weight(p: CheckpointPrint, module: str) -> TensorPrint | None:
    for name in (f"{module}.weight", f"model.{module}.weight"):
        if name in p.tensors:
            return p.tensors[name]
    stripped = module.split(".", 1)[1] if module.startswith("model.") else None
    if stripped and f"{stripped}.weight" in p.tensors:
        return p.tensors[f"{stripped}.weight"]
    return None


def fan_in_fan_out(adapter: CheckpointPrint) -> bool:
    """The adapter's targets store their weights as (in, out) (peft's ``fan_in_fan_out``:
    GPT-2's Conv1D), so ``B @ A`` is the transpose of their delta."""
    return bool((adapter.info.get("adapter") or {}).get("fan_in_fan_out"))


def fits(adapter: CheckpointPrint, base: CheckpointPrint) -> bool:
    """Every LoRA target of the adapter has a base weight of shape (out, in) ((in, out) with
    ``fan_in_fan_out``) with lora_A (r, in) and lora_B (out, r)."""
    pairs = lora_pairs(adapter)
    if not pairs:
        return False
    for module, (la, lb) in pairs.items():
        w = base_weight(base, module)
        if w is None or len(w.shape) != 2 or len(la.shape) != 2 or len(lb.shape) != 2:
            return False
        out, inp = w.shape[::-1] if fan_in_fan_out(adapter) else w.shape
        if la.shape[1] != inp or lb.shape[0] != out or la.shape[0] != lb.shape[1]:
            return False
    return True


