"""Megatron-LM checkpoint listing: ``registry.load`` against Megatron's own way of reading.

    python bench/megatron_list.py [--producer /work/venvs/megatron/bin/python] [--runs 5]
                                  [--json rows.json]

Checkpoints (the committed fixtures, see ``fixtures/megatron/README.md``):

* ``gpt_tp2_pp2`` (legacy ``--ckpt-format torch``: 2 tensor x 2 pipeline ranks): Megatron reads
  it with ``torch.load(path, map_location="cpu", weights_only=False)`` of each rank's
  ``model_optim_rng.pt`` (``megatron/training/checkpointing.py`` ``_load_base_checkpoint``);
  the producer venv needs megatron-core (its pickles name ``megatron.core`` enums).
* ``megatron_dist`` (``torch_dist``, written by megatron-core's ``dist_checkpointing.save``):
  megatron-core's ``dist_checkpointing.load_tensors_metadata(DIR)``, its listing call.

Ways, each in its own process, timed inside it after its imports (CPU time, the least of
``--runs`` loads in one process): ``inspector`` is ``registry.load(DIR)`` (every rank file
through the restricted unpickler, pieces placed by Megatron's parallel rules; no tensor bytes).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import rows

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CASES = {
    "gpt_tp2_pp2 (legacy, 4 ranks)": ("legacy", REPO / "fixtures/megatron/gpt_tp2_pp2"),
    "megatron_dist (torch_dist)": ("dist", REPO / "fixtures/dcp/megatron_dist"),
}

INSPECTOR = r"""
import sys, time
from inspector.adapters.registry import load
path, runs = sys.argv[1], int(sys.argv[2])
best = float("inf")
for _ in range(runs):
    t0 = time.process_time()
    ckpt = load(path)
    best = min(best, time.process_time() - t0)
print(best, len(ckpt.tensors))
"""

MEGATRON = r"""
import glob, os, sys, time, warnings
warnings.filterwarnings("ignore")
import torch
kind, path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "dist":
    from megatron.core import dist_checkpointing
best = float("inf")
for _ in range(runs):
    t0 = time.process_time()
    it = open(os.path.join(path, "latest_checkpointed_iteration.txt")).read().strip()
    iteration = os.path.join(path, f"iter_{int(it):07d}")
    if kind == "legacy":
        files = sorted(glob.glob(os.path.join(iteration, "mp_rank_*", "model_optim_rng.pt")))
        n = 0
        for f in files:
            sd = torch.load(f, map_location="cpu", weights_only=False)
            n += len(sd["model"])
    else:
        n = len(dist_checkpointing.load_tensors_metadata(iteration))
    best = min(best, time.process_time() - t0)
print(best, n)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--producer", "--torch-python", dest="producer",
                    default="/work/venvs/megatron/bin/python",
                    help="a python with torch and megatron-core")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", help="write the result rows (bench/rows.py schema) here")
    a = ap.parse_args(argv)
    have = rows.python_ok(a.producer)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    json_rows = []
    print("| checkpoint | way | tensors | least CPU time inside the process |")
    print("|---|---|---:|---:|")
    for label, (kind, path) in CASES.items():
        ours, (n,) = rows.min_inner([sys.executable, "-c", INSPECTOR, str(path),
                                     str(a.runs)], 1)
        print(f"| {label} | inspector registry.load | {n} | {ours * 1000:.1f} ms |")
        theirs = None
        tool = ("torch.load(weights_only=False) per rank" if kind == "legacy"
                else "dist_checkpointing.load_tensors_metadata")
        if have:
            try:
                theirs, (m,) = rows.min_inner([a.producer, "-c", MEGATRON, kind, str(path),
                                               str(a.runs)], 1, env)
                print(f"| {label} | Megatron: {tool} | {m} | {theirs * 1000:.1f} ms |")
            except RuntimeError as e:
                print(f"| {label} | Megatron: {tool} | failed: {str(e)[-200:]} | |")
        else:
            print(f"| {label} | Megatron: {tool} | {rows.NA} | |")
        json_rows.append(rows.faster_than_producer(
            "formats", f"Megatron {label}: registry.load vs {tool}", ours, theirs, 5,
            "CPU time inside one process after imports, least of the runs"))
    rows.write(a.json, json_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
