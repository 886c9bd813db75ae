"""Secrets in query parameters after ``;``, in path parameters (``;jsessionid=``), OAuth
``code=``, signed-URL parameters, and the tokens services put in a path segment (Telegram's
``/bot<id>:<token>/``, Hugging Face, GitHub, Slack, AWS key ids) are never shown: on the
redaction function, and end to end on a failing URL of a real HTTP server on 127.0.0.1
(tests/remote_servers.py), for the verbs and for ``inspector.load``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from inspector.adapters.redaction import redact, redact_text

from conftest import FIXTURES, ROOT

TELEGRAM = "123456789:AAH7fK2mQ9xZ_r4TtLw8vBnE3uYdC1oPqRs"
HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
GITHUB = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG"
SLACK = "xoxb-2401234567-8912345678901-AbCdEfGhIjKlMnOpQrStUvWx"
AWS = "AKIAIOSFODNN7EXAMPLE"

# (url, what must not be shown, what must still be shown)
CASES = [
    ("https://h/x.pt?a=1;token=SEMITOKEN9&b=2", ["SEMITOKEN9"], ["a=1;token=***&b=2"]),
    ("https://h/x.pt?v=1;access_token=ACCESS99;page=3", ["ACCESS99"], ["v=1;", ";page=3"]),
    ("https://h/m;jsessionid=JSESS1234/w.pt", ["JSESS1234"], ["/m;jsessionid=***/w.pt"]),
    ("https://h/m;type=a;sessionToken=SESSTOK77/w.pt", ["SESSTOK77"], [";type=a;"]),
    ("https://h/m;phpsessid=PHPSESS42/w.pt", ["PHPSESS42"], ["/w.pt"]),
    ("https://h/cb?code=OAUTHCODE5&state=xyz", ["OAUTHCODE5"], ["state=xyz"]),
    ("https://h/cb#id_token=IDTOK55&refresh_token=REFTOK55", ["IDTOK55", "REFTOK55"], []),
    ("https://b.blob.core.windows.net/c/m.pt?sv=2022-11-02&se=2030-01-01&sp=r&sig=SAS%2Bsig1",
     ["SAS%2Bsig1", "SAS+sig1"], ["sv=2022-11-02", "sp=r"]),
    ("https://s3.amazonaws.com/b/m.pt?X-Amz-Credential=AKIAQQ%2F20260101&X-Amz-Signature=ab12cd"
     "&X-Amz-Security-Token=FQoGZXIv1", ["AKIAQQ%2F20260101", "ab12cd", "FQoGZXIv1"], ["/b/m.pt?"]),
    ("https://storage.googleapis.com/b/m.pt?X-Goog-Signature=GOOGSIG77", ["GOOGSIG77"], []),
    ("https://h/m.pt?api_key=APIKEY77;key=KEY7777;password=PASS7777",
     ["APIKEY77", "KEY7777", "PASS7777"], []),
    (f"https://api.telegram.org/bot{TELEGRAM}/getFile", [TELEGRAM, TELEGRAM.split(":")[1]],
     ["api.telegram.org/bot***/getFile"]),
    (f"https://api.telegram.org/file/bot{TELEGRAM.replace(':', '%3A')}/model.pt",
     [TELEGRAM.split(":")[1]], ["/file/bot***/model.pt"]),
    (f"https://h/{HF}/model.safetensors", [HF], ["/model.safetensors"]),
    (f"https://h/repo/{GITHUB}/x.pt", [GITHUB], ["/repo/***/x.pt"]),
    (f"https://hooks.slack.com/services/{SLACK}/x", [SLACK], ["/services/***/x"]),
    (f"https://h/keys/{AWS}/x.pt", [AWS], ["/keys/***/x.pt"]),
    ("https://h/a;b/model-00001-of-00002.safetensors?revision=main;format=pt",
     [], ["/a;b/model-00001-of-00002.safetensors?revision=main;format=pt"]),
]


@pytest.mark.parametrize("url,hidden,shown", CASES)
def test_parameters_and_path_tokens_are_hidden(url: str, hidden: list[str],
                                               shown: list[str]) -> None:
    out = redact(url)
    for text in hidden:
        assert text not in out, (url, out)
        assert text not in redact_text(f"failed: {url} ({text})"), text  # remembered too
    for text in shown:
        assert text in out, (url, out)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    from remote_servers import RangeServer

    root = tmp_path_factory.mktemp("served")
    (root / "fixtures").symlink_to(FIXTURES)
    with RangeServer(root) as srv:
        yield srv


def _failing_urls(server) -> list[tuple[str, list[str]]]:
    base = server.url.rstrip("/")
    return [
        (f"{base}/fixtures/torch/missing.pt?a=1;token=SEMITOKEN9", ["SEMITOKEN9"]),
        (f"{base}/fixtures/torch;jsessionid=JSESS1234/missing.pt", ["JSESS1234"]),
        (f"{base}/fixtures/torch/missing.pt?code=OAUTHCODE5&state=s", ["OAUTHCODE5"]),
        (f"{base}/bot{TELEGRAM}/missing.pt", [TELEGRAM, TELEGRAM.split(":")[1]]),
        (f"{base}/{HF}/missing.pt?sig=SAS%2Bsig1&se=2030-01-01", [HF, "SAS%2Bsig1", "SAS+sig1"]),
        (f"{base}/{GITHUB}/{AWS}/{SLACK}/missing.pt", [GITHUB, AWS, SLACK]),
    ]


@pytest.mark.parametrize("verb", [("show",), ("scan",), ("stats",), ("--debug", "show")])
def test_a_failing_remote_url_shows_no_secret(server, verb: tuple[str, ...]) -> None:
    for url, secrets in _failing_urls(server):
        proc = subprocess.run([sys.executable, "-m", "inspector", *verb, url],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert proc.returncode == 2, (url, proc.stdout, proc.stderr)
        text = proc.stdout + proc.stderr
        assert "127.0.0.1" in text, text  # the URL is named...
        for secret in secrets:
            assert secret not in text, (url, text)  # ...without its secrets


def test_the_api_error_shows_no_secret(server) -> None:
    import inspector

    for url, secrets in _failing_urls(server):
        with pytest.raises(inspector.InspectorError) as err:
            inspector.load(url)
        text = redact_text(str(err.value))  # what the tool prints for it
        assert "127.0.0.1" in text
        for secret in secrets:
            assert secret not in text, (url, text)
