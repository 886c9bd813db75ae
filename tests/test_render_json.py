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


ROW_TEXT = st.text(alphabet=st.sampled_from(list('ab{}, "\\\n')), max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"name": ROW_TEXT, "shape": st.lists(st.integers(0, 9)),
                                        "file": st.none() | ROW_TEXT}), min_size=1, max_size=6))
def test_rows_at_once_equal_rows_one_by_one(rows):
    from inspector.reports.render import _row_encoder, _rows_text

    encode_row = _row_encoder(json.JSONEncoder(ensure_ascii=False))
    assert _rows_text(rows, encode_row) == ",\n".join("    " + encode_row(r) for r in rows)
