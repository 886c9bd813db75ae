"""Checkpoints behind a URL: :class:`RemoteSource` reads ``http(s)://``, ``s3://`` and any
protocol fsspec knows in ranges, and every adapter works on it unchanged.

Reads are few and small: the first request fetches the first :data:`BLOCK` bytes (the size
comes with it); later reads fetch only what is not cached yet, coalesced into one request of at
least :data:`BLOCK` bytes (bounded read-ahead), so a format's metadata costs a request or two and
tensor data is never downloaded for a listing. Reads larger than :data:`KEEP_MAX` (tensor values
for ``diff --values``) go straight through without being kept. Files of one directory with the
same suffix (the shards of a checkpoint) get their first blocks fetched together, concurrently,
when the first of them is read. ``child`` / ``sibling`` refuse names that leave the directory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

from .errors import FormatError, InspectorError, NotFoundError
from .remote_transport import (
    Entry,
    Fetched,
    IsADirectory,
    RemoteError,
    Transport,
    redact,
    timeout,
    transport,
)
from .source_interface import RangeFile, Source, check_relative

BLOCK = 64 << 10  # first request, and the least a request fetches
AHEAD_MAX = 1 << 20  # read-ahead of a scan (HDF5 metadata spread through a file)
KEEP_MAX = 1 << 20  # reads of this size or more (tensor values) are not cached
CACHE_MAX = 64 << 20  # cached bytes per file
TOTAL_MAX = 512 << 20  # cached bytes of all files (least recently used files dropped first)
SCAN_MAX = 256 << 20  # find/rfind over a remote view
PEERS_MAX = 256  # first blocks fetched together
BLOBS_MAX = 512  # remote files whose cache is kept


class Blob:
    """The cached state of one remote file: its kind, size and the byte ranges fetched so far."""

    def __init__(self, url: str, t: Transport) -> None:
        self.url = url
        self.t = t
        self.kind: str | None = None  # "file", "dir", "missing", "error"
        self.size: int | None = None
        self.error: InspectorError | None = None
        self.pieces: list[tuple[int, bytes]] = []  # sorted, disjoint, not touching
        self.kept = 0
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.claimed = False
        self.entries: list[Entry] | None = None  # a directory's listing, once read
        self._ahead = BLOCK  # read-ahead of the next miss
        self._last: int | None = None  # where the last fetch ended

    @property
    def where(self) -> str:
        return redact(self.url)

    @property
    def parent_key(self) -> tuple[str, str]:
        path = urlsplit(self.url).path
        parent, _, name = path.rpartition("/")
        return parent, name.rpartition(".")[2] if "." in name else ""

    # -- the first block ----------------------------------------------------------------------
    def settle(self, got: Fetched | Exception) -> None:
        with self.lock:
            self._settle(got)

    def _settle(self, got: Fetched | Exception) -> None:
        if isinstance(got, Fetched):
            total = got.total
            if total is None and len(got.data) < BLOCK:
                total = len(got.data)
            if total is None:
                self.error = RemoteError(
                    "the server did not say the file's size (no Content-Range)", self.where
                )
                self.kind = "error"
            else:  # size before kind: a reader that sees the kind finds the size
                self.size = total
                if got.data:
                    self._insert(got.start, got.data)
                self.kind = "file"
        elif isinstance(got, IsADirectory):
            self.kind = "dir"
        elif isinstance(got, NotFoundError):
            self.kind = "missing"
        else:
            self.error = got if isinstance(got, InspectorError) else self.t.error(got, self.url)
            self.kind = "error"

    def first(self) -> None:
        """Fetch the first block of this file (and of its unread same-suffix siblings)."""
        if self.kind is not None:
            return
        with _blobs_lock:
            if self.claimed:
                mine: list[Blob] = []
            else:
                key = self.parent_key
                peers = [
                    b for b in _blobs.values()
                    if b is not self and not b.claimed and b.kind is None and b.t is self.t
                    and b.parent_key == key and key[1] and not b.url.endswith("/")
                ][: PEERS_MAX - 1]
                mine = [self, *peers]
                for b in mine:
                    b.claimed = True
        if not mine:
            if not self.ready.wait(timeout() * 4):
                raise RemoteError("timed out waiting for another read of this file", self.where)
            return
        try:
            if self.url.endswith("/"):
                self.settle(IsADirectory(self.where))
            files = [b for b in mine if b.kind is None]
            try:
                results = self.t.fetch_many([(b.url, 0, BLOCK) for b in files]) if files else []
            except Exception as e:  # noqa: BLE001 - one request: its error settles it
                results = [e] * len(files)
            for b, got in zip(files, results, strict=True):
                b.settle(got)
            for b in mine:  # an object store prefix is a directory without an object
                if b.kind == "missing":
                    try:
                        b.entries = b.t.list_dir(b.url)
                    except InspectorError as e:
                        b.kind, b.error = "error", e
                    if b.entries:
                        b.kind = "dir"
        finally:
            for b in mine:
                if b.kind in (None, "error") and b.error is None:
                    b.error = RemoteError("could not be read", b.where)
                b.kind = b.kind or "error"
                b.ready.set()

    # -- ranged reads -------------------------------------------------------------------------
    def file_size(self) -> int:
        self.first()
        if self.kind == "file" and self.size is not None:
            return self.size
        if self.error is not None:
            raise self.error
        if self.kind == "dir":
            raise FormatError("is a directory, not a file", self.where)
        raise NotFoundError("no such file or directory", self.where)

    def read(self, offset: int, n: int) -> bytes:
        size = self.file_size()
        end = min(size, offset + max(n, 0))
        if offset < 0:
            raise ValueError("negative offset")
        if offset >= end:
            return b""
        with self.lock:
            got = self._cached(offset, end)
            if got is not None:
                return got
            if end - offset >= KEEP_MAX:
                return self._fetch(offset, end, keep=False)
            a, b = self._read_ahead(*self._missing(offset, end), size)
            self._fetch(a, b, keep=True)
            got = self._cached(offset, end)
        if got is None:
            raise RemoteError(f"bytes {offset}..{end} could not be read", self.where)
        return got

    def prefetch(self, spans: list[tuple[int, int]]) -> None:
        size = self.file_size()
        ranges: list[list[int]] = []
        with self.lock:
            for off, n in sorted(spans):
                a, b = max(0, off), min(size, off + n)
                if a >= b or self._cached(a, b) is not None:
                    continue
                if ranges and a - ranges[-1][1] < BLOCK:
                    ranges[-1][1] = max(ranges[-1][1], b)
                else:
                    ranges.append([a, b])
        if not ranges:
            return
        results = self.t.fetch_many([(self.url, a, b) for a, b in ranges])
        with self.lock:
            for (a, b), got in zip(ranges, results, strict=True):
                if isinstance(got, Fetched) and not got.whole and len(got.data) == b - a:
                    if self.kept + len(got.data) <= CACHE_MAX:
                        self._insert(a, got.data)
                # a failed or short range is read again (and reported) when it is used

    def _fetch(self, a: int, b: int, keep: bool) -> bytes:
        got = self.t.fetch(self.url, a, b)
        if got.whole:  # the server ignored Range: it sent the whole (small) file
            self.size = len(got.data)
            self._set_pieces([(0, got.data)])
            return got.data[a:b]
        if len(got.data) != b - a:
            raise RemoteError(
                f"asked for bytes {a}..{b}, the server sent {len(got.data)} bytes "
                "(the file changed or the transfer broke off)",
                self.where,
            )
        if keep:
            if self.kept + len(got.data) > CACHE_MAX:
                self._set_pieces([])
            self._insert(a, got.data)
        return got.data

    def _cached(self, a: int, b: int) -> bytes | None:
        for start, data in self.pieces:
            if start <= a and b <= start + len(data):
                return data[a - start : b - start]
        return None

    def _missing(self, a: int, b: int) -> tuple[int, int]:
        """The span from the first to the last byte of ``[a, b)`` not cached."""
        lo, hi = a, b
        for start, data in self.pieces:
            end = start + len(data)
            if start <= lo < end:
                lo = end
            if start < hi <= end:
                hi = start
        return lo, max(hi, lo + 1)

    def _read_ahead(self, a: int, b: int, size: int) -> tuple[int, int]:
        """``[a, b)`` grown to :data:`BLOCK` bytes where that fetches nothing already cached:
        forward up to the next cached piece, then backward down to the previous one."""
        after = min([s for s, _ in self.pieces if s >= b] + [size])
        before = max([s + len(d) for s, d in self.pieces if s + len(d) <= a] + [0])
        # a scan (each miss near the previous fetch) doubles the read-ahead, up to AHEAD_MAX
        near = self._last is not None and abs(a - self._last) <= self._ahead
        self._ahead = min(AHEAD_MAX, self._ahead * 2) if near else BLOCK
        b = max(b, min(after, a + self._ahead))
        a = min(a, max(before, b - self._ahead))
        self._last = b
        return a, b

    def _insert(self, a: int, data: bytes) -> None:
        b = a + len(data)
        keep, merge = [], [(a, data)]
        for start, d in self.pieces:
            if start + len(d) < a or start > b:
                keep.append((start, d))
            else:
                merge.append((start, d))
        lo = min(s for s, _ in merge)
        hi = max(s + len(d) for s, d in merge)
        buf = bytearray(hi - lo)
        for s, d in sorted(merge, key=lambda p: p[0] == a):  # the new bytes win
            buf[s - lo : s - lo + len(d)] = d
        keep.append((lo, bytes(buf)))
        keep.sort(key=lambda p: p[0])
        self._set_pieces(keep)

    def _set_pieces(self, pieces: list[tuple[int, bytes]]) -> None:
        """Replace the cached pieces (the caller holds ``self.lock``); over :data:`TOTAL_MAX`
        for all files, the least recently used files' caches are dropped."""
        global _kept_total
        kept = sum(len(d) for _, d in pieces)
        with _blobs_lock:
            _kept_total += kept - self.kept
            self.pieces, self.kept = pieces, kept
            for other in list(_blobs.values()):
                if _kept_total <= TOTAL_MAX:
                    break
                if other is not self and other.kept and other.lock.acquire(blocking=False):
                    try:
                        _kept_total -= other.kept
                        other.pieces, other.kept = [], 0
                    finally:
                        other.lock.release()


