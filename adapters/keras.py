"""Keras HDF5 files and ``.keras`` archives (Keras 2 and 3): metadata only, through h5py.

Layouts (see ``fixtures/keras/README.md`` for the observed files):

* **legacy full model** (``model.save("m.h5")``, Keras 2 and 3): root attributes
  ``keras_version``, ``backend``, ``model_config``, ``training_config``; ``/model_weights`` with
  ``layer_names``; each layer group's ``weight_names`` (Keras 2: TF names with ``:0``) naming
  datasets below it; ``/optimizer_weights`` with its own ``weight_names``.
* **legacy weights** (Keras 2 ``save_weights("w.h5")``): the ``/model_weights`` content at the root.
* **Keras 3 weights** (``.weights.h5``): ``/layers/<key>/vars/<i>``, ``/optimizer/vars/<i>``;
  names by :mod:`inspector.adapters.keras_v3`.
* **``.keras``** (a zip of ``config.json``, ``metadata.json``, ``model.weights.h5``): the HDF5
  member is opened in place (a window over the stored bytes, no extraction).

Canonical names are Keras' own variable paths (Keras 2 names without ``:0``); ``stored_name`` is
the HDF5 dataset path. Only HDF5 metadata is touched: shapes, dtypes, attributes, the data
offset of contiguous datasets (``offset``) and the chunking/filters (``extra``); never a value.
Links to other files and virtual datasets are reported as findings and never followed.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from collections import namedtuple
from contextlib import ExitStack
from types import SimpleNamespace

from .dtypes import NUMPY_KINDS
from .errors import FormatError, InspectorError
from .isolated import budget_seconds, call_isolated
from .keras_names import NON_TRAINABLE_NAMES
from .keras_v3 import name_variables
from .memory_cap import address_space_capped
from .model import Blocks, Checkpoint, Finding, Role, TensorEntry, ValueLocation, ValueReader
from .registry import Adapter
from .source import Source, WindowFile
from .zip_container import open_member

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    import zipfile
    from collections.abc import Callable
    from typing import Any, BinaryIO

    from .security.examination import FileResult

NAME = "keras"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"  # H5F_SIGNATURE (H5Fsuper.c)
# The superblock sits at 0 or after a user block of 512, 1024, 2048, ... bytes (H5Fsuper.c).
FIRST_USER_BLOCK = 512
ZIP_LOCAL_MAGIC = b"PK\x03\x04"
ZIP_LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # 30 bytes, APPNOTE 4.3.7
KERAS_WEIGHTS_MEMBER = "model.weights.h5"  # keras/src/saving/saving_lib.py _VARS_FNAME + ".h5"
KERAS_CONFIG_MEMBER = "config.json"
KERAS_METADATA_MEMBER = "metadata.json"
MAX_JSON_MEMBER = 64 << 20
# A compressed model.weights.h5 is read through zipfile's decompressor, whose backward seeks
# restart the stream; above this size the user is asked to extract it instead.
MAX_COMPRESSED_H5 = 256 << 20
# Keras refuses a dataset declaring more than this many bytes and over 1000x what it stores
# (keras/src/saving/saving_lib.py _H5_DATASET_BOMB_FLOOR_BYTES, _H5_DATASET_MAX_EXPANSION).
BOMB_FLOOR_BYTES = 1 << 32
BOMB_MAX_EXPANSION = 1000
TF_SUFFIX = re.compile(r":\d+$")
# h5py's own errors on a bad file; anything else is a bug and surfaces through the registry.
H5_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError)
# Address space the HDF5 walk may add beyond 4x the file size (metadata of 50,000 datasets).
H5_MEMORY_FLOOR = 1 << 30
# Wall-clock budget of the HDF5 walk: a base plus one second per MiB (50,000 datasets, ~30 MB,
# walk in 5-9 s on 2 cores).
H5_SECONDS = 5.0
H5_BYTES_PER_SECOND = 1 << 20


# One HDF5 dataset, described by its metadata: shape (tuple of int), dtype (str), offset and
# nbytes (int or None), extra (dict).
DsInfo = namedtuple("DsInfo", ("shape", "dtype", "offset", "nbytes", "extra"))


class DatasetColumns:
    """A walk's datasets as the columns that cross the pipe (see :func:`_facts_to_json`), for
    the isolated child: no record and no extra dict per plain contiguous dataset."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.shapes: list[tuple[int, ...]] = []
        self.dtypes: list[str] = []
        self.offsets: list[int | None] = []
        self.nbytes: list[int | None] = []
        self.layouts: list[str | None] = []
        self.stored: list[int | None] = []
        self.h5_offsets: list[int | None] = []
        self.other_extra: list[tuple[int, dict[str, Any]]] = []

    def __len__(self) -> int:
        return len(self.paths)

    def append(self, path: str, shape: tuple[int, ...], dtype: str, offset: int | None,
               nbytes: int | None, layout: str | None, stored: int | None,
               h5_offset: int | None) -> None:
        """One dataset whose extra is the plain contiguous one (``layout`` None: it is not,
        and goes in :attr:`other_extra`)."""
        self.paths.append(path)
        self.shapes.append(shape)
        self.dtypes.append(dtype)
        self.offsets.append(offset)
        self.nbytes.append(nbytes)
        self.layouts.append(layout)
        self.stored.append(stored)
        self.h5_offsets.append(h5_offset)

    def __setitem__(self, path: str, d: DsInfo) -> None:
        e = d.extra
        if tuple(e) == _PLAIN_EXTRA:
            self.append(path, d.shape, d.dtype, d.offset, d.nbytes, e["layout"],
                        e["stored_bytes"], e["h5_offset"])
        else:
            self.other_extra.append((len(self.paths), e))
            self.append(path, d.shape, d.dtype, d.offset, d.nbytes, None, None, None)


_PLAIN_EXTRA = ("layout", "stored_bytes", "h5_offset")  # a contiguous dataset's extra, in order


