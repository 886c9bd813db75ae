"""JSON that strict parsers accept (RFC 8259: no ``NaN``, ``Infinity``): every ``--format
json`` writer and the HTML report's data go through :func:`finite` or :func:`dumps`.

A NaN or infinite number becomes ``null``, and the object holding it names what it was in
``"nonfinite"``: ``{"max_abs": null, "nonfinite": {"max_abs": "nan"}}``; in a list,
``{"values": [1.0, null], "nonfinite": {"values": [null, "inf"]}}``. A reader tells a missing
number (``null`` alone) from a NaN (``null`` named in ``nonfinite``).
"""

from __future__ import annotations

import json
import math

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["NONFINITE", "dumps", "finite", "word"]

NONFINITE = "nonfinite"


def word(x: float) -> str:
    """``"nan"``, ``"inf"`` or ``"-inf"``."""
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _bad(x: Any) -> bool:
    return isinstance(x, float) and not math.isfinite(x)


def finite(obj: Any) -> Any:
    """``obj`` (dicts, lists, tuples, scalars) with no NaN or infinity: each is ``None`` and
    named in its object's ``"nonfinite"`` (see the module docstring). What has none comes
    back unchanged (the same objects)."""
    if isinstance(obj, dict):
        out: dict[Any, Any] | None = None
        named: dict[str, Any] = {}
        for k, v in obj.items():
            if _bad(v):
                new: Any = None
                named[k] = word(v)
            elif isinstance(v, (list, tuple)) and any(map(_bad, v)):
                new = [None if _bad(x) else finite(x) for x in v]
                named[k] = [word(x) if _bad(x) else None for x in v]
            else:
                new = finite(v)
            if new is not v and out is None:
                out = dict(obj)
            if out is not None:
                out[k] = new
        if named:
            out = dict(obj) if out is None else out
            previous = out.get(NONFINITE)
            out[NONFINITE] = {**previous, **named} if isinstance(previous, dict) else named
        return obj if out is None else out
    if isinstance(obj, (list, tuple)):
        items = [None if _bad(x) else finite(x) for x in obj]
        return obj if all(a is b for a, b in zip(items, obj, strict=True)) else items
    return None if _bad(obj) else obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite` ``(obj)``, refusing (ValueError) anything non-finite
    left."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)
