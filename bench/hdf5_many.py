"""Keras/HDF5 listing cost: ``inspector show`` against h5py's own traversals, same files.

Writes Keras-like HDF5 files with h5py (``--many`` small datasets in the Keras 3 ``.weights.h5``
layout and in the legacy ``model_weights`` layout; with ``--gb`` also a few-big-datasets legacy
file), then times each way as a whole process (median of ``--runs``, alternating, peak RSS from
``wait4``) and prints a markdown table. Files are written to a temporary directory and removed.

    python bench/hdf5_many.py [--many 50000] [--gb 1] [--runs 5] [--keep DIR]

Ways: ``inspector`` (``inspector show --format json FILE``), ``h5o-names`` (``h5py.h5o.visit``,
names only), ``h5o-shape`` (``h5o.visit`` + ``h5d.open``, shape and dtype: the issue's
"low-level traversal"), ``visititems`` (``File.visititems``, shape and dtype).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# Keras splits a list attribute over 64,512 bytes into name0, name1, ... (HDF5_OBJECT_HEADER_LIMIT
# in keras/src/legacy/saving/legacy_h5_format.py save_attributes_to_hdf5_group).
HEADER_LIMIT = 64512
BIG_SHAPE = (8192, 8192)  # 256 MiB of float32 per dataset

WAYS = {
    "h5o-names": """
import h5py, sys
fid = h5py.h5f.open(sys.argv[1].encode(), h5py.h5f.ACC_RDONLY)
out = []
h5py.h5o.visit(fid, lambda n, i: out.append(n) if i.type == h5py.h5o.TYPE_DATASET else None,
               info=True)
print(len(out))
""",
    "h5o-shape": """
import h5py, sys
fid = h5py.h5f.open(sys.argv[1].encode(), h5py.h5f.ACC_RDONLY)
out = {}
def visit(name, info):
    if info.type == h5py.h5o.TYPE_DATASET:
        d = h5py.h5d.open(fid, name)
        out[name] = (d.shape, d.dtype)
h5py.h5o.visit(fid, visit, info=True)
print(len(out))
""",
    "visititems": """
import h5py, sys
out = {}
def visit(name, obj):
    if isinstance(obj, h5py.Dataset):
        out[name] = (obj.shape, obj.dtype)
with h5py.File(sys.argv[1], "r") as f:
    f.visititems(visit)
print(len(out))
""",
}


def _attr_list(group, name: str, values: list[str]) -> None:
    """Keras' save_attributes_to_hdf5_group: one attribute, or chunks name0, name1, ..."""
    import numpy as np

    data = np.array([v.encode() for v in values])
    chunks = 1
    while data.nbytes / chunks > HEADER_LIMIT:
        chunks += 1
    parts = np.array_split(data, chunks)
    if chunks == 1:
        group.attrs[name] = parts[0]
    else:
        for i, part in enumerate(parts):
            group.attrs[f"{name}{i}"] = part


