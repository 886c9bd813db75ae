#!/usr/bin/env python3
"""Value passes against a numpy floor: ``inspector stats`` and ``diff --values``, warm cache.

usage: python bench/values_pass.py [--mib 256] [--dir /tmp/values_bench] [--repeat 3]
       [--torch-python /work/venvs/hf14/bin/python] [--only float32,bfloat16]

Run it with the tool's venv (it imports ``inspector``); the files are written once by torch in its
own venv (``--torch-python``): per dtype (float32, bfloat16, float16) and container (safetensors,
torch zip) two files A and B of about ``--mib`` MiB each, tensors of 32 MiB, B = A plus a small
change in every tensor (base vs fine-tune).

Floors, defined here, in this process, on the same files (offsets from the safetensors header or
the zip's local headers; bfloat16 widened to float32 by a shift, numpy having no bfloat16):

* stats: ``np.memmap`` per tensor, then the same reductions as ``stats``: NaN and Inf counts,
  min, max, mean, std, L2 (float64), zeros, subnormals, float16 overflows;
* diff: ``np.memmap`` per tensor, ``np.array_equal(a, b)`` and ``np.max(np.abs(a - b))``.

Each timing is the median of ``--repeat`` runs after one warm-up run; GB/s is bytes of the files
read (stats: A; diff: A and B) per second. Targets (issue 18/19): stats <= 2x its floor,
diff --values <= 1.2x its floor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time
import zipfile

DTYPES = ("float32", "bfloat16", "float16")
CONTAINERS = ("safetensors", "torch-zip")
TENSOR_MIB = 32

WRITE = r"""
import sys, torch, safetensors.torch
out, mib, dtype = sys.argv[1], int(sys.argv[2]), getattr(torch, sys.argv[3])
elems = 32 * (1 << 20) // torch.tensor([], dtype=dtype).element_size()
n = max(1, mib // 32)
g = torch.Generator().manual_seed(0)
a = {f"layers.{i}.weight": torch.randn(elems // 1024, 1024, generator=g).to(dtype)
     for i in range(n)}
b = {k: (v.float() + 1e-2 * torch.randn(v.shape, generator=g)).to(dtype) for k, v in a.items()}
for side, sd in (("a", a), ("b", b)):
    safetensors.torch.save_file(sd, f"{out}/{sys.argv[3]}.{side}.safetensors")
    torch.save(sd, f"{out}/{sys.argv[3]}.{side}.pt")
"""


def make(directory: str, mib: int, torch_python: str, dtypes: list[str]) -> None:
    os.makedirs(directory, exist_ok=True)
    for dt in dtypes:
        if all(os.path.exists(os.path.join(directory, f"{dt}.{s}.{e}"))
               for s in "ab" for e in ("pt", "safetensors")):
            continue
        print(f"writing {dt} files ({mib} MiB each) with {torch_python}", file=sys.stderr)
        subprocess.check_call([torch_python, "-c", WRITE, directory, str(mib), dt])


# ------------------------------------------------------------------------------------- floors
NP = {"float32": "<f4", "float16": "<f2", "bfloat16": "<u2"}
TINY = {"float32": 2.0**-126, "bfloat16": 2.0**-126, "float16": 2.0**-14}


def tensors(path: str, dtype: str) -> list[tuple[int, int]]:
    """(offset, element count) of every tensor, read the plain way."""
    item = 4 if dtype == "float32" else 2
    if path.endswith(".safetensors"):
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        return [(8 + n + h["data_offsets"][0], (h["data_offsets"][1] - h["data_offsets"][0])
                 // item) for h in header.values()]
    out = []
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            if "/data/" not in info.filename:
                continue
            f.seek(info.header_offset)
            local = f.read(30)
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            out.append((info.header_offset + 30 + name_len + extra_len, info.file_size // item))
    return out


def _array(np, path: str, dtype: str, offset: int, count: int):
    x = np.memmap(path, dtype=NP[dtype], mode="r", offset=offset, shape=(count,))
    if dtype == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x


def floor_stats(path: str, dtype: str) -> None:
    import numpy as np

    for offset, count in tensors(path, dtype):
        x = _array(np, path, dtype, offset, count)
        nan = int(np.isnan(x).sum())
        inf = int(np.isinf(x).sum())
        if nan or inf:
            x = x[np.isfinite(x)]
        x64 = x.astype(np.float64)
        _ = (x64.min(), x64.max(), x64.mean(), x64.std(), np.sqrt(np.dot(x64, x64)))
        zeros = int((x == 0).sum())
        a = np.abs(x)
        _ = (zeros, int(((a < TINY[dtype]) & (a > 0)).sum()),
             int((a >= 65520).sum()) if dtype != "float16" else 0)


def floor_diff(path_a: str, path_b: str, dtype: str) -> None:
    import numpy as np

    for (oa, n), (ob, _) in zip(tensors(path_a, dtype), tensors(path_b, dtype), strict=True):
        a = _array(np, path_a, dtype, oa, n)
        b = _array(np, path_b, dtype, ob, n)
        if not np.array_equal(a, b):
            float(np.max(np.abs(a - b)))


# ------------------------------------------------------------------------------------- the tool
def tool_stats(path: str) -> None:
    from inspector import value_stats as stats

    stats.file_stats(path)


def tool_diff(path_a: str, path_b: str) -> None:
    from inspector.diffing import diff

    diff(path_a, path_b, values=True, groups=False)


def timed(fn, *args, repeat: int) -> float:
    fn(*args)  # warm the page cache and the imports
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--dir", default="/tmp/values_bench")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch-python", default="/work/venvs/hf14/bin/python")
    ap.add_argument("--only", default=",".join(DTYPES))
    args = ap.parse_args(argv)
    dtypes = args.only.split(",")
    make(args.dir, args.mib, args.torch_python, dtypes)
    print("| pass | dtype | container | inspector | numpy floor | ratio | GB/s (inspector) |")
    print("|---|---|---|---|---|---|---|")
    for dt in dtypes:
        for container, ext in zip(CONTAINERS, ("safetensors", "pt"), strict=True):
            a = os.path.join(args.dir, f"{dt}.a.{ext}")
            b = os.path.join(args.dir, f"{dt}.b.{ext}")
            size_a, size_b = os.path.getsize(a), os.path.getsize(b)
            rows = [
                ("stats", timed(tool_stats, a, repeat=args.repeat),
                 timed(floor_stats, a, dt, repeat=args.repeat), size_a),
                ("diff --values", timed(tool_diff, a, b, repeat=args.repeat),
                 timed(floor_diff, a, b, dt, repeat=args.repeat), size_a + size_b),
            ]
            for name, tool, floor, nbytes in rows:
                print(f"| {name} | {dt} | {container} | {tool:.3f} s | {floor:.3f} s | "
                      f"{tool / floor:.2f}x | {nbytes / tool / 1e9:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
