"""torch's pre-0.4 tar checkpoints, which ``torch.load`` still tries first on any file that is
not a zip (``torch/serialization.py`` ``_legacy_load``: ``tarfile.open(mode="r:")``, and only a
``TarError`` sends it on to the pickle stream).

``legacy_load`` extracts three members (``tarfile.getmember``: the last of equal names) and
unpickles, in this order:

* ``storages``: a pickle of the count, then per storage a pickle ``(key, location,
  storage_type)`` followed by raw data (int64 little-endian element count, then the elements,
  ``THPStorage_readFileRaw``), then a pickle of the storage views;
* ``tensors``: a pickle of the count, then per tensor a pickle ``(key, storage_id, type)``
  followed by int32 ndim, 4 bytes, ndim int64 sizes, ndim int64 strides, int64 offset;
* ``pickle``: the object.

Each of those pickles is run by ``torch.load(weights_only=False)``; here each is examined through
the restricted unpickler, the raw parts skipped by their declared sizes. A tar is recognised by
its first header's checksum, as ``tarfile`` recognises it, whatever the bytes look like (a PAX
header and protocol-0 pickles hold no NUL byte).
"""

from __future__ import annotations

import io
import struct
import tarfile
from typing import Any

from ..security.examination import ERROR, FOREIGN, FileResult, examine_pickle, one_line
from ..source import Source
from .constants import STORAGE_DTYPES
from .rebuild import ITEMSIZE

MEMBERS = ("storages", "tensors", "pickle")
MAX_TAR_MEMBERS = 100_000
MAX_RECORDS = 1_000_000  # storages or tensors declared in one member
MAX_MEMBER_BYTES = 256 << 20


def is_tar(head: bytes) -> bool:
    """Whether the first 512 bytes are a tar header ``tarfile`` accepts (its checksum)."""
    if len(head) < 512:
        return False
    try:
        tarfile.TarInfo.frombuf(head[:512], "utf-8", "surrogateescape")
    except (tarfile.HeaderError, ValueError):
        return False
    return True


def torch_members(source: Source) -> list[str] | None:
    """The names of a tar's members when it holds one of torch's, else None."""
    try:
        with source.open() as f, tarfile.open(fileobj=f, mode="r:") as tar:
            names = []
            for info in tar:
                names.append(info.name)
                if len(names) > MAX_TAR_MEMBERS:
                    break
    except (tarfile.TarError, OSError, ValueError, EOFError):
        return None
    return names if any(n in MEMBERS or n == "sys_info" for n in names) else None


def examine_tar(source: Source, res: FileResult) -> None:
    with source.open() as f, tarfile.open(fileobj=f, mode="r:") as tar:
        infos = []
        for info in tar:
            infos.append(info)
            if len(infos) > MAX_TAR_MEMBERS:
                res.add(ERROR, f"more than {MAX_TAR_MEMBERS:,} tar members: not examined")
                return
        by_name: dict[str, list[tarfile.TarInfo]] = {}
        for info in infos:
            by_name.setdefault(info.name, []).append(info)
        for name in MEMBERS:
            copies = by_name.get(name, [])
            if len(copies) > 1:
                res.add(FOREIGN, f"tar: {len(copies)} members named {name!r} (torch reads the "
                        "last; each is examined)")
            for i, info in enumerate(reversed(copies)):
                label = name if i == 0 else f"{name} (an earlier copy torch does not read)"
                try:
                    data = _read(tar, info)
                    _MEMBER_READERS[name](io.BytesIO(data), len(data), label, res)
                except (tarfile.TarError, OSError, ValueError, struct.error, EOFError) as e:
                    res.add(ERROR, f"{label}: {one_line(e)}", label)
        if not by_name.get("pickle"):
            res.add(FOREIGN, "tar without a 'pickle' member: torch.load fails on it")


def _read(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    if not info.isfile():
        raise ValueError(f"member {info.name!r} is not a regular file")
    if info.size > MAX_MEMBER_BYTES:
        raise ValueError(f"member {info.name!r} of {info.size:,} bytes: not examined")
    f = tar.extractfile(info)
    if f is None:
        raise ValueError(f"member {info.name!r} cannot be read")
    return f.read()


def _count(f: io.BytesIO, label: str, res: FileResult) -> int | None:
    obj, ok = examine_pickle(res, f, f"{label}: count")
    if not ok:
        return None
    if type(obj) is not int or not 0 <= obj <= MAX_RECORDS:
        res.add(ERROR, f"{label}: count {obj!r:.40} is not a small non-negative int", label)
        return None
    return obj


def _storages(f: io.BytesIO, size: int, label: str, res: FileResult) -> None:
    n = _count(f, label, res)
    if n is None:
        return
    for i in range(n):
        args, ok = examine_pickle(res, f, f"{label}: storage {i}")
        if not ok:
            return
        item = _element_size(args)
        if item is None:
            res.add(ERROR, f"{label}: storage {i}: {args!r:.60} names no known storage type; "
                    "the rest not examined", label)
            return
        raw = f.read(8)
        if len(raw) != 8:
            res.add(ERROR, f"{label}: storage {i}: truncated", label)
            return
        (numel,) = struct.unpack("<q", raw)
        end = f.tell() + numel * item
        if numel < 0 or end > size:
            res.add(ERROR, f"{label}: storage {i} declares {numel} elements past the end", label)
            return
        f.seek(end)
    examine_pickle(res, f, f"{label}: storage views")


def _tensors(f: io.BytesIO, size: int, label: str, res: FileResult) -> None:
    n = _count(f, label, res)
    if n is None:
        return
    for i in range(n):
        _, ok = examine_pickle(res, f, f"{label}: tensor {i}")
        if not ok:
            return
        raw = f.read(8)
        if len(raw) != 8:
            res.add(ERROR, f"{label}: tensor {i}: truncated", label)
            return
        (ndim,) = struct.unpack("<i4x", raw)
        end = f.tell() + 16 * ndim + 8
        if ndim < 0 or end > size:
            res.add(ERROR, f"{label}: tensor {i} declares {ndim} dimensions past the end", label)
            return
        f.seek(end)


def _pickle(f: io.BytesIO, size: int, label: str, res: FileResult) -> None:
    examine_pickle(res, f, label)


_MEMBER_READERS = {"storages": _storages, "tensors": _tensors, "pickle": _pickle}


def _element_size(args: Any) -> int | None:
    """The element size of ``(key, location, storage_type)``'s storage type (a placeholder of
    ``torch.FloatStorage`` and friends), as torch takes it from the type's dtype."""
    if not isinstance(args, tuple) or len(args) != 3:
        return None
    name = getattr(args[2], "global_name", "")
    dtype = STORAGE_DTYPES.get(str(name).rsplit(".", 1)[-1])
    return ITEMSIZE.get(dtype) if dtype else None
