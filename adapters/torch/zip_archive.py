"""The zip container of ``torch.save`` (torch >= 1.6): the central directory, ``data.pkl`` and
the local header of each storage record, read from a buffer over the file."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import FormatError
from ..model import Checkpoint
from ..security.restricted_pickle import (
    GlobalRef,
    PickleError,
)
from ..source import Source
from .constants import (
    MAX_PICKLE_BYTES,
    MAX_TEXT_RECORD,
    TEXT_RECORDS,
    ZIP64_END_MAGIC,
    ZIP64_LOCATOR_MAGIC,
    ZIP_CENTRAL_MAGIC,
    ZIP_END_MAGIC,
    ZIP_LOCAL_MAGIC,
)
from .rebuild import ITEMSIZE, StorageRef, load_pickle, short_repr, storage_ref
from .walk import build_checkpoint

# (header offset, compression method, compressed size, uncompressed size)
_Member = tuple[int, int, int, int]
_CD_ENTRY = struct.Struct("<4s4xHH8xIIHHH8xI")  # central directory file header, 46 bytes
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory, 22 bytes
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory, 56 bytes
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator, 20 bytes
_LOCAL = struct.Struct("<4s22xHH")  # local file header: magic, ..., name len, extra len
# Members besides data.pkl a reader asks for (TorchScript code/ sources) are read up to this size.
MAX_EXTRA = 64 << 20


def central_directory(mm: Any, size: int, where: str) -> dict[str, _Member]:
    """name -> (local header offset, method, compressed size, size) of every zip member."""
    tail_start = max(0, size - (_EOCD.size + 0xFFFF))
    pos = mm.rfind(ZIP_END_MAGIC, tail_start)
    if pos < 0 or pos + _EOCD.size > size:
        raise FormatError(
            f"no zip end-of-central-directory record: the file ({size} bytes) is truncated "
            "or not a zip",
            where,
        )
    eocd = mm[pos : pos + _EOCD.size]
    _, _disk, _cd_disk, _n_here, count, cd_size, cd_offset, _clen = _EOCD.unpack(eocd)
    cd_end = pos
    loc = pos - _ZIP64_LOCATOR.size
    # torch (miniz) writes the zip64 records even for small files; use them when present.
    if loc >= 0 and mm[loc : loc + 4] == ZIP64_LOCATOR_MAGIC:
        _, _, z64, _ = _ZIP64_LOCATOR.unpack(mm[loc : loc + _ZIP64_LOCATOR.size])
        if z64 + _ZIP64_EOCD.size > loc or mm[z64 : z64 + 4] != ZIP64_END_MAGIC:
            raise FormatError(
                "zip64 end-of-central-directory record missing", where, f"offset {z64}"
            )
        _, _, _, _, _, _, _, count, cd_size, cd_offset = _ZIP64_EOCD.unpack(
            mm[z64 : z64 + _ZIP64_EOCD.size]
        )
        cd_end = z64
    elif count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        raise FormatError("zip64 sizes without a zip64 locator", where, f"offset {pos}")
    # Bytes prepended to the archive shift every offset (zipfile's "concat").
    concat = cd_end - cd_size - cd_offset
    start = cd_offset + concat
    if concat < 0 or start < 0:
        raise FormatError(
            f"central directory ({cd_size} bytes at {cd_offset}) does not fit before its end "
            f"record at {cd_end}: truncated or corrupt zip",
            where,
        )
    if count > cd_size // _CD_ENTRY.size:
        raise FormatError(f"zip declares {count} members in a {cd_size}-byte directory", where)
    members: dict[str, _Member] = {}
    unpack = _CD_ENTRY.unpack_from
    cd = mm[start:cd_end]  # one copy; slicing bytes is cheaper than slicing the mmap
    end = len(cd)
    p = 0
    for _ in range(count):
        if p + 46 > end:
            raise FormatError("zip central directory is truncated", where, f"offset {start + p}")
        magic, flags, method, csize, usize, nlen, elen, clen, hoff = unpack(cd, p)
        if magic != ZIP_CENTRAL_MAGIC:
            raise FormatError("bad zip central directory entry", where, f"offset {start + p}")
        q = p + 46
        name = str(cd[q : q + nlen], "utf-8" if flags & 0x800 else "cp437", "replace")
        if csize == 0xFFFFFFFF or usize == 0xFFFFFFFF or hoff == 0xFFFFFFFF:
            usize, csize, hoff = _zip64_extra(
                cd[q + nlen : q + nlen + elen], usize, csize, hoff, where, name
            )
        members[name] = (hoff + concat, method, csize, usize)
        p = q + nlen + elen + clen
    return members


def _zip64_extra(
    extra: bytes, usize: int, csize: int, hoff: int, where: str, name: str
) -> tuple[int, int, int]:
    i = 0
    while i + 4 <= len(extra):
        tag, ln = struct.unpack_from("<HH", extra, i)
        if tag == 1:
            vals = list(struct.unpack_from(f"<{ln // 8}Q", extra, i + 4))
            if usize == 0xFFFFFFFF and vals:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if hoff == 0xFFFFFFFF and vals:
                hoff = vals.pop(0)
            return usize, csize, hoff
        i += 4 + ln
    raise FormatError(f"member {name!r} needs zip64 sizes but has no zip64 extra field", where)


def find_data_pkl(members: dict[str, _Member]) -> str | None:
    """The ``<root>/data.pkl`` member (root of any name), preferring the first member's root."""
    found = [
        n
        for n in members
        if n.endswith("data.pkl")
        and (n == "data.pkl" or n.endswith("/data.pkl"))
        and n.count("/") <= 1
    ]
    if len(found) <= 1:
        return found[0] if found else None
    first_root = next(iter(members)).split("/", 1)[0]
    for n in found:
        if n.split("/", 1)[0] == first_root:
            return n
    return found[0]