class H5Facts:
    """Everything a listing needs from an HDF5 file, gathered in one metadata walk (the
    isolated child gathers the datasets as :class:`DatasetColumns`)."""

    __slots__ = ("datasets", "groups", "soft_links", "findings")

    def __init__(self, datasets: dict[str, DsInfo] | DatasetColumns | None = None,
                 groups: dict[str, dict[str, Any]] | None = None,
                 soft_links: dict[str, str] | None = None,
                 findings: list[Finding] | None = None) -> None:
        self.datasets = {} if datasets is None else datasets
        self.groups = {} if groups is None else groups
        self.soft_links = {} if soft_links is None else soft_links
        self.findings = [] if findings is None else findings

    def _fields(self) -> tuple:
        return (self.datasets, self.groups, self.soft_links, self.findings)

    def __eq__(self, other: object) -> bool:
        if type(other) is not H5Facts:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, equal by value

    def __repr__(self) -> str:
        return "H5Facts(datasets={!r}, groups={!r}, soft_links={!r}, findings={!r})".format(
            *self._fields())


# ---------------------------------------------------------------- detection


def sniff(head: bytes, source: Source) -> str | None:
    """'hdf5' (any Keras HDF5 layout, decided on open) or 'keras' (a .keras zip, also with
    extra members or with data before it: a zip is found by its end record, as zipfile and
    Keras find it)."""
    if source.is_dir():
        return None
    if not head.startswith(ZIP_LOCAL_MAGIC):
        # A remote file that opens as a pickle (torch's legacy format, a plain pickle) is not
        # searched past its first cached block: each further read is a request.
        far = source.is_local or not _pickle_head(head)
        limit = source.size if far else REMOTE_SEARCH
        if superblock_offset(head, min(source.size, limit), source.read) is not None:
            return "hdf5"
        if not far or not _zip_end_record(source):
            return None
    if not _names_keras_members(source):
        return None
    import zipfile  # only for a zip: an HDF5 file's detection does without

    from .zip_errors import ZIP_ERRORS

    try:
        with source.open() as raw, zipfile.ZipFile(raw) as z:
            names = set(z.namelist())
    except ZIP_ERRORS:
        return None
    if KERAS_WEIGHTS_MEMBER in names or {KERAS_CONFIG_MEMBER, KERAS_METADATA_MEMBER} <= names:
        return "keras"
    return None


REMOTE_SEARCH = 64 << 10  # a remote source's first block (remote.py reads it whole)


def _pickle_head(head: bytes) -> bool:
    return len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5


ZIP_END = struct.Struct("<4s4H2IH")  # end of central directory record, APPNOTE 4.3.16
ZIP_END_MAGIC = b"PK\x05\x06"
ZIP_END_SEARCH = ZIP_END.size + 0xFFFF  # the record and the longest comment


def _zip_tail(source: Source) -> tuple[bytes, int]:
    """The last bytes of the file that can hold the end record, and where they start."""
    start = max(0, source.size - ZIP_END_SEARCH)
    return source.read(start, source.size - start), start


def _zip_end_record(source: Source) -> bool:
    return ZIP_END_MAGIC in _zip_tail(source)[0]


def _names_keras_members(source: Source) -> bool:
    """Whether the central directory names a Keras member (a cheap test before zipfile parses
    it: a torch zip of 50,000 members is declined by one read of its directory)."""
    tail, start = _zip_tail(source)
    at = tail.rfind(ZIP_END_MAGIC)
    if at < 0 or len(tail) - at < ZIP_END.size:
        return True  # no usable record: zipfile decides
    *_, cd_size, cd_offset, _comment = ZIP_END.unpack(tail[at : at + ZIP_END.size])
    if cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        return True  # zip64: zipfile decides
    end = start + at
    first = max(0, end - cd_size)
    names = (KERAS_CONFIG_MEMBER.encode(), KERAS_WEIGHTS_MEMBER.encode())
    if source.is_local:
        import mmap

        with source.view() as mm:  # searched in place: a 50,000-member directory is ~4 MB
            if isinstance(mm, mmap.mmap):
                return any(mm.find(n, first, end) >= 0 for n in names)
    directory = source.read(first, end - first)
    return any(n in directory for n in names)


def _superblock_offset(head: bytes, source: Source) -> int | None:
    """Where the HDF5 superblock is: 0, or after a user block of 512, 1024, 2048, ... bytes,
    doubling up to the file size, as libhdf5 searches (H5FD_locate_signature)."""
    return superblock_offset(head, source.size, source.read)


def superblock_offset(head: bytes, size: int, read: Callable[[int, int], bytes]) -> int | None:
    """:func:`_superblock_offset` over any ``read(offset, n)``."""
    if head.startswith(HDF5_MAGIC):
        return 0
    offset = FIRST_USER_BLOCK
    while offset + len(HDF5_MAGIC) <= size:
        if offset + 8 <= len(head):
            found = head[offset : offset + 8] == HDF5_MAGIC
        else:
            found = read(offset, 8) == HDF5_MAGIC
        if found:
            return offset
        offset *= 2
    return None


# ---------------------------------------------------------------- opening


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    """Open a Keras HDF5 file or ``.keras`` archive, reading metadata only."""
    if variant == "keras":
        ckpt = _open_archive(source)
    elif variant == "hdf5":
        # By name where the file is local: HDF5's own POSIX driver; a Python file object costs
        # a callback per metadata read.
        local = source.local_path
        with ExitStack() as stack:
            fileobj = os.fspath(local) if local else stack.enter_context(source.open())
            facts = read_h5(fileobj, source.where, source.size, base=0)
        ckpt = build_checkpoint(source, facts, config=None, metadata={})
        ckpt.findings += _user_block_findings(source)
    else:
        raise FormatError(f"unsupported Keras variant {variant!r}", source.where)
    ckpt.reader = h5_value_reader(source, archive=variant == "keras")
    return ckpt


