"""Benchmark: listing a torch Distributed Checkpoint against torch's own metadata reader.

    python bench/dcp_metadata.py [--torch-python /work/venvs/torch/bin/python] [--runs 5]
                                 [--keep DIR]

Checkpoints, written by torch itself (``--torch-python``, torch 2.13):

* ``fsdp2``: the committed fixture ``fixtures/dcp/fsdp2`` (FSDP2, 2 ranks, 28 tensors).
* ``chunks-100k``: a synthetic ``.metadata`` made of torch's own classes (``Metadata``,
  ``TensorStorageMetadata``, ``ChunkStorageMetadata``, ``MetadataIndex``, ``_StorageInfo``) and
  pickled as ``FileSystemWriter.finish`` does: 1,000 bf16 tensors of [6400, 64], each in 100
  chunks of [64, 64] spread over 100 rank files (sparse files of the right sizes): 100,000
  chunk entries.

Ways, each in its own process: the time inside the process after its imports and one
warm-up load, median and least of ``--runs`` loads in that process; ``inspector show`` as
``--runs`` whole processes, against torch's import and first load timed inside its process:

* ``inspector``: ``registry.load(DIR)``: the restricted unpickler, every item, chunk and
  storage entry checked, each file's size checked, the bytes items read.
* ``inspector show``: ``inspector show --format json DIR`` as a whole process.
* ``torch``: ``FileSystemReader(DIR).read_metadata()`` (``pickle.load`` with torch's classes).
* ``floor``: plain Python: ``pickle.Unpickler`` with a ``find_class`` returning a stub class
  (BUILD stores the state), then one pass making (name, shape, dtype, chunks -> file/range)
  rows: the least any Python reader of this header does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rows

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

WRITE = r"""
import os, pickle, sys, torch
from torch.distributed.checkpoint.metadata import (
    ChunkStorageMetadata, Metadata, MetadataIndex, StorageMeta, TensorProperties,
    TensorStorageMetadata)
from torch.distributed.checkpoint.filesystem import _StorageInfo
out, tensors, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = 64
sdm, storage, planner, ends = {}, {}, {}, {}
for t in range(tensors):
    fqn = f"model.layers.{t}.weight"
    chunks = []
    for r in range(ranks):
        chunks.append(ChunkStorageMetadata(torch.Size([r * rows, 0]), torch.Size([rows, 64])))
        name = f"__{r}_0.distcp"
        off = ends.get(name, 0)
        storage[MetadataIndex(fqn, [r * rows, 0])] = _StorageInfo(name, off, 9000)
        ends[name] = off + 9000
    sdm[fqn] = TensorStorageMetadata(TensorProperties(dtype=torch.bfloat16),
                                     torch.Size([rows * ranks, 64]), chunks)
    planner[fqn] = ("model", f"layers.{t}.weight")
md = Metadata(sdm, planner_data=planner, storage_data=storage,
              storage_meta=StorageMeta(checkpoint_id=out, save_id="bench"), version="1.0.0")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, ".metadata"), "wb") as f:
    pickle.dump(md, f)
for name, size in ends.items():
    with open(os.path.join(out, name), "wb") as f:
        f.truncate(size)
"""

# The in-process ways: a warm-up load, then argv[2] timed loads in the same process, one line
# each (wall, CPU, facts); torch's first line is its import and first load, for the
# whole-process comparison.
TORCH_WAY = r"""
import sys, time
t0 = time.perf_counter()
from torch.distributed.checkpoint import FileSystemReader
FileSystemReader(sys.argv[1]).read_metadata()  # warm-up: lazy imports, caches
print("first", time.perf_counter() - t0)
for _ in range(int(sys.argv[2])):
    t1, c1 = time.perf_counter(), time.process_time()
    md = FileSystemReader(sys.argv[1]).read_metadata()
    t2, c2 = time.perf_counter(), time.process_time()
    n = sum(len(getattr(v, "chunks", ())) for v in md.state_dict_metadata.values())
    print(t2 - t1, c2 - c1, len(md.state_dict_metadata), n, flush=True)
    del md
"""

INSPECTOR_WAY = r"""
import sys, time
from inspector.adapters.registry import load
load(sys.argv[1])  # warm-up: lazy imports, caches
for _ in range(int(sys.argv[2])):
    t1, c1 = time.perf_counter(), time.process_time()
    ckpt = load(sys.argv[1])
    t2, c2 = time.perf_counter(), time.process_time()
    print(t2 - t1, c2 - c1, len(ckpt.tensors), ckpt.metadata["chunks"], flush=True)
    del ckpt
"""

FLOOR_WAY = r"""
import pickle, sys, time

class Stub:  # no __setstate__: BUILD fills __dict__ in C, as for torch's plain dataclasses
    pass

class Floor(pickle.Unpickler):
    def find_class(self, module, name):
        if name == "Size":
            return tuple
        if name == "TensorProperties":
            return Props
        if name in ("_get_layout", "_MEM_FORMAT_ENCODING", "PosixPath", "WindowsPath"):
            return lambda *args: args  # called by REDUCE
        return type(name, (Stub,), {})

class Props:
    def __setstate__(self, state): self.state = state

