"""The byte reads that confirm a lineage kind the fingerprints suggest (each cached per pair of
fingerprint keys, so a second run over unchanged files reads no tensor bytes):

* :meth:`Confirm.lora_ranks`: the rank of each changed matrix's delta, by a randomized SVD;
* :meth:`Confirm.conversion`: a layout map's pairing and the relative error of every pair;
* :meth:`Confirm.carried_rows`: for a resized tensor, whether the rows both sides hold agree;
* :meth:`Confirm.adapter_merged`: whether some checkpoint equals a base plus the adapter's
  ``scale * B @ A`` on every target.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from inspector.adapters.model import Checkpoint
from inspector.fingerprint import Cache, CheckpointPrint

# A delta is low rank when its rank is at most this share of its smaller dimension.
LOW_RANK_SHARE = 0.5
SKETCH = 256  # columns of the randomized range finder for large matrices
EXACT = 1024  # up to this smaller dimension the SVD is exact


def singular_values(delta: np.ndarray, k: int = SKETCH, power: int = 2,
                    seed: int = 0) -> np.ndarray:
    """The leading singular values of ``delta``: exact for small matrices, else from a
    randomized range finder with ``power`` subspace iterations (Halko, Martinsson and Tropp,
    2011), which is exact for a matrix of rank below ``k``."""
    m, n = delta.shape
    if min(m, n) <= EXACT:
        return np.linalg.svd(delta, compute_uv=False)
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(delta @ rng.standard_normal((n, min(k, n))))
    for _ in range(power):
        q, _ = np.linalg.qr(delta.T @ q)
        q, _ = np.linalg.qr(delta @ q)
    return np.linalg.svd(q.T @ delta, compute_uv=False)


def numerical_rank(s: np.ndarray, noise: float) -> int:
    """Singular values above the rounding noise of the stored matrices (``noise``: the
    Frobenius norm that rounding alone could give the delta) and above 1e-7 of the largest."""
    if not len(s) or s[0] == 0:
        return 0
    tol = max(noise, s[0] * 1e-7)
    return int(np.sum(s > tol))


def _roundoff(dtype: str | None) -> float:
    from inspector.lineage_evidence import ROUNDOFF

    return ROUNDOFF.get(dtype or "", 2.0 ** -24)


class Confirm:
    """Reads bytes of loaded checkpoints (``opened``: path -> Checkpoint, or a function that
    loads one) and caches what it finds in ``cache``."""

    def __init__(self, opened: Callable[[str], Checkpoint], cache: Cache) -> None:
        self.opened, self.cache = opened, cache
        self.reads = 0  # tensors whose bytes were read (0 on a fully cached run)

    def _key(self, what: str, *parts: str) -> str:
        return "pair-" + hashlib.sha256("|".join((what, *parts)).encode()).hexdigest()

    def _cached(self, key: str, compute: Callable[[], Any]) -> Any:
        got = self.cache.get_json(key)
        if got is not None:
            return got["value"]
        value = compute()
        self.cache.put_json(key, {"value": value})
        return value

    def array(self, ckpt_path: str, name: str) -> np.ndarray:
        from inspector.arrays import get_tensor

        self.reads += 1
        return np.asarray(get_tensor(self.opened(ckpt_path), name), dtype=np.float64)

    # -- LoRA
    def lora_ranks(self, p: CheckpointPrint, c: CheckpointPrint,
                   changed: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Per changed 2-D tensor: the numerical rank of ``c - p`` and whether it is low."""
        names = sorted(n for n in changed if len(p.tensors[n].shape) == 2)
        if not names or len(names) != len(changed):
            return {}

        def compute() -> dict[str, dict[str, Any]]:
            out = {}
            for name in names:
                a = self.array(p.path, name)
                b = self.array(c.path, name)
                delta = b - a
                u = max(_roundoff(p.tensors[name].dtype), _roundoff(c.tensors[name].dtype))
                noise = 2 * u * (np.linalg.norm(a) + np.linalg.norm(b))
                s = singular_values(delta)
                rank = numerical_rank(s, noise)
                small = min(delta.shape)
                out[name] = {"rank": rank,
                             "low_rank": 0 < rank <= LOW_RANK_SHARE * small and rank < small,
                             "top_singular_values": [float(x) for x in s[: min(8, len(s))]]}
            return out

        return self._cached(self._key("lora", p.key, c.key, *names), compute)

    # -- conversions
    def conversion(self, p: CheckpointPrint, c: CheckpointPrint) -> dict[str, Any] | None:
        """When a built-in layout map pairs ``p`` (its source side) with ``c`` and every paired
        tensor agrees within ``c``'s stored type's noise: the pairing's facts, else None."""
        from inspector import layout_map

        if not any(layout_map.format_fits(m.a, p.format)
                   and layout_map.format_fits(m.b, c.format)
                   for m in layout_map.builtin()):
            return None
        key = self._key("conversion", p.key, c.key)

        def compute() -> dict[str, Any] | None:
            from inspector.diffing import diff

            a, b = self.opened(p.path), self.opened(c.path)
            chosen = layout_map.choose("auto", a, b)
            if chosen is None or chosen[1]:
                return None
            result = diff(a, b, values=True, layout="auto", groups=False)
            worst, tensors, noisy = 0.0, 0, []
            for r in result.records:
                if r.values is None or r.a is None or r.b is None:
                    continue
                tensors += 1
                rel = float(r.values.rel_l2)
                worst = max(worst, rel if math.isfinite(rel) else math.inf)
                bound = _conversion_noise(r.b.dtype)
                if not rel <= bound:
                    noisy.append(r.name)
            self.reads += 2 * tensors
            paired = sum(1 for r in result.records if r.a is not None and r.b is not None)
            # what the converter computes itself (quantization scales, a sinusoidal table)
            # has no source to pair with
            made = sum(1 for r in result.records
                       if r.a is None and str(getattr(r, "how", "") or "").startswith(
                           "generated:"))
            if not tensors or noisy or paired < 0.9 * (len(result.records) - made):
                return None
            return {"map": chosen[0].name, "tensors": tensors, "rel_l2": worst,
                    "stored_types": sorted({str(r.b.dtype) for r in result.records if r.b})}

        return self._cached(key, compute)

    # -- resize
    def carried_rows(self, p: CheckpointPrint, c: CheckpointPrint,
                     names: Sequence[str]) -> dict[str, Any]:
        """Per reshaped tensor: the rows (first axis) both hold, and whether they are equal."""
        def compute() -> dict[str, Any]:
            out = {}
            for name in names:
                a, b = self.array(p.path, name), self.array(c.path, name)
                if a.ndim != b.ndim or a.shape[1:] != b.shape[1:]:
                    out[name] = {"rows": 0, "equal": False}
                    continue
                k = min(a.shape[0], b.shape[0])
                out[name] = {"rows": int(k), "equal": bool(np.array_equal(a[:k], b[:k]))}
            return out

        return self._cached(self._key("rows", p.key, c.key, *names), compute)

    # -- adapters
    def adapter_merged(self, adapter: CheckpointPrint, base: CheckpointPrint,
                       others: Sequence[CheckpointPrint]) -> str | None:
        """The path of a checkpoint equal to ``base`` + scale * B @ A on every target (and to
        ``base`` elsewhere), or None."""
        from inspector.lineage_evidence import base_weight, compare, fan_in_fan_out, lora_pairs

        pairs = lora_pairs(adapter)
        targets = {}
        for module in pairs:
            w = base_weight(base, module)
            if w is None:
                return None
            targets[module] = w.name
        info = adapter.info.get("adapter") or {}
        r = info.get("r") or next(iter(pairs.values()))[0].shape[0]
        alpha = info.get("lora_alpha") or r
        scale = alpha / math.sqrt(r) if info.get("use_rslora") else alpha / r
        for m in others:
            if m is base:
                continue
            ev = compare(base, m)
            if set(ev.changed) != set(targets.values()) or ev.unrelated or ev.reshaped:
                continue
            key = self._key("merged", adapter.key, base.key, m.key)

            def compute(m: CheckpointPrint = m) -> bool:
                for module, (la, lb) in pairs.items():
                    name = targets[module]
                    delta = self.array(m.path, name) - self.array(base.path, name)
                    ba = scale * (self.array(adapter.path, lb.name)
                                  @ self.array(adapter.path, la.name))
                    if fan_in_fan_out(adapter):
                        ba = ba.T
                    den = np.linalg.norm(ba) or 1.0
                    if np.linalg.norm(delta - ba) / den > 1e-3:
                        return False
                return True

            if self._cached(key, compute):
                return m.path
        return None


# CTranslate2's integer weights, compared dequantized by their scales (ModelSpec._quantize):
# int8 rounds x * 127 / max|row| (each value within max|row| / 254), int16 x * 2**10 / max|x|
# (within max|x| / 2048); as ggml's q8_0 (blocks of 32: finer), a relative L2 error of 2%
# bounds both for any tensor whose largest value is within ~9x its root mean square
INT_NOISE = {"int8": 0.02, "int16": 0.02}


def _conversion_noise(dtype: str | None) -> float:
    from inspector.lineage_evidence import QUANT_NOISE, ROUNDOFF

    d = (dtype or "").lower()
    if d in ROUNDOFF:
        return max(4 * ROUNDOFF[d], 1e-6)
    return QUANT_NOISE.get(d, INT_NOISE.get(d, 0.0))
