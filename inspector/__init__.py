"""inspector: what is inside a checkpoint, without running the framework that wrote it.

>>> import inspector
>>> ckpt = inspector.load("fixtures/torch/seed001_transformer_lm.pt")  # doctest: +SKIP
>>> ckpt.totals()["parameter"]  # doctest: +SKIP
1851

:func:`load` returns an :class:`~adapters.model.Checkpoint` (ordered
:class:`~adapters.model.TensorEntry` records, format metadata, hyperparameters) for any supported
format, reading metadata only; :func:`listing` turns it into the documented JSON-ready report that
``inspector show`` prints.
"""

from __future__ import annotations

from adapters.errors import FormatError, InspectorError, UnknownFormatError, UnsafeContentError
from adapters.model import Checkpoint, Finding, Role, TensorEntry
from adapters.registry import adapters, load

from .listing import listing

__version__ = "0.1.0"

__all__ = [
    "Checkpoint",
    "Finding",
    "FormatError",
    "InspectorError",
    "Role",
    "TensorEntry",
    "UnknownFormatError",
    "UnsafeContentError",
    "adapters",
    "listing",
    "load",
]
