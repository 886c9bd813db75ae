"""The plain table writer gives tabulate's bytes wherever it answers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tabulate import tabulate

from inspector.reports.plain_table import plain_table

CELL = st.text(alphabet=st.sampled_from(list("ab -|,.()#x0123\\é\t")), max_size=7)


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(
    st.lists(CELL, min_size=n, max_size=n),
    st.lists(st.lists(CELL, min_size=n, max_size=n), max_size=5),
    st.lists(st.sampled_from(["left", "right"]), min_size=n, max_size=n),
    st.sampled_from(["simple", "github"]))))
def test_plain_table_is_tabulate(case):
    headers, rows, align, fmt = case
    got = plain_table(rows, headers, fmt, align)
    if got is not None:
        assert got == tabulate(rows, headers, fmt, disable_numparse=True, colalign=align)


def test_plain_table_answers_for_plain_cells():
    rows = [["enc.weight", "(3, 4)", "12"], ["b", "()", "1"]]
    assert plain_table(rows, ["name", "shape", "numel"], "simple",
                       ["left", "left", "right"]) is not None
