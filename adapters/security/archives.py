"""Archives people unpack, examined all the way down without unpacking anything to disk.

A tar (plain, gzip, bzip2, xz), a 7z (with the optional ``py7zr``), and any archive inside a
zip or another archive: every member is examined by the same walk as a loose file (the
``examine`` callable scan hands in: the registry's claim, then the adapter's hook or the
generic walk) and named by its nested path, ``outer.tar!inner.zip!data.pkl``. What leaves
the archive when it is unpacked is a finding: absolute names and names that climb out
(``..``), links whose target leaves the archive, device members.

Bounds, as for zip bombs (:data:`~.examination.MAX_ZIP_MEMBERS`,
:data:`~.examination.MAX_PICKLE_BYTES`), counted over the whole nesting of one file: depth,
members, decompressed bytes. tarfile parses the headers (never ``extract``): it reads a
plain tar in place, a compressed one from its decompressed stream spooled to at most
:data:`MAX_TOTAL_BYTES`, and no header read above :data:`MAX_HEADER_BYTES` is let through
(a PAX or GNU long-name header is read whole by tarfile).
"""

from __future__ import annotations

import io
import tarfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath

from ..bytes_source import BytesSource
from ..errors import FormatError
from ..source_interface import OneFile, Source, Window
from .examination import DANGEROUS, ERROR, FOREIGN, MAX_PICKLE_BYTES, MAX_ZIP_MEMBERS, FileResult

MAX_DEPTH = 4  # archives inside archives
MAX_MEMBERS = MAX_ZIP_MEMBERS  # members examined over the whole nesting of one file
MAX_TOTAL_BYTES = 4 << 30  # decompressed bytes over the whole nesting of one file
MAX_MEMBER_BYTES = MAX_PICKLE_BYTES  # a compressed member held in memory
MAX_HEADER_BYTES = 1 << 20  # one tar header record (PAX, GNU long name) as tarfile reads it
SPOOL_IN_MEMORY = 64 << 20
SEVEN_ZIP_MAGIC = b"7z\xbc\xaf\x27\x1c"
TAR_COMPRESSIONS = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz"}

Examine = Callable[[Source, FileResult], None]


class _Budget(threading.local):
    depth = 0
    members = 0
    total = 0


_BUDGET = _Budget()


def start_file() -> None:
    """A new top-level file: its own budget (scan calls this for each file it examines)."""
    _BUDGET.depth = _BUDGET.members = _BUDGET.total = 0


@contextmanager
def _one_level(res: FileResult, label: str) -> Iterator[bool]:
    """Enter one archive level; False (with an error item) past :data:`MAX_DEPTH`."""
    if _BUDGET.depth >= MAX_DEPTH:
        res.add(ERROR, f"{label}: archives nested deeper than {MAX_DEPTH}: not examined", label)
        yield False
        return
    _BUDGET.depth += 1
    try:
        yield True
    finally:
        _BUDGET.depth -= 1


def _count(res: FileResult, label: str, nbytes: int) -> bool:
    """Charge one member of ``nbytes`` to the file's budget; False (error item) past it."""
    _BUDGET.members += 1
    _BUDGET.total += nbytes
    if _BUDGET.members > MAX_MEMBERS:
        res.add(ERROR, f"more than {MAX_MEMBERS:,} archive members: the rest not examined",
                label)
        return False
    if _BUDGET.total > MAX_TOTAL_BYTES:
        res.add(ERROR, f"archive members hold more than {MAX_TOTAL_BYTES:,} bytes: the rest "
                "not examined", label)
        return False
    return True


def nested_name(res: FileResult, name: str) -> str:
    """``outer.tar!inner.zip!name``: the member's path through every archive around it."""
    if "!" in res.path:
        return f"{res.path}!{name}"
    return f"{PurePosixPath(res.path).name}!{name}"