def floor():
    with open(sys.argv[1] + "/.metadata", "rb") as f:
        md = Floor(f).load()
    top = md.__dict__
    files = {(k.fqn, k.__dict__.get("offset")): (v.relative_path, v.offset, v.length)
             for k, v in top["storage_data"].items()}
    rows = []
    n = 0
    for fqn, item in top["state_dict_metadata"].items():
        if not hasattr(item, "chunks"):
            continue
        chunks = [(c.offsets, c.sizes, files[(fqn, c.offsets)]) for c in item.chunks]
        n += len(chunks)
        rows.append((fqn, item.size, item.properties.state[0], chunks))
    return rows, n

floor()  # warm-up, as for the other ways
for _ in range(int(sys.argv[2])):
    t1, c1 = time.perf_counter(), time.process_time()
    rows, n = floor()
    t2, c2 = time.perf_counter(), time.process_time()
    print(t2 - t1, c2 - c1, len(rows), n, flush=True)
    del rows
"""


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def measure(label: str, cmd: list[str], runs: int) -> dict:
    """``inspector show``: ``runs`` whole processes. The in-process ways: one process of a
    warm-up load and ``runs`` timed ones (its whole-process figure: torch's import and first
    load, timed inside it; the others' process wall)."""
    inner, cpu, walls, facts = [], [], [], ""
    if label == "inspector show":
        for _ in range(runs):
            wall, out = run(cmd)
            walls.append(wall)
            facts = f"{len(json.loads(out)['tensors'])}"
    else:
        wall, out = run([*cmd, str(runs)])
        walls.append(wall)
        for line in out.splitlines():
            if line.startswith("first "):
                walls[-1] = float(line.split()[1])
                continue
            t, c, *rest = line.split()
            inner.append(float(t))
            cpu.append(float(c))
            facts = " ".join(rest)
    return {
        "way": label,
        "inside_ms": statistics.median(inner) * 1000 if inner else None,
        "cpu_ms": statistics.median(cpu) * 1000 if cpu else None,
        "cpu_min_s": min(cpu) if cpu else None,
        "process_ms": statistics.median(walls) * 1000,
        "facts": facts,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch-python", default="/work/venvs/torch/bin/python")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tensors", type=int, default=1000)
    ap.add_argument("--ranks", type=int, default=100)
    ap.add_argument("--json", help="write the result rows (bench/rows.py schema) here")
    ap.add_argument("--keep", help="write the checkpoint here and keep it (reused when present)")
    a = ap.parse_args(argv)
    py = sys.executable
    json_rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        big = os.path.join(rows.kept(a.keep, WRITE, str(a.tensors), str(a.ranks),
                                     a.torch_python) if a.keep else tmp, "chunks")
        cases = {"fsdp2 (fixture)": str(REPO / "fixtures" / "dcp" / "fsdp2")}
        if rows.python_ok(a.torch_python):
            if not os.path.exists(os.path.join(big, ".metadata")):
                for old in (big, big + ".part"):
                    shutil.rmtree(old, ignore_errors=True)
                run([a.torch_python, "-c", WRITE, big + ".part", str(a.tensors), str(a.ranks)])
                os.replace(big + ".part", big)
            cases[f"{a.tensors * a.ranks:,} chunks"] = big
        print("| checkpoint | .metadata | way | inside: wall (ms) | inside: CPU (ms) | "
              "whole process (ms) | tensors chunks |")
        print("| --- | --- | --- | ---: | ---: | ---: | --- |")
        for label, path in cases.items():
            size = os.path.getsize(os.path.join(path, ".metadata"))
            have_torch = rows.python_ok(a.torch_python)
            results = [
                measure("inspector", [py, "-c", INSPECTOR_WAY, path], a.runs),
                measure("inspector show", [py, "-m", "inspector", "show", "--format", "json",
                                           path], a.runs),
                measure("torch read_metadata", [a.torch_python, "-c", TORCH_WAY, path], a.runs)
                if have_torch else None,
                measure("floor (pickle + rows)", [py, "-c", FLOOR_WAY, path], a.runs),
            ]
            if label != "fsdp2 (fixture)":  # the target is about a large .metadata
                json_rows.append(rows.faster_than_producer(
                    "formats", f"DCP .metadata, {label}: registry.load vs torch read_metadata",
                    results[0]["cpu_min_s"], results[2]["cpu_min_s"] if have_torch else None,
                    5, "CPU time inside the process after a warm-up load, least of the runs",
                    floor=results[3]["cpu_min_s"]))
            if not have_torch:
                print(f"| {label} | {size:,} B | torch read_metadata | {rows.NA} | | | |")
                results = [r for r in results if r is not None]
                for r in results:
                    inside = f"{r['inside_ms']:.1f}" if r["inside_ms"] is not None else "-"
                    print(f"| {label} | {size:,} B | {r['way']} | {inside} | | "
                          f"{r['process_ms']:.0f} | {r['facts']} |")
                continue
            for r in results:
                inside = f"{r['inside_ms']:.1f}" if r["inside_ms"] is not None else "-"
                cpu = f"{r['cpu_ms']:.1f}" if r["cpu_ms"] is not None else "-"
                print(f"| {label} | {size:,} B | {r['way']} | {inside} | {cpu} | "
                      f"{r['process_ms']:.0f} | {r['facts']} |")
            ours, torch, floor = (results[0]["cpu_ms"], results[2]["cpu_ms"],
                                  results[3]["cpu_ms"])
            whole = results[2]["process_ms"] / results[1]["process_ms"]
            print(f"| {label} | | CPU ratios | inspector/floor {ours / floor:.2f}x | "
                  f"torch/inspector {torch / ours:.2f}x | whole process: torch/inspector show "
                  f"{whole:.1f}x | |")
    rows.write(a.json, json_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
