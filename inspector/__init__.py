"""inspector: what is inside a checkpoint, without running the framework that wrote it.

>>> import inspector
>>> ckpt = inspector.load("fixtures/torch/seed001_transformer_lm.pt")  # doctest: +SKIP
>>> ckpt.totals()["parameters"]  # doctest: +SKIP
1851

:func:`load` returns an :class:`~inspector.adapters.model.Checkpoint` (a read-only mapping from
canonical name to :class:`~inspector.adapters.model.TensorEntry`, plus format metadata and
hyperparameters) for any supported format, reading metadata only; :func:`listing` turns it into the
documented JSON-ready report that ``inspector show`` prints; :func:`formats` lists the adapters.

Every verb is a function too, returning a typed, immutable result whose ``to_dict()`` is the
verb's JSON document: :func:`check`, :func:`diff`, :func:`scan`, :func:`stats`, :func:`predict`
and :func:`budget` (see :mod:`inspector.api` and :mod:`inspector.results`).

>>> inspector.scan("fixtures/security").verdict  # doctest: +SKIP
'foreign'

The names below are imported on first use, so ``import inspector`` (and ``inspector --help``) stays
cheap.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    from inspector.adapters.errors import (
        FormatError as FormatError,
    )
    from inspector.adapters.errors import (
        InspectorError as InspectorError,
    )
    from inspector.adapters.errors import (
        NotFoundError as NotFoundError,
    )
    from inspector.adapters.errors import (
        PermissionDeniedError as PermissionDeniedError,
    )
    from inspector.adapters.errors import (
        UnknownFormatError as UnknownFormatError,
    )
    from inspector.adapters.errors import (
        UnsafeContentError as UnsafeContentError,
    )
    from inspector.adapters.errors import (
        UsageError as UsageError,
    )
    from inspector.adapters.model import Checkpoint as Checkpoint
    from inspector.adapters.model import Finding as Finding
    from inspector.adapters.model import Role as Role
    from inspector.adapters.model import TensorEntry as TensorEntry
    from inspector.adapters.registry import formats as formats
    from inspector.adapters.registry import load as load
    from inspector.api import budget as budget
    from inspector.api import check as check
    from inspector.api import diff as diff
    from inspector.api import predict as predict
    from inspector.api import scan as scan
    from inspector.api import stats as stats
    from inspector.arrays import get_tensor as get_tensor
    from inspector.reports.listing import listing as listing
    from inspector.results import BudgetResult as BudgetResult
    from inspector.results import CheckResult as CheckResult
    from inspector.results import DiffResult as DiffResult
    from inspector.results import PredictResult as PredictResult
    from inspector.results import ScanResult as ScanResult
    from inspector.results import StatsResult as StatsResult

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
    # the verbs as functions, and their results
    "check": "inspector.api",
    "diff": "inspector.api",
    "scan": "inspector.api",
    "stats": "inspector.api",
    "predict": "inspector.api",
    "budget": "inspector.api",
    "CheckResult": "inspector.results",
    "DiffResult": "inspector.results",
    "ScanResult": "inspector.results",
    "StatsResult": "inspector.results",
    "PredictResult": "inspector.results",
    "BudgetResult": "inspector.results",
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
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (tab completion offers these)."""
    return list(__all__)


del annotations, TYPE_CHECKING  # not public names
