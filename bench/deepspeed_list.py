"""Benchmark: listing a DeepSpeed ZeRO checkpoint against DeepSpeed's own ``zero_to_fp32``.

    python bench/deepspeed_list.py [--ds-python /work/venvs/ds-hf/bin/python] [--runs 5]

Checkpoints:

* ``llama-z3`` (fixture): ``fixtures/deepspeed/llama-z3/checkpoint-3`` (5,200 parameters).
* ``llama-8m-z2`` / ``llama-8m-z3``: written here by deepspeed itself (``--ds-python``,
  deepspeed 0.19.8 on 2 CPU ranks, bf16, one AdamW step, ``save_checkpoint``): a Llama of
  8.4 M parameters (hidden 256, 8 layers, 8 query / 4 key-value heads, vocabulary 4,096),
  ZeRO stage 2 and 3 (about 110 MB each).

Ways, each in its own process (the CPU time inside the process after its imports, median and
least of ``--runs`` loads in that process; the first load of each process pays for lazy imports,
the least does not):

* ``inspector``: ``registry.load(DIR)``: every states pickle through the restricted unpickler,
  parameters and moments placed in the ranks' partitions; no tensor bytes.
* ``inspector stats``: ``stats.file_stats`` over every tensor (reads every byte once).
* ``zero_to_fp32 lazy``: ``get_fp32_state_dict_from_zero_checkpoint(DIR, lazy_mode=True)``
  (``torch.load`` of every states file, mmap; no tensor assembled).
* ``zero_to_fp32``: the same, tensors assembled (the documented use).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import rows

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

TRAIN = r"""
import os, sys, torch, deepspeed
from transformers import LlamaConfig, LlamaForCausalLM
deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
m = LlamaForCausalLM(LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=688,
    num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
    max_position_embeddings=64, tie_word_embeddings=False))
cfg = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
       "zero_optimization": {"stage": int(sys.argv[2])}}
engine, _, _, _ = deepspeed.initialize(model=m, model_parameters=m.parameters(), config=cfg)
ids = torch.randint(0, 4096, (1, 16))
engine.backward(engine(input_ids=ids, labels=ids).loss)
engine.step()
engine.save_checkpoint(sys.argv[1])
if torch.distributed.get_rank() == 0:
    m.config.save_pretrained(sys.argv[1])
"""

INSPECTOR = r"""
import json, statistics, sys, time
from inspector.adapters.registry import load
from inspector import value_stats as stats
path, runs, values = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
times = []
for _ in range(runs):
    t0 = time.process_time()
    ckpt = load(path)
    if values:
        stats.file_stats(ckpt)
    times.append(time.process_time() - t0)
print(json.dumps({"median": statistics.median(times), "min": min(times),
                  "tensors": len(ckpt.tensors)}))
"""

ZERO_TO_FP32 = r"""
import json, statistics, sys, time
from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint as get
path, runs, lazy = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
times = []
for _ in range(runs):
    t0 = time.process_time()
    sd = get(path, lazy_mode=lazy)
    times.append(time.process_time() - t0)
print(json.dumps({"median": statistics.median(times), "min": min(times), "tensors": len(sd)}))
"""


def _run(python: str, code: str, *args: str) -> dict:
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    proc = subprocess.run([python, "-c", code, *args], capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write(ds_python: str, out: Path, stage: int, port: int) -> None:
    script = out.parent / "train.py"
    script.write_text(TRAIN)
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    subprocess.run([ds_python, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                    "--master_addr", "127.0.0.1", "--master_port", str(port), str(script),
                    str(out), str(stage)], env=env, check=True, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-python", default="/work/venvs/ds-hf/bin/python")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true",
                    help="the committed fixtures only (no training run), without the "
                    "assembling zero_to_fp32 way")
    ap.add_argument("--json", help="write the result rows (bench/rows.py schema) here")
    args = ap.parse_args()
    have_ds = rows.python_ok(args.ds_python)
    json_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"llama-z3": REPO / "fixtures/deepspeed/llama-z3/checkpoint-3",
                 "gpt2-z2": REPO / "fixtures/deepspeed/gpt2-z2/checkpoint-3"}
        for stage in () if args.quick or not have_ds else (2, 3):
            out = Path(tmp) / f"llama-8m-z{stage}"
            write(args.ds_python, out, stage, 29650 + stage)
            cases[out.name] = out
        print(f"{'checkpoint':14} {'MB':>6} {'way':20} {'tensors':>8} {'median s':>9} "
              f"{'min s':>9}  (CPU)")
        for name, path in cases.items():
            mb = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6
            got = {}
            for way, python, code, flag in (
                ("inspector", sys.executable, INSPECTOR, "0"),
                ("inspector stats", sys.executable, INSPECTOR, "1"),
                ("zero_to_fp32 lazy", args.ds_python, ZERO_TO_FP32, "1"),
                ("zero_to_fp32", args.ds_python, ZERO_TO_FP32, "0"),
            ):
                if python == args.ds_python and not have_ds:
                    print(f"{name:14} {mb:6.1f} {way:20} {rows.NA}")
                    continue
                if args.quick and way == "zero_to_fp32":
                    continue  # a DeepSpeed import for a figure beside the target, not in it
                r = got[way] = _run(python, code, str(path), str(args.runs), flag)
                print(f"{name:14} {mb:6.1f} {way:20} {r['tensors']:8} {r['median']:9.4f} "
                      f"{r['min']:9.4f}")
            lazy = got.get("zero_to_fp32 lazy")
            json_rows.append(rows.faster_than_producer(
                "formats", f"DeepSpeed {name} ({mb:.1f} MB): registry.load vs zero_to_fp32 "
                "get_fp32_state_dict_from_zero_checkpoint(lazy_mode=True)",
                got["inspector"]["min"], lazy["min"] if lazy else None, 5,
                "CPU time inside one process, least of the runs after imports"
                + (f"; zero_to_fp32 assembling the tensors: {got['zero_to_fp32']['min']:.4f} s"
                   if "zero_to_fp32" in got else "")))
    rows.write(args.json, json_rows)


if __name__ == "__main__":
    main()
