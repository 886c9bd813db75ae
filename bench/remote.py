"""Requests and bytes of ``inspector show`` over HTTP and S3, per format (issue 21).

Serves checkpoints from a local HTTP server that honours Range and logs every request
(tests/remote_servers.py) and from moto's S3 server (through real s3fs), runs
``inspector show --format json URL`` for each in a fresh process and counts, on the server side,
the requests and the body bytes sent. Big files are sparse (their tensor data is a hole), written
in a temporary directory: 4 GiB safetensors, a 390 KB safetensors header, a 4 GiB checkpoint in
4 shards, 4 GiB torch zips, a 1 GiB legacy torch file, Keras HDF5 files of 2,000 datasets; real
fixtures for MXNet, NumPy, Sockeye and HF directories. Big files are served over HTTP only (moto
keeps objects in memory).

    python bench/remote.py [--json OUT.json]

Needs the test extra (moto[server], s3fs). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

FIXTURES = ROOT / "fixtures"
REAL = [  # (label, path under fixtures/)
    ("safetensors (fixture)", "safetensors/seed001_transformer_lm.safetensors"),
    ("torch zip (fixture)", "torch/seed001_transformer_lm.pt"),
    ("torch legacy (fixture)", "torch/lstm_bidir_legacy.pt"),
    ("TorchScript (fixture)", "dirs/torchscript_trace.pt"),
    ("MXNet params (fixture)", "mxnet/mxnet-1.9.1/all_dtypes.params"),
    ("NumPy npz (fixture)", "mxnet/mxnet-2.0.0b1/all_dtypes.npz"),
    ("Keras .keras (fixture)", "keras/batch_norm.keras"),
    ("Keras legacy .h5 (fixture)", "keras/batch_norm.legacy.h5"),
    ("HF dir, 3 safetensors shards", "dirs/hf_llama_safetensors_sharded"),
    ("HF dir, .bin shards", "dirs/hf_gpt2_bin_sharded"),
    ("Sockeye 3 dir", "sockeye/sockeye3_transformer_l1-1_m16_h2_ff32"),
]


def make_big(d: Path) -> list[tuple[str, str]]:
    import remote_bigfiles as big
    from hdf5_many import write_legacy, write_v3

    big.safetensors(d / "big.safetensors", [(f"w{i}", "F32", (16384, 16384)) for i in range(4)])
    big.safetensors(
        d / "bighdr.safetensors",
        [(f"model.layers.{i // 8}.w{i}", "F32", (256, 1024)) for i in range(4000)],
    )
    big.sharded_safetensors(d / "sharded")
    big.torch_zip(d / "big.pt", 2, gib_each=2)
    big.torch_zip(d / "many.pt", 16, gib_each=0, mib_each=256)
    big.torch_legacy(d / "big_legacy.pt", 4, 256)
    write_legacy(str(d / "many.h5"), 2000)
    write_v3(str(d / "many.weights.h5"), 2000)
    return [
        ("safetensors 4 GiB", "big.safetensors"),
        ("safetensors, 390 KB header", "bighdr.safetensors"),
        ("safetensors 4 GiB in 4 shards", "sharded/model.safetensors.index.json"),
        ("torch zip 4 GiB, 2 storages", "big.pt"),
        ("torch zip 4 GiB, 16 storages", "many.pt"),
        ("torch legacy 1 GiB, 4 storages", "big_legacy.pt"),
        ("Keras 2 .h5, 2,000 datasets", "many.h5"),
        ("Keras 3 .weights.h5, 2,000 datasets", "many.weights.h5"),
    ]


def size_of(p: Path) -> int:
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    if p.name.endswith(".index.json"):
        return sum(f.stat().st_size for f in p.parent.iterdir())
    return p.stat().st_size


def show(url: str, env: dict[str, str]) -> tuple[int, float]:
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "inspector", "show", "--format", "json", url],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, **env}, timeout=300,
    )
    if proc.returncode:
        raise SystemExit(f"{url}: {proc.stderr.strip()}")
    return proc.returncode, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", metavar="OUT", help="also write the rows as JSON")
    args = ap.parse_args()
    import boto3
    from remote_servers import MotoS3, RangeServer

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp)
        (served / "fixtures").symlink_to(FIXTURES)
        (served / "big").mkdir()
        bigs = make_big(served / "big")
        cases = [(label, served / "fixtures" / rel, "fixtures/" + rel, True) for label, rel in REAL]
        cases += [(label, served / "big" / rel, "big/" + rel, False) for label, rel in bigs]
        with RangeServer(served) as http, MotoS3() as s3srv:
            s3 = boto3.client("s3", endpoint_url=s3srv.endpoint, aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1")
            s3.create_bucket(Bucket="bench")
            for _, local, rel, small in cases:
                if small:
                    files = [local] if local.is_file() else sorted(
                        f for f in local.rglob("*") if f.is_file())
                    for f in files:
                        key = rel + ("/" + str(f.relative_to(local)) if local.is_dir() else "")
                        s3.upload_file(str(f), "bench", key)
            for label, local, rel, small in cases:
                row = {"format": label, "size": size_of(local)}
                http.reset()
                _, row["http_seconds"] = show(f"{http.url}/{rel}", {})
                row["http_requests"] = len(http.log)
                row["http_bytes"] = http.bytes_sent()
                if small:
                    s3srv.reset()
                    _, row["s3_seconds"] = show(f"s3://bench/{rel}", s3srv.env)
                    row["s3_requests"] = len(s3srv.log)
                    row["s3_bytes"] = sum(r.sent for r in s3srv.log if r.range)
                rows.append(row)
                print(f"{label}: {row}", file=sys.stderr)
    print("| checkpoint | size | HTTP requests | HTTP bytes | S3 requests | S3 bytes |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        s3 = (f"{r['s3_requests']} | {r['s3_bytes']:,}" if "s3_requests" in r else "- | -")
        print(f"| {r['format']} | {_size(r['size'])} | {r['http_requests']} | "
              f"{r['http_bytes']:,} | {s3} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


if __name__ == "__main__":
    main()
