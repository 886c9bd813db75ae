"""Pickles inside a pickle: ``torch.storage._load_from_bytes(b"...")``.

``pickle.dumps`` of a torch tensor (not ``torch.save``) writes each storage as a call of
``torch.storage._load_from_bytes`` on the bytes of a whole ``torch.save`` file, which torch
unpickles with ``weights_only=False`` when the outer pickle is loaded. The global is on fickling's
list for that reason; picklescan's comment on such globals suggests scanning the inner bytes
instead. That is done here: the bytes are read as a torch zip (or legacy stream) through the same
restricted unpickler, recursively (bounded depth), and the call is judged by what they hold.
"""

from __future__ import annotations

import io
import threading
import zipfile
from collections.abc import Callable
from typing import Any

from . import verdicts
from .placeholders import GlobalRef, PickleError

MAX_DEPTH = 4
# Per thread: fleets (show, scan --jobs) examine several files at once.
_local = threading.local()


def examine(blob: Any, load: Callable[[bytes], dict[str, GlobalRef]]) -> tuple[str, str]:
    """(level, summary) of the torch.save bytes a nested loader would load: ``dangerous`` when
    they cannot be examined or name a dangerous global, else the worst of their globals.
    ``load(pickle_bytes)``: the globals of one pickle, read by the restricted unpickler
    (:func:`.restricted_pickle.examine_nested` gives it), or a :class:`PickleError`."""

    if not isinstance(blob, (bytes, bytearray)):
        return verdicts.DANGEROUS, "its argument is not bytes in the file"
    depth = getattr(_local, "depth", 0)
    if depth >= MAX_DEPTH:
        return verdicts.DANGEROUS, f"nested more than {MAX_DEPTH} deep"
    _local.depth = depth + 1
    try:
        pickles = _pickles(bytes(blob))
        if not pickles:
            return verdicts.DANGEROUS, "its bytes are not a torch.save file"
        names: dict[str, str] = {}
        for data in pickles:
            try:
                globals_ = load(data)
            except PickleError as e:
                return verdicts.DANGEROUS, f"its bytes hold a broken pickle ({e})"
            for g in globals_.values():
                assert g.verdict is not None
                names[g.name] = g.verdict.level
        level = verdicts.worst(set(names.values()))
        bad = sorted(n for n, lv in names.items() if lv == level and lv != verdicts.SAFE)
        return level, ", ".join(bad) if bad else "no dangerous global"
    finally:
        _local.depth = depth


def _pickles(blob: bytes) -> list[bytes]:
    """The pickle(s) of a torch.save file held in memory: a zip's data.pkl, or a legacy
    stream's first five pickles (read as bytes, one after another)."""
    if blob[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(blob)) as z:
                names = [n for n in z.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
                if len(names) != 1 or z.getinfo(names[0]).file_size > len(blob) * 64:
                    return []
                return [z.read(names[0])]
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
            return []
    if blob[:1] == b"\x80":
        return [blob]  # a legacy stream: its pickles are judged as one, up to the first error
    return []
