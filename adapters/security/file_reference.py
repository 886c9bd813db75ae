"""Where a reference to another file, held in a file, points: HDF5 external links and raw
storage, virtual-dataset sources, a Keras lookup layer's vocabulary path."""

from __future__ import annotations

import re

from .examination import DANGEROUS, FOREIGN

_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


def target_level(target: str) -> str | None:
    """``dangerous`` for a target that is absolute or climbs out (``..``), ``foreign`` for one
    beside the file, None for ``.`` (the file itself). Both separators count: libhdf5 on
    Windows takes ``\\`` too."""
    if target == ".":
        return None
    parts = re.split(r"[\\/]", target)
    absolute = target.startswith(("/", "\\")) or bool(_DRIVE.match(target))
    return DANGEROUS if absolute or ".." in parts else FOREIGN
