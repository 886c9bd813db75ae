"""The legacy container of ``torch.save`` (``_use_new_zipfile_serialization=False``, torch < 1.6):
five concatenated pickles, then the raw storages, which are skipped."""

from __future__ import annotations

import struct
from typing import Any

from ..errors import FormatError
from ..model import Checkpoint
from ..security.restricted_pickle import (
    PickleError,
    render,
    unpickle,
)
from ..source import Source
from .constants import MAGIC_NUMBER, PROTOCOL_VERSION
from .rebuild import ITEMSIZE, Builder, StorageRef, short_repr, storage_ref
from .walk import build_checkpoint


def open_legacy(source: Source) -> Checkpoint:
    where = source.where
    size = source.size
    with source.open() as f:
        head = f.read(2)
        proto = head[1] if head[:1] == b"\x80" and len(head) == 2 else None
        f.seek(0)

        def small(what: str) -> Any:
            start = f.tell()
            try:
                value, globals_ = unpickle(f, {})
            except PickleError as e:
                _refuse_dangerous(e.globals or {}, what, where)
                raise FormatError(f"{what}: {e}", where, f"offset {start}") from None
            _refuse_dangerous(globals_, what, where)  # torch.load runs it before any check
            return value

        if small("magic number") != MAGIC_NUMBER:
            raise FormatError("first pickle is not torch's magic number", where, "offset 0")
        version = small("protocol version")
        if version != PROTOCOL_VERSION:
            raise FormatError(
                f"legacy protocol version {version!r} is not supported "
                f"(expected {PROTOCOL_VERSION})",
                where,
            )
        sys_info = small("sys_info")
        if not isinstance(sys_info, dict):
            raise FormatError("sys_info pickle is not a dict", where)

        storages: dict[str, StorageRef] = {}

        def resolve(pid: Any) -> Any:
            if not isinstance(pid, tuple) or not pid:
                raise PickleError(f"unexpected persistent id {short_repr(pid)}")
            head = pid[0]
            if isinstance(head, bytes):  # torch's _maybe_decode_ascii
                head = head.decode("ascii", "replace")
            if head == "module" and len(pid) >= 2:
                # (module, class, source file, source): torch returns data[0] whatever it is (a
                # falsy field skips the source check), a placeholder the pickle may call
                return pid[1]
            if head != "storage" or len(pid) not in (5, 6):
                raise PickleError(f"unexpected persistent id {short_repr(pid)}")
            ref = storage_ref(*pid[1:5])
            view = pid[5] if len(pid) == 6 else None
            root = storages.setdefault(ref.key, ref)
            if root.dtype != ref.dtype:
                raise PickleError(
                    f"storage {ref.key!r} is referenced as both {root.dtype} and {ref.dtype}"
                )
            if view is None:
                return root
            if not (
                isinstance(view, tuple)
                and len(view) == 3
                and type(view[1]) is int
                and type(view[2]) is int
                and view[1] >= 0
                and view[2] >= 0
            ):
                raise PickleError(f"storage view {short_repr(view)} is not (key, offset, size)")
            v = StorageRef(root.key, root.dtype, view[2], root.location, root.type_name)
            v.base, v.view_offset = root, view[1]
            return v

        main_at = f.tell()
        try:
            obj, globals_ = unpickle(f, Builder().allowed(), resolve)
        except PickleError as e:
            raise FormatError(str(e), where, f"pickle at offset {main_at}") from None
        keys_at = f.tell()
        keys = small("storage key list")
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise FormatError(
                "the storage key list is not a list of strings", where, f"offset {f.tell()}"
            )
        pos = f.tell()
    _scan_legacy_storages(source, pos, size, keys, storages, where)
    meta: dict[str, Any] = {
        "legacy_protocol_version": version,
        "byteorder": "little" if sys_info.get("little_endian", True) else "big",
        "type_sizes": render(sys_info.get("type_sizes")),
        "pickle_protocol": proto,
        "storages": len(storages),
    }
    member = f"pickle at offset {main_at}"
    return build_checkpoint(source, "torch-legacy", obj, globals_, meta, member, keys_at - main_at)


def _refuse_dangerous(globals_: dict[str, Any], what: str, where: str) -> None:
    """A refusal when one of the small pickles (magic, version, sys_info, storage keys) names a
    dangerous global: ``torch.load`` unpickles each before it checks the value."""
    from ..errors import UnsafeContentError
    from ..security.verdicts import DANGEROUS

    bad = sorted(f"{g.name} (would be {g.verdict.use}: {g.verdict.why})"
                 for g in globals_.values()
                 if g.verdict is not None and g.verdict.level == DANGEROUS)
    if bad:
        raise UnsafeContentError(f"refused: the {what} pickle references {'; '.join(bad[:3])}; "
                                 "nothing was run (torch.load would run it)", where)


def _scan_legacy_storages(
    source: Source,
    pos: int,
    size: int,
    keys: list[str],
    storages: dict[str, StorageRef],
    where: str,
) -> None:
    """Per key: 8-byte LE element count, then the bytes; record offsets, seek over the data."""
    listed = set(keys)
    missing = [k for k in storages if k not in listed]
    if missing:
        raise FormatError(
            f"storage {missing[0]!r} is used by the pickle but missing from the storage key list",
            where,
        )
    seen: set[str] = set()
    with source.view() as mm:
        for key in keys:
            ref = storages.get(key)
            if ref is None:
                raise FormatError(
                    f"storage key {key!r} is listed but no tensor uses it", where, f"offset {pos}"
                )
            if key in seen:
                raise FormatError(f"storage key {key!r} is listed twice", where, f"offset {pos}")
            seen.add(key)
            if pos + 8 > size:
                raise FormatError(
                    f"storage {key!r}: element count at offset {pos} is past the end "
                    f"of the file ({size} bytes): truncated",
                    where,
                    f"offset {pos}",
                )
            (count,) = struct.unpack("<q", mm[pos : pos + 8])
            nbytes = count * ITEMSIZE[ref.dtype]
            if count < 0 or pos + 8 + nbytes > size:
                raise FormatError(
                    f"storage {key!r} declares {count} x {ref.dtype} ({nbytes} bytes) "
                    f"at offset {pos + 8}, past the end of the file ({size} bytes)",
                    where,
                    f"offset {pos}",
                )
            ref.offset, ref.nbytes = pos + 8, nbytes
            pos += 8 + nbytes