def write_v3(path: str, count: int) -> None:
    """Keras 3 ``save_weights('x.weights.h5')`` of a Sequential of Dense layers:
    ``layers/dense_<i>/vars/{0,1}`` (kernel, bias), each ``vars`` group naming its layer."""
    import h5py
    import numpy as np

    kernel, bias = np.zeros((4, 4), "float32"), np.zeros((4,), "float32")
    with h5py.File(path, "w") as f:
        f.create_group("vars").attrs["name"] = "sequential"
        layers = f.create_group("layers")
        for i in range(count // 2):
            key = "dense" if i == 0 else f"dense_{i}"
            v = layers.create_group(key).create_group("vars")
            v.attrs["name"] = key
            v["0"], v["1"] = kernel, bias


def write_legacy(path: str, count: int) -> None:
    """Keras 2 ``model.save('x.h5')`` weights part: ``model_weights/<layer>/<layer>/kernel:0``
    with ``layer_names`` / ``weight_names`` attributes (split as Keras splits them)."""
    import h5py
    import numpy as np

    kernel, bias = np.zeros((4, 4), "float32"), np.zeros((4,), "float32")
    names = ["dense" if i == 0 else f"dense_{i}" for i in range(count // 2)]
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["backend"] = "tensorflow"
        mw = f.create_group("model_weights")
        mw.attrs["keras_version"] = "2.15.0"
        mw.attrs["backend"] = "tensorflow"
        _attr_list(mw, "layer_names", names)
        for n in names:
            g = mw.create_group(n)
            _attr_list(g, "weight_names", [f"{n}/kernel:0", f"{n}/bias:0"])
            inner = g.create_group(n)
            inner["kernel:0"], inner["bias:0"] = kernel, bias


def write_big(path: str, gb: float) -> None:
    """A few 256 MiB contiguous datasets in the legacy ``save_weights`` layout."""
    import h5py
    import numpy as np

    count = max(1, round(gb * 4))
    data = np.zeros(BIG_SHAPE, "float32")
    names = [f"dense_{i}" for i in range(count)]
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["backend"] = "tensorflow"
        _attr_list(f, "layer_names", names)
        for n in names:
            g = f.create_group(n)
            _attr_list(g, "weight_names", [f"{n}/kernel:0"])
            g.create_group(n)["kernel:0"] = data


def _inspector() -> list[str]:
    exe = shutil.which("inspector", path=os.path.dirname(sys.executable)) or shutil.which(
        "inspector"
    )
    return [exe] if exe else [sys.executable, "-m", "inspector"]


def run_once(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{argv[:3]} failed: {proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return wall, usage.ru_maxrss * 1024


def time_ways(path: str, ways: list[str], runs: int) -> dict[str, tuple[float, int]]:
    argvs = {w: [sys.executable, "-c", WAYS[w], path] for w in ways if w in WAYS}
    if "inspector" in ways:
        argvs["inspector"] = [*_inspector(), "show", "--format", "json", path]
    for argv in argvs.values():  # warm the page cache
        run_once(argv)
    got: dict[str, list[tuple[float, int]]] = {w: [] for w in argvs}
    for _ in range(runs):
        for w, argv in argvs.items():
            got[w].append(run_once(argv))
    return {w: (statistics.median(t for t, _ in r), max(m for _, m in r)) for w, r in got.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--many", type=int, default=50_000, help="datasets in the small files")
    p.add_argument("--gb", type=float, default=1.0, help="size of the big file (0: none)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--ways", default="inspector,h5o-names,h5o-shape,visititems")
    p.add_argument("--keep", help="write the files here and keep them (reused when present)")
    a = p.parse_args()
    ways = a.ways.split(",")
    out = a.keep or tempfile.mkdtemp(prefix="hdf5_many.")
    os.makedirs(out, exist_ok=True)
    files = {
        f"keras3 {a.many}": (os.path.join(out, f"many{a.many}.weights.h5"), write_v3, a.many),
        f"legacy {a.many}": (os.path.join(out, f"many{a.many}.legacy.h5"), write_legacy, a.many),
    }
    if a.gb:
        files[f"big {a.gb:g} GB"] = (os.path.join(out, f"big{a.gb:g}.h5"), write_big, a.gb)
    try:
        rows = []
        for case, (path, write, n) in files.items():
            if not os.path.exists(path):
                write(path, n)
            res = time_ways(path, ways, a.runs)
            rows.append((case, res))
        floor = "h5o-shape"
        print(f"| file | {' | '.join(ways)} | inspector / {floor} |")
        print(f"|---|{'---|' * len(ways)}---|")
        for case, res in rows:
            cells = [f"{res[w][0]:.3f} s, {res[w][1] >> 20} MB" for w in ways if w in res]
            ratio = (
                f"{res['inspector'][0] / res[floor][0]:.2f}×"
                if "inspector" in res and floor in res
                else "–"
            )
            print(f"| {case} | {' | '.join(cells)} | {ratio} |")
    finally:
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
