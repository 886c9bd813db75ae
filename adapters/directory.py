"""A directory that holds one checkpoint file and nothing of a known model layout.

The model-directory adapters (Sockeye, Hugging Face, rau, Keras sharded weights) come first in
the registry; a directory none of them claims is opened here when exactly one of its files is a
checkpoint of a known format (``epoch=3.ckpt`` beside a ``README``), and refused with the
candidates named when several are (a folder of epoch files). Only the directory's own entries
are looked at, never subdirectories, so symlink loops cannot make the search run forever; a
directory of more than :data:`MAX_SNIFFED` entries is refused without opening any file.

The helpers the directory adapters share (file lookups that swallow entries that cannot be
resolved, such as a symlink loop, and bounded JSON side files) are in :mod:`.side_files`.
"""

from __future__ import annotations

from .errors import FormatError
from .model import Checkpoint
from .registry import Adapter, load, sniff_file
from .side_files import (  # the helpers the directory adapters share, importable from here
    MAX_SIDE_JSON,
    dir_in,
    file_in,
    read_json_object,
)
from .source import Source

__all__ = ["ADAPTER", "MAX_SIDE_JSON", "candidates", "dir_in", "file_in", "read_json_object"]

NAME = "directory"
# Directories with more entries than this are not searched file by file.
MAX_SNIFFED = 1000
# Candidates named in the "several checkpoints" error.
MAX_NAMED = 4


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
