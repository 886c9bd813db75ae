"""ONNX listing cost: ``inspector`` against ``onnx.load(load_external_data=False)`` and a
plain-Python floor, on the same files (issue 28, "Speed").

    python bench/onnx_list.py [--producer /work/venvs/onnx/bin/python] [--many 20000]
                              [--d-model 512] [--layers 6] [--runs 5] [--keep DIR]

The producer venv (torch 2.13.0 CPU, onnx, onnxscript) writes the files into a temporary
directory: a Transformer-encoder LM exported by ``torch.onnx.export(dynamo=True)`` (weights
inline), the same model saved with its weights in one external data file, and a model of
``--many`` small initializers (``onnx.helper``: a chain of Add nodes, one initializer each).

Ways, each in a fresh process, alternating, the least of ``--runs``:

- ``inspector``: ``inspector show --format json FILE`` (the whole command: start-up, listing,
  groups, JSON); ``inspector-load``: ``registry.load(FILE)`` timed inside the process.
- ``onnx.load``: ``onnx.load(FILE, load_external_data=False)`` and the initializers' names,
  dims and data types, timed inside the process (the import of onnx is not counted), and the
  whole process (its import counted).

In-process times (``inspector-load``, ``onnx.load``) are of a second load in the process, after
one warm-up load: neither onnx's import nor the modules the tool imports on its first ONNX
listing are counted.
- ``floor``: a plain-Python protobuf walk over an mmap of the file: ModelProto -> graph ->
  initializer name, dims, data_type, skipping every other field by its length; no checks, no
  subgraphs, no nodes (what any reader must at least do), timed inside the process.
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

import rows

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

MAKE = r'''
import sys, os, numpy as np, torch, onnx
from onnx import TensorProto, helper, numpy_helper
out, many, d_model, layers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8000, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, 8, 4 * d_model, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d_model, 8000)
        with torch.no_grad():
            for p in self.parameters():
                p.normal_(0, 0.02)
    def forward(self, x):
        return self.head(self.encoder(self.embed(x)))

torch.manual_seed(0)
lm = LM().eval()
path = os.path.join(out, "transformer.onnx")
torch.onnx.export(lm, (torch.randint(0, 10, (1, 8)),), dynamo=True, optimize=True).save(path)
model = onnx.load(path)
os.makedirs(os.path.join(out, "external"), exist_ok=True)
onnx.save_model(model, os.path.join(out, "external", "transformer.onnx"),
                save_as_external_data=True, all_tensors_to_one_file=True,
                location="transformer.onnx.data", size_threshold=0)
rng = np.random.default_rng(0)
inits, nodes, prev = [], [], "x"
for i in range(many):
    inits.append(numpy_helper.from_array(rng.normal(size=16).astype(np.float32), f"block{i}.bias"))
    nodes.append(helper.make_node("Add", [prev, f"block{i}.bias"], [f"h{i}"]))
    prev = f"h{i}"
graph = helper.make_graph(nodes, "many", [helper.make_tensor_value_info("x", 1, [16])],
                          [helper.make_tensor_value_info(prev, 1, [16])], inits)
onnx.save_model(helper.make_model(graph, producer_name="bench"), os.path.join(out, "many.onnx"))
'''

ONNX_WAY = r'''
import sys, time, json
import onnx
onnx.load(sys.argv[1], load_external_data=False)  # warm-up, as for the inspector
t0 = time.process_time()
m = onnx.load(sys.argv[1], load_external_data=False)
rows = [(t.name, list(t.dims), t.data_type) for t in m.graph.initializer]
print(json.dumps({"seconds": time.process_time() - t0, "tensors": len(rows)}))
'''

INSPECTOR_WAY = r'''
import sys, time, json
from inspector.adapters.registry import load
load(sys.argv[1])  # warm-up: the adapter's modules are imported on first use
t0 = time.process_time()
ckpt = load(sys.argv[1])
print(json.dumps({"seconds": time.process_time() - t0, "tensors": len(ckpt.tensors)}))
'''

FLOOR_WAY = r'''
import sys, time, json, mmap
t0 = time.process_time()

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s
        if c < 0x80:
            return v, i
        s += 7

def fields(b, i, end):
    while i < end:
        key, i = varint(b, i)
        w = key & 7
        if w == 0:
            v, i = varint(b, i); yield key >> 3, 0, v, 0
        elif w == 2:
            n, i = varint(b, i); yield key >> 3, 2, i, n; i += n
        elif w == 1:
            yield key >> 3, 1, i, 8; i += 8
        else:
            yield key >> 3, 5, i, 4; i += 4

def graph(b, a, end, rows):
    for f, w, c, k in fields(b, a, end):
        if f == 5 and w == 2:  # initializer: name, dims, data_type
            name, dims, dt = "", [], 0
            for f3, w3, d, m in fields(b, c, c + k):
                if f3 == 1 and w3 == 0: dims.append(d)
                elif f3 == 2: dt = d
                elif f3 == 8: name = b[d:d + m].decode()
            rows.append((name, dims, dt))
        elif f == 1 and w == 2:  # node > attribute > g / graphs
            for f3, w3, d, m in fields(b, c, c + k):
                if f3 == 5 and w3 == 2:
                    for f4, w4, e, n in fields(b, d, d + m):
                        if f4 in (6, 11) and w4 == 2:
                            graph(b, e, e + n, rows)

with open(sys.argv[1], "rb") as f:
    b = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    rows = []
    for f1, w1, a, n in fields(b, 0, len(b)):
        if f1 == 7 and w1 == 2:
            graph(b, a, a + n, rows)
print(json.dumps({"seconds": time.process_time() - t0, "tensors": len(rows)}))
'''


def run(cmd: list[str]) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of the child, what it printed last as JSON)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{proc.stderr[-2000:]}")
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "{}"
    try:
        inner = json.loads(last)
    except ValueError:
        inner = {}
    return wall, cpu, inner if isinstance(inner, dict) else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--producer", default="/work/venvs/onnx/bin/python")
    ap.add_argument("--python", default=sys.executable, help="the python with inspector")
    ap.add_argument("--many", type=int, default=20000)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", help="write the files here and keep them (reused when present: "
                    "under a directory named by the generator, its arguments and the producer)")
    ap.add_argument("--json", help="write the result rows (bench/rows.py schema) here")
    args = ap.parse_args()
    json_rows: list[dict] = []
    names = {"transformer (external data)": "ONNX with external data (Transformer LM)",
             f"{args.many:,} initializers": f"ONNX {args.many:,} initializers"}
    if not rows.python_ok(args.producer):
        for name in names.values():
            print(f"{name}: {rows.NA}")
            json_rows.append(rows.missing("formats", f"{name}: registry.load vs onnx.load",
                                          "at least as fast as the producer"))
        rows.write(args.json, json_rows)
        return

    tmp = Path(rows.kept(args.keep, MAKE, str(args.many), str(args.d_model), str(args.layers),
                         args.producer) if args.keep else tempfile.mkdtemp(prefix="onnx-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        if not (tmp / "many.onnx").exists():
            print(f"writing files into {tmp} ...", file=sys.stderr)
            subprocess.run([args.producer, "-c", MAKE, str(tmp), str(args.many),
                            str(args.d_model), str(args.layers)], check=True,
                           capture_output=True)
        cases = [("transformer (inline)", tmp / "transformer.onnx"),
                 ("transformer (external data)", tmp / "external" / "transformer.onnx"),
                 (f"{args.many:,} initializers", tmp / "many.onnx")]
        inspector = str(Path(args.python).parent / "inspector")
        ways = {
            "inspector show --format json": lambda p: [inspector, "show", "--format", "json",
                                                       str(p)],
            "inspector registry.load": lambda p: [args.python, "-c", INSPECTOR_WAY, str(p)],
            "onnx.load(load_external_data=False)": lambda p: [args.producer, "-c", ONNX_WAY,
                                                              str(p)],
            "floor (plain-Python protobuf walk)": lambda p: [args.python, "-c", FLOOR_WAY,
                                                             str(p)],
        }
        print("| file | size | tensors | way | in-process CPU (s) | process wall (s) "
              "| process CPU (s) |")
        print("|---|---:|---:|---|---:|---:|---:|")
        for label, path in cases:
            size = sum(f.stat().st_size for f in path.parent.iterdir()
                       if f.is_file() and f.name.startswith(path.name))
            samples: dict[str, list[tuple[float, float, dict]]] = {w: [] for w in ways}
            for cmd in ways.values():
                run(cmd(path))  # warm-up (page cache, pyc)
            for _ in range(args.runs):
                for way, cmd in ways.items():
                    samples[way].append(run(cmd(path)))
            inner_by_way = {}
            for way, got in samples.items():
                wall = min(w for w, _, _ in got)
                cpu = min(c for _, c, _ in got)
                inner = [i["seconds"] for _, _, i in got if "seconds" in i]
                tensors = next((i["tensors"] for _, _, i in got if "tensors" in i), "")
                inner_by_way[way] = min(inner) if inner else None
                inner_text = f"{inner_by_way[way]:.4f}" if inner else ""
                print(f"| {label} | {size / 2**20:.1f} MiB | {tensors} | {way} | {inner_text} "
                      f"| {wall:.3f} | {cpu:.3f} |", flush=True)
            ours = inner_by_way["inspector registry.load"]
            floor = inner_by_way["floor (plain-Python protobuf walk)"]
            theirs = inner_by_way["onnx.load(load_external_data=False)"]
            print(f"| {label} | | | registry.load / floor = {ours / floor:.1f}x; "
                  f"onnx.load / registry.load = {theirs / ours:.1f}x | | | |", flush=True)
            if label in names:
                json_rows.append(rows.faster_than_producer(
                    "formats", f"{names[label]}: registry.load vs onnx.load", ours, theirs, 1,
                    "CPU time inside the process after a warm-up load (imports not counted), "
                    "min of runs",
                    floor=floor))
        rows.write(args.json, json_rows)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
