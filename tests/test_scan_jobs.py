"""A verdict is a property of the file: the same with one worker or many.

One tree holds an HDF5 file on which libhdf5 loops forever and one on which it crashes
(``tests/corpus/hdf5_hang.h5.hang``, ``hdf5_segfault.h5.crash``), beside Keras files a real
loader executes (``keras.saving.load_model`` ran their Lambda: ``keras_lambda.truth.json``), an
HDF5 file whose data comes from a file outside (h5py reads it), benign Keras and HDF5 files,
a benign torch checkpoint and a torch zip whose pickle calls ``os.system``. ``scan`` with
``--jobs 1``, ``2`` and ``8`` must give the same verdicts, the same exit code, and ``error``
lines for the hanging and the crashing file only. The per-file time budget is lowered through
``INSPECTOR_HDF5_SECONDS`` to keep the test short; each file still has its own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from one_walk_attacks import payload, torch_zip

from conftest import FIXTURES, ROOT, run_cli

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

CORPUS = ROOT / "tests" / "corpus"


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(CORPUS / "hdf5_hang.h5.hang", tree / "hang.h5")
    shutil.copy(CORPUS / "hdf5_segfault.h5.crash", tree / "crash.h5")
    for name in ("lambda_legacy.h5", "lambda_v3.keras"):
        shutil.copy(CORPUS / name, tree / name)
    for name in ("batch_norm.legacy.h5", "conv1d.keras", "conv1d.weights.h5",
                 "gru_reset_after.legacy.h5"):
        shutil.copy(FIXTURES / "keras" / name, tree / name)
    shutil.copy(FIXTURES / "torch" / "gru.pt", tree / "gru.pt")
    (tree / "payload.pt").write_bytes(torch_zip("payload", payload("true")))
    with h5py.File(tree / "external.h5", "w") as f:
        f.create_dataset("w", (4,), "f4", external=[("/etc/hostname", 0, 16)])
    return tree


def test_verdicts_do_not_depend_on_the_number_of_workers(tmp_path):
    tree = _tree(tmp_path)
    runs = {}
    for jobs in (1, 2, 8):
        proc = run_cli("scan", "--format", "json", "--jobs", str(jobs), str(tree),
                       env={"INSPECTOR_HDF5_SECONDS": "2"})
        doc = json.loads(proc.stdout)
        runs[jobs] = (proc.returncode,
                      {Path(f["path"]).name: f["verdict"] for f in doc["files"]},
                      {Path(f["path"]).name: [i["text"] for i in f["findings"]
                                              if i["level"] == "error"]
                       for f in doc["files"] if f["verdict"] == "error"})
    assert runs[1] == runs[2] == runs[8]
    code, verdicts, errors = runs[8]
    assert code == 1
    assert {n for n, v in verdicts.items() if v == "dangerous"} == {
        "lambda_legacy.h5", "lambda_v3.keras", "payload.pt", "external.h5"}
    assert set(errors) == {"hang.h5", "crash.h5"}
    assert "did not finish" in errors["hang.h5"][0]
    assert "crashed" in errors["crash.h5"][0]
    assert {verdicts[n] for n in ("batch_norm.legacy.h5", "conv1d.keras", "conv1d.weights.h5",
                                  "gru_reset_after.legacy.h5", "gru.pt")} == {"safe"}
