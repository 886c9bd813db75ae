"""Credentials in URLs are never shown: user-info (a password holding ``@``, ``/`` or ``#``, a
token as the user name alone), secret-looking query parameters and fragments. Checked on the
redaction function and, end to end, on every verb's output and error path against a real HTTP
server on 127.0.0.1 (tests/remote_servers.py), with and without ``--debug``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from inspector.adapters.redaction import is_secret_name, redact, redact_text

from conftest import FIXTURES, ROOT

# (url, what must not be shown, what must still be shown)
CASES = [
    ("https://user:p@ss@host/x", ["p@ss", "ss@host"], ["host/x"]),
    ("https://user:p@s@s@host.example/x", ["p@s@s", "s@s", "@s@"], ["host.example/x"]),
    ("https://ghp_abcdef0123456789@github.com/o/r", ["ghp_abcdef0123456789"], ["github.com/o/r"]),
    ("https://user:pa/ss@host/x.pt", ["pa/ss", "ss@"], ["host/x.pt"]),
    ("https://user:pa#ss@host/x.pt", ["pa#ss", "ss@"], ["host/x.pt"]),
    ("https://user:pa?ss@host/x.pt", ["pa?ss"], ["host/x.pt"]),
    ("https://u:pw@[::1]:8080/x.pt", ["u:pw"], ["[::1]:8080/x.pt"]),
    ("s3://AKIAEXAMPLE:wJalr/XUtnFEMI@bucket/k.pt", ["AKIAEXAMPLE", "wJalr", "XUtnFEMI"],
     ["bucket/k.pt"]),
    ("simplecache::https://tok3n_value@h/x.pt", ["tok3n_value"], ["simplecache::https://", "h/x.pt"]),
]
SECRET_PARAMS = [
    "pwd", "pass", "passwd", "password", "Password", "PASSWORD", "jwt", "token", "access_token",
    "accessToken", "access-token", "refresh_token", "id_token", "sig", "signature", "Signature",
    "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "x_amz_security_token",
    "X-Goog-Signature", "X-Goog-Credential", "key", "apikey", "api_key", "apiKey", "API-KEY",
    "AWSAccessKeyId", "secret", "client_secret", "clientSecret", "auth", "authorization",
    "credential", "credentials", "session", "sessionToken", "hf_token", "private_token",
]
PLAIN_PARAMS = ["v", "download", "revision", "format", "page", "name", "x-id", "partNumber"]


@pytest.mark.parametrize("url,hidden,shown", CASES)
def test_userinfo_is_hidden(url: str, hidden: list[str], shown: list[str]) -> None:
    out = redact(url)
    for text in hidden:
        assert text not in out, (url, out)
    for text in shown:
        assert text in out, (url, out)
    assert "***@" in out


@pytest.mark.parametrize("name", SECRET_PARAMS)
def test_secret_query_and_fragment_values_are_hidden(name: str) -> None:
    assert is_secret_name(name)
    url = f"https://h/x.pt?v=1&{name}=VALUE-{name}-42&page=2#{name}=FRAG-{name}-42"
    out = redact(url)
    assert f"VALUE-{name}-42" not in out and f"FRAG-{name}-42" not in out, out
    assert out == f"https://h/x.pt?v=1&{name}=***&page=2#{name}=***"


@pytest.mark.parametrize("name", PLAIN_PARAMS)
def test_plain_query_values_are_kept(name: str) -> None:
    assert not is_secret_name(name)
    assert redact(f"https://h/x.pt?{name}=abc") == f"https://h/x.pt?{name}=abc"


def test_bare_token_fragment_and_query_are_hidden() -> None:
    assert redact("https://h/x#eyJhbGciOiJIUzI1NiJ9") == "https://h/x#***"
    assert redact("https://h/x?hf_Abcdefgh12345678") == "https://h/x?***"
    assert redact("https://h/x?download") == "https://h/x?download"


def test_urls_without_credentials_are_unchanged() -> None:
    for url in ("https://h:8080/m@v2/x.pt", "s3://bucket/a@b/c", "hf://datasets/o/r@main/x",
                "/local/dir@x/file.pt", "https://[::1]:80/x"):
        assert redact(url) == url


def test_free_text_loses_urls_and_remembered_secrets() -> None:
    redact("https://bob:hunter2@h/x")  # seen once (as the CLI does with its arguments)
    text = "bad port in 'bob:hunter2' of https://bob:hunter2@h/x (hunter2)"
    out = redact_text(text)
    assert "hunter2" not in out
    assert "https://***@h/x" in out
    # a URL in prose ends before its trailing punctuation: "URL: problem" keeps its colon
    assert redact_text("https://h/x.pt?token=abc: not found") == (
        "https://h/x.pt?token=***: not found")


# -- end to end: every verb, its output and its error path, against a real server -------------

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    from remote_servers import RangeServer

    root = tmp_path_factory.mktemp("served")
    (root / "fixtures").symlink_to(FIXTURES)
    with RangeServer(root) as srv:
        yield srv


SECRETS = ("p@ss!W0rd", "ss!W0rd", "SECRET", "ghp_T0KEN")


def _urls(server, path: str) -> list[str]:
    hostport = server.url.split("://", 1)[1]
    return [
        f"http://alice:p@ss!W0rd@{hostport}/{path}?pwd=SECRETA&X-Amz-Signature=SECRETB&v=1"
        "#access_token=SECRETC",
        f"http://ghp_T0KEN0123456789abcdef@{hostport}/{path}?jwt=SECRETJ&pass=SECRETP",
    ]


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "INSPECTOR_REMOTE_TIMEOUT": "10"})


@pytest.fixture
def run_here(capsys, monkeypatch):
    """``inspector ARGS`` in this process (the CLI's own main, as the console script calls it):
    its exit code, stdout and stderr."""
    from inspector import cli

    monkeypatch.setenv("INSPECTOR_REMOTE_TIMEOUT", "10")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        code = cli.main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)
    return run


def _clean(text: str, server) -> None:
    for secret in SECRETS:
        assert secret not in text, text


VERBS = [
    ("show",), ("show", "--format", "json"), ("check",), ("stats",), ("stats", "--format", "json"),
    ("scan",),
]


def test_error_path_of_every_verb(server, tmp_path: Path, run_here) -> None:
    """Each verb on a missing file: one line without --debug, the traceback and request
    statistics with it; neither shows a secret."""
    userinfo, token = _urls(server, "fixtures/torch/missing.pt")
    runs = [(("--debug",), verb, userinfo) for verb in
            [*VERBS, ("report", "-o", str(tmp_path / "r.html")), ("diff", userinfo)]]
    runs += [((), verb, token) for verb in (("show",), ("stats",), ("diff", userinfo))]
    for debug, verb, url in runs:
        proc = run_here(*debug, verb[0], url, *verb[1:])
        assert proc.returncode == 2, (verb, proc.stderr)
        _clean(proc.stdout + proc.stderr, server)
        assert "***@127.0.0.1" in proc.stderr, (verb, proc.stderr)
        if not debug:
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
            assert re.fullmatch(r"inspector: http://\*\*\*@127\.0\.0\.1:\d+/\S+: no such file "
                                r"or directory", proc.stderr.strip()), proc.stderr


def test_output_of_every_verb(server, tmp_path: Path, run_here) -> None:
    """Each verb's output on a served file (listings, JSON, statistics, the HTML report) and
    the --debug request statistics name the URL without a secret."""
    userinfo, token = _urls(server, "fixtures/torch/gru.pt")
    runs = [(verb, userinfo) for verb in [*VERBS, ("diff", token, "--values")]]
    runs.append((("show", "--format", "json"), token))
    for verb, url in runs:
        proc = run_here("--debug", verb[0], url, *verb[1:])
        assert proc.returncode in (0, 1, 3), (verb, proc.stderr)
        _clean(proc.stdout + proc.stderr, server)
        if verb[0] != "scan":
            assert "request(s)" in proc.stderr  # the --debug statistics, redacted
    proc = _run("--debug", "show", token)  # and once as its own process, as a user runs it
    assert proc.returncode == 0 and "request(s)" in proc.stderr
    _clean(proc.stdout + proc.stderr, server)
    report = tmp_path / "r.html"
    proc = run_here("--debug", "report", userinfo, "-o", str(report), "--values")
    assert proc.returncode == 0, proc.stderr
    html = report.read_text(encoding="utf-8")
    _clean(proc.stdout + proc.stderr + html, server)
    assert "***@127.0.0.1" in html
