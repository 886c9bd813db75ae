"""The members of a torch zip beside the ``data.pkl`` torch reads, examined for the listing and
for ``scan`` alike: the container's disagreements, the other members a ``data.pkl`` lookup could
answer with, and every other member that is a pickle (TorchScript's ``constants.pkl``,
``*.debug_pkl``, anything a re-zipper added). Raw storage records (``<root>/data/<key>``) are
never unpickled by torch and are skipped."""

from __future__ import annotations

from typing import Any

from ..security.examination import (
    ERROR,
    FOREIGN,
    MAX_PICKLE_BYTES,
    FileResult,
    examine_pickle,
    is_pickle_start,
    one_line,
)
from ..zip_container import Member, local_header, local_name_notes, read_member

PICKLE_SUFFIXES = (".pkl", ".pickle", ".debug_pkl")


def container_notes(mm: Any, size: int, tz: Any, res: FileResult) -> None:
    """What readers could disagree on: the directory's notes and local-name mismatches of the
    members a ``data.pkl`` lookup could answer with."""
    for note in tz.directory.notes:
        res.add(FOREIGN, f"zip: {note}")
    for note in local_name_notes(mm, size, tz.directory, res.path, tz.pickle_copies()):
        res.add(FOREIGN, f"zip: {note}")


def examine_others(mm: Any, size: int, tz: Any, where: str, res: FileResult) -> None:
    """Every pickle of the archive but the ``data.pkl`` torch reads."""
    copies = tz.pickle_copies()
    done = {m.index for m in copies}
    for m in copies[1:]:
        examine_member(mm, size, m, f"{m.name} (entry {m.index}: a copy torch does not read)",
                       where, res)
    records = (tz.root + "data/").lower()
    for m in tz.directory.members:
        if m.index in done or m.is_dir() or m.name.lower().startswith(records):
            continue
        if m.encrypted:
            res.add(ERROR, f"member {m.name} is encrypted: not examined", m.name)
            continue
        try:
            head = _head(mm, size, m, where)
        except Exception as e:  # noqa: BLE001 - one member's damage is that member's error
            res.add(ERROR, one_line(e), m.name)
            continue
        if is_pickle_start(head) or m.name.lower().endswith(PICKLE_SUFFIXES):
            examine_member(mm, size, m, m.name, where, res)


def _head(mm: Any, size: int, m: Member, where: str) -> bytes:
    """A member's first two bytes (a stored member's without reading the rest)."""
    if m.method == 0:
        start, _ = local_header(mm, size, m, where, with_name=False)
        return bytes(mm[start : start + min(2, m.csize)])
    return read_member(mm, size, m, where, MAX_PICKLE_BYTES)[:2]


def examine_member(mm: Any, size: int, m: Member, label: str, where: str,
                   res: FileResult) -> None:
    try:
        data = read_member(mm, size, m, where, MAX_PICKLE_BYTES)
    except Exception as e:  # noqa: BLE001 - damage in one member is that member's error
        res.add(ERROR, one_line(e), label)
        return
    examine_pickle(res, data, label)
