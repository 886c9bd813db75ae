"""Table cells made from the entries (``show``'s lazy rows) equal those made from the report's
row dicts, for any names, shapes, files and groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.adapters.model import Role, TensorEntry
from inspector.grouping import Assignment
from inspector.reports import render
from inspector.reports.listing import TensorRows, _tensor
from inspector.reports.text import PLAIN, Style

NAME = st.text(alphabet=st.sampled_from(list("ab.0 \t\x1b\n\x00é")), max_size=6)
ENTRY = st.tuples(NAME, st.none() | NAME, st.lists(st.integers(0, 10**7), max_size=3),
                  st.sampled_from(["float32", "int8"]),
                  st.sampled_from(["parameter", "buffer", "optimizer", "other"]),
                  st.none() | st.just("") | NAME)


@settings(max_examples=300, deadline=None)
@given(st.lists(ENTRY, min_size=1, max_size=8), st.booleans(), st.booleans(), st.data())
def test_cells_from_entries_equal_cells_from_rows(raw, grouped, raw_numbers, data):
    entries = [TensorEntry(stored if stored is not None else name, name, tuple(shape), dtype,
                           Role(role), nbytes=0, file=file)
               for name, stored, shape, dtype, role, file in raw]
    places = {t.name: Assignment(data.draw(NAME)) for t in entries}
    report = {"tensors": TensorRows(entries, {}, [places[t.name] for t in entries])}
    dicts = {"tensors": [_tensor(t, None, places[t.name]) for t in entries]}
    if grouped:
        report["groups"] = dicts["groups"] = []
    style = Style(raw_numbers=raw_numbers) if raw_numbers else PLAIN
    made = render._entry_rows(report, style)
    assert made is not None
    assert made == render._rows(dicts, style)


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_sanitize_shortcut_equals_translate(text):
    """``sanitize`` returns a printable string as it is: every character it escapes is
    unprintable, so translating such a string changes nothing."""
    from inspector.adapters.errors import _CONTROL, sanitize

    assert not any(chr(c).isprintable() for c in _CONTROL)
    assert sanitize(text) == text.translate(_CONTROL)
