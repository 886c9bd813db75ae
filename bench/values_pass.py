#!/usr/bin/env python3
"""Value passes against the read floor: ``stats`` and ``diff --values`` beside reading the bytes.

usage: python bench/values_pass.py [--quick] [--mib 1024] [--dir /tmp/values_bench]
       [--repeat 3] [--only float32,bfloat16,float16] [--json bench/out/values_pass.json]

Run it with the tool's venv (it imports ``inspector`` and numpy). Per dtype (float32, bfloat16,
float16) it writes two safetensors files A and B of ``--mib`` MiB (``--quick``: 256) with
tensors of 64 MiB, so that one tensor is many chunks; B is A plus a small change in every tensor
(a fine-tune). The files are written here with numpy in the safetensors layout (8-byte header
length, JSON header, little-endian data), once, and kept in ``--dir``.

The floor is the machine's single-read bandwidth: the same file read once from the page cache
into a 1 MiB buffer (``readinto``, as ``cat`` does), on one thread. ``stats`` is
``inspector.value_stats.file_stats(A)``; ``diff --values`` is ``inspector.diffing.diff(A, B,
values=True)``, whose floor is reading A and B. Every timing is the fastest of ``--repeat`` runs
after one warm-up run (which also fills the page cache), the floor's runs and the pass's
alternating, so that other load on the machine counts as little and as evenly as it can; CPU
time (user + system of every thread) is shown beside the wall time, with the load average.

Output: one line per row, the ratio first (the pass's bandwidth as a fraction of the floor's,
target >= 0.50 for float32 and >= 0.35 for bfloat16 and float16), and
``bench/out/values_pass.json`` (rows: name, ours_s, floor_s, ratio, target, met, gbps, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from pathlib import Path

DTYPES = ("float32", "bfloat16", "float16")
TARGETS = {"float32": 0.50, "bfloat16": 0.35, "float16": 0.35}
CODES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}
TENSOR_MIB = 64
HERE = Path(__file__).resolve().parent


def write(path: Path, dtype: str, mib: int, side: str) -> None:
    """A safetensors file of ``mib`` MiB of ``dtype``: tensors of TENSOR_MIB MiB, values
    N(0, 0.02); side "b" adds a change of about 1e-3 to every tensor."""
    import numpy as np

    item = 4 if dtype == "float32" else 2
    count = max(1, mib // TENSOR_MIB)
    elems = min(mib, TENSOR_MIB) * (1 << 20) // item
    header, offset = {}, 0
    for i in range(count):
        header[f"layers.{i}.weight"] = {"dtype": CODES[dtype], "shape": [elems // 1024, 1024],
                                        "data_offsets": [offset, offset + elems * item]}
        offset += elems * item
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(0)
    block = rng.standard_normal(1 << 22, dtype=np.float32) * np.float32(0.02)
    noise = rng.standard_normal(1 << 22, dtype=np.float32) * np.float32(1e-3)
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for i in range(count):
            x = np.resize(block * np.float32(1 + i / 64), elems)
            if side == "b":
                x += np.resize(noise, elems)
            if dtype == "bfloat16":  # round to nearest even, as torch does
                u = x.view(np.uint32)
                x = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            elif dtype == "float16":
                x = x.astype(np.float16)
            f.write(x.tobytes())
    os.replace(tmp, path)


def files(directory: Path, mib: int, dtypes: list[str]) -> dict[str, tuple[Path, Path]]:
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for dt in dtypes:
        pair = tuple(directory / f"{dt}.{mib}MiB.{side}.safetensors" for side in "ab")
        for side, path in zip("ab", pair, strict=True):
            if not path.exists():
                print(f"writing {path}", file=sys.stderr, flush=True)
                write(path, dt, mib, side)
        out[dt] = pair
    return out


def read_floor(*paths: Path) -> None:
    """Each file read once from the page cache into one 1 MiB buffer."""
    buf = memoryview(bytearray(1 << 20))
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def tool_stats(path: Path) -> None:
    from inspector import value_stats as stats

    stats.file_stats(str(path))


def tool_diff(a: Path, b: Path) -> None:
    from inspector.diffing import diff

    diff(str(a), str(b), values=True, groups=False)


def alternating(first, second, repeat: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """(wall, CPU) seconds of the fastest run of each of two ``(fn, *args)``, after a warm-up
    run of each, the timed runs alternating (first, second, first, ...) so that a change in the
    machine's load weighs on both alike."""
    best = [(float("inf"), float("inf"))] * 2
    for i in range(repeat + 1):
        for j, (fn, *args) in enumerate((first, second)):
            wall, cpu = time.perf_counter(), time.process_time()
            fn(*args)
            run = (time.perf_counter() - wall, time.process_time() - cpu)
            if i:  # the first round warms the page cache and the imports
                best[j] = min(best[j], run)
    return best[0], best[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="256 MiB files (default 1024)")
    ap.add_argument("--mib", type=int, default=None)
    ap.add_argument("--dir", default="/tmp/values_bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default=",".join(DTYPES))
    ap.add_argument("--json", default=str(HERE / "out" / "values_pass.json"))
    ap.add_argument("--torch-python", help=argparse.SUPPRESS)  # accepted, not needed any more
    args = ap.parse_args(argv)
    mib = args.mib or (256 if args.quick else 1024)
    dtypes = [d for d in args.only.split(",") if d]
    pairs = files(Path(args.dir), mib, dtypes)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cores = os.cpu_count() or 1
    rows = []
    for dt in dtypes:
        a, b = pairs[dt]
        cases = [("stats", (tool_stats, a), (a,)), ("diff --values", (tool_diff, a, b), (a, b))]
        for name, (fn, *fargs), read in cases:
            (floor_s, floor_cpu), (ours_s, ours_cpu) = alternating(
                (read_floor, *read), (fn, *fargs), args.repeat)
            nbytes = sum(p.stat().st_size for p in read)
            ratio = floor_s / ours_s
            row = {"name": f"{name} {dt} {mib} MiB", "ours_s": round(ours_s, 4),
                   "floor_s": round(floor_s, 4), "ratio": round(ratio, 3),
                   "target": TARGETS[dt], "met": ratio >= TARGETS[dt],
                   "gbps": round(nbytes / ours_s / 1e9, 3),
                   "floor_gbps": round(nbytes / floor_s / 1e9, 3),
                   "cpu_s": round(ours_cpu, 4), "floor_cpu_s": round(floor_cpu, 4),
                   # what the ratio would be with every core free: the floor's CPU time
                   # against the pass's CPU time shared by the cores (a load-free estimate)
                   "cpu_ratio": round(floor_cpu * cores / ours_cpu, 3),
                   "bytes": nbytes}
            rows.append(row)
            print(f"{ratio:.2f}x of the read floor (target >= {TARGETS[dt]:.2f}: "
                  f"{'met' if row['met'] else 'NOT met'})  {row['name']}: "
                  f"{row['gbps']:.2f} GB/s vs {row['floor_gbps']:.2f} GB/s read; "
                  f"CPU {ours_cpu:.2f} s in {ours_s:.2f} s wall, floor CPU {floor_cpu:.3f} s "
                  f"(CPU ratio x {cores} cores: {row['cpu_ratio']:.2f})", flush=True)
    end = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"values_pass: {cores} cores, load average {load:.1f} at start, {end:.1f} at the end; "
          f"fastest of {args.repeat} alternating runs after a warm-up; files in {args.dir}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cores": cores, "load_average": load, "mib": mib,
                               "repeat": args.repeat, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
