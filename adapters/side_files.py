"""The files beside a checkpoint's weights: guarded lookups inside a directory, bounded JSON side
files, and the producers' side configurations a checkpoint carries (:attr:`Checkpoint.side_configs
<inspector.adapters.model.Checkpoint.side_configs>`).

Side configurations are the adapters' to read, never the formulas': a model directory's adapter
gives the one it read (``hf_config``: HF ``config.json``; ``rau_kwargs``: rau's ``kwargs.json``;
``sockeye_config``: Sockeye's ``config``; ``keras_config``: a Keras model config kept in a side
file; ``side_config``: any other format's, ``{"file": name, "config": {...}}``), and
:func:`inspector.adapters.registry.load` gives every other checkpoint :func:`beside`: the
``config.json`` beside a weights file and the ``kwargs.json`` beside or above a rau parameters
file, read on first use (a listing never reads them; a malformed one is a FormatError then).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping

from .errors import FormatError, InspectorError
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

HF_CONFIG = "hf_config"  # Hugging Face config.json
RAU_KWARGS = "rau_kwargs"  # rau's kwargs.json
SOCKEYE_CONFIG = "sockeye_config"  # Sockeye's ``config`` (YAML)
KERAS_CONFIG = "keras_config"  # a Keras model config read from a side file
SIDE_CONFIG = "side_config"  # any other format: {"file": name, "config": {...}}
KEYS = (HF_CONFIG, RAU_KWARGS, SOCKEYE_CONFIG, KERAS_CONFIG, SIDE_CONFIG)
HF_CONFIG_FILE = "config.json"
RAU_KWARGS_FILE = "kwargs.json"

# config.json, kwargs.json, adapter_config.json, *.weights.json: small JSON side files.
MAX_SIDE_JSON = 16 << 20


def file_in(directory: Source, name: str) -> Source | None:
    """``name`` inside ``directory`` when it is a regular file there, else None (missing,
    a directory, a symlink that loops or leaves the directory). A FIFO, socket or device of
    that name is refused (:class:`FormatError` naming it), never opened nor passed over."""
    try:
        child = directory.child(name)
        if child.is_file():
            return child
        special = not child.is_dir() and child.exists()
    except (InspectorError, OSError, RuntimeError):  # RuntimeError: symlink loop (3.11 resolve)
        return None
    if special:
        _ = child.size  # raises for a FIFO, socket or device
    return None


def dir_in(directory: Source, name: str) -> Source | None:
    """``name`` inside ``directory`` when it is a directory there, else None."""
    try:
        child = directory.child(name)
        return child if child.is_dir() else None
    except (InspectorError, OSError, RuntimeError):
        return None


def read_json_object(source: Source, what: str) -> dict[str, Any]:
    """A small JSON side file that must hold an object."""
    try:
        data = json.loads(source.read_text(MAX_SIDE_JSON))
    except ValueError as e:  # JSONDecodeError
        raise FormatError(f"{what} is not readable JSON ({e})", source.where) from None
    if not isinstance(data, dict):
        raise FormatError(f"{what} is not a JSON object", source.where)
    return data


class SideConfigs(Mapping):
    """Side configurations by key (:data:`KEYS`): the ones given, and the ones a loader reads on
    first access (a loader may return None: no such file). Read-only for its users."""

    __slots__ = ("_given", "_loaders")

    def __init__(self, given: Mapping[str, Any] | None = None,
                 loaders: Mapping[str, Callable[[], Any]] | None = None) -> None:
        self._given: dict[str, Any] = dict(given or {})
        self._loaders = dict(loaders or {})

    def _load(self, key: str) -> None:
        loader = self._loaders.pop(key, None)
        if loader is not None:
            value = loader()
            if value is not None:
                self._given[key] = value

    def __getitem__(self, key: str) -> Any:
        self._load(key)
        return self._given[key]

    def __iter__(self) -> Iterator[str]:
        for key in list(self._loaders):
            self._load(key)
        return iter(list(self._given))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"SideConfigs(given={sorted(self._given)}, unread={sorted(self._loaders)})"


def beside(source: Source, recorded: Mapping[str, Any] | None = None) -> SideConfigs:
    """The side configurations of a checkpoint opened from ``source`` by an adapter that gave
    none: ``recorded`` (:func:`recorded`), else for a file the ``config.json`` beside it and
    rau's ``kwargs.json`` beside it (``parameters.pt``) or one level up
    (``parameters/main.pt``); none for a directory."""
    return SideConfigs(recorded, loaders={HF_CONFIG: lambda: _hf_config(source),
                                RAU_KWARGS: lambda: _rau_kwargs(source)})


def recorded(metadata: Mapping[str, Any], hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """The side configs an adapter recorded through the :class:`SharedMetadata` keys:
    ``config_file: "config.json"`` (its ``hyperparameters["config"]`` is HF's config.json) and
    ``kwargs_file: "kwargs.json"`` (``hyperparameters["kwargs"]`` is rau's)."""
    out: dict[str, Any] = {}
    if metadata.get("config_file") == HF_CONFIG_FILE:
        out[HF_CONFIG] = hyperparameters.get("config") or {}
    if metadata.get("kwargs_file") == RAU_KWARGS_FILE:
        out[RAU_KWARGS] = hyperparameters.get("kwargs") or {}
    return out


def _hf_config(source: Source) -> dict[str, Any] | None:
    if source.is_dir():
        return None
    try:
        found = source.sibling(HF_CONFIG_FILE)
    except FormatError:
        return None
    return read_json_object(found, found.name) if found.is_file() else None


def _rau_kwargs(source: Source) -> dict[str, Any] | None:
    if source.is_dir():
        return None
    d = source.parent_dir()
    for _ in range(2):
        try:
            found = d.child(RAU_KWARGS_FILE)
        except FormatError:  # above the directory the checkpoint was opened in
            return None
        if found.is_file():
            return read_json_object(found, "rau kwargs.json")
        d = d.parent_dir()
    return None
