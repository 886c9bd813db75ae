"""The interface of a checkpoint's byte source: :class:`Source` (one file or one directory),
the file objects over a source's ranges (:class:`RangeFile`, :class:`WindowFile`,
:class:`RunReader`), a byte range of a source as a source of its own (:class:`Window`), the check
that a looked-up name stays inside its directory, and :func:`is_url`; :class:`BytesSource`
(bytes in memory as a source: a decompressed archive member).

:mod:`.source` implements it for the local file system and dispatches URLs to :mod:`.remote`;
both import this module, so neither imports the other's module at load time.
"""

from __future__ import annotations

import io
import mmap
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import FormatError

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from pathlib import Path
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
        text = pure_text(self.where.rstrip("/"), posix=True)
        return "" if text == "." else text.rpartition("/")[2]

    @property
    def suffix(self) -> str:
        """The last dot-suffix of :attr:`name`, as :attr:`pathlib.PurePath.suffix`."""
        name = self.name
        i = name.rfind(".")
        return name[i:] if 0 < i < len(name) - 1 else ""

    @property
    def local_path(self) -> Path | None:
        """A local file-system path for libraries that need one, None for remote sources."""
        return None

    @property
    def is_local(self) -> bool:
        """Whether this is a file on the local file system (:attr:`local_path` is not None),
        asked without making the path."""
        return self.local_path is not None

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


def pure_text(path: str, posix: bool = False) -> str:
    """``str(PurePath(path))`` (``PurePosixPath`` with ``posix``) without pathlib: repeated
    and trailing separators and ``.`` components dropped, ``..`` kept, two leading slashes
    kept as POSIX allows; elsewhere than POSIX, pathlib's own answer."""
    if not posix and os.name != "posix":
        from pathlib import PurePath

        return str(PurePath(path))
    root = ""
    if path.startswith("/"):
        root = "//" if path.startswith("//") and not path.startswith("///") else "/"
    text = root + "/".join(part for part in path.split("/") if part and part != ".")
    return text or "."


def check_relative(name: str, where: str) -> str:
    """``name`` as a relative path that stays inside its directory (its ``/``-separated parts,
    empty and ``.`` parts dropped), or a FormatError."""
    if not name or "\\" in name or "\x00" in name or name.startswith("/") or os.path.isabs(name):
        raise FormatError(f"refusing the path {name!r}: it is not a plain relative name", where)
    parts = [part for part in name.split("/") if part and part != "."]
    if ".." in parts:
        raise FormatError(f"refusing the path {name!r}: it leaves the directory", where)
    return "/".join(parts) or "."

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")


def is_url(text: str) -> bool:
    """``text`` starts with ``scheme://`` (a remote source; ``file://`` is local)."""
    return bool(_URL.match(text))



class RunReader(io.RawIOBase):
    """A tensor's bytes read run by run from open files (chunks, rank partitions, shard pieces):
    :meth:`next_run` gives the next run as (a file object positioned at its start, its length),
    or None after the last. ``what`` names the files in the error a short file raises."""

    def __init__(self, where: str, what: str) -> None:
        self._where, self._what = where, what
        self._file: Any = None
        self._left = 0  # bytes left in the current run

    def readable(self) -> bool:
        return True

    def next_run(self) -> tuple[Any, int] | None:
        raise NotImplementedError

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view):
            if self._left == 0:
                run = self.next_run()
                if run is None:
                    break
                self._file, self._left = run
                continue
            data = self._file.read(min(self._left, len(view) - done))
            if not data:
                raise FormatError(f"{self._what} ends early", self._where)
            view[done:done + len(data)] = data
            done += len(data)
            self._left -= len(data)
        return done


class _WindowView:
    """Slices, ``len``, ``find``/``rfind`` of ``length`` bytes of ``view`` from ``start``."""

    def __init__(self, view: Any, start: int, length: int) -> None:
        self._view, self._start, self._len = view, start, length

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: slice) -> bytes:
        a, b, step = key.indices(self._len)
        if step != 1:
            raise ValueError("contiguous slices only")
        return self._view[self._start + a : self._start + max(a, b)]

    def _bounds(self, start: int | None, end: int | None) -> tuple[int, int]:
        a, b, _ = slice(start, end).indices(self._len)
        return self._start + a, self._start + max(a, b)

    def find(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        i = self._view.find(sub, *self._bounds(start, end))
        return i - self._start if i >= 0 else -1

    def rfind(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        i = self._view.rfind(sub, *self._bounds(start, end))
        return i - self._start if i >= 0 else -1


class OneFile(Source):
    """A source that is one existing file, never a directory (bytes in memory, a window of
    another file, an archive member): the answers every such source gives alike."""

    def exists(self) -> bool:
        return True

    def is_dir(self) -> bool:
        return False


class Window(OneFile):
    """``length`` bytes of ``base`` from ``start`` as a file of its own, read in place: a
    ``torch.save`` blob of a ``.distcp``, a member of an uncompressed tar (``.nemo``)."""

    def __init__(self, base: Source, start: int, length: int, label: str) -> None:
        self._base, self._start, self._len, self._label = base, start, length, label

    @property
    def where(self) -> str:
        return f"{self._base.where}:{self._label}"

    @property
    def size(self) -> int:
        return self._len

    def read(self, offset: int, n: int) -> bytes:
        n = max(0, min(n, self._len - offset))
        return self._base.read(self._start + offset, n) if n else b""

    def open(self, mode: str = "rb") -> Any:
        return WindowFile(self._base.open(), self._start, self._len, owns=True)

    @contextmanager
    def view(self) -> Iterator[Any]:
        with self._base.view() as mm:
            yield _WindowView(mm, self._start, self._len)

    def child(self, name: str) -> Source:
        raise FormatError("a byte range of a file has no children", self.where)

    def parent_dir(self) -> Source:
        return self._base.parent_dir()

    def list(self) -> list[str]:
        return []
