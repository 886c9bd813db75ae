"""TensorFlow SavedModels written by TensorFlow itself (``tf.saved_model.save`` of a tiny
``tf.Module``), benign and with file, process-free Python and file-reading operations in a
``tf.function``. Run in the producer venv (tensorflow-cpu 2.21.0):

    python3 -m venv /work/venvs/tf && /work/venvs/tf/bin/pip install tensorflow-cpu
    /work/venvs/tf/bin/python tests/corpus/serving/make_savedmodels.py

Each SavedModel directory is kept whole (``saved_model.pb``, ``variables/``, a few KiB) as
``<name>/``. ``savedmodels.truth.json`` records,
from TensorFlow's own protobuf classes, every op type in the meta graphs' GraphDefs and in the
function library, and, from the real loader, whether ``tf.saved_model.load(d).serve(x)`` wrote
the marker file (the WriteFile op runs at inference).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

HERE = Path(__file__).resolve().parent
SPEC = [tf.TensorSpec([None, 3], tf.float32)]


class Benign(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(np.arange(6, dtype="f4").reshape(3, 2))

    @tf.function(input_signature=SPEC)
    def serve(self, x):
        return tf.nn.relu(tf.matmul(x, self.w))


class WritesFile(Benign):
    """tf.io.write_file: the WriteFile op writes ``marker`` when the model is called."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    @tf.function(input_signature=SPEC)
    def serve(self, x):
        tf.io.write_file(self.marker, tf.strings.as_string(tf.reduce_sum(x)))
        return tf.matmul(x, self.w)


class ReadsFile(Benign):
    """tf.io.read_file of an absolute path: the ReadFile op reads it at inference."""

    @tf.function(input_signature=SPEC)
    def serve(self, x):
        secret = tf.io.read_file("/etc/hostname")
        return tf.matmul(x, self.w) + tf.cast(tf.strings.length(secret), tf.float32)


class CallsPython(Benign):
    """tf.py_function / tf.numpy_function: EagerPyFunc / PyFunc ops call Python."""

    @tf.function(input_signature=SPEC)
    def serve(self, x):
        y = tf.py_function(lambda t: t * 2, [x], tf.float32)
        z = tf.numpy_function(lambda t: t + 1, [x], tf.float32)
        return tf.matmul(y + z, self.w)


def ops(pb: Path) -> dict[str, list[str]]:
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(pb.read_bytes())
    graph, library = set(), set()
    for mg in sm.meta_graphs:
        graph |= {n.op for n in mg.graph_def.node}
        for fn in mg.graph_def.library.function:
            library |= {n.op for n in fn.node_def}
    return {"graph_ops": sorted(graph), "function_ops": sorted(library)}


def main() -> None:
    truth: dict[str, dict] = {"tensorflow": tf.__version__, "files": {}}
    work = Path(tempfile.mkdtemp())
    marker = work / "ran-writes_file"
    models = {"benign": Benign(), "writes_file": WritesFile(str(marker)),
              "reads_file": ReadsFile(), "calls_python": CallsPython()}
    for name, module in models.items():
        d = work / name
        tf.saved_model.save(module, str(d))
        loaded = tf.saved_model.load(str(d))
        ran = None
        try:
            loaded.serve(tf.ones([1, 3]))
            ran = True
        except Exception as e:  # noqa: BLE001 - py_function's Python is not in the file
            ran = f"{type(e).__name__}"
        out = HERE / name
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(d, out)
        truth["files"][f"{name}/saved_model.pb"] = {
            **ops(d / "saved_model.pb"), "serve_called": ran,
            "marker_written": marker.exists() if name == "writes_file" else None}
    (HERE / "savedmodels.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
