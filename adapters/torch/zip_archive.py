"""The zip container of ``torch.save`` (torch >= 1.6): the central directory, ``data.pkl`` and
the local header of each storage record, read from a buffer over the file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import FormatError
from ..model import Checkpoint
from ..security.examination import FileResult, as_findings
from ..security.restricted_pickle import (
    GlobalRef,
    PickleError,
)
from ..source import Source
from ..zip_container import Directory, Member, local_header, read_directory, read_member
from .constants import MAX_PICKLE_BYTES, MAX_TEXT_RECORD, TEXT_RECORDS
from .rebuild import ITEMSIZE, StorageRef, load_pickle, short_repr, storage_ref
from .walk import build_checkpoint
from .zip_members import container_notes, examine_others

MAX_EXTRA = 64 << 20  # members besides data.pkl a reader asks for (TorchScript code/ sources)


@dataclass
class TorchZip:
    """A torch zip as ``torch.load`` walks it (:func:`walk_zip`): the central directory, the
    root (the first member's top directory, as ``PyTorchStreamReader`` takes it) and the
    ``data.pkl`` member miniz's lookup answers with."""

    directory: Directory
    root: str  # "archive/" (with its slash) or "" for a data.pkl at the top
    pkl: Member

    def find(self, name: str) -> Member | None:
        """``<root>/<name>`` as torch's reader finds it (ASCII case-insensitive)."""
        return self.directory.find(self.root + name)

    def pickle_copies(self) -> list[Member]:
        """Every member a lookup of ``<root>/data.pkl`` could answer with (duplicates, other
        cases), the one torch reads first."""
        others = [m for m in self.directory.same_name(self.pkl.name) if m is not self.pkl]
        return [self.pkl, *others]


def central_directory(mm: Any, size: int, where: str) -> Directory:
    """The zip's central directory (:func:`~inspector.adapters.zip_container.read_directory`)."""
    return read_directory(mm, size, where)


def find_data_pkl(d: Directory) -> tuple[str, Member] | None:
    """(root, data.pkl member) as torch's reader finds them: the root is the first member's
    top directory (any name: ``archive``, the file's stem, ``data``), ``data.pkl`` looked up
    under it (``PyTorchStreamReader`` refuses a zip whose first member is not in a directory).
    A re-zipped archive whose first member is another directory's is still read when every
    member sits in a directory; a zip with files at its top (a ``.keras`` archive with an
    ``assets/data.pkl``) is not torch's."""
    if not d.members:
        return None
    first = d.members[0].name
    if "/" in first:
        root = first.split("/", 1)[0] + "/"
        found = d.find(root + "data.pkl")
        if found is not None:
            return root, found
    if any("/" not in m.name for m in d.members):
        return None
    for m in d.members:  # a re-zipped archive whose first member is not under the root
        low = m.name.lower()
        if low == "data.pkl" or (low.endswith("/data.pkl") and low.count("/") == 1):
            root = m.name[: -len("data.pkl")]
            return root, d.find(m.name) or m
    return None


def walk_zip(mm: Any, size: int, where: str) -> TorchZip:
    """The one walk of a torch zip, for listing and examination alike."""
    d = read_directory(mm, size, where)
    found = find_data_pkl(d)
    if found is None:
        shown = ", ".join(d.names()[:8]) + (
            f", ... ({len(d.members)} members)" if len(d.members) > 8 else ""
        )
        raise FormatError(
            f"zip archive has no <root>/data.pkl, so it is not a torch.save checkpoint; it "
            f"holds: {shown or 'nothing'}",
            where,
        )
    root, pkl = found
    return TorchZip(d, root, pkl)


def open_zip(source: Source) -> Checkpoint:
    z = read_zip(source)
    ckpt = build_checkpoint(
        source, "torch-zip", z.obj, z.globals, z.meta, z.pkl_name, z.pickle_bytes
    )
    ckpt.findings = [*ckpt.findings, *as_findings(z.side)]
    return ckpt


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
    side: FileResult


def read_zip(source: Source, want: Callable[[str], bool] | None = None) -> ZipRead:
    """Read a torch zip archive's ``data.pkl`` and records; ``want(name)`` selects further
    members (relative to the root) whose bytes are returned in :attr:`ZipRead.extra`."""
    where = source.where
    with source.view() as mm:
        size = len(mm)
        tz = walk_zip(mm, size, where)
        root, pkl_name = tz.root, tz.pkl.name
        data = read_member(mm, size, tz.pkl, where, MAX_PICKLE_BYTES)

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
            member = tz.find(f"data/{key}")
            if member is None:
                raise FormatError(
                    f"storage {key!r} referenced by data.pkl has no record {record} in the zip",
                    where,
                    pkl_name,
                )
            ref.nbytes = member.usize
            records[key] = member
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

        records: dict[str, Member] = {}
        obj, globals_ = load_pickle(data, resolve, where, pkl_name)
        _locate_records(mm, size, records, storages, where)
        meta: dict[str, Any] = {"zip_root": root.rstrip("/")}
        for key, record in TEXT_RECORDS:
            found = tz.find(record)
            if found is not None:
                meta[key] = (
                    read_member(mm, size, found, where, MAX_TEXT_RECORD)
                    .decode("utf-8", "replace")
                    .strip()
                )
        # TorchScript archives (torch.jit.save) add code/ and constants.pkl beside data.pkl.
        names = tz.directory.names()
        meta["torchscript"] = any(n.startswith(root + "code/") for n in names)
        side = FileResult(where)  # what scan reports beside data.pkl, for the listing too
        container_notes(mm, size, tz, side)
        examine_others(mm, size, tz, where, side)
        extra = {}
        if want is not None:
            for m in tz.directory.members:
                n = m.name
                if n.startswith(root) and want(n[len(root):]):
                    extra[n[len(root):]] = read_member(mm, size, m, where, MAX_EXTRA)
    meta.setdefault("byteorder", "little")  # torch < 2.1 wrote no byteorder record: little-endian
    meta["pickle_protocol"] = data[1] if data[:1] == b"\x80" and len(data) > 1 else None
    meta["storages"] = len(storages)
    return ZipRead(obj, globals_, meta, pkl_name, len(data), root, names, extra, side)


def _locate_records(
    mm: Any,
    size: int,
    records: dict[str, Member],
    storages: dict[str, StorageRef],
    where: str,
) -> None:
    """Each storage's data offset from its 30-byte local header (the data itself is not read)."""
    prefetch = getattr(mm, "prefetch", None)  # a remote view fetches the headers together
    if prefetch is not None:
        prefetch([(records[key].header, 30) for key in storages])
    for key, ref in storages.items():
        m = records[key]
        start, _ = local_header(mm, size, m, where, with_name=False)
        if start + m.csize > size:
            raise FormatError(
                f"storage record {m.name} ({m.csize} bytes at offset {start}) runs "
                f"past the end of the file ({size} bytes): truncated zip",
                where,
                m.name,
            )
        if m.method == 0:
            ref.offset = start
        else:  # compressed by some re-zipper: no direct offset, sizes still known
            ref.compressed = True