def _user_block_findings(source: Source) -> list[Finding]:
    """A pickle in the user block (``torch.load`` reads it first): what ``scan`` finds in it,
    as findings (dangerous ones refuse the file)."""
    from .security.examination import FileResult
    from .security.side_code import as_findings
    from .security.user_block import examine_user_block

    res = FileResult(source.where)
    examine_user_block(source.read, _superblock_offset(source.head(4096), source), res)
    return as_findings([(i.level, i.text, i.where) for i in res.items])


def h5_value_reader(source: Source, archive: bool) -> ValueReader:
    """Each tensor is the HDF5 dataset ``stored_name``, read through h5py in blocks; in a
    ``.keras`` archive, of its ``.h5`` member."""

    def locate(entry: TensorEntry) -> ValueLocation:
        _refuse_other_files(entry.extra, entry.stored_name, source.where)

        def dataset(stack: ExitStack) -> Any:
            import h5py

            if archive:
                import zipfile

                z = stack.enter_context(zipfile.ZipFile(stack.enter_context(source.open())))
                names = [n for n in z.namelist() if n.endswith(".h5")]
                member = entry.file if entry.file in names else (
                    KERAS_WEIGHTS_MEMBER if KERAS_WEIGHTS_MEMBER in names else
                    names[0] if len(names) == 1 else None
                )
                if member is None:
                    raise FormatError("no single .h5 member in the archive", source.where)
                h5 = stack.enter_context(
                    h5py.File(stack.enter_context(open_member(z, member, source.where)), "r"))
            else:
                local = source.local_path
                target = os.fspath(local) if local else stack.enter_context(source.open())
                h5 = stack.enter_context(h5py.File(target, "r"))
            # The listing's path is made of hard links; a link elsewhere is never followed.
            ds = _dataset_here(h5py, h5, entry.stored_name, source.where)
            dcpl = ds.id.get_create_plist()
            _refuse_other_files(
                {"external": _external_files(dcpl),
                 "layout": _layout_name(dcpl.get_layout())},
                entry.stored_name, source.where)
            if tuple(ds.shape) != entry.shape:
                raise FormatError(
                    f"HDF5 dataset {entry.stored_name!r} has shape {list(ds.shape)}, the listing "
                    f"{list(entry.shape)}",
                    source.where,
                )
            return ds

        return Blocks(dataset)

    return locate


def _refuse_other_files(extra: dict[str, Any], name: str, where: str) -> None:
    """A dataset whose values live in other files (external raw storage, a virtual dataset)
    is never read, by any verb: its targets are named instead."""
    if extra.get("external"):
        raise FormatError(
            f"values of {name} not read: they are stored in external file(s) "
            f"{', '.join(map(str, extra['external']))}", where)
    if extra.get("layout") == "virtual":
        sources = extra.get("virtual_sources")
        named = f" from {', '.join(map(str, sources))}" if sources else ""
        raise FormatError(f"values of {name} not read: a virtual dataset (mapped{named})",
                          where)