def examine_member(member: Source, name: str, res: FileResult, examine: Examine,
                   quiet_unknown: bool = False) -> None:
    """The member ``name`` of ``res``'s archive, examined as a loose file by ``examine``; its
    items join ``res``, their text led by the member's nested name, their place by ``name``.
    ``quiet_unknown``: a member no walk recognises adds nothing (a zip's raw tensor blobs)."""
    label = nested_name(res, name)
    inner = FileResult(label)
    try:
        examine(member, inner)
    except Exception as e:  # noqa: BLE001 - one member's damage is that member's error
        from .examination import one_line

        inner.add(ERROR, one_line(e))
    if quiet_unknown and inner.kind == "unknown" and not inner.globals and all(
            i.level == FOREIGN for i in inner.items):
        return
    for item in inner.items:
        where = f"{name}!{item.where}" if item.where and item.where != label else name
        if item.text.startswith(label):
            text = item.text
        elif inner.zip_walked and item.where and not item.where.startswith(("pickle", "npy")):
            text = f"{label}!{item.where}: {item.text}"  # a member of a zip member
        else:
            text = f"{label}: {item.text}"
        res.add(item.level, text, where)
    for g in inner.globals:
        res.globals.append({**g, "where": f"{name}!{g['where']}" if g.get("where") else name})


def path_finding(name: str) -> tuple[str, str] | None:
    """(level, text) for a member name that leaves the folder it is unpacked in."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return DANGEROUS, (f"member {name!r} has an absolute path: an extractor that keeps it "
                           "writes outside the folder it unpacks into")
    if ".." in parts:
        return DANGEROUS, (f"member {name!r} climbs out (..): an extractor that keeps it "
                           "writes outside the folder it unpacks into")
    return None


def _link_finding(info: tarfile.TarInfo) -> tuple[str, str] | None:
    target = info.linkname
    if info.issym():
        base = PurePosixPath(info.name).parent
        joined = target if target.startswith("/") else str(base / target)
        kind = "symbolic link"
    else:
        joined, kind = target, "hard link"
    depth = 0
    leaves = joined.startswith("/")
    for part in joined.split("/"):
        if part == "..":
            depth -= 1
            leaves = leaves or depth < 0
        elif part not in ("", "."):
            depth += 1
    if leaves:
        return DANGEROUS, (f"member {info.name!r} is a {kind} to {target!r}, outside the "
                           "archive: unpacking exposes or overwrites that file")
    return None


# ---------------------------------------------------------------------------------------------
# tar


def is_tar(head: bytes) -> bool:
    """A first header ``tarfile`` accepts (its checksum), whatever the magic says."""
    if len(head) < 512:
        return False
    try:
        tarfile.TarInfo.frombuf(head[:512], "utf-8", "surrogateescape")
    except (tarfile.HeaderError, ValueError):
        return False
    return True


def compressed_tar(source: Source) -> str | None:
    """'gzip', 'bzip2' or 'xz' for a compressed stream whose first 512 decompressed bytes are
    a tar header; ``"broken KIND: why"`` for one that breaks off before them."""
    head = source.head(8)
    kind = next((k for magic, k in TAR_COMPRESSIONS.items() if head.startswith(magic)), None)
    if kind is None:
        return None
    try:
        with source.open() as f, _decompressing(f, kind) as stream:
            first = stream.read(512)
    except Exception as e:  # noqa: BLE001 - a stream of that kind that breaks off
        return f"broken {kind}: {type(e).__name__}: {e}"
    return kind if is_tar(first) else None


def _decompressing(f: io.BufferedIOBase, kind: str) -> io.BufferedIOBase:
    import bz2
    import gzip
    import lzma

    if kind == "gzip":
        return gzip.GzipFile(fileobj=f)  # type: ignore[return-value]
    if kind == "bzip2":
        return bz2.BZ2File(f)  # type: ignore[return-value]
    return lzma.LZMAFile(f)  # type: ignore[return-value]


class _SpoolSource(OneFile):
    """A decompressed stream spooled (memory, then a temporary file) as a source, read in
    ranges (its view slices read what they cover)."""

    def __init__(self, spool: io.BufferedIOBase, size: int, where: str) -> None:
        self._spool, self._size, self._where = spool, size, where
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return self._where

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, n: int) -> bytes:
        n = max(0, min(n, self._size - offset))
        with self._lock:
            self._spool.seek(offset)
            return self._spool.read(n)

    def open(self, mode: str = "rb") -> io.BufferedIOBase:
        return io.BufferedReader(_Reader(self))  # type: ignore[return-value]

    @contextmanager
    def view(self) -> Iterator[object]:
        yield _ReadView(self)

    def child(self, name: str) -> Source:
        raise FormatError("a decompressed stream has no children", self._where)

    def parent_dir(self) -> Source:
        return _EmptyDir(self._where)

    def list(self) -> list[str]:
        return []


class _ReadView:
    """Slices, ``len``, ``find``/``rfind`` of a source, each reading only what it covers."""

    def __init__(self, source: Source) -> None:
        self._s = source

    def __len__(self) -> int:
        return self._s.size

    def __getitem__(self, key: slice) -> bytes:
        a, b, _ = key.indices(self._s.size)
        return self._s.read(a, max(0, b - a))

    def find(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        a, b, _ = slice(start, end).indices(self._s.size)
        i = self._s.read(a, max(0, b - a)).find(sub)
        return a + i if i >= 0 else -1

    def rfind(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        a, b, _ = slice(start, end).indices(self._s.size)
        i = self._s.read(a, max(0, b - a)).rfind(sub)
        return a + i if i >= 0 else -1


class _Reader(io.RawIOBase):
    """A seekable raw file over a source's ``read``."""

    def __init__(self, source: Source) -> None:
        self._s, self._pos = source, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else \
            self._s.size + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: object) -> int:
        view = memoryview(buffer)  # type: ignore[arg-type]
        data = self._s.read(self._pos, len(view))
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)


