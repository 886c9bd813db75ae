"""What ``torch.load`` would run from a torch file, examined through the walks the listing uses.

* zip: :func:`~.zip_archive.walk_zip` (the root from the first member, ``data.pkl`` looked up
  as torch's miniz does). Every member a lookup of ``<root>/data.pkl`` could answer with is
  examined (the one torch reads first; a duplicate torch skips could be the one another reader
  takes), every other member that is a pickle by its first bytes or name too (TorchScript's
  ``constants.pkl``, ``*.debug_pkl``); raw storage records (``<root>/data/<key>``) are never
  unpickled by torch and are skipped. The directory's disagreements are reported.
* legacy: the pickles of the stream (magic, version, sys_info, the object, the storage keys).
* tar (torch < 0.4, which ``torch.load`` still tries first, :mod:`.tar_legacy`).
"""

from __future__ import annotations

from typing import Any

from ..security.examination import (
    ERROR,
    FOREIGN,
    FileResult,
    examine_pickles,
    examine_stream,
    one_line,
)
from ..security.trust import vetted_here
from ..source import Source
from ..zip_container import read_member
from .zip_archive import MAX_EXTRA, walk_zip
from .zip_members import container_notes, examine_member, examine_others


def examine(source: Source, variant: str, res: FileResult) -> None:
    res.kind = {"zip": "torch-zip", "legacy": "torch-legacy", "tar": "torch-tar",
                "pickle": "pickle"}.get(variant, variant)
    if variant == "zip":
        examine_zip(source, res)
    elif variant == "tar":
        from .tar_legacy import examine_tar

        examine_tar(source, res)
    elif variant == "legacy":  # the five pickles torch reads; the raw storages follow
        with source.open() as f:
            examine_stream(res, f, source.size, "pickle", max_pickles=5)
    else:
        with source.open() as f:
            examine_pickles(res, f, source.size)


def examine_zip(source: Source, res: FileResult) -> None:
    where = source.where
    with source.view() as mm:
        size = len(mm)
        tz = walk_zip(mm, size, where)
        res.zip_walked = True
        container_notes(mm, size, tz, res)
        names = tz.directory.names()
        code = [n for n in names if n.startswith(tz.root + "code/")]
        if code:
            res.kind = "torchscript"
            res.add(FOREIGN, f"TorchScript code: {len(code)} file(s) under code/ (torch.jit.load "
                    "compiles and runs them; they cannot call Python)")
        with vetted_here(script_classes(mm, size, tz, where, res)):
            examine_member(mm, size, tz.pkl, tz.pkl.name, where, res)
            examine_others(mm, size, tz, where, res)


def script_classes(mm: Any, size: int, tz: Any, where: str, res: FileResult) -> dict[str, str]:
    """The ``__torch__.<module>.`` prefixes whose classes a loader takes from the archive's own
    TorchScript code -> why: only in an archive ``torch.load`` hands to ``torch.jit.load`` (one
    with ``constants.pkl``: ``_is_torchscript_zip``), whose unpickler resolves ``__torch__`` names
    in the compiled ``code/`` (TorchScript, which cannot call Python), never by importing. Each
    source is read as the listing reads it (for the class declarations); one that does not read
    is an error naming it, and vets nothing."""
    root = tz.root
    if root + "constants.pkl" not in tz.directory.names():
        return {}
    prefix = root + "code/"
    out: dict[str, str] = {}
    for m in tz.directory.members:
        name = m.name
        if not (name.startswith(prefix + "__torch__") and name.endswith(".py")):
            continue
        try:
            read_member(mm, size, m, where, MAX_EXTRA)
        except Exception as e:  # noqa: BLE001 - one member's damage is that member's error
            res.add(ERROR, one_line(e), name)
            continue
        out[name[len(prefix):-3].replace("/", ".") + "."] = (
            "a TorchScript class compiled from the archive's own "
            f"{name[len(root):]} (TorchScript cannot call Python)")
    return out
