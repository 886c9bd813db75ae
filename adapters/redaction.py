"""Credentials out of every URL the tool shows: :func:`redact` for one URL, :func:`redact_text`
for free text (error messages, tracebacks under ``--debug``).

What goes: the whole user-info (``user:password@``, ``TOKEN@``: a user name alone is often a
token, and a password may hold ``@``, ``/``, ``?`` or ``#`` unencoded), the values of query
parameters (separated by ``&`` or ``;``) and path parameters (``/x;jsessionid=...``) whose
name looks like a secret (``pwd``, ``pass``, ``jwt``, ``access_token``, ``code``, ``sig``,
``X-Amz-Signature``, ``apiKey``, ... matched by word, case-insensitive, across ``_``, ``-``,
``.`` and camelCase), a bare query word that looks like a token, every value of a fragment
(``#access_token=...``), and the tokens services put in a path (Telegram's ``/bot<id>:<token>/``,
Hugging Face ``hf_...``, GitHub ``ghp_...``, Slack ``xoxb-...``, AWS ``AKIA...``, OpenAI
``sk-...``, JWTs). Each secret taken out is remembered, so that a library's message
that quotes it outside a URL (a host parse error, a decoded user name) loses it too.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, unquote_plus

__all__ = ["MASK", "is_secret_name", "redact", "redact_text"]

MASK = "***"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_CHAIN = re.compile(r"::(?=[A-Za-z][A-Za-z0-9+.-]*://)")  # fsspec's simplecache::s3://...
# A host (a name, IPv4, or [IPv6]) with an optional numeric port: anything else before the first
# "/", "?" or "#" is the start of a user-info that holds one of those characters.
_HOST_PORT = re.compile(r"(\[[0-9A-Za-z:.%]*\]|[^:@\[\]]*)(:[0-9]*)?")
# An "@" followed by a host name (or [IPv6]) and port, then the end of the authority.
_AT_HOST = re.compile(r"@(?=(?:\[[0-9A-Za-z:.%]+\]|[A-Za-z0-9._~%-]+)(?::[0-9]*)?(?:[/?#]|$))")
# Words of a parameter name that make its value a secret.
_SECRET_WORDS = frozenset(
    "pwd pw pass passwd password passphrase passcode jwt token tok sig signature key apikey "
    "secret secrets auth authorization oauth credential credentials cred creds session sessionid "
    "sid cookie bearer sas otp private privatekey accesskey signed code sessid".split()
)
# Pieces that make a name secret even inside a longer run of lowercase letters (accesstoken).
_SECRET_PIECES = ("token", "secret", "passw", "pwd", "signature", "credential", "apikey",
                  "accesskey", "privatekey", "jwt", "bearer", "authoriz", "oauth", "sessionid",
                  "sessid")
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# A bare query word (no "=") long and mixed enough to be a token.
_TOKEN_LIKE = re.compile(r"(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9._~+/=%-]{16,}")
# Tokens services put in a URL's path, each by its published prefix.
_PATH_TOKEN = re.compile(
    r"(?<=/bot)[0-9]+(?::|%3[Aa])[A-Za-z0-9_-]{20,}"  # Telegram: /bot<id>:<token>/
    r"|(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}"  # AWS access key ids
    r"|sk-[A-Za-z0-9_-]{20,}"  # OpenAI-style secret keys
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JWT
    r")(?![A-Za-z0-9])"
)
_MIN_REMEMBERED = 4  # shorter secrets are not searched for in free text (too many false hits)
_seen: set[str] = set()


def is_secret_name(name: str) -> bool:
    """Whether a query parameter called ``name`` carries a secret (by its words)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if any(w in _SECRET_WORDS for w in words):
        return True
    compact = "".join(words)
    return any(piece in compact for piece in _SECRET_PIECES)


def _remember(secret: str) -> None:
    for form in {secret, unquote(secret), unquote_plus(secret), quote(unquote(secret), safe="")}:
        if len(form) >= _MIN_REMEMBERED:
            _seen.add(form)


def _userinfo_end(rest: str) -> int:
    """Where the user-info of ``rest`` (a URL after ``scheme://``) ends (the index of its
    ``@``), -1 when it has none. A well-formed URL has it before the first ``/``, ``?`` or
    ``#``; when a password holds one of those unencoded, the user-info runs on to the last
    ``@`` that a host name follows (more is hidden rather than any of the password shown)."""
    end = min([i for i in (rest.find(ch) for ch in "/?#") if i != -1], default=len(rest))
    authority = rest[:end]
    if "@" not in authority and _HOST_PORT.fullmatch(authority):
        return -1
    hosts = [m.start() for m in _AT_HOST.finditer(rest)]
    if hosts:
        return hosts[-1]
    return authority.rfind("@") if "@" in authority else rest.find("@")


def _pairs(text: str, bare_is_secret: bool) -> str:
    out = []
    for piece in re.split(r"([&;])", text):
        if piece in ("&", ";"):
            out.append(piece)
            continue
        name, eq, value = piece.partition("=")
        if eq:
            if value and is_secret_name(unquote_plus(name)):
                _remember(value)
                value = MASK
            out.append(f"{name}={value}")
        elif piece and (bare_is_secret or _TOKEN_LIKE.fullmatch(piece)):
            _remember(piece)
            out.append(MASK)
        else:
            out.append(piece)
    return "".join(out)


def _path(path: str) -> str:
    """A path with secret path parameters (``;jsessionid=...``) and known tokens masked."""
    def token(m: re.Match[str]) -> str:
        _remember(m.group(0))
        _remember(re.split(r":|%3[Aa]", m.group(0))[-1])  # Telegram's secret half alone
        return MASK

    path = _PATH_TOKEN.sub(token, path)
    if ";" not in path:
        return path
    out = []
    for segment in path.split("/"):
        name, semi, params = segment.partition(";")
        out.append(name + semi + _params(params) if semi else segment)
    return "/".join(out)


def _params(params: str) -> str:
    """``a=1;jsessionid=X`` with the secret values masked (bare words kept: ``;type=a``)."""
    out = []
    for piece in params.split(";"):
        name, eq, value = piece.partition("=")
        if eq and value and is_secret_name(unquote_plus(name)):
            _remember(value)
            value = MASK
        out.append(f"{name}{eq}{value}")
    return ";".join(out)


def redact(url: str) -> str:
    """``url`` as it may be shown: no user-info, no secret query value, no fragment value.
    Text that is not a URL (a local path) comes back unchanged; fsspec chains
    (``simplecache::s3://...``) are redacted link by link."""
    chain = _CHAIN.split(url)
    if len(chain) > 1:
        return "::".join(redact(part) for part in chain)
    m = _SCHEME.match(url)
    if m is None:
        return url
    head, rest = url[: m.end()], url[m.end():]
    at = _userinfo_end(rest)
    if at != -1:
        userinfo = rest[:at]
        _remember(userinfo)
        user, colon, password = userinfo.partition(":")
        _remember(password if colon else user)  # a user name alone is often a token
        rest = f"{MASK}@{rest[at + 1:]}"
    rest, hash_, fragment = rest.partition("#")
    rest, qmark, query = rest.partition("?")
    rest = _path(rest)
    if qmark:
        rest += "?" + _pairs(query, bare_is_secret=False)
    if hash_:
        rest += "#" + _pairs(fragment, bare_is_secret=True)
    return head + rest


# a URL in prose: up to a space or quote, not its trailing punctuation ("URL: problem")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]*[^\s'\"<>`:,.;)\]]")


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted and every secret seen so far masked."""
    text = _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text)
    for secret in sorted(_seen, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text
