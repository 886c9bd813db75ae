"""The adapter registry: which formats exist and which one a file is, decided by content.

Each adapter module defines ``ADAPTER = Adapter(...)`` with a cheap ``sniff(head, path)`` that
looks at the first bytes (never the extension alone) and returns a variant name or None, and an
``open(path, variant)`` that builds the :class:`~adapters.model.Checkpoint`. Third-party packages
add adapters through the ``inspector.adapters`` entry-point group (value: ``module:ADAPTER``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import FormatError, InspectorError, UnknownFormatError
from .model import Checkpoint

ENTRY_POINT_GROUP = "inspector.adapters"
SNIFF_BYTES = 4096
GIT_LFS_POINTER = b"version https://git-lfs.github.com/spec/"

# Order matters only where two sniffs could both match; the most specific comes first.
BUILTIN_MODULES = (
    "adapters.sockeye",
    "adapters.safetensors",
    "adapters.torch",
    "adapters.mxnet",
    "adapters.numpy_npy",
    "adapters.keras",
)


@dataclass(frozen=True)
class Adapter:
    """One on-disk format."""

    name: str
    description: str
    extensions: tuple[str, ...]
    sniff: Callable[[bytes, Path], str | None]
    open: Callable[[Path, str], Checkpoint]
    # Variant to try when the user forces this format on a file its sniff does not recognise.
    default_variant: str | None = None


_cache: list[Adapter] | None = None
_builtin: dict[str, Adapter] = {}  # module name -> its ADAPTER, as imported


def _builtins() -> Iterator[Adapter]:
    """The built-in adapters in order, each module imported only when reached: detection stops
    at the first match, so a safetensors file never imports the Keras or NumPy readers."""
    for module in BUILTIN_MODULES:
        adapter = _builtin.get(module)
        if adapter is None:
            adapter = _builtin[module] = importlib.import_module(module).ADAPTER
        yield adapter


def adapters() -> list[Adapter]:
    """Built-in adapters followed by those registered through the entry-point group."""
    global _cache
    if _cache is None:
        found = list(_builtins())
        found.extend(_plugins({a.name for a in found}))
        _cache = found
    return _cache


def _plugins(taken: set[str]) -> list[Adapter]:
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            adapter = ep.load()
        except Exception as e:  # a broken plugin must not break the built-in formats
            raise InspectorError(
                f"adapter plugin {ep.name!r} ({ep.value}) failed to load: {e}"
            ) from e
        if not isinstance(adapter, Adapter):
            raise InspectorError(f"adapter plugin {ep.name!r} ({ep.value}) is not an Adapter")
        if adapter.name not in taken:
            out.append(adapter)
            taken.add(adapter.name)
    return out


def read_head(path: Path) -> bytes:
    """The first bytes of a file (b'' for a directory), with the early refusals."""
    if not path.exists():
        raise InspectorError("no such file or directory", str(path))
    if path.is_dir():
        return b""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        raise InspectorError(f"cannot read ({e.strerror})", str(path)) from None
    if not head:
        raise FormatError("file is empty", str(path))
    if head.startswith(GIT_LFS_POINTER):
        raise FormatError(
            "this is a Git LFS pointer, not the checkpoint: run 'git lfs pull' first", str(path)
        )
    return head


def detect(path: Path, format: str | None = None) -> tuple[Adapter, str]:
    """The adapter and variant for ``path``; ``format`` forces an adapter by name."""
    head = read_head(path)
    if format is None:
        # Built-ins first, as in adapters(); plugins (entry points: importlib.metadata costs
        # tens of ms) are looked up only when no built-in format matches.
        for adapter in _builtins():
            variant = adapter.sniff(head, path)
            if variant is not None:
                return adapter, variant
        candidates = adapters()
        rest = candidates[len(BUILTIN_MODULES) :]
    else:
        every = adapters()
        candidates = rest = [a for a in every if a.name == format]
        if not candidates:
            raise UnknownFormatError(
                f"unknown format {format!r}; supported: {', '.join(a.name for a in every)}"
            )
    for adapter in rest:
        variant = adapter.sniff(head, path)
        if variant is not None:
            return adapter, variant
    if format is not None and candidates[0].default_variant is not None:
        return candidates[0], candidates[0].default_variant
    kind = "directory" if path.is_dir() else "file"
    raise UnknownFormatError(
        f"{kind} is not a recognised checkpoint; supported formats: "
        + "; ".join(f"{a.name} ({a.description})" for a in candidates),
        str(path),
    )


def load(path: str | Path, format: str | None = None) -> Checkpoint:
    """Open a checkpoint of any supported format, reading metadata only."""
    p = Path(path)
    adapter, variant = detect(p, format)
    try:
        return adapter.open(p, variant)
    except InspectorError:
        raise
    except Exception as e:  # noqa: BLE001 - a bad file must end in one clear line, never a traceback
        raise FormatError(
            f"could not be read as {adapter.name} ({type(e).__name__}: {e})", str(p)
        ) from e