_blobs: OrderedDict[str, Blob] = OrderedDict()
_blobs_lock = threading.Lock()
_kept_total = 0  # cached bytes of all files


def forget() -> None:
    """Drop every remote file's state and cached bytes: a long-lived process (a Dask worker)
    between independent passes, so it neither holds their bytes nor reads a changed file from
    an old cache."""
    global _kept_total
    with _blobs_lock:
        _blobs.clear()
        _kept_total = 0


def blob(url: str, t: Transport) -> Blob:
    """The shared state of ``url`` (most recently used files kept)."""
    global _kept_total
    with _blobs_lock:
        b = _blobs.get(url)
        if b is None:
            b = _blobs[url] = Blob(url, t)
            while len(_blobs) > BLOBS_MAX:
                _, old = _blobs.popitem(last=False)
                _kept_total -= old.kept
        else:
            _blobs.move_to_end(url)
        return b


class RemoteView:
    """A read-only buffer over a remote file: slicing, ``len``, ``find``/``rfind``; each access
    reads through the file's cache."""

    def __init__(self, b: Blob) -> None:
        self._b = b

    def __len__(self) -> int:
        return self._b.file_size()

    def __getitem__(self, key: int | slice) -> Any:
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                raise ValueError("remote views take contiguous slices only")
            return self._b.read(start, stop - start) if stop > start else b""
        if key < 0:
            key += n
        if not 0 <= key < n:
            raise IndexError("index out of range")
        return self._b.read(key, 1)[0]

    def prefetch(self, spans: list[tuple[int, int]]) -> None:
        """Fetch the ``(offset, length)`` spans not cached yet together: spans less than
        :data:`BLOCK` apart share a request, the requests run concurrently."""
        self._b.prefetch(spans)

    def _span(self, start: int | None, end: int | None) -> tuple[int, bytes]:
        n = len(self)
        a, b, _ = slice(start, end).indices(n)
        if b - a > SCAN_MAX:
            raise FormatError(f"refusing to search {b - a:,} bytes of a remote file", self._b.where)
        return a, self[a:b] if b > a else b""

    def find(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        a, data = self._span(start, end)
        i = data.find(sub)
        return a + i if i >= 0 else -1

    def rfind(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        a, data = self._span(start, end)
        i = data.rfind(sub)
        return a + i if i >= 0 else -1


class RemoteFile(RangeFile):
    """A seekable read-only file object over a remote file's cache."""

    def __init__(self, b: Blob) -> None:
        self._b = b
        self.name = b.where

    def size(self) -> int:
        return self._b.file_size()

    def read_at(self, offset: int, n: int) -> bytes:
        return self._b.read(offset, n)


class RemoteSource(Source):
    """A remote file or directory (``url``: with its protocol; a directory may end in ``/``)."""

    def __init__(self, url: str, t: Transport | None = None) -> None:
        self.url = url
        self.t = t or transport(url.split("://", 1)[0])
        self._b = blob(url, self.t)
        self._entries: dict[str, Entry] | None = None

    @property
    def where(self) -> str:
        url = self.url.rstrip("/") if not self.url.endswith("://") else self.url
        return redact(url if "/" in url.split("://", 1)[-1] else self.url)

    @property
    def name(self) -> str:
        return urlsplit(self.url).path.rstrip("/").rpartition("/")[2] or self.url

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemoteSource) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    @property
    def reads(self) -> int:  # type: ignore[override]
        from .remote_transport import STATS

        return STATS.per_url.get(self.where, [0, 0])[0]

    @property
    def bytes_read(self) -> int:  # type: ignore[override]
        from .remote_transport import STATS

        return STATS.per_url.get(self.where, [0, 0])[1]

    def _kind(self) -> str:
        self._b.first()
        if self._b.kind == "error" and self._b.error is not None:
            raise self._b.error
        return self._b.kind or "missing"

    def exists(self) -> bool:
        return self._kind() in ("file", "dir")

    def is_dir(self) -> bool:
        return self._kind() == "dir"

    def is_file(self) -> bool:
        return self._kind() == "file"

    @property
    def size(self) -> int:
        return self._b.file_size()

    def read(self, offset: int, n: int) -> bytes:
        return self._b.read(offset, n)

    def open(self, mode: str = "rb") -> BinaryIO:
        if mode != "rb":
            raise ValueError("sources are read-only")
        self._b.file_size()
        return RemoteFile(self._b)  # type: ignore[return-value]

    @contextmanager
    def view(self) -> Iterator[Any]:
        self._b.file_size()
        yield RemoteView(self._b)

    def child(self, name: str) -> RemoteSource:
        parts = check_relative(name, self.where).split("/")
        url = self.url
        for part in parts:
            url = self.t.join(url, part)
        child = RemoteSource(url, self.t)
        if self._entries is not None and parts[0] not in self._entries:
            with _blobs_lock:  # not in the listing: known missing, no request
                if child._b.kind is None and not child._b.claimed:
                    child._b.kind = "missing"
        return child

    def parent_dir(self) -> RemoteSource:
        parts = urlsplit(self.url)
        parent = parts.path.rstrip("/").rpartition("/")[0] + "/"
        return RemoteSource(urlunsplit(parts._replace(path=parent, query="", fragment="")), self.t)

    def list(self) -> list[str]:
        if self._entries is None:
            if not self.is_dir():
                raise FormatError("not a directory", self.where)
            found = self._b.entries
            if found is None:
                found = self._b.entries = self.t.list(self.url)
            self._entries = {e.name: e for e in found}
            for e in self._entries.values():
                if e.is_dir:
                    for u in (self.t.join(self.url, e.name), self.t.join(self.url, e.name) + "/"):
                        b = blob(u, self.t)
                        b.kind = b.kind or "dir"
        return sorted(self._entries)

    def child_dir(self, name: str) -> RemoteSource:
        """A sub-directory known from the listing, as a directory URL (ending in ``/``)."""
        return RemoteSource(self.t.join(self.url, name) + "/", self.t)

    def walk(self, limit: int = 100_000) -> Iterator[RemoteSource]:
        """Every file below this directory, in name order (at most ``limit``): one listing of
        the whole prefix where the store gives one, else directory by directory."""
        if not self.is_dir():
            raise FormatError("not a directory", self.where)
        found = self.t.find(self.url)
        if found is not None:
            if len(found) > limit:
                raise FormatError(f"more than {limit} files below", self.where)
            for e in found:
                yield self.child(e.name)
            return
        stack: list[RemoteSource] = [self]
        seen = 0
        while stack:
            d = stack.pop()
            names = d.list()
            entries = d._entries or {}
            subdirs = []
            for n in names:
                if entries[n].is_dir:
                    subdirs.append(d.child_dir(n))
                else:
                    seen += 1
                    if seen > limit:
                        raise FormatError(f"more than {limit} files below", self.where)
                    yield d.child(n)
            stack.extend(reversed(subdirs))


def open_url(url: str) -> RemoteSource:
    """A source for ``url``; a directory URL is normalised to end in ``/``."""
    src = RemoteSource(url)
    if not url.endswith("/") and src.is_dir():
        return RemoteSource(url + "/", src.t)
    return src
