"""rau model directories (``rau lm train --output DIR``).

rau's ``ModelSaver`` (``src/rau/tools/torch/saver.py``) writes ``kwargs.json`` (KWARGS_FILE: the
model constructor's keyword arguments) and the parameters with ``torch.save(state_dict)``:

* rau 0.2.0 (PyPI): ``parameters/main.pt`` (PARAMETERS_DIR / DEFAULT_PARAMETER_FILE);
* rau's ``main`` branch since 2025-08 and the ``differentiable-stacks`` branch:
  ``parameters.pt``.

The parameters file is opened by the torch adapter; ``kwargs.json`` is the checkpoint's
hyperparameters (``hyperparameters["kwargs"]``), which the ``rau-*`` architectures of
``inspector check`` read.
"""

from __future__ import annotations

from .errors import FormatError
from .model import Checkpoint
from .registry import Adapter, load
from .side_files import RAU_KWARGS, dir_in, file_in, read_json_object
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

NAME = "rau-directory"
KWARGS_FILE = "kwargs.json"
# Newest layout first.
PARAMETER_FILES = ("parameters.pt", "parameters/main.pt")


def parameters_file(directory: Source) -> str | None:
    """The parameters file's name inside a rau directory, or None. A name that resolves
    outside the directory is refused, never followed."""
    names = set(directory.list())
    for name in (KWARGS_FILE, "parameters.pt", "parameters"):
        if name in names:
            directory.child(name)
    if file_in(directory, "parameters.pt") is not None:
        return "parameters.pt"
    sub = dir_in(directory, "parameters")
    if sub is not None and file_in(sub, "main.pt") is not None:
        return "parameters/main.pt"
    return None


def sniff(head: bytes, source: Source) -> str | None:
    if not source.is_dir():
        return None
    name = parameters_file(source)  # refuses names that leave the directory
    return name if name is not None and file_in(source, KWARGS_FILE) is not None else None


def read_kwargs(source: Source) -> dict[str, Any]:
    """rau's ``kwargs.json`` as a dict (the one reader of this file)."""
    return read_json_object(source, "rau kwargs.json")


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    name = parameters_file(source)
    if name is None:
        raise FormatError("rau directory without parameters.pt or parameters/main.pt",
                          source.where)
    inner = load(source.child(name))
    kwargs = read_kwargs(source.child(KWARGS_FILE))
    return Checkpoint(
        paths=(source.where, *inner.paths),
        format=NAME,
        tensors=inner.tensors,
        metadata={
            "kwargs_file": KWARGS_FILE,
            "parameters_file": name,
            "layout": "rau-0.2.0" if name == "parameters/main.pt" else "rau-main",
            "parameters_format": inner.format,
            "parameters_metadata": inner.metadata,
        },
        hyperparameters={"kwargs": kwargs},
        findings=inner.findings,
        source=source,
        reader=inner.reader,
        side_configs={RAU_KWARGS: kwargs},
    )


ADAPTER = Adapter(
    name=NAME,
    description="rau model directory (kwargs.json + parameters.pt or parameters/main.pt)",
    extensions=("<directory>",),
    sniff=sniff,
    open=open_checkpoint,
)