def _dataset_here(h5py: Any, h5: Any, path: str, where: str) -> Any:
    """The dataset at ``path`` reached through hard links only (no soft, external or
    user-defined link on the way)."""
    parts = [p for p in path.split("/") if p]
    node = h5
    for i, part in enumerate(parts):
        name = "/".join(parts[: i + 1])
        link = h5.get("/" + name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            raise FormatError(
                f"values of {path} not read: /{name} is not a link inside the file", where)
        node = node[part]
    if not isinstance(node, h5py.Dataset):
        raise FormatError(f"no HDF5 dataset {path!r}", where)
    return node


def _open_archive(source: Source) -> Checkpoint:
    import zipfile

    from .zip_errors import ZIP_ERRORS

    where = source.where
    try:
        with source.open() as raw, zipfile.ZipFile(raw) as z:
            infos = {i.filename: i for i in z.infolist()}
            config = _json_member(z, infos, KERAS_CONFIG_MEMBER, where)
            meta = _json_member(z, infos, KERAS_METADATA_MEMBER, where) or {}
            info = infos.get(KERAS_WEIGHTS_MEMBER)
            if info is None:
                raise FormatError(
                    f".keras archive without {KERAS_WEIGHTS_MEMBER} (members: "
                    f"{', '.join(sorted(infos)) or 'none'})",
                    where,
                )
            member_where = f"{where}: {KERAS_WEIGHTS_MEMBER}"
            if info.compress_type == zipfile.ZIP_STORED:
                start = _member_data_offset(raw, info, where)
                window = WindowFile(raw, start, info.file_size)
                facts = read_h5(window, member_where, info.file_size, base=start)
            elif info.file_size > MAX_COMPRESSED_H5:
                raise FormatError(
                    f"{KERAS_WEIGHTS_MEMBER} is compressed ({info.file_size} bytes unpacked); "
                    "listing it in place would decompress it repeatedly: extract it "
                    "(unzip) and list the .weights.h5",
                    where,
                )
            else:
                with open_member(z, info, where) as member:
                    facts = read_h5(member, member_where, info.file_size, base=None)
                facts.findings.append(
                    Finding("info", f"{KERAS_WEIGHTS_MEMBER} is compressed: no byte offsets")
                )
    except InspectorError:  # also a ValueError or OSError, which ZIP_ERRORS would catch
        raise
    except ZIP_ERRORS as e:
        raise FormatError(f"not a readable .keras zip ({_one_line(e)})", where) from None
    metadata = {f"archive_{k}": v for k, v in meta.items()} if isinstance(meta, dict) else {}
    if isinstance(meta, dict) and "keras_version" in meta:
        metadata["keras_version"] = meta["keras_version"]
    metadata["members"] = sorted(infos)
    return build_checkpoint(source, facts, config=config, metadata=metadata)


def _json_member(z: zipfile.ZipFile, infos: dict, name: str, where: str) -> Any:
    info = infos.get(name)
    if info is None:
        return None
    if info.file_size > MAX_JSON_MEMBER:
        raise FormatError(f"{name} is {info.file_size} bytes (cap {MAX_JSON_MEMBER})", where)
    try:
        with open_member(z, info, where) as f:
            return json.loads(f.read(MAX_JSON_MEMBER + 1))
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{name} is not valid JSON ({e})", where) from None


def _member_data_offset(raw: BinaryIO, info: zipfile.ZipInfo, where: str) -> int:
    raw.seek(info.header_offset)
    header = raw.read(ZIP_LOCAL_HEADER.size)
    if len(header) < ZIP_LOCAL_HEADER.size or not header.startswith(ZIP_LOCAL_MAGIC):
        raise FormatError(
            f"bad local header for {info.filename}", where, f"offset {info.header_offset}"
        )
    *_, name_len, extra_len = ZIP_LOCAL_HEADER.unpack(header)
    return info.header_offset + ZIP_LOCAL_HEADER.size + name_len + extra_len


# ---------------------------------------------------------------- the HDF5 walk


def read_h5(fileobj: BinaryIO | str, where: str, size: int, base: int | None) -> H5Facts:
    """Walk every link of the HDF5 file ``fileobj`` (a path or a file object); ``base`` turns
    offsets absolute. The walk runs in a child process with a time budget: libhdf5 can loop
    forever in C on a corrupt global heap (a byte-flipped ``.weights.h5`` did)."""
    budget = budget_seconds(H5_SECONDS, size, H5_BYTES_PER_SECOND)
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        _import_for_walk()
    found = call_isolated(
        lambda: _facts_to_json(_read_h5_here(fileobj, where, size, base, DatasetColumns())),
        budget, where, "the HDF5 library",
    )
    return _facts_from_json(found)


def _import_for_walk() -> None:
    """Import what the walk needs, in this process, before it forks the walk's child.

    This is needed when other threads run (a fleet's ``--jobs``). A child forked while another
    thread was importing a module would wait forever for that module's import lock, and the
    walk would time out. Importing h5py here also brings its fork handler: ``os.fork`` then
    waits for h5py's global lock, so a thread inside an h5py call cannot leave the child with
    the lock taken.

    With one thread none of this can happen. The child imports h5py itself then, which is
    cheaper than forking a process that has numpy loaded."""
    import encodings.ascii  # noqa: F401  # attribute texts: a codec lookup imports its module
    import encodings.latin_1  # noqa: F401

    import h5py  # noqa: F401

    from . import h5_direct  # noqa: F401


def _facts_to_json(facts: H5Facts) -> dict[str, Any]:
    """The facts as JSON-ready columns (one list per field: a 50,000-dataset walk crosses the
    pipe as a few long lists, not 50,000 small records); an ``extra`` that is not the plain
    contiguous one goes whole, by position, in ``other_extra``."""
    cols = facts.datasets
    if not isinstance(cols, DatasetColumns):
        cols = DatasetColumns()
        for path, d in facts.datasets.items():
            cols[path] = d
    return {
        "paths": cols.paths,
        "shapes": cols.shapes,
        "dtypes": cols.dtypes,
        "offsets": cols.offsets,
        "nbytes": cols.nbytes,
        "layouts": cols.layouts,
        "stored": cols.stored,
        "h5_offsets": cols.h5_offsets,
        "other_extra": cols.other_extra,
        "groups": facts.groups,
        "soft_links": facts.soft_links,
        "findings": [[f.severity, f.message, f.where, f.subject] for f in facts.findings],
    }


def _facts_from_json(doc: dict[str, Any]) -> H5Facts:
    other = dict(doc["other_extra"])
    extras = [
        other[i] if layout is None else
        {"layout": layout, "stored_bytes": stored, "h5_offset": h5_offset}
        for i, (layout, stored, h5_offset) in enumerate(
            zip(doc["layouts"], doc["stored"], doc["h5_offsets"], strict=True))
    ]
    datasets = dict(zip(doc["paths"], map(DsInfo, map(tuple, doc["shapes"]), doc["dtypes"],
                                          doc["offsets"], doc["nbytes"], extras), strict=True))
    return H5Facts(
        datasets=datasets,
        groups=doc["groups"],
        soft_links=doc["soft_links"],
        findings=[Finding(*f) for f in doc["findings"]],
    )


def _read_h5_here(
    fileobj: BinaryIO | str, where: str, size: int, base: int | None,
    datasets: DatasetColumns | None = None,
) -> H5Facts:
    """The walk itself, in this process; the datasets go into ``datasets`` if given."""
    import h5py  # heavy: only when a Keras file is opened

    from .h5_direct import bind

    try:
        # HDF5 trusts sizes inside the file: a corrupted global-heap length made it allocate
        # 3.7 GB for one attribute. Under the cap that allocation fails and ends as a FormatError.
        with address_space_capped(H5_MEMORY_FLOOR + 4 * size), h5py.File(fileobj, "r") as f:
            facts = H5Facts() if datasets is None else H5Facts(datasets=datasets)
            facts.groups["/"] = _group_attrs(f.id)
            direct = bind(h5py, f.id)

            failed: list[BaseException] = []

            def visit(raw_name: bytes, info: Any) -> int | None:
                # An exception raised inside h5py's visit callback comes out mangled: keep it
                # and stop the visit (a non-None return) instead.
                try:
                    _visit(f, raw_name, info, facts, where, size, base, direct)
                except (FormatError, *H5_ERRORS) as e:
                    failed.append(e)
                    return 1
                return None

            # H5Lvisit through the low-level API: every link once, hard-link cycles visited
            # once, no name lookups per link (h5py's visititems_links costs 3x more).
            f.id.links.visit(visit, info=True)
            if failed:
                raise failed[0]
            return facts
    except FormatError:
        raise
    except MemoryError:
        raise FormatError("HDF5 metadata asks for more memory than is available (corrupt sizes?)",
                          where) from None
    except H5_ERRORS as e:
        raise FormatError(f"not a readable HDF5 file ({_one_line(e)})", where) from None


def _visit(
    f: Any, raw_name: bytes, info: Any, facts: H5Facts, where: str, size: int, base: int | None,
    direct: Any,
) -> None:
    import h5py

    path = "/" + raw_name.decode("utf-8", "surrogateescape")
    kind = info.type
    if kind == h5py.h5l.TYPE_HARD:
        if direct is not None:
            oid = _visit_direct(direct, f.id, raw_name, info.u, path, facts, where, size,
                                base)
            if oid is None:
                return
        else:
            # Low-level IDs only: an h5py Dataset/Group per link and its cached properties
            # cost more than HDF5's own work on files of 50,000 small datasets.
            oid = h5py.h5o.open(f.id, raw_name)
        if isinstance(oid, h5py.h5d.DatasetID):
            facts.datasets[path] = _dataset(oid, path, where, size, base, facts)
        elif isinstance(oid, h5py.h5g.GroupID):
            facts.groups[path] = _group_attrs(oid)
    elif kind == h5py.h5l.TYPE_EXTERNAL:
        filename, target = (v.decode("utf-8", "replace") for v in f.id.links.get_val(raw_name))
        facts.findings.append(_external_finding(
            filename, f"external link {path} -> {filename}:{target}: not followed", path))
    elif kind == h5py.h5l.TYPE_SOFT:
        facts.soft_links[path] = f.id.links.get_val(raw_name).decode("utf-8", "replace")
    else:
        facts.findings.append(Finding("warning", f"user-defined link type {kind} ignored", path))


def _visit_direct(
    direct: Any, fid: Any, raw_name: bytes, addr: int, path: str, facts: H5Facts, where: str,
    size: int, base: int | None,
) -> Any:
    """A hard link's object through direct libhdf5 calls: a contiguous dataset of a standard
    numeric type is recorded here (None returned); any other dataset or group is returned as
    h5py's ID for the general path, which also reopens what failed to open."""
    import h5py

    oid = direct.open(raw_name, addr)
    if oid < 0:  # h5py opens it again and reports libhdf5's error
        return h5py.h5o.open(fid, raw_name)
    kind = direct.kind(oid)
    if kind == h5py.h5i.DATASET:
        plain = direct.plain(oid)
        dtype = None if plain is None else NUMPY_KINDS.get((plain[1].kind, plain[1].itemsize))
        if dtype is None:
            return h5py.h5d.DatasetID(oid)  # h5py owns (and closes) the ID from here
        direct.close(oid)
        shape, dt, offset, stored = plain
        declared = dt.itemsize
        for d in shape:
            declared *= d
        _contiguous(facts, path, shape, dtype, declared, stored, offset, where, size, base)
        return None
    if kind == h5py.h5i.GROUP:
        return h5py.h5g.GroupID(oid)
    direct.close(oid)  # a named datatype: not listed
    return None


def _dataset(
    dsid: Any, path: str, where: str, size: int, base: int | None, facts: H5Facts
) -> DsInfo:
    import h5py

    shape = tuple(map(int, dsid.shape or ()))
    dt = dsid.dtype
    declared = dt.itemsize
    for d in shape:
        declared *= d
    stored = dsid.get_storage_size()
    # An offset exists only for contiguous storage inside the file (H5Dget_offset): the common
    # case needs no creation property list, whose copy costs as much as the rest together.
    offset = dsid.get_offset()
    if offset is None:
        dcpl = dsid.get_create_plist()
        layout, external = dcpl.get_layout(), dcpl.get_external_count() > 0
    else:
        layout, external = h5py.h5d.CONTIGUOUS, False
    extra: dict[str, Any] = {"layout": _layout_name(layout), "stored_bytes": stored}
    if offset is not None:
        _refuse_past_end(declared, offset, size, where, path)
    elif layout == h5py.h5d.CHUNKED:
        ds = h5py.Dataset(dsid)  # rare in Keras files: h5py's own chunk/filter reading
        extra["chunks"] = list(ds.chunks)
        if ds.compression:
            extra["compression"] = ds.compression
        filters = dcpl.get_nfilters()
        if filters:
            extra["filters"] = filters
    _refuse_bomb(declared, stored, where, path)
    if external:
        files = list(dict.fromkeys(_external_files(dcpl)))
        extra["external"] = files
        for name in files:
            facts.findings.append(_external_finding(
                name, f"dataset {path} stores its data in external file {name}: never read",
                path))
    if layout == h5py.h5d.VIRTUAL:
        sources = _virtual_sources(dcpl)
        extra["virtual_sources"] = sorted(sources)
        for src, names in sources.items():
            more = f" and {len(names) - 1} more" if len(names) > 1 else ""
            facts.findings.append(_external_finding(
                src, f"virtual dataset {path} reads {src}:{names[0]}{more}: never read", path))
    if offset is not None:
        extra["h5_offset"] = offset
        offset = None if base is None else base + offset
    return DsInfo(shape, _dtype(dsid, dt), offset, declared, extra)


def _external_files(dcpl: Any) -> list[str]:
    """Every external raw-storage file of a dataset (no cap)."""
    out = []
    for i in range(dcpl.get_external_count()):
        name = dcpl.get_external(i)[0]
        out.append(name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name))
    return out


