#!/usr/bin/env python3
"""When does ``stats --dask`` pay? Shard sizes x cluster sizes x storage, against the
single-process pass.

usage: python bench/dask_pass.py [--mib 256] [--shards 2,8,32] [--workers 1,2]
       [--storage local,s3] [--dir /tmp/dask_bench] [--repeat 2]
       [--torch-python /work/venvs/hf14/bin/python]

Run it with the tool's venv and the ``dask`` and ``test`` extras (distributed, moto, s3fs). The
checkpoints are written once by torch + safetensors in their own venv (``--torch-python``):
for each shard count, a sharded safetensors checkpoint of about ``--mib`` MiB of float32
(``model-0000k-of-0000n.safetensors`` + ``model.safetensors.index.json``, as transformers
writes them), tensors of 4 MiB.

Each checkpoint is read from the local disk (warm page cache) and from moto's S3 server (a
separate process on 127.0.0.1, ``tests/remote_servers.py``), by

* ``single``: ``inspector stats PATH`` (threads over tensors, one process), and the same with
  ``--threads 1``;
* ``dask N``: ``inspector stats PATH --dask tcp://...`` against a LocalCluster of N worker
  processes (1 thread each) started beforehand (the cluster's start-up, about 1-2 s, is not
  counted; ``--dask local`` pays it on every run).

Each time is the best of ``--repeat`` runs of the whole command (a Python start-up, about
0.3 s, included in all). The result table is printed as Markdown; the JSON outputs of every run
must equal the single pass's (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TENSOR_MIB = 4

WRITE = r"""
import json, sys, torch
from safetensors.torch import save_file
out, mib, shards, tensor_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
n = max(1, mib // tensor_mib)
per = -(-n // shards)
rows = tensor_mib * (1 << 20) // 4 // 1024
weight_map, k = {}, 0
for s in range(shards):
    name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
    tensors = {}
    for _ in range(per):
        if k == n:
            break
        tensors[f"model.layers.{k}.weight"] = torch.randn(rows, 1024) * (0.02 + k * 1e-4)
        weight_map[f"model.layers.{k}.weight"] = name
        k += 1
    save_file(tensors, f"{out}/{name}", metadata={"format": "pt"})
json.dump({"metadata": {"total_size": n * tensor_mib << 20}, "weight_map": weight_map},
          open(f"{out}/model.safetensors.index.json", "w"))
"""


def write(root: Path, mib: int, shards: int, torch_python: str) -> Path:
    d = root / f"{mib}mib_{shards}shards"
    if not (d / "model.safetensors.index.json").exists():
        d.mkdir(parents=True, exist_ok=True)
        subprocess.run([torch_python, "-c", WRITE, str(d), str(mib), str(shards),
                        str(TENSOR_MIB)], check=True)
    return d


def start_moto(root: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests/remote_servers.py"), "s3",
                             str(root), "bench"], stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    env_line = proc.stdout.readline().split()
    env = dict(kv.split("=", 1) for kv in env_line)
    proc.stdout.readline()  # the endpoint

    def drain() -> None:  # the server prints every request: keep its pipe from filling
        for _ in proc.stdout:  # type: ignore[union-attr]
            pass

    import threading

    threading.Thread(target=drain, daemon=True).start()
    return proc, env


def timed(args: list[str], env: dict[str, str], repeat: int) -> tuple[float, dict]:
    best, doc = float("inf"), {}
    for _ in range(repeat):
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "inspector", "stats", *args, "--format",
                            "json"], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, **env})
        dt = time.perf_counter() - t
        if p.returncode not in (0, 1):
            raise SystemExit(f"{args}: {p.stderr}")
        best, doc = min(best, dt), json.loads(p.stdout)
    return best, doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--shards", default="2,8,32")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--dir", default="/tmp/dask_bench")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--storage", default="local,s3", help="local, s3 (moto) or both")
    ap.add_argument("--torch-python", default="/work/venvs/hf14/bin/python")
    a = ap.parse_args()
    from distributed import LocalCluster

    root = Path(a.dir)
    shard_counts = [int(x) for x in a.shards.split(",")]
    worker_counts = [int(x) for x in a.workers.split(",")]
    dirs = {n: write(root, a.mib, n, a.torch_python) for n in shard_counts}
    storages = a.storage.split(",")
    moto, s3_env = start_moto(root) if "s3" in storages else (None, {})
    rows = []
    try:
        os.environ.update(s3_env)  # the workers find the endpoint as a real worker would
        clusters = {}
        for w in worker_counts:
            clusters[w] = LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
        for n in shard_counts:
            d = dirs[n]
            for storage, target, env in (("local", str(d), {}),
                                         ("moto S3", f"s3://bench/{d.name}/", s3_env)):
                if storage.split()[-1].lower() not in storages:
                    continue
                base, ref = timed([target], env, a.repeat)
                one, _ = timed([target, "--threads", "1"], env, a.repeat)
                row = {"shards": n, "shard_mib": a.mib / n, "storage": storage,
                       "single": base, "single1": one}
                for w, c in clusters.items():
                    t, doc = timed([target, "--dask", c.scheduler_address], env, a.repeat)
                    assert doc["tensors"] == ref["tensors"], "results differ"
                    row[f"dask{w}"] = t
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        for c in clusters.values():
            c.close()
    finally:
        if moto is not None:
            moto.terminate()
            moto.wait()
    heads = ["shards x MiB", "storage", "single", "single --threads 1",
             *(f"dask {w} worker(s)" for w in worker_counts)]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for r in rows:
        cells = [f"{r['shards']} x {r['shard_mib']:g}", r["storage"], f"{r['single']:.2f} s",
                 f"{r['single1']:.2f} s"]
        for w in worker_counts:
            t = r[f"dask{w}"]
            cells.append(f"{t:.2f} s ({r['single'] / t:.2f}x)")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
