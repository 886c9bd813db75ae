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

import mmap
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import FormatError, InspectorError, NotFoundError, PermissionDeniedError
from .source_interface import (  # the interface, importable from here as before
    SNIFF_BYTES,
    RangeFile,
    Source,
    WindowFile,
    check_relative,
    is_url,
)

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["SNIFF_BYTES", "LocalSource", "RangeFile", "Source", "WindowFile", "as_source",
           "check_relative", "is_url"]



class LocalSource(Source, os.PathLike):
    """A file or directory on the local file system.

    ``root`` is the directory that :meth:`child` and :meth:`sibling` lookups must stay in (after
    resolving symlinks); it is the source's own directory unless given.
    """

    def __init__(self, path: str | os.PathLike[str], root: Path | None = None) -> None:
        self.path = Path(path)
        self._root = root
        self._size: int | None = None
        self._real: Path | None = None  # _base(), resolved once per source
        # the path itself is known to resolve inside the base: the source's own directory, or
        # a child() checked so
        self._inside = root is None

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
                st = self.path.stat()
            except OSError as e:
                raise _os_error(e, self.where) from None
            refuse_special(st.st_mode, self.where)
            self._size = st.st_size
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
            refuse_special(os.stat(self.path).st_mode, self.where)  # a socket cannot be opened
            # O_NONBLOCK: a FIFO opened for reading would wait for a writer; checked again on
            # what was opened, in case the name changed in between
            fd = os.open(self.path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise _os_error(e, self.where) from None
        try:
            refuse_special(os.fstat(fd).st_mode, self.where)
            if _NONBLOCK:
                os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

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
        # Resolved once: a directory listing asks for dozens of children, and each resolve is
        # an lstat per path component. The candidate child is still resolved every time.
        if self._real is None:
            self._real = (self._root if self._root is not None else self.path).resolve()
        return self._real

    def child(self, name: str) -> LocalSource:
        rel = check_relative(name, self.where)
        candidate = self.path / rel
        base = self._base()
        if not (self._inside and len(rel.parts) == 1 and _not_link(candidate)):
            # (one name that is not a symlink, in a directory inside the base, stays inside)
            resolved = candidate.resolve()
            if resolved != base and base not in resolved.parents:
                raise FormatError(f"refusing {name!r}: it resolves outside {base}", self.where)
        out = LocalSource(candidate, root=base)
        out._real = base  # already resolved
        out._inside = True
        return out

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


def _not_link(path: Path) -> bool:
    """``path`` is no symlink: it is missing or names a file or directory itself."""
    try:
        return not stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def refuse_special(mode: int, where: str) -> None:
    """A FIFO, socket or device file is never read (a FIFO blocks until a writer comes, a
    device never ends): :class:`FormatError` naming what it is."""
    for test, what in _SPECIAL:
        if test(mode):
            raise FormatError(f"{what}, not a regular file: not read", where)


def _os_error(e: OSError, where: str) -> InspectorError:
    if isinstance(e, FileNotFoundError):
        return NotFoundError("no such file or directory", where)
    if isinstance(e, PermissionError):
        return PermissionDeniedError("permission denied", where)
    return InspectorError(f"cannot read ({e.strerror or e})", where)



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

