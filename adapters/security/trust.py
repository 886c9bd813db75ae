"""Names the user vouches for, as ``torch.serialization.add_safe_globals`` does for torch.

A trusted global (``module.qualname``, exact: never a prefix) is ``safe`` for every use, with
the reason "trusted by the user" and where the trust came from; a name on a known-dangerous list
stays ``dangerous`` (:mod:`.verdicts` says so). The trust comes from, all added together:

* ``--trust MODULE.NAME`` on any verb, or ``trust=[...]`` of ``inspector.load``
  (:func:`trusting`, for the calls made inside it, threads of ``run_ordered`` included);
* the environment variable ``INSPECTOR_TRUST`` (names separated by commas or spaces);
* ``trust = [...]`` under ``[tool.inspector]`` of the nearest ``pyproject.toml`` upward from the
  current directory;
* ``trust = [...]`` at the top of ``$XDG_CONFIG_HOME/inspector/config.toml``
  (``~/.config/inspector/config.toml``).

Configuration is read only when a verdict needs it (an unvetted global), never to list a file
that holds no pickle. Also here: the names vetted by the file being read itself
(:func:`vetted_here`: TorchScript classes compiled from the archive's own ``code/``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import UsageError

FLAG = "--trust"
ENV = "INSPECTOR_TRUST"
_NAME = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+\Z")
_GIVEN: ContextVar[frozenset[str]] = ContextVar("inspector_trust", default=frozenset())
_HERE: ContextVar[Mapping[str, str] | None] = ContextVar("inspector_vetted_here", default=None)
_CONFIG: dict[tuple[str, ...], dict[str, str]] = {}
MAX_NAMES = 10_000
MAX_CONFIG_BYTES = 1 << 20


def check_name(name: str, where: str) -> str:
    """``name`` when it is a dotted ``module.qualname``; else a :class:`UsageError`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"{where}: {name!r} is not a dotted name MODULE.NAME (e.g. "
                         "argparse.Namespace)")
    return name


@contextmanager
def trusting(names: Iterable[str] | None) -> Iterator[None]:
    """Trust ``names`` (added to any trust already in force) for the calls made inside."""
    given = [check_name(n, FLAG) for n in names or ()]
    if not given:
        yield
        return
    token = _GIVEN.set(_GIVEN.get() | frozenset(given))
    try:
        yield
    finally:
        _GIVEN.reset(token)


@contextmanager
def vetted_here(names: Mapping[str, str]) -> Iterator[None]:
    """Names vetted by the file being read (name -> reason), for the calls made inside."""
    token = _HERE.set({**(_HERE.get() or {}), **names})
    try:
        yield
    finally:
        _HERE.reset(token)


def here(full: str) -> str | None:
    """Why the file being read vets ``full`` (by its name, or its module's ``"module."``), or
    None."""
    names = _HERE.get() or {}
    return names.get(full) or names.get(full.rsplit(".", 1)[0] + ".")


def trusted(full: str) -> str | None:
    """Where the user's trust in ``full`` comes from ("--trust", a file, the environment), or
    None when it is not trusted."""
    if full in _GIVEN.get():
        return f"{FLAG} or trust="
    return configured().get(full)


def everything_trusted() -> tuple[str, ...]:
    """Every name trusted here (given and configured), for a load in another process."""
    return tuple(sorted(_GIVEN.get() | set(configured())))


def configured() -> dict[str, str]:
    """Every name the environment and the configuration files trust -> where it is written
    (read once per current directory and environment)."""
    env = os.environ.get(ENV, "")
    cwd = os.getcwd()
    user = _user_config()
    key = (env, cwd, user)
    found = _CONFIG.get(key)
    if found is None:
        found = {}
        for name in env.replace(",", " ").split():
            found[check_name(name, ENV)] = ENV
        project = _project_config(cwd)
        for path, table in ((project, ("tool", "inspector")), (user, ())):
            if path and os.path.isfile(path):
                for name in _names_in(path, table):
                    found.setdefault(name, path)
        if len(found) > MAX_NAMES:
            raise UsageError(f"more than {MAX_NAMES:,} trusted names")
        _CONFIG[key] = found
    return found


def _user_config() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "inspector", "config.toml")


def _project_config(cwd: str) -> str | None:
    """The nearest ``pyproject.toml`` from ``cwd`` up to the root (bounded by the path's depth)."""
    path = os.path.abspath(cwd)
    for _ in range(path.count(os.sep) + 1):
        candidate = os.path.join(path, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return None


def _names_in(path: str, table: tuple[str, ...]) -> list[str]:
    """The ``trust`` list of ``table`` in the TOML file ``path`` (none when it has none)."""
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
        import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise UsageError(f"{path}: larger than {MAX_CONFIG_BYTES:,} bytes")
        doc = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{path}: cannot be read for its trust list ({e})") from e
    for key in table:
        doc = doc.get(key) if isinstance(doc, dict) else None
    names = doc.get("trust") if isinstance(doc, dict) else None
    if names is None:
        return []
    if not isinstance(names, list):
        raise UsageError(f"{path}: trust must be a list of MODULE.NAME strings")
    return [check_name(n, path) for n in names]