class _HeaderReads(io.RawIOBase):
    """The file tarfile parses headers from: no single read above :data:`MAX_HEADER_BYTES`
    (tarfile reads a PAX or GNU long-name record whole, at the size its header declares)."""

    def __init__(self, source: Source) -> None:
        self._s, self._pos = source, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else \
            self._s.size + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > MAX_HEADER_BYTES:
            raise tarfile.ReadError(f"a tar header record of {n:,} bytes (limit "
                                    f"{MAX_HEADER_BYTES:,}): refused")
        data = self._s.read(self._pos, n)
        self._pos += len(data)
        return data


def examine_tar(source: Source, res: FileResult, examine: Examine,
                compression: str | None = None) -> None:
    """Every member of a tar (``compression``: None, 'gzip', 'bzip2', 'xz'), each examined by
    ``examine`` as a loose file; what would leave the folder on unpacking reported."""
    res.kind = "tar" if compression is None else f"tar.{compression}"
    with _one_level(res, res.path) as ok:
        if not ok:
            return
        if compression is None:
            _walk_tar(source, res, examine)
            return
        import tempfile

        with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY) as spool:
            size = _spool(source, compression, spool, res)
            if size is None:
                return
            _walk_tar(_SpoolSource(spool, size, source.where), res, examine)


def _spool(source: Source, kind: str, spool: io.BufferedIOBase, res: FileResult) -> int | None:
    """Decompress into ``spool`` up to the file's remaining budget; its size, or None (error
    item) when the stream is bigger or broken."""
    room = MAX_TOTAL_BYTES - _BUDGET.total
    size = 0
    try:
        with source.open() as f, _decompressing(f, kind) as stream:
            while True:
                chunk = stream.read(min(1 << 20, room + 1 - size))
                if not chunk:
                    break
                size += len(chunk)
                if size > room:
                    res.add(ERROR, f"the {kind} stream decompresses past {MAX_TOTAL_BYTES:,} "
                            "bytes: not examined")
                    return None
                spool.write(chunk)
    except Exception as e:  # noqa: BLE001 - a broken stream: what it held is not examined
        res.add(ERROR, f"the {kind} stream breaks off ({type(e).__name__}: {e}): not examined")
        return None
    return size