def _virtual_sources(dcpl: Any) -> dict[str, list[str]]:
    """Every source file of a virtual dataset (no cap), with its dataset names."""
    out: dict[str, list[str]] = {}
    for i in range(dcpl.get_virtual_count()):
        out.setdefault(dcpl.get_virtual_filename(i), []).append(dcpl.get_virtual_dsetname(i))
    return out


def _external_finding(target: str, message: str, path: str) -> Finding:
    """Data from another file: ``danger`` when the target is absolute or climbs out (every
    verb refuses the file, as scan calls it dangerous), else a warning."""
    from .security.file_reference import target_level

    level = target_level(target)
    if level == "dangerous":
        return Finding("danger", f"{message} (data from anywhere on the reader's machine)",
                       path, message)
    if level is None:
        return Finding("info", f"{message} (the file itself)", path)
    return Finding("warning", f"{message} (data from a file beside it)", path)


def _contiguous(
    facts: H5Facts, path: str, shape: tuple[int, ...], dtype: str, declared: int, stored: int,
    offset: int, where: str, size: int, base: int | None,
) -> None:
    """Record the contiguous dataset stored at ``offset`` in the file, as :func:`_dataset`
    describes it."""
    _refuse_past_end(declared, offset, size, where, path)
    _refuse_bomb(declared, stored, where, path)
    at = None if base is None else base + offset
    if isinstance(facts.datasets, DatasetColumns):
        facts.datasets.append(path, shape, dtype, at, declared, "contiguous", stored, offset)
    else:
        extra = {"layout": "contiguous", "stored_bytes": stored, "h5_offset": offset}
        facts.datasets[path] = DsInfo(shape, dtype, at, declared, extra)


