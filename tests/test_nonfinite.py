"""NaN and infinity: ``diff --values`` gives NumPy's numbers and names NaN / Inf in a finding;
every ``--format json`` writer is strict JSON (no bare ``NaN`` / ``Infinity``): a non-finite
number is ``null`` and named in its object's ``"nonfinite"``.

Ground truth: ``fixtures/diff/nan_inf/numpy_truth.json``, written by torch and NumPy
(``make_fixture.py``): NumPy's ``max(abs(a - b))``, relative L2 and cosine on the values torch
loads back, and the NaN / Inf counts of each side."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from inspector import cli
from inspector.reports.strict_json import finite

from conftest import FIXTURES, load_truth

PAIR = FIXTURES / "diff" / "nan_inf"
NAN_STATS = FIXTURES / "stats" / "torch" / "lm_nan_zero.pt"
LABELS = {"max_abs": "max |a-b|", "rel_l2": "rel L2", "cosine": "cosine"}


def strict(text: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity."""
    def refuse(word: str) -> None:
        raise AssertionError(f"bare {word} in JSON output")
    return json.loads(text, parse_constant=refuse)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(list(args))
    return code, capsys.readouterr().out


def _number(values: dict[str, Any], key: str) -> Any:
    """A number of the JSON output as the truth writes it ("nan"/"inf" or a float)."""
    return values.get("nonfinite", {}).get(key, values[key])


def test_diff_values_follow_numpy(capsys) -> None:
    truth = load_truth(PAIR / "numpy_truth.json")
    code, out = run(capsys, "diff", str(PAIR / "a.pt"), str(PAIR / "b.pt"), "--values", "--all",
                    "--format", "json")
    assert code == 1
    report = strict(out)
    got = {t["name"]: t["values"] for t in report["tensors"]}
    assert sorted(got) == sorted(t["name"] for t in truth["tensors"])
    for t in truth["tensors"]:
        v = got[t["name"]]
        for key in ("max_abs", "rel_l2", "cosine"):
            want, have = t[key], _number(v, key)
            if isinstance(want, str):
                assert have == want, (t["name"], key)
                assert v[key] is None
            else:
                assert have == pytest.approx(want, rel=1e-6), (t["name"], key)
        assert v["identical"] == t["equal_nan"], t["name"]
        expected = {side: c for side, c in t["nan_inf"].items() if any(c.values())}
        assert v.get("nan_inf", {}) == expected, t["name"]
    # every tensor with NaN or Inf is named in a finding, with its counts
    named = {f["tensor"]: f for f in report["findings"]}
    for t in truth["tensors"]:
        if any(any(c.values()) for c in t["nan_inf"].values()):
            f = named.pop(t["name"])
            assert f["nan_inf"] == {s: c for s, c in t["nan_inf"].items() if any(c.values())}
            nan_numbers = [label for key, label in LABELS.items() if t[key] == "nan"]
            assert f"{', '.join(nan_numbers)} NaN" in f["message"], f["message"]
    assert not named


def test_diff_table_says_nan(capsys) -> None:
    code, out = run(capsys, "diff", str(PAIR / "a.pt"), str(PAIR / "b.pt"), "--values")
    assert code == 1
    row = next(line for line in out.splitlines() if line.split()[1:2] == ["nan_in_b"])
    assert row.split()[-3:] == ["nan", "nan", "nan"]  # not inf, inf, 1.0000000
    assert re.search(r"error: nan_in_b: B has 1 NaN", out)


def _verbs(tmp_path: Path) -> list[tuple[str, ...]]:
    a, b = str(PAIR / "a.pt"), str(PAIR / "b.pt")
    return [
        ("show", a), ("show", a, "--groups"), ("show", a, "--per-layer"), ("show", str(NAN_STATS)),
        ("show", a, str(NAN_STATS)), ("check", a), ("check", str(NAN_STATS)),
        ("diff", a, b), ("diff", a, b, "--values"), ("diff", str(NAN_STATS), str(NAN_STATS),
                                                     "--values"),
        ("stats", a), ("stats", a, "--groups"), ("stats", str(NAN_STATS)), ("stats", a, a),
        ("stats", str(FIXTURES / "stats" / "sockeye1_run")),
        ("scan", a), ("predict", "--arch", "sockeye-rnn"), ("archs",), ("formats",),
        ("schemes",),
        ("budget", "--arch", "rau-lstm", "--set", "vocab_size=64", "--set", "num_layers=3",
         "--target", "103360", "--solve", "hidden_units"),
    ]


def test_every_json_writer_is_strict(capsys, tmp_path: Path) -> None:
    for args in _verbs(tmp_path):
        code, out = run(capsys, *args, "--format", "json")
        assert code in (0, 1, 3), args
        doc = strict(out)
        assert doc, args
    # the nonfinite hyperparameters of a.pt: null, named
    doc = strict(run(capsys, "show", str(PAIR / "a.pt"), "--format", "json")[1])
    text = json.dumps(doc)
    assert '"grad_clip": null' in text and '"grad_clip": "inf"' in text
    assert '"lr_floor": "nan"' in text
    # jsonl: one strict object per line
    code, out = run(capsys, "show", str(PAIR / "a.pt"), str(NAN_STATS), "--format", "jsonl")
    assert code == 0 and all(strict(line) for line in out.splitlines())


def test_report_data_is_strict(capsys, tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    code, _ = run(capsys, "report", str(PAIR / "a.pt"), str(PAIR / "b.pt"), "--values",
                  "-o", str(html))
    assert code == 0
    text = html.read_text(encoding="utf-8")
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text,
                     re.S).group(1)
    doc = strict(data)  # JSON.parse in the page takes exactly this
    values = {t["name"]: t["values"] for t in doc["diff"]["tensors"]}
    assert values["nan_in_b"]["nonfinite"]["max_abs"] == "nan"
    assert '<p class="error">[error] nan_in_b: B has 1 NaN: ' in text  # the finding, shown


def test_finite_names_what_it_replaces() -> None:
    nan, inf = math.nan, math.inf
    assert finite({"a": 1.0, "b": [1, 2]}) == {"a": 1.0, "b": [1, 2]}
    assert finite({"x": nan, "y": -inf, "z": 0.5}) == {
        "x": None, "y": None, "z": 0.5, "nonfinite": {"x": "nan", "y": "-inf"}}
    assert finite({"v": [1.0, inf, nan]}) == {
        "v": [1.0, None, None], "nonfinite": {"v": [None, "inf", "nan"]}}
    assert finite([{"k": inf}, 2.0]) == [{"k": None, "nonfinite": {"k": "inf"}}, 2.0]
    assert finite({"m": inf, "nonfinite": {"old": "nan"}})["nonfinite"] == {
        "old": "nan", "m": "inf"}
    same = {"deep": [{"a": 1.0}]}
    assert finite(same) is same  # nothing to replace: the same object, no copy
