"""Local servers for the remote tests, bound to 127.0.0.1 on a free port, logging every request.

* :class:`RangeServer`: an HTTP file server over a directory that honours ``Range`` (206 with
  ``Content-Range``), serves directory listings (HTML links) and logs each request with the
  bytes of its body. Misbehaviours for the bad-input tests are chosen by path prefix:
  ``/norange/`` ignores Range (200, whole file), ``/forbidden/`` answers 403, ``/loop/``
  redirects to itself, ``/reset/`` sends half the asked bytes and closes the connection,
  ``/slow/`` sleeps before answering.
* :class:`MotoS3`: moto's S3 server (werkzeug, threaded) behind a WSGI middleware that logs
  each request and the bytes of each response body.
"""

from __future__ import annotations

import html
import os
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit


@dataclass
class Logged:
    method: str
    path: str
    range: str | None
    status: int
    sent: int


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _log(self, status: int, sent: int) -> None:
        with self.server.log_lock:
            self.server.log.append(
                Logged(self.command, self.path, self.headers.get("Range"), status, sent)
            )

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._log(status, len(body) if self.command != "HEAD" else 0)

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        path = unquote(urlsplit(self.path).path)
        mode = path.split("/")[1] if path.count("/") > 1 else ""
        if mode in ("norange", "forbidden", "loop", "reset", "slow"):
            rel = path[len(mode) + 2 :]
        else:
            mode, rel = "", path.lstrip("/")
        if mode == "forbidden":
            return self._send(403, b"<h1>Forbidden</h1>")
        if mode == "loop":
            return self._send(302, b"", {"Location": self.path})
        if mode == "slow":
            time.sleep(self.server.slow_seconds)
        if ".." in rel.split("/"):
            return self._send(404, b"not found")
        target = self.server.root / rel  # symlinks are followed (fixtures linked into the root)
        if not target.exists():
            return self._send(404, b"not found")
        if target.is_dir():
            if not path.endswith("/"):
                return self._send(301, b"", {"Location": path + "/"})
            links = "".join(
                f'<a href="{quote(p.name)}{"/" if p.is_dir() else ""}">{html.escape(p.name)}</a>\n'
                for p in sorted(target.iterdir())
            )
            return self._send(200, f"<html><body>{links}</body></html>".encode(),
                              {"Content-Type": "text/html"})
        size = target.stat().st_size
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        if mode == "norange" or m is None:  # the whole file, streamed
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            sent = 0
            try:
                with open(target, "rb") as f:
                    while self.command != "HEAD" and (chunk := f.read(1 << 20)):
                        self.wfile.write(chunk)
                        sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            self._log(200, sent)
            return None
        start = int(m.group(1))
        end = min(size - 1, int(m.group(2)) if m.group(2) else size - 1)
        if start >= size:
            return self._send(416, b"", {"Content-Range": f"bytes */{size}"})
        with open(target, "rb") as f:
            f.seek(start)
            body = f.read(end - start + 1)
        headers = {"Content-Range": f"bytes {start}-{end}/{size}",
                   "Content-Type": "application/octet-stream"}
        if mode == "reset":  # promise the range, send half, close
            self.send_response(206)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self._log(206, len(body) // 2)
            self.close_connection = True
            return None
        return self._send(206, body, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    root: Path
    log: list[Logged]
    log_lock: threading.Lock
    slow_seconds: float


class RangeServer:
    """``with RangeServer(root) as srv: srv.url + "/name"``; ``srv.log`` holds the requests."""

    def __init__(
        self, root: str | os.PathLike[str], slow_seconds: float = 3.0, port: int = 0
    ) -> None:
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.root = Path(root).absolute()
        self.httpd.log = []
        self.httpd.log_lock = threading.Lock()
        self.httpd.slow_seconds = slow_seconds
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def log(self) -> list[Logged]:
        return self.httpd.log

    def reset(self) -> None:
        with self.httpd.log_lock:
            self.httpd.log.clear()

    def bytes_sent(self) -> int:
        return sum(r.sent for r in self.log)

    def __enter__(self) -> RangeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


class MotoS3:
    """moto's S3 in server mode on 127.0.0.1 with a request log; ``env`` points botocore at it
    through the standard variables (``AWS_ENDPOINT_URL``, test credentials)."""

    def __init__(self, port: int = 0) -> None:
        import logging

        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)

        app = DomainDispatcherApplication(create_backend_app)
        self.log: list[Logged] = []
        self._lock = threading.Lock()

        def logged(environ: dict[str, Any], start_response: Any) -> Any:
            status_box: list[int] = []

            def start(status: str, headers: Any, exc_info: Any = None) -> Any:
                status_box.append(int(status.split()[0]))
                return start_response(status, headers, exc_info)

            body = b"".join(app(environ, start))
            path = environ.get("PATH_INFO", "")
            with self._lock:
                self.log.append(Logged(environ["REQUEST_METHOD"], path, environ.get("HTTP_RANGE"),
                                       status_box[0] if status_box else 0, len(body)))
            return [body]

        self.server = make_server("127.0.0.1", port, logged, threaded=True)
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"
        self.env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reset(self) -> None:
        with self._lock:
            self.log.clear()

    def bytes_sent(self, method: str = "GET") -> int:
        return sum(r.sent for r in self.log if r.method == method)

    def __enter__(self) -> MotoS3:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self._thread.join(timeout=5)


def main() -> None:
    """``python tests/remote_servers.py http DIR [PORT]``: serve DIR with Range support;
    ``python tests/remote_servers.py s3 DIR BUCKET/PREFIX [PORT]``: moto's S3 holding DIR's
    files under the prefix. Both on 127.0.0.1 until interrupted; every request is printed."""
    import sys

    kind, root = sys.argv[1], Path(sys.argv[2])
    port = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0
    if kind == "http":
        srv: Any = RangeServer(root, port=port)
        url = srv.url
    else:
        import boto3

        srv = MotoS3(port)
        url = srv.endpoint
    with srv:
        if kind == "s3":
            bucket, _, prefix = sys.argv[3].partition("/")
            s3 = boto3.client("s3", endpoint_url=srv.endpoint, aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1")
            s3.create_bucket(Bucket=bucket)
            for f in sorted(p for p in root.rglob("*") if p.is_file()):
                key = "/".join(x for x in (prefix.strip("/"), f.relative_to(root).as_posix()) if x)
                s3.upload_file(str(f), bucket, key)
            print(" ".join(f"{k}={v}" for k, v in srv.env.items()), flush=True)
        print(url, flush=True)
        seen = 0
        try:
            while True:
                time.sleep(0.2)
                for r in srv.log[seen:]:
                    print(f"{r.method} {r.path} {r.range or '-'} {r.status} {r.sent}", flush=True)
                seen = len(srv.log)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
