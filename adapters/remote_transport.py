"""Ranged requests to remote storage through fsspec: one :class:`Transport` per protocol.

``http(s)://`` goes through fsspec's HTTP file system (its aiohttp session and options) with
requests of our own, so that a server ignoring ``Range`` is caught before it sends a whole
file; ``s3://`` uses s3fs's ``GetObject`` with a ``Range`` (the size comes back in
``Content-Range``, so no ``HEAD`` is needed); any other protocol fsspec knows uses its
``cat_file``. Credentials come only from each library's standard places (environment, config
files, instance roles); URLs are shown with their credentials redacted (:func:`redact`).

Every request is bounded in time (``INSPECTOR_REMOTE_TIMEOUT`` seconds, default 30) and in size.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from .errors import FormatError, InspectorError, NotFoundError, PermissionDeniedError
from .redaction import redact, redact_text
from .source_interface import is_url

__all__ = ["is_url", "redact", "redact_text", "transport"]

# A server that ignores Range and sends the whole file: accepted up to this size, refused above.
FULL_BODY_CAP = 64 << 20
MAX_REDIRECTS = 8
JOBS = 8  # concurrent requests of one batch


class RemoteError(InspectorError):
    """A remote read that failed (network, protocol, server)."""


def timeout() -> float:
    try:
        return float(os.environ.get("INSPECTOR_REMOTE_TIMEOUT", "30"))
    except ValueError:
        return 30.0


@dataclass
class Stats:
    """Requests sent and body bytes received, per URL (redacted) and in total."""

    requests: int = 0
    bytes: int = 0
    per_url: dict[str, list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, where: str, n: int) -> None:
        with self.lock:
            self.requests += 1
            self.bytes += n
            row = self.per_url.setdefault(where, [0, 0])
            row[0] += 1
            row[1] += n


STATS = Stats()


@dataclass
class Fetched:
    """One response: the bytes of ``[start, start + len(data))``, the file's total size when the
    server said it, and whether ``data`` is the whole file (a server that ignored Range)."""

    data: bytes
    start: int
    total: int | None
    whole: bool = False


@dataclass
class Entry:
    """One name in a directory listing."""

    name: str
    is_dir: bool
    size: int | None = None


class Transport:
    """Ranged reads and listings for one protocol through one fsspec file system."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self._fs: Any = None
        self._pid = -1

    # -- the file system, re-created in a forked child (its event loop thread is gone) --------
    @property
    def fs(self) -> Any:
        if self._fs is None or self._pid != os.getpid():
            self._fs = self._make()
            self._pid = os.getpid()
        return self._fs

    def _make(self) -> Any:
        try:
            import fsspec
        except ImportError:
            raise RemoteError(
                f"{self.protocol}:// needs the optional packages of the 'remote' extra: "
                "pip install 'ckpt-inspector[remote]'"
            ) from None
        try:
            return fsspec.filesystem(self.protocol, skip_instance_cache=True, **self._options())
        except (ImportError, ValueError) as e:
            raise RemoteError(
                f"{self.protocol}:// is not available ({_one_line(e)}); "
                "pip install 'ckpt-inspector[remote]' or the fsspec package for it"
            ) from None

    def _options(self) -> dict[str, Any]:
        return {}

    def fs_path(self, url: str) -> str:
        return self.fs._strip_protocol(url)

    # -- requests -----------------------------------------------------------------------------
    def fetch(self, url: str, start: int, end: int) -> Fetched:
        """``[start, end)`` of ``url`` (fewer bytes at the end of the file)."""
        return self.fetch_many([(url, start, end)])[0]

    def fetch_many(self, ranges: Sequence[tuple[str, int, int]]) -> list[Fetched | Exception]:
        """Several ranges at once (at most :data:`JOBS` in flight); a failed one is its
        exception in the result list, except for the first range alone (raised)."""
        fs = self.fs
        if getattr(fs, "async_impl", False):
            from fsspec.asyn import sync

            async def all_() -> list[Any]:
                sem = asyncio.Semaphore(JOBS)

                async def one(url: str, a: int, b: int) -> Fetched:
                    async with sem:
                        return await asyncio.wait_for(self._afetch(url, a, b), timeout() * 2)

                return await asyncio.gather(*(one(*r) for r in ranges), return_exceptions=True)

            try:
                out = sync(fs.loop, all_, timeout=timeout() * (2 + len(ranges) // JOBS * 2))
            except Exception as e:  # noqa: BLE001 - mapped to one line below
                out = [e] * len(ranges)
        else:
            out = []
            for r in ranges:
                try:
                    out.append(self._fetch_sync(*r))
                except Exception as e:  # noqa: BLE001
                    out.append(e)
        result: list[Fetched | Exception] = []
        for (url, _, _), got in zip(ranges, out, strict=True):
            if isinstance(got, BaseException) and not isinstance(got, Exception):
                raise got
            result.append(self.error(got, url) if isinstance(got, Exception) else got)
        if len(ranges) == 1 and isinstance(result[0], Exception):
            raise result[0]
        return result

    async def _afetch(self, url: str, start: int, end: int) -> Fetched:
        fs = self.fs
        data = await fs._cat_file(self.fs_path(url), start=start, end=end)
        STATS.add(redact(url), len(data))
        total = (await fs._info(self.fs_path(url))).get("size") if start == 0 else None
        return Fetched(data, start, total)

    def _fetch_sync(self, url: str, start: int, end: int) -> Fetched:
        fs = self.fs
        total = fs.info(self.fs_path(url)).get("size") if start == 0 else None
        data = fs.cat_file(self.fs_path(url), start=start, end=end)
        STATS.add(redact(url), len(data))
        return Fetched(data, start, total)

    def list(self, url: str) -> list[Entry]:
        """The entries directly inside the directory ``url``."""
        try:
            found = self.fs.ls(self.fs_path(url), detail=True)
        except Exception as e:  # noqa: BLE001
            raise self.error(e, url) from None
        finally:
            STATS.add(redact(url), 0)
        base = self.fs_path(url).rstrip("/") + "/"
        out = []
        for d in found:
            name = str(d["name"])
            if not name.startswith(base):
                continue
            rest = name[len(base):].strip("/")
            if rest and "/" not in rest:
                out.append(Entry(rest, d.get("type") == "directory", d.get("size")))
        return out

    def find(self, url: str) -> list[Entry] | None:
        """Every file below the directory ``url`` (names relative to it) in one listing where
        the store can (an object store lists a prefix without delimiters), else None."""
        base = self.fs_path(url).rstrip("/") + "/"
        try:
            found = self.fs.find(base, detail=True)
        except Exception as e:  # noqa: BLE001
            raise self.error(e, url) from None
        finally:
            STATS.add(redact(url), 0)
        out = []
        for name, d in sorted(found.items()):
            if name.startswith(base) and d.get("type") != "directory":
                out.append(Entry(name[len(base):], False, d.get("size")))
        return out

    def list_dir(self, url: str) -> list[Entry] | None:
        """The entries of ``url`` if it is a non-empty directory, else None."""
        try:
            found = self.list(url)
        except NotFoundError:
            return None
        return found or None

    def join(self, url: str, name: str) -> str:
        return url.rstrip("/") + "/" + name

    # -- errors -------------------------------------------------------------------------------
    def error(self, e: BaseException, url: str) -> InspectorError:
        """``e`` as one line naming ``url`` (redacted)."""
        where = redact(url)
        if isinstance(e, InspectorError):
            return e
        if isinstance(e, FileNotFoundError):
            return NotFoundError("no such file or directory", where)
        if isinstance(e, PermissionError):
            return PermissionDeniedError(f"access denied ({_one_line(e)})", where)
        if isinstance(e, (asyncio.TimeoutError, TimeoutError)) or "Timeout" in type(e).__name__:
            return RemoteError(f"no answer within {timeout():g} s (timed out)", where)
        name = type(e).__name__
        if "Credentials" in name:
            return RemoteError(f"no credentials found ({_one_line(e)})", where)
        return RemoteError(f"remote read failed ({name}: {_one_line(redact_text(str(e)))})", where)


class HTTPTransport(Transport):
    """http(s):// with Range requests of our own on fsspec's aiohttp session: the status, the
    ``Content-Range`` and the length are checked before a body is read."""

    def _options(self) -> dict[str, Any]:
        import aiohttp

        t = timeout()
        return {
            "client_kwargs": {
                "timeout": aiohttp.ClientTimeout(total=None, sock_connect=t, sock_read=t)
            }
        }

    def fs_path(self, url: str) -> str:
        return url

    def join(self, url: str, name: str) -> str:
        base = urlsplit(url)
        path = base.path.rstrip("/") + "/" + quote(name)
        return urlunsplit(base._replace(path=path, query="", fragment=""))

    async def _afetch(self, url: str, start: int, end: int) -> Fetched:
        fs = self.fs
        session = await fs.set_session()
        where = redact(url)
        headers = {"Range": f"bytes={start}-{max(start, end - 1)}"}
        async with session.get(
            fs.encode_url(url), headers=headers, max_redirects=MAX_REDIRECTS, **fs.kwargs
        ) as r:
            if r.status in (404, 410):
                STATS.add(where, 0)
                raise NotFoundError(f"no such file (HTTP {r.status})", where)
            if r.status in (401, 403):
                STATS.add(where, 0)
                raise PermissionDeniedError(f"access denied (HTTP {r.status} {r.reason})", where)
            if r.status == 416:  # past the end (an empty file)
                STATS.add(where, 0)
                total = _content_range_total(r.headers.get("Content-Range", ""))
                return Fetched(b"", start, total)
            if r.status >= 400:
                STATS.add(where, 0)
                raise RemoteError(f"HTTP {r.status} {r.reason}", where)
            if str(r.url).endswith("/") and not url.endswith("/"):
                STATS.add(where, 0)
                raise IsADirectory(where)
            if r.status == 206:
                total = _content_range_total(r.headers.get("Content-Range", ""))
                first = _content_range_start(r.headers.get("Content-Range", ""))
                if first is not None and first != start:
                    raise RemoteError(
                        f"asked for bytes from {start}, the server sent from {first}", where
                    )
                data = await _read_capped(r, end - start, where, "range")
                STATS.add(where, len(data))
                return Fetched(data, start, total)
            # 200: the server ignored Range and sends the whole file
            length = r.content_length
            if length is not None and length > FULL_BODY_CAP:
                STATS.add(where, 0)
                raise RemoteError(
                    f"the server ignores Range requests and the file is {length:,} bytes, over "
                    f"the {FULL_BODY_CAP:,}-byte cap for downloading a whole file; refusing",
                    where,
                )
            data = await _read_capped(r, FULL_BODY_CAP, where, "whole")
            STATS.add(where, len(data))
            return Fetched(data, 0, len(data), whole=True)

    def list_dir(self, url: str) -> list[Entry] | None:
        """Nothing: an HTTP directory is known by its redirect to a URL ending in ``/``."""
        return None

    def find(self, url: str) -> list[Entry] | None:
        """None: an index page lists one level (walked level by level)."""
        return None

    def list(self, url: str) -> list[Entry]:
        """The links of an index page (a directory listing) that lie directly below ``url``."""
        url = url if url.endswith("/") else url + "/"
        try:
            found = self.fs.ls(url, detail=False)
        except Exception as e:  # noqa: BLE001
            raise self.error(e, url) from None
        finally:
            STATS.add(redact(url), 0)
        base = urlsplit(url).path
        out = []
        for link in found:
            path = urlsplit(link).path
            if not path.startswith(base):
                continue
            rest = path[len(base):]
            name = rest.rstrip("/")
            if name and "/" not in name:
                from urllib.parse import unquote

                out.append(Entry(unquote(name), rest.endswith("/")))
        return out

    def error(self, e: BaseException, url: str) -> InspectorError:
        name = type(e).__name__
        where = redact(url)
        if name == "TooManyRedirects":
            return RemoteError(f"more than {MAX_REDIRECTS} redirects (a redirect loop?)", where)
        if name in ("ClientPayloadError", "ServerDisconnectedError", "ClientOSError"):
            return RemoteError(
                f"the connection broke off during the transfer ({_one_line(e)})", where
            )
        if name in ("ClientConnectorError", "ClientConnectionError"):
            return RemoteError(f"cannot connect ({_one_line(e)})", where)
        return super().error(e, url)


class IsADirectory(InspectorError):
    """The URL redirected to a directory listing."""

    def __init__(self, where: str) -> None:
        super().__init__("is a directory", where)


class S3Transport(Transport):
    """s3:// through s3fs: ``GetObject`` with a Range, the size from ``Content-Range``."""

    def _options(self) -> dict[str, Any]:
        t = timeout()
        return {
            "config_kwargs": {
                "connect_timeout": t,
                "read_timeout": t,
                "retries": {"max_attempts": 2, "mode": "standard"},
            },
        }

    def _make(self) -> Any:
        fs = super()._make()
        fs.retries = 2  # s3fs's own retry loop (default 5) on top of botocore's
        return fs

    async def _afetch(self, url: str, start: int, end: int) -> Fetched:
        fs = self.fs
        bucket, key, version = fs.split_path(self.fs_path(url))
        where = redact(url)
        if not key:
            raise IsADirectory(where)
        try:
            resp = await fs._call_s3(
                "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{max(start, end - 1)}"
            )
        except OSError as e:
            STATS.add(where, 0)
            if "InvalidRange" in str(e) or "416" in str(e):
                return Fetched(b"", start, None)
            raise
        body = resp["Body"]
        try:
            data = await asyncio.wait_for(body.read(), timeout())
        finally:
            body.close()
        STATS.add(where, len(data))
        total = _content_range_total(resp.get("ContentRange") or "")
        if len(data) > end - start:
            raise RemoteError(f"asked for {end - start} bytes, got {len(data)}", where)
        return Fetched(data, start, total)


async def _read_capped(r: Any, cap: int, where: str, what: str) -> bytes:
    """At most ``cap`` bytes of the body; a body that goes on is refused (whole) or cut off
    (a range: the server sends more than asked)."""
    parts: list[bytes] = []
    got = 0
    while got <= cap:
        chunk = await r.content.read(min(1 << 20, cap + 1 - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    if got > cap:
        if what == "whole":
            raise RemoteError(
                f"the server ignores Range requests and sends more than the "
                f"{cap:,}-byte cap for downloading a whole file; refusing",
                where,
            )
        raise RemoteError(f"the server sent more than the {cap} bytes asked for", where)
    return b"".join(parts)


def _content_range_total(value: str) -> int | None:
    m = re.search(r"/(\d+)\s*$", value)
    return int(m.group(1)) if m else None


def _content_range_start(value: str) -> int | None:
    m = re.match(r"\s*bytes\s+(\d+)-", value)
    return int(m.group(1)) if m else None


def _one_line(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return " ".join(text.split())[:300]


_transports: dict[str, Transport] = {}
_lock = threading.Lock()


def transport(protocol: str) -> Transport:
    """The shared transport of ``protocol`` (``https`` and ``http`` share one)."""
    protocol = protocol.lower()
    key = {"https": "http", "s3a": "s3"}.get(protocol, protocol)
    with _lock:
        t = _transports.get(key)
        if t is None:
            cls = HTTPTransport if key == "http" else S3Transport if key == "s3" else Transport
            t = _transports[key] = cls(key)
        return t


def bad_url(url: str, why: str) -> FormatError:
    return FormatError(why, redact(url))
