"""The JSON renderer's own indenting encoder writes exactly what ``json.dumps(indent=2)``
writes, for any JSON-like value (including non-string keys, tuples, NaN and str subclasses)."""

from __future__ import annotations

import json
import math
from enum import Enum

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.reports.render import _indented


class Colour(str, Enum):
    RED = "red"


SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text(max_size=8) | st.just(Colour.RED) | st.just(math.inf))
KEYS = st.text(max_size=6) | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(KEYS, inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_indented_equals_json_dumps(value):
    assert _indented(value, "\n") == json.dumps(value, indent=2, ensure_ascii=False)
    expected = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
    assert _indented(value, "\n  ") == expected