def _refuse_past_end(declared: int, offset: int, size: int, where: str, path: str) -> None:
    if offset + declared > size:
        raise FormatError(
            f"dataset declares {declared} bytes at offset {offset}, past the end of the "
            f"file ({size} bytes)",
            where,
            path,
        )


def _refuse_bomb(declared: int, stored: int, where: str, path: str) -> None:
    if declared > BOMB_FLOOR_BYTES and declared > BOMB_MAX_EXPANSION * stored:
        raise FormatError(
            f"dataset declares {declared} bytes but stores {stored}: refused, as Keras does",
            where,
            path,
        )


_LAYOUTS: dict[int, str] = {}


def _layout_name(layout: int) -> str:
    if not _LAYOUTS:
        import h5py

        _LAYOUTS.update({h5py.h5d.COMPACT: "compact", h5py.h5d.CONTIGUOUS: "contiguous",
                         h5py.h5d.CHUNKED: "chunked", h5py.h5d.VIRTUAL: "virtual"})
    return _LAYOUTS.get(layout) or str(layout)


def _dtype(dsid: Any, dt: Any) -> str:
    known = NUMPY_KINDS.get((dt.kind, dt.itemsize))
    if known is not None:
        return known
    # Keras 3 writes bfloat16 as 2-byte data tagged with a "dtype" attribute (H5IOStore).
    tag = _group_attrs(dsid, ("dtype",)).get("dtype")
    return str(tag) if tag else str(dt)


# The only group attributes the layouts read (Keras splits long lists into name0, name1, ...);
# reading every attribute of every group costs seconds on 50,000-dataset files.
GROUP_ATTRS = re.compile(
    r"(name|keras_version|backend|model_config|training_config|(layer|weight)_names\d*)\Z"
)


