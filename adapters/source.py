"""Where a checkpoint's bytes come from: a :class:`Source` is one file or one directory.

Adapters read through a source, never through ``open(path)`` or ``os`` calls: its size, ranged
reads, a seekable file object, a read-only buffer over the whole file (:meth:`Source.view`), and
lookups of children (in a directory) and siblings (beside a file) that can never leave the
directory they start from. :class:`LocalSource` is the local file system; a remote source (HTTP,
object storage) implements the same methods and every adapter works unchanged.

A source also reads like a :class:`pathlib.Path` where that is harmless (``name``, ``suffix``,
``is_dir()``, ``is_file()``, ``str()``), and a local one is :class:`os.PathLike`, so libraries that
want a path (h5py) get one through :attr:`Source.local_path`.
"""

from __future__ import annotations

import io
import mmap
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from .errors import FormatError, InspectorError, NotFoundError, PermissionDeniedError

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

SNIFF_BYTES = 4096


class Source(ABC):
    """One file or directory that a checkpoint is read from."""

    #: Read statistics (requests and bytes) for the benchmark of remote sources.
    reads: int = 0
    bytes_read: int = 0

    # -- identity ---------------------------------------------------------------------------
    @property
    @abstractmethod
    def where(self) -> str:
        """The path or URL as an error message or a report shows it."""

    @property
    def name(self) -> str:
        """The last component, as :attr:`pathlib.PurePath.name`."""
        return PurePosixPath(self.where.rstrip("/")).name

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def local_path(self) -> Path | None:
        """A local file-system path for libraries that need one, None for remote sources."""
        return None

    def __str__(self) -> str:
        return self.where

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where!r}>"

    # -- kind -------------------------------------------------------------------------------
    @abstractmethod
    def exists(self) -> bool: ...

    @abstractmethod
    def is_dir(self) -> bool: ...

    def is_file(self) -> bool:
        return self.exists() and not self.is_dir()

    # -- bytes ------------------------------------------------------------------------------
    @property
    @abstractmethod
    def size(self) -> int:
        """File size in bytes."""

    @abstractmethod
    def read(self, offset: int, n: int) -> bytes:
        """Up to ``n`` bytes from ``offset`` (fewer only at the end of the file)."""

    @abstractmethod
    def open(self, mode: str = "rb") -> BinaryIO:
        """A seekable binary file object (``mode`` is accepted for Path compatibility: only
        ``"rb"``)."""

    @contextmanager
    def view(self) -> Iterator[bytes | mmap.mmap]:
        """A read-only view of the whole file: slicing (contiguous, giving bytes), ``len``,
        ``find`` and ``rfind``; nothing else (a remote view fetches what is sliced, so it has no
        buffer protocol: ``struct.unpack(fmt, view[a:b])``, not ``unpack_from(fmt, view, a)``).
        The default reads the file; local files map it; remote files read ranges on access."""
        yield self.read(0, self.size)

    def head(self, n: int = SNIFF_BYTES) -> bytes:
        """The first ``n`` bytes (b'' for a directory)."""
        return b"" if self.is_dir() else self.read(0, n)

    def read_text(self, limit: int, encoding: str = "utf-8") -> str:
        """The whole file as text, refused above ``limit`` bytes (side files: configs, indexes)."""
        if self.size > limit:
            raise FormatError(f"{self.size} bytes, over the {limit}-byte limit", self.where)
        try:
            return self.read(0, self.size).decode(encoding)
        except UnicodeDecodeError as e:
            raise FormatError(f"not {encoding} text ({e.reason})", self.where) from None

    # -- neighbours -------------------------------------------------------------------------
    @abstractmethod
    def child(self, name: str) -> Source:
        """``name`` (a relative path, ``/``-separated) inside this directory. A name that would
        leave the directory (``..``, absolute, a symlink pointing out) is refused."""

    @abstractmethod
    def parent_dir(self) -> Source:
        """The directory holding this file."""

    def sibling(self, name: str) -> Source:
        """``name`` beside this file, never outside its directory."""
        return self.parent_dir().child(name)

    @abstractmethod
    def list(self) -> list[str]:
        """The names in this directory, sorted."""

    def iterdir(self) -> Iterator[Source]:
        return (self.child(n) for n in self.list())

    def __truediv__(self, name: str) -> Source:
        return self.child(name)


class RangeFile(io.RawIOBase):
    """A seekable read-only file object over ranged reads: a subclass says its ``size()`` and
    how to ``read_at(offset, n)`` (up to ``n`` bytes, fewer only at the end)."""

    _pos = 0

    def size(self) -> int:
        raise NotImplementedError

    def read_at(self, offset: int, n: int) -> bytes:
        raise NotImplementedError

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            offset += self.size()
        if offset < 0:
            raise OSError("negative seek position")
        self._pos = offset
        return offset

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.size() - self._pos
        data = self.read_at(self._pos, max(0, min(n, self.size() - self._pos)))
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


