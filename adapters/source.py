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

from .errors import FormatError, InspectorError, NotFoundError, PermissionDeniedError
from .source_interface import (  # the interface, importable from here as before
    SNIFF_BYTES,
    RangeFile,
    Source,
    WindowFile,
    check_relative,
    is_url,
    pure_text,
)

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import BinaryIO

__all__ = ["SNIFF_BYTES", "LocalSource", "RangeFile", "Source", "WindowFile", "as_source",
           "check_relative", "is_url"]



class LocalSource(Source, os.PathLike):
    """A file or directory on the local file system.

    ``root`` is the directory that :meth:`child` and :meth:`sibling` lookups must stay in (after
    resolving symlinks); it is the source's own directory unless given.
    """

    def __init__(self, path: str | os.PathLike[str],
                 root: str | os.PathLike[str] | None = None) -> None:
        self._where = pure_text(os.fspath(path))
        self._path: Path | None = None
        self._root = root
        self._size: int | None = None
        self._real: str | None = None  # _base(), resolved once per source
        # the path itself is known to resolve inside the base: the source's own directory, or
        # a child() checked so
        self._inside = root is None

    @property
    def path(self) -> Path:
        """The path as a :class:`pathlib.Path` (pathlib, with urllib.parse and ipaddress behind
        it, is imported when first asked for: a listing of one file does not need it)."""
        if self._path is None:
            from pathlib import Path

            self._path = Path(self._where)
        return self._path

    @property
    def where(self) -> str:
        return self._where

    @property
    def name(self) -> str:
        return "" if self._where == "." else self._where.rpartition("/")[2]

    @property
    def local_path(self) -> Path:
        return self.path

    @property
    def is_local(self) -> bool:
        return True

    def __fspath__(self) -> str:
        return self._where

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalSource) and other._where == self._where

    def __hash__(self) -> int:
        return hash(self._where)

    def exists(self) -> bool:
        return os.path.exists(self._where)

    def is_dir(self) -> bool:
        return os.path.isdir(self._where)

    def is_file(self) -> bool:
        return os.path.isfile(self._where)

    @property
    def size(self) -> int:
        if self._size is None:
            try:
                st = os.stat(self._where)
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
            refuse_special(os.stat(self._where).st_mode, self.where)  # a socket cannot be opened
            # O_NONBLOCK: a FIFO opened for reading would wait for a writer; checked again on
            # what was opened, in case the name changed in between
            fd = os.open(self._where, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
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

    def _base(self) -> str:
        # Resolved once: a directory listing asks for dozens of children, and each resolve is
        # an lstat per path component. The candidate child is still resolved every time.
        if self._real is None:
            self._real = os.path.realpath(self._root if self._root is not None else self._where)
        return self._real

    def child(self, name: str) -> LocalSource:
        rel = check_relative(name, self.where)
        candidate = os.path.join(self._where, rel)
        base = self._base()
        if not (self._inside and "/" not in rel and _not_link(candidate)):
            # (one name that is not a symlink, in a directory inside the base, stays inside)
            resolved = os.path.realpath(candidate)
            if resolved != base and not resolved.startswith(base.rstrip(os.sep) + os.sep):
                raise FormatError(f"refusing {name!r}: it resolves outside {base}", self.where)
        out = LocalSource(candidate, root=base)
        out._real = base  # already resolved
        out._inside = True
        return out

    def parent_dir(self) -> LocalSource:
        return LocalSource(self._parent(), root=self._root)

    def sibling(self, name: str) -> LocalSource:
        parent = self._parent()
        base = self._root if self._root is not None else os.path.realpath(parent)
        return LocalSource(parent, root=base).child(name)

    def _parent(self) -> str:
        """The parent directory's path, as :attr:`pathlib.PurePath.parent`."""
        if self._where in (".", ".."):
            return "."
        return pure_text(os.path.dirname(self._where))

    def list(self) -> list[str]:
        try:
            return sorted(os.listdir(self._where))
        except OSError as e:
            raise _os_error(e, self.where) from None


def _not_link(path: str) -> bool:
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