def _group_attrs(oid: Any, wanted: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The attributes of object ``oid`` named in ``wanted`` (default: :data:`GROUP_ATTRS`)."""
    import h5py

    if not h5py.h5a.get_num_attrs(oid):
        return {}
    names: list[bytes] = []
    h5py.h5a.iterate(oid, names.append)
    keep = [
        k
        for k in (n.decode("utf-8", "surrogateescape") for n in names)
        if (k in wanted if wanted is not None else GROUP_ATTRS.match(k))
    ]
    if not keep:
        return {}
    attrs = h5py.AttributeManager(SimpleNamespace(id=oid))  # h5py's reading, on a bare ID
    out = {}
    for k in keep:
        value = _str_attr(oid, k.encode("utf-8", "surrogateescape"))
        out[k] = _plain(attrs[k]) if value is None else value
    return out


VLEN_REF_MIN_BYTES = 12  # a variable-length element in the file: 4-byte length + heap id (>= 8)


def _str_attr(oid: Any, name: bytes) -> str | list[str] | None:
    """A scalar or 1-d string attribute (Keras' ``name``, ``weight_names``, ``layer_names``) as
    h5py would return it after :func:`_plain`, opened once; None for anything else."""
    import h5py
    import numpy as np

    aid = h5py.h5a.open(oid, name)
    tid = aid.get_type()
    if tid.get_class() != h5py.h5t.STRING:
        return None
    space = aid.get_space()
    if space.get_simple_extent_type() not in (h5py.h5s.SCALAR, h5py.h5s.SIMPLE):
        return None
    shape = space.get_simple_extent_dims()
    if len(shape) > 1:
        return None
    count = shape[0] if shape else 1
    if not tid.is_variable_str():
        # Fixed length: h5py's own read (its memory type, so its padding conversion), decoded
        # as _plain decodes bytes; a size that the stored bytes do not hold goes to h5py.
        dt = tid.dtype
        if count and count * dt.itemsize > aid.get_storage_size():
            return None
        arr = np.zeros(shape, dtype=dt)
        aid.read(arr, mtype=h5py.h5t.py_create(dt))
        if not shape:
            return arr[()].decode("utf-8", "replace")
        return [b.decode("utf-8", "replace") for b in arr.tolist()]
    # Each stored string is a reference of at least 12 bytes (length + global heap id), so a
    # corrupt extent cannot make us allocate and fill more strings than the attribute holds.
    # (An empty attribute stores nothing: libhdf5 answers its storage size as an error.)
    if count and count * VLEN_REF_MIN_BYTES > aid.get_storage_size():
        raise FormatError(
            f"attribute {name.decode('utf-8', 'replace')!r} declares {count:,} strings in "
            f"{aid.get_storage_size():,} bytes"
        )
    dt = h5py.string_dtype("utf-8" if tid.get_cset() == h5py.h5t.CSET_UTF8 else "ascii")
    arr = np.empty(shape, dtype=dt)
    aid.read(arr, mtype=h5py.h5t.py_create(dt))
    if not shape:
        return arr[()].decode("utf-8", "surrogateescape")
    return [b.decode("utf-8", "surrogateescape") for b in arr]


def _plain(value: Any) -> Any:
    """An HDF5 attribute as plain Python: str for bytes, lists for arrays."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


# ---------------------------------------------------------------- layouts


def build_checkpoint(source: Source, facts: H5Facts, config: Any,
                     metadata: dict[str, Any]) -> Checkpoint:
    where = source.where
    root = facts.groups.get("/", {})
    metadata = dict(metadata)
    for key in ("keras_version", "backend"):
        if key in root:
            metadata[key] = root[key]
    hyper: dict[str, Any] = {}
    findings = list(facts.findings)
    if config is not None:
        findings += _config_findings(config, KERAS_CONFIG_MEMBER)
    if "model_weights" in _child_groups(facts, "/") or "layer_names" in root:
        model_config = _json_attr(root, "model_config", where)
        training_config = _json_attr(root, "training_config", where)
        full = "model_weights" in _child_groups(facts, "/")
        major = _major(metadata.get("keras_version"))
        kind = (
            ("keras2-h5" if major < 3 else "keras-legacy-h5")
            if full
            else ("keras2-weights-h5" if major < 3 else "keras-legacy-weights-h5")
        )
        entries = _legacy(facts, "/model_weights" if full else "", model_config, where, findings)
        entries += _legacy_optimizer(facts, where)
        if model_config is not None:
            hyper.update(
                model_config if isinstance(model_config, dict) else {"model_config": model_config}
            )
            findings += _config_findings(model_config, "model_config")
        if training_config is not None:
            hyper["training_config"] = training_config
            findings += _config_findings(training_config, "training_config")
    elif "layers" in _child_groups(facts, "/") or "/vars" in facts.groups:
        kind = "keras-v3" if config is not None or metadata.get("members") else "keras-weights-h5"
        shapes = {p: d.shape for p, d in facts.datasets.items()}
        cfg = config if isinstance(config, dict) else None
        named, more = name_variables(facts.groups, shapes, cfg)
        findings.extend(more)
        entries = [_entry(n.stored, n.name, n.role, facts.datasets[n.stored], n.guessed)
                   for n in named]
        if cfg is not None:
            hyper.update(cfg)
    else:
        kind = "hdf5"
        findings.append(
            Finding(
                "warning",
                "no Keras layout (model_weights, layer_names or layers/vars): "
                "every dataset listed by its path, role other",
            )
        )
        entries = [_entry(p, p.lstrip("/"), Role.OTHER, d) for p, d in facts.datasets.items()]
    metadata["file_kind"] = kind
    return Checkpoint(
        paths=(where,),
        format=kind,
        tensors=entries,
        metadata=metadata,
        hyperparameters=hyper,
        findings=findings,
    )


def _config_findings(config: Any, where: str) -> list[Finding]:
    """What Keras would run from the config (Lambda bytecode, references by module) as
    findings; bytecode and listed references are ``danger``: every verb refuses the file."""
    from .security.keras_config import config_findings

    return config_findings(config, where)


def _legacy(
    facts: H5Facts, top: str, model_config: Any, where: str, findings: list[Finding]
) -> list[TensorEntry]:
    """Layers of ``layer_names`` under ``top``, each with the datasets its ``weight_names`` list."""
    attrs = facts.groups.get(top or "/", {})
    layer_names = _attr_list(attrs, "layer_names")
    if layer_names is None:
        raise FormatError("no layer_names attribute", where, top or "/")
    frozen = _frozen_layers(model_config)
    known = set(layer_names) | _config_layer_names(model_config)
    entries: list[TensorEntry] = []
    used: set[str] = set()
    datasets = facts.datasets
    for layer in layer_names:
        gpath = f"{top}/{layer}"
        if gpath not in facts.groups:
            raise FormatError(f"layer {layer!r} of layer_names has no group", where, gpath)
        weight_names = _attr_list(facts.groups[gpath], "weight_names")
        if weight_names is None:
            raise FormatError("layer group without weight_names", where, gpath)
        for wn in weight_names:
            dpath = f"{gpath}/{wn}"
            info = datasets.get(dpath)
            if info is None:
                dpath = _resolve(facts, dpath)
                if dpath is None:
                    raise FormatError(f"weight {wn!r} listed in weight_names is missing", where,
                                      gpath)
                info = datasets[dpath]
            used.add(dpath)
            name = _ununiquified(_tf_stripped(wn), layer, known)
            trainable = name.rpartition("/")[2] not in NON_TRAINABLE_NAMES and not (
                frozen and frozen & {layer, *name.split("/")[:-1]})
            role = Role.PARAMETER if trainable else Role.BUFFER
            entries.append(_entry(dpath, name, role, info))
    inside = f"{top}/"
    stray = [
        p
        for p in datasets
        if p not in used and p.startswith(inside) and not p.startswith("/optimizer_weights/")
    ]
    if stray:
        findings.append(
            Finding(
                "warning",
                f"{len(stray)} dataset(s) not listed in any weight_names (Keras "
                f"ignores them): {', '.join(stray[:5])}",
            )
        )
    return entries


def _tf_stripped(name: str) -> str:
    """``name`` without TensorFlow's ``:<digits>`` output suffix (:data:`TF_SUFFIX`)."""
    head, sep, tail = name.rpartition(":")
    if sep and tail.isdecimal():  # what \d+ matches: Unicode decimal digits (Nd)
        return head
    return TF_SUFFIX.sub("", name) if sep else name


def _ununiquified(name: str, layer: str, known: set[str]) -> str:
    """``conv2d_1_1/kernel`` in layer ``conv2d_1``'s group -> ``conv2d_1/kernel``.

    TensorFlow 1.x graphs make name scopes unique: a layer built again in the same graph (a
    model loaded with ``load_model`` where it was built, Keras 2.0-2.3 and tf.keras 1.x) gets
    ``<layer>_1`` as its weights' scope. The canonical name uses the layer's own name; a scope
    that is itself a layer of the model is left alone."""
    head, sep, rest = name.partition("/")
    if sep and head != layer and head not in known and re.fullmatch(
            re.escape(layer) + r"_\d+", head):
        return f"{layer}/{rest}"
    return name


def _named_configs(model_config: Any) -> list[tuple[dict, dict]]:
    """Every ``(node, node["config"])`` in a model config whose config has a string ``name``:
    layers, nested models and wrapped layers (bounded depth)."""
    out: list[tuple[dict, dict]] = []

    def walk(node: Any, depth: int) -> None:
        if depth > 64:
            return
        if isinstance(node, dict):
            cfg = node.get("config")
            if isinstance(cfg, dict) and isinstance(cfg.get("name"), str):
                out.append((node, cfg))
            for v in node.values():
                walk(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                walk(v, depth + 1)

    walk(model_config, 0)
    return out


def _config_layer_names(model_config: Any) -> set[str]:
    """Every layer name in a model config, nested models and wrapped layers included."""
    return {cfg["name"] for node, cfg in _named_configs(model_config) if "class_name" in node}


def _legacy_optimizer(facts: H5Facts, where: str) -> list[TensorEntry]:
    attrs = facts.groups.get("/optimizer_weights")
    if attrs is None:
        return []
    out = []
    for wn in _attr_list(attrs, "weight_names") or []:
        dpath = _resolve(facts, f"/optimizer_weights/{wn}")
        if dpath is None:
            raise FormatError(f"optimizer weight {wn!r} is missing", where, "/optimizer_weights")
        out.append(_entry(dpath, _tf_stripped(wn), Role.OPTIMIZER, facts.datasets[dpath]))
    return out


def _resolve(facts: H5Facts, path: str) -> str | None:
    """``path`` if it is a dataset, following soft links inside the file (a few hops)."""
    for _ in range(8):
        if path in facts.datasets:
            return path
        target = facts.soft_links.get(path)
        if target is None:
            return None
        path = target if target.startswith("/") else f"{path.rpartition('/')[0]}/{target}"
    return None


def _frozen_layers(model_config: Any) -> set[str]:
    """Names of layers whose config says ``trainable: false`` (their weights are non-trainable)."""
    return {cfg["name"] for _, cfg in _named_configs(model_config)
            if cfg.get("trainable") is False}


def _entry(stored: str, name: str, role: Role, info: DsInfo, guessed: bool = False
           ) -> TensorEntry:
    return TensorEntry(
        stored_name=stored,
        name=name,
        shape=info.shape,
        dtype=info.dtype,
        role=role,
        nbytes=info.nbytes,
        # Two links to one contiguous dataset share its data offset: counted once.
        storage="hdf5" if info.offset is not None else None,
        offset=info.offset,
        # name_guessed: the name is one of several the file alone allows (see keras_v3)
        extra={**info.extra, "name_guessed": True} if guessed else info.extra,
    )


def _child_groups(facts: H5Facts, path: str) -> set[str]:
    prefix = path.rstrip("/") + "/"
    return {
        p[len(prefix) :]
        for p in facts.groups
        if p.startswith(prefix) and "/" not in p[len(prefix) :]
    }


def _attr_list(attrs: dict[str, Any], name: str) -> list[str] | None:
    """A list attribute, also when Keras split it into ``name0``, ``name1``, ... (>64 KiB)."""
    if name in attrs:
        value = attrs[name]
        return [str(v) for v in value] if isinstance(value, list) else [str(value)]
    if f"{name}0" not in attrs:
        return None
    out, i = [], 0
    while f"{name}{i}" in attrs:
        value = attrs[f"{name}{i}"]
        out.extend(str(v) for v in (value if isinstance(value, list) else [value]))
        i += 1
    return out


def _json_attr(attrs: dict[str, Any], name: str, where: str) -> Any:
    value = attrs.get(name)
    if value is None:
        return None
    try:
        return json.loads(value)
    except (TypeError, ValueError) as e:
        raise FormatError(f"{name} attribute is not JSON ({e})", where, "/") from None


def _major(version: Any) -> int:
    match = re.match(r"\s*(\d+)", str(version or ""))
    return int(match.group(1)) if match else 0


# ---------------------------------------------------------------- security examination


def examine(source: Source, variant: str, result: FileResult) -> None:
    """``inspector scan``'s examination of a file this adapter claims: an HDF5 file's links,
    external storage, virtual sources and Keras config attributes (libhdf5 isolated); a
    ``.keras`` archive's members as any zip's (:func:`~inspector.adapters.security.examination.
    examine_zip_members`: pickles, object ``.npy`` arrays, every copy of a name), its root
    ``config.json`` and every HDF5 member by :func:`_examine_keras_member`."""
    from .security.examination import examine_zip_members
    from .security.hdf5 import examine_hdf5

    if variant == "hdf5":
        from .security.user_block import examine_user_block

        result.kind = "hdf5"
        examine_user_block(source.read, _superblock_offset(source.head(4096), source), result)
        examine_hdf5(source, result, None)
        return
    result.kind = "keras"
    examine_zip_members(source, result, _examine_keras_member)


def _examine_keras_member(name: str, data: bytes, result: FileResult) -> None:
    """A member that is neither a pickle nor ``.npy``: the root ``config.json`` (what Keras
    reads), or HDF5 by its superblock at any user-block offset."""
    import io

    from .security.hdf5 import examine_hdf5
    from .security.keras_config import examine_keras_config

    if name == KERAS_CONFIG_MEMBER:
        if len(data) > MAX_JSON_MEMBER:
            result.add("error", f"{name} is {len(data):,} bytes (cap {MAX_JSON_MEMBER:,}): not "
                                "examined", name)
            return
        try:
            config = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            result.add("error", f"{name} is not valid JSON ({e})", name)
            return
        examine_keras_config(config, result, name)
    elif (offset := superblock_offset(data[:4096], len(data),
                                      lambda o, n: data[o : o + n])) is not None:
        from .security.user_block import examine_user_block

        examine_user_block(lambda o, n: data[o : o + n], offset, result, name)
        examine_hdf5(io.BytesIO(data), result, name, size=len(data))
        if result.kind == "keras-h5":
            result.kind = "keras"


ADAPTER = Adapter(
    name=NAME,
    description="Keras HDF5 (.h5, .weights.h5, Keras 2 and 3) or .keras archive",
    extensions=(".h5", ".hdf5", ".keras", ".weights.h5"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,
)
