"""TensorFlow checkpoint listing: ``registry.load`` against ``tf.train.load_checkpoint``, each
timed inside its own process after its imports and one warm-up load (TensorFlow's import is not
counted, nor the modules the tool imports on its first listing of the format).

    python bench/tf_list.py [--producer /work/venvs/tf/bin/python] [--vars 5000] [--runs 5]
                            [--json rows.json] [--keep DIR]

The checkpoint is written by TensorFlow itself (``--producer``): ``tf.train.Checkpoint`` of a
``tf.Module`` holding ``--vars`` float32 variables of shape [64, 64] in blocks of 8 (the
layout of a deep model's layers), saved with an Adam slot each (``optimizer.apply_gradients``
once), so the bundle holds variables, slot variables and the object graph.

Ways (one process each; CPU time inside it, the least of ``--runs`` loads after the warm-up):

* ``inspector``: ``registry.load(DIR)``: the .index table read, every entry's shape, dtype and
  byte range; the object graph read for the names.
* ``tf.train.load_checkpoint``: ``load_checkpoint(prefix)`` then its
  ``get_variable_to_shape_map()`` and ``get_variable_to_dtype_map()`` (what a listing needs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import rows

WRITE = r"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
out, n = sys.argv[1], int(sys.argv[2])

class Block(tf.Module):
    def __init__(self, i, k):
        super().__init__(name=f"block{i}")
        self.w = [tf.Variable(tf.zeros([64, 64]), name=f"w{j}") for j in range(k)]

blocks = [Block(i, min(8, n - 8 * i)) for i in range((n + 7) // 8)]
model = tf.Module()
model.blocks = blocks
opt = tf.keras.optimizers.Adam() if hasattr(tf, "keras") else None
variables = [v for b in blocks for v in b.w]
if opt is not None:
    opt.apply_gradients(zip([tf.ones_like(v) for v in variables], variables))
    ckpt = tf.train.Checkpoint(model=model, optimizer=opt)
else:
    ckpt = tf.train.Checkpoint(model=model)
print(ckpt.save(os.path.join(out, "ckpt")))
"""

TF_WAY = r"""
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
tf.train.load_checkpoint(sys.argv[1]).get_variable_to_shape_map()  # warm-up: lazy set-up
best = float("inf")
for _ in range(int(sys.argv[2])):
    t0 = time.process_time()
    r = tf.train.load_checkpoint(sys.argv[1])
    shapes, dtypes = r.get_variable_to_shape_map(), r.get_variable_to_dtype_map()
    best = min(best, time.process_time() - t0)
print(best, len(shapes))
"""

INSPECTOR_WAY = r"""
import sys, time
from inspector.adapters.registry import load
load(sys.argv[1])  # warm-up: the adapter's modules are imported on first use
best = float("inf")
for _ in range(int(sys.argv[2])):
    t0 = time.process_time()
    ckpt = load(sys.argv[1])
    best = min(best, time.process_time() - t0)
print(best, len(ckpt.tensors))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--producer", default="/work/venvs/tf/bin/python")
    ap.add_argument("--vars", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", help="write the result rows (bench/rows.py schema) here")
    ap.add_argument("--keep", help="write the checkpoint here and keep it (reused when present)")
    a = ap.parse_args(argv)
    name = f"TF checkpoint, {a.vars:,} variables + Adam slots: registry.load vs " \
           "tf.train.load_checkpoint"
    if not rows.python_ok(a.producer):
        print(f"{name}: {rows.NA}")
        rows.write(a.json, [rows.missing("formats", name, "at least as fast as the producer")])
        return 0
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = rows.kept(a.keep, WRITE, str(a.vars), a.producer) if a.keep else scratch
        made = os.path.join(tmp, "prefix.txt")  # written last: the checkpoint is whole
        if not os.path.exists(made):
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            prefix = subprocess.run([a.producer, "-c", WRITE, tmp, str(a.vars)], check=True,
                                    capture_output=True, text=True, env=env
                                    ).stdout.strip().splitlines()[-1]
            with open(made, "w") as f:
                f.write(os.path.basename(prefix))
        with open(made) as f:
            prefix = os.path.join(tmp, f.read())
        # one process a way (TensorFlow's import takes seconds), --runs loads in it
        ours, (n_ours,) = rows.min_inner([sys.executable, "-c", INSPECTOR_WAY, tmp,
                                          str(a.runs)], 1)
        theirs, (n_tf,) = rows.min_inner([a.producer, "-c", TF_WAY, prefix, str(a.runs)], 1,
                                         env)
    print("| way | entries | CPU inside the process (min) |\n|---|---:|---:|")
    print(f"| inspector registry.load | {n_ours} | {ours * 1000:.1f} ms |")
    print(f"| tf.train.load_checkpoint + shape/dtype maps | {n_tf} | {theirs * 1000:.1f} ms |")
    print(f"| tf / inspector | | {theirs / ours:.2f}x |")
    rows.write(a.json, [rows.faster_than_producer(
        "formats", name, ours, theirs, 1,
        "CPU time inside one process after imports and a warm-up load, least of the runs; "
        f"{n_ours} tensors listed, {n_tf} in TF's map")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
