"""The benchmark chart of the docs is drawn from the benchmark's rows, one bar per row."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("gen_bench_chart", ROOT / "docs/gen_bench_chart.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_bar_per_row_coloured_by_target() -> None:
    chart = _module()
    doc = json.loads((ROOT / "docs/bench_results.json").read_text())
    rows = doc["rows"]
    svg = chart.svg(rows, "docs/bench_results.json")
    bars = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', svg)
    assert len(bars) == len(rows)
    assert [b == chart.MISSED for b in bars] == [not r["met"] for r in rows]
    for r in rows:
        assert r["met"] == (r["ratio"] <= r["target"])
        assert f'{r["ratio"]:.2f}×' in svg


def test_the_committed_chart_is_current() -> None:
    # mkdocs redraws it on every build; the committed copy must be what the snapshot draws
    chart = _module()
    if (ROOT / "bench/out/results.json").is_file():
        pytest.skip("a local benchmark run: the chart is drawn from bench/out/results.json")
    assert chart.OUT.read_text(encoding="utf-8") == chart.svg(*_rows(chart))


def _rows(chart):
    rows, source = chart.load_rows()
    return rows, source.relative_to(ROOT).as_posix()