def _walk_tar(source: Source, res: FileResult, examine: Examine) -> None:
    size = source.size
    seen = 0
    regular: dict[str, Source] = {}
    try:
        tar = tarfile.open(fileobj=_HeaderReads(source), mode="r:")  # type: ignore[arg-type]
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        res.add(ERROR, f"not a readable tar archive ({e})")
        return
    with tar:
        while True:
            try:
                info = tar.next()
            except (tarfile.TarError, EOFError, OSError, ValueError) as e:
                res.add(ERROR, f"tar header after member {seen} cannot be read ({e}): the rest "
                        "not examined")
                return
            if info is None:
                _check_end(source, tar.offset, seen, res)
                _manifest(source, regular, res)
                return
            seen += 1
            label = nested_name(res, info.name)
            found = path_finding(info.name)
            if found:
                res.add(*found, info.name)
            if info.issym() or info.islnk():
                link = _link_finding(info)
                if link:
                    res.add(*link, info.name)
                continue
            if info.isdir():
                continue
            if info.ischr() or info.isblk():
                res.add(DANGEROUS, f"member {info.name!r} is a device file: unpacking as root "
                        "creates a device node", info.name)
                continue
            if not info.isreg():
                res.add(FOREIGN, f"member {info.name!r} is a special file (type "
                        f"{info.type!r}): not examined", info.name)
                continue
            if info.issparse():
                res.add(FOREIGN, f"member {info.name!r} is a sparse file: not examined",
                        info.name)
                continue
            if info.offset_data + info.size > size:
                res.add(ERROR, f"member {info.name!r} ({info.size:,} bytes) runs past the end "
                        "of the archive: truncated", info.name)
                return
            if not _count(res, info.name, info.size):
                return
            member = Window(source, info.offset_data, info.size, info.name)
            regular[info.name] = member
            examine_member(_Named(member, label), info.name, res, examine)


def _manifest(source: Source, regular: dict[str, Source], res: FileResult) -> None:
    """A TorchServe archive written as a tar (``--archive-format tgz``): its manifest's parts,
    named relative to the folder that holds ``MAR-INF/``."""
    from .torchserve import MANIFEST, MAX_MANIFEST, examine_manifest

    for name, member in regular.items():
        if name == MANIFEST or name.endswith("/" + MANIFEST):
            prefix = name[: -len(MANIFEST)]
            names = [n[len(prefix):] for n in regular if n.startswith(prefix)]
            kind = res.kind
            examine_manifest(member.read(0, min(member.size, MAX_MANIFEST + 1)), names, res)
            res.kind = f"torchserve-{kind}"
            return


def _check_end(source: Source, offset: int, seen: int, res: FileResult) -> None:
    """tarfile ends its walk quietly at a header it cannot read past the first: a tar cut
    inside a header, or a damaged header, is an error here (members may follow unexamined)."""
    left = source.size - offset
    if left <= 0:
        return
    block = source.read(offset, min(left, 512))
    if left < 512 or block.strip(b"\0"):
        res.add(ERROR, f"the tar breaks off after member {seen} (offset {offset:,}: "
                f"{'a cut header' if left < 512 else 'a header tarfile cannot read'}): the "
                "rest not examined")


class _Named(OneFile):
    """A member source shown by its nested name (``outer.tar!inner.zip!data.pkl``); its
    directory is an empty one (a member has no side files a loader would read)."""

    def __init__(self, inner: Source, label: str) -> None:
        self._inner, self._label = inner, label

    @property
    def where(self) -> str:
        return self._label

    @property
    def size(self) -> int:
        return self._inner.size

    def read(self, offset: int, n: int) -> bytes:
        return self._inner.read(offset, n)

    def open(self, mode: str = "rb") -> io.BufferedIOBase:
        return self._inner.open(mode)  # type: ignore[return-value]

    @contextmanager
    def view(self) -> Iterator[object]:
        with self._inner.view() as mm:
            yield mm

    def child(self, name: str) -> Source:
        raise FormatError("an archive member has no children", self._label)

    def parent_dir(self) -> Source:
        return _EmptyDir(self._label)

    def list(self) -> list[str]:
        return []


