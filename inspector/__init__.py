"""inspector: what is inside a checkpoint, without running the framework that wrote it.

>>> import inspector
>>> ckpt = inspector.load("fixtures/torch/seed001_transformer_lm.pt")  # doctest: +SKIP
>>> ckpt.totals()["parameters"]  # doctest: +SKIP
1851

:func:`load` returns an :class:`~inspector.adapters.model.Checkpoint` (a read-only mapping from
canonical name to :class:`~inspector.adapters.model.TensorEntry`, plus format metadata and
hyperparameters) for any supported format, reading metadata only; :func:`listing` turns it into the
documented JSON-ready report that ``inspector show`` prints; :func:`formats` lists the adapters.

The names below are imported on first use, so ``import inspector`` (and ``inspector --help``) stays
cheap.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.2.0"

# public name -> module that defines it
_EXPORTS = {
    "Checkpoint": "inspector.adapters.model",
    "Finding": "inspector.adapters.model",
    "Role": "inspector.adapters.model",
    "TensorEntry": "inspector.adapters.model",
    "FormatError": "inspector.adapters.errors",
    "InspectorError": "inspector.adapters.errors",
    "NotFoundError": "inspector.adapters.errors",
    "PermissionDeniedError": "inspector.adapters.errors",
    "UsageError": "inspector.adapters.errors",
    "UnknownFormatError": "inspector.adapters.errors",
    "UnsafeContentError": "inspector.adapters.errors",
    "load": "inspector.adapters.registry",
    "formats": "inspector.adapters.registry",
    "listing": "inspector.reports.listing",
    "get_tensor": "inspector.arrays",
}

__all__ = sorted(_EXPORTS)


def _source_tree_adapters() -> None:
    """In the repository checkout, ``adapters/`` sits beside ``inspector/`` (it installs as
    ``inspector.adapters``, so nothing named ``adapters`` reaches site-packages). When this
    package is that source tree (a shell in the repository root imports it before the installed
    one), ``inspector.adapters`` is found there too."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "adapters")):
        return  # installed: the adapters are inside the package
    sibling = os.path.join(os.path.dirname(here), "adapters")
    if os.path.isfile(os.path.join(sibling, "registry.py")):
        import importlib.util
        import sys

        if "inspector.adapters" not in sys.modules:
            spec = importlib.util.spec_from_file_location(
                "inspector.adapters", os.path.join(sibling, "__init__.py"),
                submodule_search_locations=[sibling],
            )
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                sys.modules["inspector.adapters"] = module
                spec.loader.exec_module(module)
                globals()["adapters"] = module


_source_tree_adapters()


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'inspector' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