def open_zip(source: Source) -> Checkpoint:
    z = read_zip(source)
    return build_checkpoint(
        source, "torch-zip", z.obj, z.globals, z.meta, z.pkl_name, z.pickle_bytes
    )


@dataclass
class ZipRead:
    """What :func:`read_zip` found: the unpickled ``data.pkl`` (tensors as records), the globals
    it named, the metadata, and the small members a TorchScript reader asks for (``extra``)."""

    obj: Any
    globals: dict[str, GlobalRef]
    meta: dict[str, Any]
    pkl_name: str
    pickle_bytes: int
    root: str
    members: list[str]
    extra: dict[str, bytes]


def read_zip(source: Source, want: Callable[[str], bool] | None = None) -> ZipRead:
    """Read a torch zip archive's ``data.pkl`` and records; ``want(name)`` selects further
    members (relative to the root) whose bytes are returned in :attr:`ZipRead.extra`."""
    where = source.where
    with source.view() as mm:
        size = len(mm)
        members = central_directory(mm, size, where)
        pkl_name = find_data_pkl(members)
        if pkl_name is None:
            shown = ", ".join(list(members)[:8]) + (
                f", ... ({len(members)} members)" if len(members) > 8 else ""
            )
            raise FormatError(
                f"zip archive has no <root>/data.pkl, so it is not a torch.save "
                f"checkpoint; it holds: {shown or 'nothing'}",
                where,
            )
        root = pkl_name[: -len("data.pkl")]  # "archive/" or ""
        data = _read_member(mm, size, members, pkl_name, where)

        storages: dict[str, StorageRef] = {}

        def resolve(pid: Any) -> StorageRef:
            if type(pid) is not tuple or len(pid) != 5 or pid[0] != "storage":
                raise PickleError(
                    f"unexpected persistent id {short_repr(pid)} (expected "
                    "('storage', type, key, location, numel))"
                )
            _, stype, key, location, numel = pid
            old = storages.get(key) if type(key) is str else None
            if old is not None and old.type_name == stype and old.numel == numel:
                return old  # the same storage again (tied weights, views)
            ref = storage_ref(stype, key, location, numel)
            if old is not None:
                if old.dtype != ref.dtype:
                    raise PickleError(
                        f"storage {key!r} is referenced as both {old.dtype} and {ref.dtype}"
                    )
                return old
            record = f"{root}data/{key}"
            member = members.get(record)
            if member is None:
                raise FormatError(
                    f"storage {key!r} referenced by data.pkl has no record {record} in the zip",
                    where,
                    pkl_name,
                )
            ref.nbytes = member[3]
            need = numel * ITEMSIZE[ref.dtype]
            if ref.nbytes < need:
                raise FormatError(
                    f"storage record {record} holds {ref.nbytes} bytes, but data.pkl "
                    f"declares {numel} x {ref.dtype} = {need}",
                    where,
                    record,
                )
            storages[key] = ref
            return ref

        obj, globals_ = load_pickle(data, resolve, where, pkl_name)
        _locate_records(mm, size, members, root, storages, where)
        meta: dict[str, Any] = {"zip_root": root.rstrip("/")}
        for key, member in TEXT_RECORDS:
            if root + member in members:
                meta[key] = (
                    _read_member(mm, size, members, root + member, where, MAX_TEXT_RECORD)
                    .decode("utf-8", "replace")
                    .strip()
                )
        # TorchScript archives (torch.jit.save) add code/ and constants.pkl beside data.pkl.
        meta["torchscript"] = any(n.startswith(root + "code/") for n in members)
        extra = {}
        if want is not None:
            for n in members:
                if n.startswith(root) and want(n[len(root):]):
                    extra[n[len(root):]] = _read_member(mm, size, members, n, where, MAX_EXTRA)
    meta.setdefault("byteorder", "little")  # torch < 2.1 wrote no byteorder record: little-endian
    meta["pickle_protocol"] = data[1] if data[:1] == b"\x80" and len(data) > 1 else None
    meta["storages"] = len(storages)
    return ZipRead(obj, globals_, meta, pkl_name, len(data), root, list(members), extra)


