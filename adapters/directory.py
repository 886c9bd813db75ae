"""A directory that holds one checkpoint file and nothing of a known model layout.

The model-directory adapters (Sockeye, Hugging Face, rau, Keras sharded weights) come first in
the registry; a directory none of them claims is opened here when exactly one of its files is a
checkpoint of a known format (``epoch=3.ckpt`` beside a ``README``), and refused with the
candidates named when several are (a folder of epoch files). Only the directory's own entries
are looked at, never subdirectories, so symlink loops cannot make the search run forever; a
directory of more than :data:`MAX_SNIFFED` entries is refused without opening any file.

Also the helpers the directory adapters share: a guarded listing, file lookups that swallow
entries that cannot be resolved (a symlink loop), and bounded JSON side files.
"""

from __future__ import annotations

import json

from .errors import FormatError, InspectorError
from .model import Checkpoint
from .registry import Adapter, load, sniff_file
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

NAME = "directory"
# Directories with more entries than this are not searched file by file.
MAX_SNIFFED = 1000
# config.json, kwargs.json, adapter_config.json, *.weights.json: small JSON side files.
MAX_SIDE_JSON = 16 << 20
# Candidates named in the "several checkpoints" error.
MAX_NAMED = 4


def file_in(directory: Source, name: str) -> Source | None:
    """``name`` inside ``directory`` when it is a regular file there, else None (missing,
    a directory, a symlink that loops or leaves the directory)."""
    try:
        child = directory.child(name)
        return child if child.is_file() else None
    except (InspectorError, OSError, RuntimeError):  # RuntimeError: symlink loop (3.11 resolve)
        return None


def dir_in(directory: Source, name: str) -> Source | None:
    """``name`` inside ``directory`` when it is a directory there, else None."""
    try:
        child = directory.child(name)
        return child if child.is_dir() else None
    except (InspectorError, OSError, RuntimeError):
        return None


def read_json_object(source: Source, what: str) -> dict[str, Any]:
    """A small JSON side file that must hold an object."""
    try:
        data = json.loads(source.read_text(MAX_SIDE_JSON))
    except ValueError as e:  # JSONDecodeError
        raise FormatError(f"{what} is not readable JSON ({e})", source.where) from None
    if not isinstance(data, dict):
        raise FormatError(f"{what} is not a JSON object", source.where)
    return data


def candidates(directory: Source) -> list[str]:
    """The names of the files in ``directory`` that some file adapter recognises."""
    names = directory.list()
    if len(names) > MAX_SNIFFED:
        raise FormatError(
            f"directory holds {len(names):,} entries and no known model layout; "
            "name the checkpoint file to open",
            directory.where,
        )
    found = []
    for name in names:
        f = file_in(directory, name)
        if f is not None and sniff_file(f) is not None:
            found.append(name)
    return found


def sniff(head: bytes, source: Source) -> str | None:
    if not source.is_dir():
        return None
    found = candidates(source)
    if len(found) == 1:
        return "single"
    return "several" if found else None


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    found = candidates(source)
    if variant == "several" or len(found) != 1:
        shown = ", ".join(found[:MAX_NAMED]) + (f", ... ({len(found)})" if len(found) > MAX_NAMED
                                               else "")
        raise FormatError(
            f"{len(found)} checkpoints here ({shown}); pick one, e.g. "
            f"{source.where.rstrip('/')}/{found[0]}",
            source.where,
        )
    inner = load(source.child(found[0]))
    return Checkpoint(
        paths=(source.where, *inner.paths),
        format=inner.format,
        tensors=inner.tensors,
        metadata={**inner.metadata, "directory_file": found[0]},
        hyperparameters=inner.hyperparameters,
        findings=inner.findings,
        source=inner.source,
        reader=inner.reader,
    )


ADAPTER = Adapter(
    name=NAME,
    description="a directory holding one checkpoint file",
    extensions=("<directory>",),
    sniff=sniff,
    open=open_checkpoint,
)
