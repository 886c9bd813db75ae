"""TorchServe model archives written by ``torch-model-archiver`` itself. Run in the producer
venv (torch 2.13.0 CPU, torch-model-archiver):

    python3 -m venv /work/venvs/torchserve
    /work/venvs/torchserve/bin/pip install torch==2.13.0 torch-model-archiver py7zr
    /work/venvs/torchserve/bin/python tests/corpus/serving/make_mars.py

- ``benign.mar``: a TorchScript model with TorchServe's built-in ``image_classifier`` handler.
- ``eager.mar``: eager mode, a ``state_dict`` with the ``model.py`` TorchServe imports.
- ``handler_system.mar`` and ``handler_system.tar.gz`` (``--archive-format tgz``): the same
  model served by a custom ``handler.py`` whose ``initialize`` calls ``os.system``: TorchServe
  imports the handler and runs it when it loads the model.
- ``pickle_system.mar``: the serialized model is a ``torch.save`` of an object whose
  ``__reduce__`` calls ``os.system``; ``torch.load(weights_only=False)`` (TorchServe's eager
  handler before torch 2.6) runs it.

``mars.truth.json`` records, per archive, the members (Python's zipfile or tarfile), the
manifest, and for ``pickle_system.mar`` whether ``torch.load(weights_only=False)`` of the
serialized file wrote its marker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
ARCHIVER = str(Path(sys.executable).with_name("torch-model-archiver"))
torch.manual_seed(38)

MODEL_PY = '''import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''

HANDLER_PY = '''import os

from ts.torch_handler.base_handler import BaseHandler


class Handler(BaseHandler):
    def initialize(self, context):
        os.system("touch /tmp/torchserve-handler-ran")
        super().initialize(context)
'''


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


class Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def archive(work: Path, name: str, *args: str, fmt: str = "default") -> Path:
    subprocess.run([ARCHIVER, "--model-name", name, "--version", "1.0", "--export-path",
                    str(HERE), "--archive-format", fmt, "-f", *args], check=True, cwd=work)
    return HERE / (f"{name}.tar.gz" if fmt == "tgz" else f"{name}.mar")


def members(path: Path) -> list[str]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return z.namelist()
    with tarfile.open(path) as t:
        return t.getnames()


def manifest(path: Path) -> dict:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return json.loads(z.read("MAR-INF/MANIFEST.json"))
    with tarfile.open(path) as t:
        name = next(n for n in t.getnames() if n.endswith("MAR-INF/MANIFEST.json"))
        return json.loads(t.extractfile(name).read())


def main() -> None:
    work = Path(tempfile.mkdtemp())
    model = Tiny().eval()
    torch.jit.save(torch.jit.script(model), work / "tiny.pt")
    torch.save(model.state_dict(), work / "tiny_state.pt")
    (work / "model.py").write_text(MODEL_PY)
    (work / "handler.py").write_text(HANDLER_PY)
    (work / "index_to_name.json").write_text('{"0": "no", "1": "yes"}\n')
    marker = work / "ran-pickle_system"
    torch.save({"model": Payload(str(marker))}, work / "payload.pt")
    made = {
        "benign.mar": archive(work, "benign", "--serialized-file", "tiny.pt", "--handler",
                              "image_classifier", "--extra-files", "index_to_name.json"),
        "eager.mar": archive(work, "eager", "--serialized-file", "tiny_state.pt",
                             "--model-file", "model.py", "--handler", "image_classifier"),
        "handler_system.mar": archive(work, "handler_system", "--serialized-file", "tiny.pt",
                                      "--handler", "handler.py"),
        "handler_system.tar.gz": archive(work, "handler_system", "--serialized-file",
                                         "tiny.pt", "--handler", "handler.py", fmt="tgz"),
        "pickle_system.mar": archive(work, "pickle_system", "--serialized-file", "payload.pt",
                                     "--handler", "image_classifier"),
    }
    torch.load(work / "payload.pt", weights_only=False)
    truth = {"torch": torch.__version__, "files": {
        name: {"members": members(path), "manifest": manifest(path)}
        for name, path in made.items()}}
    truth["files"]["pickle_system.mar"]["payload_ran_under_torch_load"] = marker.exists()
    (HERE / "mars.truth.json").write_text(json.dumps(truth, indent=1) + "\n")


if __name__ == "__main__":
    main()
