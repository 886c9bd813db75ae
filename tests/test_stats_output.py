"""`inspector stats` text output follows the global Style like every other table: counts with
thousands separators (``--raw-numbers`` without), shapes never; fitted to ``COLUMNS`` (a run's
checkpoints continue in a further table) and full names when piped; finding severities coloured
only when colour is on, never with ``NO_COLOR``. Counts are the producers' (truth files)."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, load_truth

STATS = FIXTURES / "stats"
NAN_ZERO = STATS / "torch" / "lm_nan_zero.pt"
RUN = STATS / "sockeye1_run"
KERAS = STATS / "keras" / "lstm_lm.keras"


@pytest.mark.parametrize("args", [
    (str(NAN_ZERO),), (str(STATS / "torch" / "dtypes.pt"),), (str(KERAS),),
    (str(RUN / "params.00001"),), (str(RUN),), (str(RUN), "--groups"),
], ids=lambda a: " ".join(a)[-40:])
def test_stats_fits_80_columns(cli, args):
    proc = cli("stats", *args, env={"COLUMNS": "80"})
    assert proc.returncode in (0, 1), proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) > 5
    too_long = [x for x in lines if len(x) > 80]
    assert not too_long, "\n".join(too_long)
    assert "\033[" not in proc.stdout


def test_stats_piped_keeps_full_names_and_every_column(cli):
    truth = load_truth(KERAS.with_name(KERAS.name + ".truth.json"))
    names = [w["path"] for w in truth["weights"]]  # Keras's own variable paths
    piped = cli("stats", str(KERAS)).stdout
    head = piped.splitlines()[2].split()
    assert head == ["tensor", "shape", "dtype", "min", "max", "mean", "std", "l2", "of",
                    "counts"]
    assert "…" not in piped
    assert all(f"\n{n} " in piped for n in names)
    narrow = cli("stats", str(KERAS), env={"COLUMNS": "40"}).stdout
    assert all(len(x) <= 40 for x in narrow.splitlines())
    assert "mean" not in narrow  # low-value columns went first, then names were elided
    assert "lstm/lstm…" in narrow and "lstm/lstm_cell/recurrent_kernel" not in narrow


def test_run_continues_in_a_further_table_when_narrow(cli):
    wide = cli("stats", str(RUN)).stdout.splitlines()
    heads = [x for x in wide if x.startswith("group")]
    assert len(heads) == 1 and "[0] L2 (change)" in heads[0] and "[2] L2 (change)" in heads[0]
    start = wide.index(heads[0]) + 2
    groups = [x.split()[0] for x in wide[start:wide.index("", start)]]
    assert len(groups) == 5  # io, decoder_lx, birnn, enc2decinit, hidden
    narrow = cli("stats", str(RUN), env={"COLUMNS": "60"}).stdout
    heads = [x for x in narrow.splitlines() if x.startswith("group")]
    assert len(heads) == 2  # [0] [1] side by side, then [2]
    assert "[2] L2 (change)" in heads[1] and "[2]" not in heads[0]
    # every group has a row in both tables: nothing is dropped
    assert all(narrow.count(f"\n{g} ") == 2 for g in groups), groups


def test_raw_numbers_and_shapes(cli):
    truth = load_truth(RUN / "params.00001.truth.json")
    elements = sum(t["stats"]["count"] for t in truth["tensors"])
    assert elements >= 1000  # 2,126: a count that shows a separator
    out = cli("stats", str(RUN / "params.00001")).stdout
    assert f"{elements:,} values by scheme" in out
    raw = cli("stats", str(RUN / "params.00001"), "--raw-numbers").stdout
    assert f"{elements} values by scheme" in raw and f"{elements:,}" not in raw
    shapes = {"(" + ", ".join(map(str, t["shape"])) + ("," if len(t["shape"]) == 1 else "")
              + ")" for t in truth["tensors"]}
    assert all(s in out for s in shapes)


def test_shape_text_has_no_separators():
    """A real report with one shape set to seed 000's output layer: ``(42767, 512)``."""
    from inspector import value_stats as stats
    from inspector.reports.render_stats import render
    from inspector.reports.text import Style

    rep = stats.report(stats.file_stats(NAN_ZERO))
    rep["tensors"][0]["shape"] = [42767, 512]
    for style in (Style(), Style(width=80), Style(raw_numbers=True)):
        text = render(rep, "table", "tensors", style)
        assert "(42767, 512)" in text and "42,767" not in text
    assert "(42767, 512)" in render(rep, "markdown")


def test_severity_colour_only_when_on(cli):
    truth = load_truth(NAN_ZERO.with_name(NAN_ZERO.name + ".truth.json"))
    plain = cli("stats", str(NAN_ZERO))
    assert plain.returncode == 1 and "\033[" not in plain.stdout
    coloured = cli("stats", str(NAN_ZERO), "--color", "always").stdout
    for name in truth["injected"]["nan"] + truth["injected"]["neginf"]:
        assert f"\033[31merror\033[0m: {name}: " in coloured
    for name in truth["injected"]["zeroed"]:
        assert f"\033[33mwarning\033[0m: {name}: all " in coloured
    # colour is for the severities only: the tables stay plain
    assert "\033[" not in coloured.split("findings:")[0]
    assert "\033[" not in cli("stats", str(NAN_ZERO), "--color", "auto",
                              env={"NO_COLOR": "1"}).stdout
