"""A plain pickle (``pickle.dump``, numpy/sklearn objects, joblib without raw arrays).

torch.load cannot read one (it is neither a zip nor a legacy stream), but people keep model
state in them: it is read like a torch ``data.pkl`` without storages, so its globals get their
verdicts (and the policy) and any plain values are listed.
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError
from ..model import Checkpoint
from ..security.pickle_grammar import genops
from ..source import Source
from .constants import MAX_PICKLE_BYTES
from .rebuild import load_pickle
from .walk import build_checkpoint


def open_plain(source: Source) -> Checkpoint:
    where = source.where
    if source.size > MAX_PICKLE_BYTES:
        raise FormatError(f"plain pickle of {source.size} bytes exceeds {MAX_PICKLE_BYTES}", where)
    with source.open() as f:
        data = f.read()
    obj, globals_ = load_pickle(data, None, where, "pickle")
    meta: dict[str, Any] = {
        "pickle_protocol": data[1] if data[:1] == b"\x80" else None,
        "storages": 0,
    }
    return build_checkpoint(source, "pickle", obj, globals_, meta, "pickle", len(data))


def protocol_0_1_pickle(head: bytes) -> bool:
    """A protocol 0/1 pickle of a container or object (what pickle.dumps writes for them): it
    starts with MARK, EMPTY_DICT/LIST/TUPLE or GLOBAL and parses to STOP within the head, or for
    at least 32 opcodes to the end of a full 4 KiB head."""
    if head[:1] not in (b"(", b"}", b"]", b")", b"c"):
        return False
    import warnings

    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # protocol-0 STRING escapes in random bytes
        try:
            for op, _arg, _pos in genops(head):
                n += 1
                if op.name == "STOP":
                    return True
        except Exception:  # noqa: BLE001 - not a pickle, or the head cut it short
            return n >= 32 and len(head) >= 4096
    return False