class WindowFile(RangeFile):
    """``size`` bytes of the seekable file object ``raw`` from ``start``, read in place (a zip
    member stored uncompressed, one blob of a larger file); closing it closes ``raw`` when it
    ``owns`` it."""

    def __init__(self, raw: BinaryIO, start: int, size: int, owns: bool = False) -> None:
        self._raw, self._start, self._size, self._owns = raw, start, size, owns

    def size(self) -> int:
        return self._size

    def read_at(self, offset: int, n: int) -> bytes:
        self._raw.seek(self._start + offset)
        return self._raw.read(n)

    def close(self) -> None:
        if self._owns and not self.closed:
            self._raw.close()
        super().close()


def check_relative(name: str, where: str) -> PurePosixPath:
    """``name`` as a relative path that stays inside its directory, or a FormatError."""
    if not name or "\\" in name or "\x00" in name or name.startswith("/") or os.path.isabs(name):
        raise FormatError(f"refusing the path {name!r}: it is not a plain relative name", where)
    rel = PurePosixPath(name)
    if ".." in rel.parts:
        raise FormatError(f"refusing the path {name!r}: it leaves the directory", where)
    return rel


class LocalSource(Source, os.PathLike):
    """A file or directory on the local file system.

    ``root`` is the directory that :meth:`child` and :meth:`sibling` lookups must stay in (after
    resolving symlinks); it is the source's own directory unless given.
    """

    def __init__(self, path: str | os.PathLike[str], root: Path | None = None) -> None:
        self.path = Path(path)
        self._root = root
        self._size: int | None = None

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def local_path(self) -> Path:
        return self.path

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalSource) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def exists(self) -> bool:
        return self.path.exists()

    def is_dir(self) -> bool:
        return self.path.is_dir()

    def is_file(self) -> bool:
        return self.path.is_file()

    @property
    def size(self) -> int:
        if self._size is None:
            try:
                self._size = self.path.stat().st_size
            except OSError as e:
                raise _os_error(e, self.where) from None
        return self._size

    def read(self, offset: int, n: int) -> bytes:
        with self.open() as f:
            f.seek(offset)
            data = f.read(n)
        self.reads += 1
        self.bytes_read += len(data)
        return data

    def open(self, mode: str = "rb") -> BinaryIO:
        if mode != "rb":
            raise ValueError("sources are read-only")
        try:
            return open(self.path, "rb")
        except OSError as e:
            raise _os_error(e, self.where) from None

    @contextmanager
    def view(self) -> Iterator[mmap.mmap | bytes]:
        with self.open() as f:
            if self.size == 0:
                yield b""
                return
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                yield mm
            finally:
                mm.close()

    def _base(self) -> Path:
        return (self._root if self._root is not None else self.path).resolve()

    def child(self, name: str) -> LocalSource:
        rel = check_relative(name, self.where)
        candidate = self.path / rel
        base = self._base()
        resolved = candidate.resolve()
        if resolved != base and base not in resolved.parents:
            raise FormatError(f"refusing {name!r}: it resolves outside {base}", self.where)
        return LocalSource(candidate, root=base)

    def parent_dir(self) -> LocalSource:
        parent = self.path.parent
        return LocalSource(parent, root=self._root if self._root is not None else None)

    def sibling(self, name: str) -> LocalSource:
        parent = self.path.parent
        base = self._root if self._root is not None else parent.resolve()
        return LocalSource(parent, root=base).child(name)

    def list(self) -> list[str]:
        try:
            return sorted(p.name for p in self.path.iterdir())
        except OSError as e:
            raise _os_error(e, self.where) from None


def _os_error(e: OSError, where: str) -> InspectorError:
    if isinstance(e, FileNotFoundError):
        return NotFoundError("no such file or directory", where)
    if isinstance(e, PermissionError):
        return PermissionDeniedError("permission denied", where)
    return InspectorError(f"cannot read ({e.strerror or e})", where)


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")


def is_url(text: str) -> bool:
    """``text`` starts with ``scheme://`` (a remote source; ``file://`` is local)."""
    return bool(_URL.match(text))


def as_source(path: str | os.PathLike[str] | Source) -> Source:
    """A source for what the caller gave: a source as is, a URL (``scheme://...``, read through
    fsspec: :mod:`.remote`) as a remote source, a path as a :class:`LocalSource`."""
    if isinstance(path, Source):
        return path
    if isinstance(path, str) and "://" in path[:32]:
        if is_url(path) and not path.lower().startswith("file://"):
            from .remote import open_url

            return open_url(path)
        if path.lower().startswith("file://"):
            return LocalSource(path[len("file://") :])
    return LocalSource(path)

