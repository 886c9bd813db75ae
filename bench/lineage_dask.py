#!/usr/bin/env python3
"""``inspector inventory`` / ``lineage`` on a Dask cluster: speed-up from 1 to 2 workers and
peak memory per worker, against the single-process run.

usage: python bench/lineage_dask.py [--copies 20] [--repeat 1] [--quick] [--s3]

The store is ``--copies`` copies of fixtures/lineage/zoo (14 checkpoints, 50 files each, written
by transformers and peft) in a temporary directory, read from the local disk, or with ``--s3``
uploaded to a moto S3 server on 127.0.0.1 and read from there (by the client for the
single-process run, by each worker for the cluster runs). Each run is the
whole command, ``inspector lineage STORE --no-cache --format json`` (fingerprints: one value
pass per checkpoint) and ``inspector inventory STORE -o DB`` (fingerprint, statistics and scan
per checkpoint), without a cluster and against a LocalCluster of 1 and of 2 worker processes (1
thread each) started beforehand (its start-up is not counted). Peak memory per worker is the
largest resident set a worker reached (``distributed``'s own process metrics, sampled by the
worker process's own ``getrusage`` peak resident set, read at the end). The forests must be
equal (checked).

Prints one line per run, ratio first (speed-up over 1 worker), and writes
bench/out/lineage_dask.json (rows: name, ours_s, floor_s, ratio, rss_mib).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "fixtures" / "lineage" / "zoo"


def timed(cmd: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return time.perf_counter() - t, r.stdout


def edges(stdout: str) -> set:
    return {(e["parent"], e["child"], e["kind"]) for e in json.loads(stdout)["edges"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="5 copies")
    ap.add_argument("--s3", action="store_true", help="read the store from a moto S3 server")
    args = ap.parse_args()
    copies = 5 if args.quick else args.copies
    from distributed import Client, LocalCluster

    tmp = Path(tempfile.mkdtemp(prefix="lineage_bench_"))
    moto = None
    try:
        for k in range(copies):
            shutil.copytree(ZOO, tmp / f"copy{k:03d}")
        store = str(tmp)
        if args.s3:
            moto = _upload(tmp)
            store = "s3://bench/"
            os.environ.update(moto.env)  # the CLI and the cluster's workers read it
        objects = sum(1 for p in tmp.rglob("*") if p.is_file())
        print(f"{objects} objects in {store}")
        exe = [sys.executable, "-m", "inspector"]
        rows, forests = [], {}
        runs = [("single", None), ("dask 1", 1), ("dask 2", 2)]
        for verb in ("lineage", "inventory"):
            base = None
            for name, workers in runs:
                cluster = client = None
                extra: list[str] = []
                if workers:
                    cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                           processes=True, host="127.0.0.1",
                                           dashboard_address=None)
                    client = Client(cluster)
                    extra = ["--dask", cluster.scheduler_address]
                best, out = float("inf"), ""
                for _ in range(args.repeat):
                    db = tmp / f"db{time.monotonic_ns()}.duckdb"
                    cmd = exe + ([verb, store, "--no-cache", "--format", "json"]
                                 if verb == "lineage" else [verb, store, "-o", str(db)])
                    s, out = timed(cmd + extra)
                    best = min(best, s)
                rss = None
                if client is not None:
                    mem = client.run(_peak_rss)
                    rss = max(mem.values()) / (1 << 20)
                    client.close()
                    cluster.close()
                if verb == "lineage":
                    forests[name] = edges(out)
                if name == "dask 1":
                    base = best
                rows.append({"name": f"{verb} {copies * 14} checkpoints "
                                     f"({objects} objects{', S3' if args.s3 else ''}), {name}",
                             "ours_s": best, "floor_s": base, "rss_mib": rss})
        if len({frozenset(v) for v in forests.values()}) != 1:
            raise SystemExit("the forests differ between runs")
        for r in rows:
            r["ratio"] = (r["floor_s"] / r["ours_s"]) if r["floor_s"] else None
            ratio = f"{r['ratio']:.2f}x vs 1 worker" if r["ratio"] else "-"
            rss = f", worker peak {r['rss_mib']:.0f} MiB" if r["rss_mib"] else ""
            print(f"{ratio:>18}  {r['name']}: {r['ours_s']:.2f} s{rss}")
        out_dir = ROOT / "bench" / "out"
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "lineage_dask.json").write_text(json.dumps(rows, indent=1) + "\n")
    finally:
        if moto is not None:
            moto.__exit__(None, None, None)
        shutil.rmtree(tmp, ignore_errors=True)


def _peak_rss() -> int:
    """This process's peak resident set in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _upload(tree: Path):
    """A moto S3 server (tests/remote_servers.py, 127.0.0.1) holding ``tree`` in bucket
    ``bench``."""
    import boto3

    sys.path.insert(0, str(ROOT / "tests"))
    from remote_servers import MotoS3

    moto = MotoS3().__enter__()
    s3 = boto3.client("s3", endpoint_url=moto.endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    s3.create_bucket(Bucket="bench")
    for p in sorted(tree.rglob("*")):
        if p.is_file():
            s3.upload_file(str(p), "bench", str(p.relative_to(tree)))
    return moto


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
