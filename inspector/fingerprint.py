"""Fingerprints of a checkpoint's tensors, for ``inspector lineage`` and ``inventory``.

Each tensor gets, in one pass over its values (:func:`inspector.values.iter_values`):

* ``digest``: BLAKE2b-128 of its stored values (dtype, shape and the bytes as stored, in C
  order), so two tensors with equal digests hold the very same values;
* ``samples``: its values (as float64) at :data:`SAMPLES` positions that depend only on its
  element count (:func:`positions`). Two tensors of one shape are sampled at the same places in
  every checkpoint, so the samples survive a dtype cast or a quantization (they move by the
  rounding) and show a fine-tune's drift, while two independently initialised tensors give
  uncorrelated samples.

A quantized Hugging Face checkpoint's packed weights also get a print each, as the float weight
they stand for (``CheckpointPrint.dequantized``: :func:`dequantized_prints`), with each sample's
noise, so lineage compares them with another storage of the layer.

A tensor is *informative* when its samples could only match by descent: a floating-point
tensor of at least :data:`MIN_NUMEL` elements whose samples take at least
:data:`MIN_DISTINCT` values (a norm initialised to ones, a zero bias, a 0/1 mask are identical
across unrelated models and are no evidence).

:class:`CheckpointPrint` holds one checkpoint's fingerprints and the metadata lineage needs
(format, names, shapes, dtypes, training step, declared base). :class:`Cache` keeps them per
file (path, size and modification time of every file the checkpoint reads, or a remote etag),
so a second run over unchanged files reads no tensor bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inspector.adapters.model import Checkpoint, TensorEntry

SCHEMA = "inspector.fingerprint/4"
SAMPLES = 128
MIN_NUMEL = 64
MIN_DISTINCT = 16
FLOAT_DTYPES_PREFIX = ("float", "bfloat", "q", "iq", "tq", "mxfp", "nvfp", "f8", "complex")
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 of each element (plain integer arithmetic: the same on every platform)."""
    with np.errstate(over="ignore"):
        z = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return z ^ (z >> np.uint64(31))