class _EmptyDir(Source):
    def __init__(self, where: str) -> None:
        self._where = where

    @property
    def where(self) -> str:
        return self._where + "!.."

    def exists(self) -> bool:
        return True

    def is_dir(self) -> bool:
        return True

    @property
    def size(self) -> int:
        return 0

    def read(self, offset: int, n: int) -> bytes:
        return b""

    def open(self, mode: str = "rb") -> io.BufferedIOBase:
        raise FormatError("a directory", self.where)

    def child(self, name: str) -> Source:
        from ..errors import NotFoundError

        raise NotFoundError("not in the archive (members are examined alone)",
                            f"{self._where}!{name}")

    def parent_dir(self) -> Source:
        return self

    def list(self) -> list[str]:
        return []


# ---------------------------------------------------------------------------------------------
# members of a zip, and 7z


def examine_bytes_member(data: bytes, name: str, res: FileResult, examine: Examine,
                         quiet_unknown: bool = False) -> None:
    """A member already read into memory (a zip's, a 7z's), examined as a loose file."""
    label = nested_name(res, name)
    with _one_level(res, label) as ok:
        if not ok or not _count(res, name, len(data)):
            return
        examine_member(_Named(BytesSource(data, label, _EmptyDir(label)), label), name, res,
                       examine, quiet_unknown)


def examine_7z(source: Source, res: FileResult, examine: Examine) -> None:
    """Every member of a 7z archive (``py7zr``, the optional ``7z`` extra); without it the
    file is ``error``, never passed as unexamined."""
    res.kind = "7z"
    try:
        import py7zr
        from py7zr.io import BytesIOFactory
    except ImportError:
        res.add(ERROR, "7z archive: not examined: install ckpt-inspector[7z] (py7zr) to "
                "examine its members")
        return
    with _one_level(res, res.path) as ok:
        if not ok:
            return
        try:
            with source.open() as f, py7zr.SevenZipFile(f) as z:
                infos = z.list()
                if len(infos) + _BUDGET.members > MAX_MEMBERS:
                    res.add(ERROR, f"{len(infos):,} members (limit {MAX_MEMBERS:,}): not "
                            "examined")
                    return
                files = []
                for info in infos:
                    name = info.filename
                    found = path_finding(name)
                    if found:
                        res.add(*found, name)
                    if info.is_directory:
                        continue
                    if info.is_symlink:
                        res.add(FOREIGN, f"member {name!r} is a symbolic link: not followed",
                                name)
                        continue
                    usize = info.uncompressed or 0
                    if usize > MAX_MEMBER_BYTES:
                        res.add(ERROR, f"member {name!r} declares {usize:,} bytes (limit "
                                f"{MAX_MEMBER_BYTES:,}): not examined", name)
                        continue
                    if not _count(res, name, usize):
                        return
                    files.append(name)
                factory = BytesIOFactory(MAX_MEMBER_BYTES + 1)
                z.extract(targets=files, factory=factory)
        except Exception as e:  # noqa: BLE001 - py7zr's many errors: the file's error line
            res.add(ERROR, f"not a readable 7z archive ({type(e).__name__}: {e})")
            return
        for name in files:
            try:
                product = factory.get(name)
            except KeyError:
                res.add(ERROR, f"member {name!r} was not extracted by py7zr: not examined",
                        name)
                continue
            product.seek(0)
            label = nested_name(res, name)
            data = product.read()
            examine_member(_Named(BytesSource(data, label, _EmptyDir(label)), label), name,
                           res, examine)
