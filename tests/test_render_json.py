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


NAME = st.text(alphabet=st.sampled_from(list('ab.0{}, :"\\\n\x00é\U0001f600')), max_size=8)
DIM = st.integers(0, 2**40) | st.sampled_from([True, 1.0, -1])  # non-int dims: the slow path


def _entries(draw_entries):
    from inspector.adapters.model import Role, TensorEntry

    out = []
    for name, stored, shape, dtype, role, nbytes, offset, file, sparse in draw_entries:
        out.append(TensorEntry(stored if stored is not None else name, name, tuple(shape), dtype,
                               Role(role), nbytes=nbytes, offset=offset, file=file,
                               stored_numel=sparse))
    return out


ENTRY = st.tuples(NAME, st.none() | NAME, st.lists(DIM, max_size=3),
                  st.none() | st.sampled_from(["float32", "bf16"]) | NAME,
                  st.sampled_from(["parameter", "buffer", "optimizer", "other"]),
                  st.none() | st.integers(0, 2**60), st.none() | st.integers(0, 2**60),
                  st.none() | NAME, st.none() | st.just(3))


@settings(max_examples=300, deadline=None)
@given(st.lists(ENTRY, min_size=1, max_size=8), st.data())
def test_rows_written_from_entries_equal_the_encoded_rows(raw, data):
    """``TensorRows.json_text`` (rows written without dicts) gives the C encoder's bytes for
    the dicts of :func:`listing`, for any names, shapes, ties, sparse counts and groups."""
    from inspector.grouping import Assignment
    from inspector.reports.listing import TensorRows, _tensor
    from inspector.reports.render import _row_encoder

    entries = _entries(raw)
    names = [t.stored_name for t in entries]
    tied = data.draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    ties = {n: tied for n in tied} if len(tied) > 1 else {}
    places = {t.name: Assignment(data.draw(NAME), data.draw(st.none() | NAME),
                                 data.draw(st.none() | NAME), data.draw(st.none() | NAME))
              for t in entries}
    encode_row = _row_encoder(json.JSONEncoder(ensure_ascii=False))
    rows = TensorRows(entries, ties, [places[t.name] for t in entries])
    expected = [_tensor(t, ties.get(t.stored_name), places[t.name]) for t in entries]
    assert list(rows) == expected
    assert rows[1:] == expected[1:] and rows[-1] == expected[-1]
    start = data.draw(st.integers(0, len(entries) - 1))
    assert rows.json_text(start, len(entries), encode_row) == ",\n".join(
        "    " + encode_row(r) for r in expected[start:])


RECORD_VALUE = (st.none() | st.integers() | st.booleans() | st.text(max_size=4)
                | st.just(Colour.RED) | st.floats(allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["block", "la%yer", 'd"ir', "n"]), min_size=1, max_size=4,
                unique=True),
       st.lists(st.lists(st.none() | st.integers(-5, 10**20) | st.text(max_size=4), min_size=4,
                         max_size=4), min_size=2, max_size=6),
       st.sampled_from([None, RECORD_VALUE]))
def test_lists_of_flat_records_equal_json_dumps(keys, values, odd):
    """Per-layer records (same keys, one type per column) take the column-wise writer: the
    same text as ``json.dumps(indent=2)``, also when a column mixes types or keys differ."""
    records = [dict(zip(keys, row, strict=False)) for row in values]
    if odd is not None:
        records[-1][keys[0]] = Colour.RED
    assert _indented(records, "\n  ") == json.dumps(
        records, indent=2, ensure_ascii=False).replace("\n", "\n  ")
    columns = [{k: i for k in keys} for i in range(3)] + [{k: str(i) for k in keys}
                                                            for i in range(3)]
    assert _indented(columns, "\n") == json.dumps(columns, indent=2, ensure_ascii=False)