def positions(numel: int, k: int = SAMPLES) -> np.ndarray:
    """The sorted element indices sampled from a tensor of ``numel`` elements: every index when
    there are at most ``k``, else ``k`` distinct pseudo-random ones seeded by ``numel``."""
    if numel <= k:
        return np.arange(numel, dtype=np.int64)
    seed = _splitmix64(np.array([numel], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        picks = _splitmix64(np.arange(4 * k, dtype=np.uint64) + seed) % np.uint64(numel)
    _, first = np.unique(picks, return_index=True)
    chosen = picks[np.sort(first)][:k]
    return np.sort(chosen.astype(np.int64))


def is_float(dtype: str | None) -> bool:
    return bool(dtype) and str(dtype).startswith(FLOAT_DTYPES_PREFIX) and "int" not in str(dtype)


class TensorPrint:
    """One tensor's fingerprint (see the module docstring)."""

    __slots__ = ("name", "shape", "dtype", "role", "numel", "digest", "samples", "noise",
                 "spread")

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str | None, role: str,
                 numel: int, digest: str, samples: np.ndarray,
                 noise: np.ndarray | None = None, spread: bool = False) -> None:
        self.name, self.shape, self.dtype, self.role = name, shape, dtype, role
        self.numel, self.digest, self.samples = numel, digest, samples
        # a dequantized weight (:func:`dequantized_prints`): each sample's noise, half a
        # quantization step and the producer's roundings; ``spread``: judged by their root mean
        # square, not one by one (GPTQ)
        self.noise, self.spread = noise, spread

    @property
    def informative(self) -> bool:
        # a parameter, or a tensor whose role the format does not say (a bare state dict
        # consolidated from a distributed save); never optimizer state or a buffer
        if not is_float(self.dtype) or self.numel < MIN_NUMEL \
                or self.role not in ("parameter", "other"):
            return False
        s = self.samples[np.isfinite(self.samples)]
        return len(np.unique(s)) >= MIN_DISTINCT

    def __repr__(self) -> str:
        return f"TensorPrint({self.name!r}, {self.shape}, {self.dtype}, {self.digest[:8]})"


def tensor_print(ckpt: Checkpoint, entry: TensorEntry) -> TensorPrint:
    """The fingerprint of one tensor, from one pass over its stored values."""
    from inspector.values import iter_values, widen

    where = positions(entry.numel)
    samples = np.full(len(where), np.nan)
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{entry.dtype}|{','.join(map(str, entry.shape))}|".encode())
    start = 0
    for raw in iter_values(ckpt, entry, stored=True):
        chunk = np.ascontiguousarray(raw)
        h.update(memoryview(chunk).cast("B"))
        end = start + chunk.size
        lo, hi = np.searchsorted(where, [start, end])
        if hi > lo:
            x = widen(chunk, entry.dtype or "")
            picked = x.reshape(-1)[where[lo:hi] - start]
            with np.errstate(invalid="ignore"):  # a NaN cast in (fingerprints keep NaNs)
                samples[lo:hi] = picked.real if np.iscomplexobj(picked) else picked
        start = end
    return TensorPrint(entry.name, tuple(entry.shape), entry.dtype, str(entry.role),
                       entry.numel, h.hexdigest(), samples)


class CheckpointPrint:
    """A checkpoint's fingerprints (name -> :class:`TensorPrint`, in stored order) and what
    lineage reads about it: ``info`` holds ``format``, ``path``, ``step`` (a training step the
    checkpoint records), ``run`` (the directory of the run it belongs to), ``declared`` (the
    base it names: PEFT ``base_model_name_or_path``, a model card's ``base_model``), ``adapter``
    (PEFT ``r``, ``target_modules``, ``lora_alpha`` for an adapter), ``unreadable`` (tensors
    whose values could not be read, with why)."""

    __slots__ = ("key", "info", "tensors", "dequantized")

    def __init__(self, key: str, info: dict[str, Any], tensors: dict[str, TensorPrint],
                 dequantized: dict[str, TensorPrint] | None = None) -> None:
        self.key, self.info, self.tensors = key, info, tensors
        # a quantized checkpoint's packed weights dequantized, by the float weight's name
        self.dequantized = dequantized or {}

    @property
    def path(self) -> str:
        return str(self.info["path"])

    @property
    def format(self) -> str:
        return str(self.info.get("format"))

    def informative(self) -> dict[str, TensorPrint]:
        return {n: t for n, t in self.tensors.items() if t.informative}

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The fingerprint as plain arrays (an ``.npz`` of the cache, no pickle)."""
        ts = list(self.tensors.values())
        width = max((len(t.samples) for t in ts), default=0)
        samples = np.full((len(ts), width), np.nan)
        for i, t in enumerate(ts):
            samples[i, : len(t.samples)] = t.samples
        meta = {
            "schema": SCHEMA, "key": self.key, "info": self.info,
            "tensors": [[t.name, list(t.shape), t.dtype, t.role, t.numel, t.digest,
                         len(t.samples)] for t in ts],
        }
        dq = list(self.dequantized.values())
        dwidth = max((len(t.samples) for t in dq), default=0)
        dq_samples, dq_noise = np.full((len(dq), dwidth), np.nan), np.full((len(dq), dwidth),
                                                                            np.nan)
        for i, t in enumerate(dq):
            dq_samples[i, : len(t.samples)] = t.samples
            if t.noise is not None:
                dq_noise[i, : len(t.noise)] = t.noise
        meta["dequantized"] = [[t.name, list(t.shape), t.dtype, t.numel, len(t.samples),
                                t.spread] for t in dq]
        return {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
                "samples": samples, "dq_samples": dq_samples, "dq_noise": dq_noise}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> CheckpointPrint:
        meta = json.loads(bytes(arrays["meta"]).decode())
        if meta.get("schema") != SCHEMA:
            raise ValueError("another fingerprint schema")
        samples = arrays["samples"]
        tensors = {}
        for i, (name, shape, dtype, role, numel, digest, k) in enumerate(meta["tensors"]):
            tensors[name] = TensorPrint(name, tuple(shape), dtype, role, numel, digest,
                                        samples[i, :k].copy())
        dequantized = {}
        for i, (name, shape, kind, numel, k, spread) in enumerate(meta.get("dequantized", ())):
            dequantized[name] = TensorPrint(name, tuple(shape), kind, "parameter", numel, "",
                                            arrays["dq_samples"][i, :k].copy(),
                                            arrays["dq_noise"][i, :k].copy(), bool(spread))
        return cls(meta["key"], meta["info"], tensors, dequantized)


def dequantized_rows(fp: CheckpointPrint) -> list[dict[str, Any]]:
    """A checkpoint's dequantized prints as JSON-ready rows (the inventory keeps them in the
    checkpoint's ``info``); NaN as None."""
    def num(xs: np.ndarray) -> list[float | None]:
        return [float(x) if np.isfinite(x) else None for x in xs]

    return [{"name": t.name, "shape": list(t.shape), "kind": t.dtype, "numel": t.numel,
             "spread": t.spread, "samples": num(t.samples),
             "noise": num(t.noise if t.noise is not None else np.full(len(t.samples), np.nan))}
            for t in fp.dequantized.values()]


def dequantized_from_rows(rows: Any) -> dict[str, TensorPrint]:
    """The prints :func:`dequantized_rows` wrote."""
    out = {}
    for r in rows or ():
        def arr(xs: Any) -> np.ndarray:
            return np.array([np.nan if x is None else x for x in xs], dtype=float)

        out[r["name"]] = TensorPrint(r["name"], tuple(r["shape"]), r["kind"], "parameter",
                                     int(r["numel"]), "", arr(r["samples"]), arr(r["noise"]),
                                     bool(r["spread"]))
    return out


def file_key(ckpt: Checkpoint) -> str:
    """What identifies the checkpoint's bytes without reading them: the path and, for every
    file it is read from (a directory: each file in it and its sub-directories, bounded), its
    size and modification time in nanoseconds; a remote object: its size (and etag when the
    store gives one)."""
    h = hashlib.sha256(SCHEMA.encode())
    src = ckpt.source
    h.update(str(ckpt.path).encode())
    local = src.local_path if src is not None else None
    if local is not None:
        for p in _files(Path(local)):
            st = p.stat()
            h.update(f"|{p}|{st.st_size}|{st.st_mtime_ns}".encode())
    elif src is not None:
        size = 0 if src.is_dir() else src.size
        h.update(f"|{src.where}|{size() if callable(size) else size}".encode())
        etag = getattr(src, "etag", None)
        if etag:
            h.update(str(etag).encode())
    return h.hexdigest()


def _files(root: Path, limit: int = 10_000) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            count += 1
            if count > limit:
                return
            yield Path(dirpath) / f


def _side_json(ckpt: Checkpoint, name: str, limit: int = 1 << 20) -> dict[str, Any] | None:
    """A small JSON file beside the checkpoint (in its directory, or beside its file)."""
    src = ckpt.source
    if src is None:
        return None
    try:
        d = src if src.is_dir() else src.parent_dir()
        f = d.child(name)
        if not f.exists() or f.is_dir():
            return None
        data = json.loads(f.read_text(limit))
    except Exception:  # noqa: BLE001 - a missing or unreadable side file says nothing
        return None
    return data if isinstance(data, dict) else None


def quantization(ckpt: Checkpoint) -> dict[str, Any] | None:
    """A quantized Hugging Face checkpoint's scheme (``label``, ``unknown`` when it is not
    modelled) and its quantized modules (each stores a packed weight and the scheme's state
    instead of a float weight); None for any other checkpoint."""
    from inspector.adapters.quant_config import hf_config

    config = hf_config(ckpt)
    q = config.get("quantization_config") if config else None
    if not isinstance(q, dict):
        return None
    from inspector.adapters.quantized import OPTION_ERRORS, packed_weights, scheme

    sch = scheme(q, config)
    modules: list[str] = []
    if sch.unknown is None:
        try:
            modules = sorted(packed_weights((t.name for t in ckpt.tensors), sch))
        except OPTION_ERRORS as e:
            sch.unknown = f"options not understood ({e})"
    return {"label": sch.label, "unknown": sch.unknown, "modules": modules}


def describe(ckpt: Checkpoint) -> dict[str, Any]:
    """The checkpoint facts lineage reads (no tensor bytes)."""
    info: dict[str, Any] = {"path": ckpt.path, "format": ckpt.format}
    files = {t.file for t in ckpt.values() if t.file}
    if len(files) > 1:
        info["shards"] = len(files)
    state = _side_json(ckpt, "trainer_state.json")
    if state and isinstance(state.get("global_step"), int):
        info["step"] = state["global_step"]
        src = ckpt.source
        if src is not None:
            d = src if src.is_dir() else src.parent_dir()
            info["run"] = d.parent_dir().where
    src = ckpt.source
    if "step" not in info and src is not None and not src.is_dir():
        # Sockeye numbers the checkpoints of one run params.00001, params.00002, ...
        # (its C.PARAMS_NAME, "params.%05d")
        m = re.fullmatch(r"params\.(\d{5,})", src.where.replace("\\", "/").rsplit("/", 1)[-1])
        if m:
            info["step"] = int(m.group(1))
            info["run"] = src.parent_dir().where
    args = (ckpt.hyperparameters or {}).get("args") if ckpt.format == "sockeye" else None
    if isinstance(args, dict) and "params" in args and args["params"] is None:
        # Sockeye's own record of the run (args.yaml): initialised from its seed, not from
        # another model's parameters (``--params``)
        info["from_scratch"] = True
        if src is not None and "run" not in info:
            info["run"] = (src if src.is_dir() else src.parent_dir()).where
    quantized = quantization(ckpt)
    if quantized:
        info["quantized"] = quantized
    config = (ckpt.hyperparameters or {}).get("config")
    if isinstance(config, dict) and config.get("peft_type"):
        info["adapter"] = {k: config.get(k) for k in
                           ("peft_type", "r", "lora_alpha", "target_modules",
                            "base_model_name_or_path", "use_rslora", "fan_in_fan_out")}
        if config.get("base_model_name_or_path"):
            info["declared"] = str(config["base_model_name_or_path"])
    return info


def fingerprint(ckpt: Checkpoint, key: str | None = None) -> CheckpointPrint:
    """Every tensor's fingerprint (a tensor whose values cannot be read is named in
    ``info["unreadable"]`` and left out)."""
    from inspector.values import ValuesUnavailable

    info = describe(ckpt)
    tensors: dict[str, TensorPrint] = {}
    unreadable: dict[str, str] = {}
    for entry in ckpt.values():
        try:
            tensors[entry.name] = tensor_print(ckpt, entry)
        except ValuesUnavailable as e:
            unreadable[entry.name] = e.why
    if unreadable:
        info["unreadable"] = unreadable
    dequantized: dict[str, TensorPrint] = {}
    if info.get("quantized") and not info["quantized"].get("unknown"):
        dequantized, aside = dequantized_prints(ckpt)
        if aside:
            info["quantized"]["not_dequantized"] = aside
    return CheckpointPrint(key or file_key(ckpt), info, tensors, dequantized)


def dequantized_prints(ckpt: Checkpoint) -> tuple[dict[str, TensorPrint], dict[str, str]]:
    """The fingerprints of a quantized checkpoint's packed weights as the float weights they
    stand for (:mod:`inspector.quant_values`): named and shaped as the unquantized model
    stores them (``<module>.weight``; (in, out) for Conv1D models), sampled at the same
    positions as a float tensor of that shape, with each sample's noise. Only the sampled
    elements are dequantized. Also the modules set aside, with why."""
    from inspector.quant_values import conv1d, layers
    from inspector.values import ValuesUnavailable

    got, aside = layers(ckpt)
    transposed = conv1d(ckpt)
    out: dict[str, TensorPrint] = {}
    for module, layer in got.items():
        if layer.rescaled:
            aside[module] = layer.rescaled
            continue
        o, i = layer.shape
        where = positions(o * i)
        flat = (where % o) * i + where // o if transposed else where
        try:
            values, noise = layer.values(flat)
        except (ValuesUnavailable, ArithmeticError, IndexError, KeyError, TypeError,
                ValueError, OSError) as e:
            aside[module] = f"its packed values could not be read ({e})"
            continue
        name = f"{module}.weight"
        out[name] = TensorPrint(name, (i, o) if transposed else (o, i), layer.kind, "parameter",
                                o * i, "", values, noise, layer.spread)
    return out, aside


class Cache:
    """Fingerprints kept per checkpoint in ``directory`` (``<key>.npz``), written atomically."""

    def __init__(self, directory: str | Path | None) -> None:
        self.dir = Path(directory) if directory else None
        self.hits = self.misses = 0

    @staticmethod
    def default_dir() -> Path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        return Path(base) / "inspector" / "fingerprints"

    def get(self, key: str) -> CheckpointPrint | None:
        if self.dir is None:
            return None
        p = self.dir / f"{key}.npz"
        try:
            with np.load(p, allow_pickle=False) as z:
                got = CheckpointPrint.from_arrays(z)
        except (OSError, ValueError, KeyError):
            return None
        self.hits += 1
        return got

    def put(self, fp: CheckpointPrint) -> None:
        if self.dir is None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{fp.key}.{os.getpid()}.tmp.npz"
        np.savez(tmp, **fp.to_arrays())
        os.replace(tmp, self.dir / f"{fp.key}.npz")

    def get_json(self, key: str) -> Any:
        if self.dir is None:
            return None
        try:
            return json.loads((self.dir / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None

    def put_json(self, key: str, value: Any) -> None:
        if self.dir is None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(value))
        os.replace(tmp, self.dir / f"{key}.json")


def fingerprint_cached(ckpt: Checkpoint, cache: Cache) -> CheckpointPrint:
    """The checkpoint's fingerprint from ``cache`` when its files are unchanged, else computed
    (one value pass) and stored."""
    key = file_key(ckpt)
    got = cache.get(key)
    if got is not None:
        return got
    cache.misses += 1
    fp = fingerprint(ckpt, key)
    cache.put(fp)
    return fp