def _read_member(
    mm: Any,
    size: int,
    members: dict[str, _Member],
    name: str,
    where: str,
    limit: int = MAX_PICKLE_BYTES,
) -> bytes:
    hoff, method, csize, usize = members[name]
    if usize > limit:
        raise FormatError(f"{name} declares {usize} bytes (limit {limit})", where, name)
    start = _data_start(mm, size, hoff, where, name)
    if start + csize > size:
        raise FormatError(
            f"{name} ({csize} bytes at offset {start}) runs past the end of the "
            f"file ({size} bytes): truncated zip",
            where,
            name,
        )
    raw = mm[start : start + csize]
    if method == 0:
        return raw
    if method == 8:
        try:
            out = zlib.decompressobj(-15).decompress(raw, usize + 1)
        except zlib.error as e:
            raise FormatError(f"{name} is not valid deflate data ({e})", where, name) from None
        if len(out) != usize:
            raise FormatError(
                f"{name} inflates to {len(out)} bytes, the directory says {usize}", where, name
            )
        return out
    raise FormatError(
        f"{name} uses zip compression method {method}; torch writes stored records", where, name
    )


def _data_start(mm: Any, size: int, hoff: int, where: str, name: str) -> int:
    if hoff + _LOCAL.size > size:
        raise FormatError(
            f"local header of {name} at offset {hoff} is past the end of the file "
            f"({size} bytes): truncated zip",
            where,
            name,
        )
    magic, nlen, elen = _LOCAL.unpack(mm[hoff : hoff + _LOCAL.size])
    if magic != ZIP_LOCAL_MAGIC:
        raise FormatError(f"no local file header for {name} at offset {hoff}", where, name)
    return hoff + 30 + nlen + elen


def _locate_records(
    mm: Any,
    size: int,
    members: dict[str, _Member],
    root: str,
    storages: dict[str, StorageRef],
    where: str,
) -> None:
    """Each storage's data offset from its 30-byte local header (the data itself is not read)."""
    unpack, n = _LOCAL.unpack, _LOCAL.size
    prefetch = getattr(mm, "prefetch", None)  # a remote view fetches the headers together
    if prefetch is not None:
        prefetch([(members[f"{root}data/{key}"][0], n) for key in storages])
    for key, ref in storages.items():
        name = f"{root}data/{key}"
        hoff, method, csize, _usize = members[name]
        if hoff + _LOCAL.size > size:
            raise FormatError(
                f"local header of {name} at offset {hoff} is past the end of the "
                f"file ({size} bytes): truncated zip",
                where,
                name,
            )
        magic, nlen, elen = unpack(mm[hoff : hoff + n])
        start = hoff + 30 + nlen + elen
        if magic != ZIP_LOCAL_MAGIC or start + csize > size:
            _data_start(mm, size, hoff, where, name)  # raises the precise error
            raise FormatError(
                f"storage record {name} ({csize} bytes at offset {start}) runs "
                f"past the end of the file ({size} bytes): truncated zip",
                where,
                name,
            )
        if method == 0:
            ref.offset = start
        else:  # compressed by some re-zipper: no direct offset, sizes still known
            ref.compressed = True
