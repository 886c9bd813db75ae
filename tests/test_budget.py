"""``inspector budget``: recover seed 003's hyperparameters from its counts, constraints, ties,
``--compare``, and the search itself on a synthetic count with a known answer."""

from __future__ import annotations

import json

import pytest

from inspector import budget_solver as budget
from inspector.adapters.errors import UsageError
from inspector.cli import main
from inspector.formulas.core import Arch, HParam, Prediction, expected

SEED = {"vocab_size": 64, "num_layers": 3}
FF = {"feedforward_size": "4*d_model"}


# Seed 003's printed counts -> the hyperparameters the notebook used.
@pytest.mark.parametrize("hidden,count", [(32, 27_104), (64, 103_360), (128, 403_328)])
def test_lstm_hidden_from_seed_count(hidden, count):
    r = budget.solve("rau-lstm", count, ["hidden_units"], SEED)
    assert (r.best.values, r.best.total, r.best.deviation) == ({"hidden_units": hidden}, count, 0)


@pytest.mark.parametrize("d,count", [(32, 40_224), (48, 87_984), (56, 118_776), (64, 154_176),
                                     (128, 603_264)])
def test_transformer_d_model_from_seed_count(d, count):
    r = budget.solve("rau-transformer", count, ["d_model"], {**SEED, "num_heads": 4}, ties=FF)
    assert r.best.values == {"d_model": d, "feedforward_size": 4 * d}
    assert r.best.total == count


@pytest.mark.parametrize("h,s,count", [(32, 20, 30_423), (32, 32, 32_355), (32, 64, 37_507),
                                       (64, 20, 109_975), (64, 32, 113_827), (64, 64, 124_099)])
def test_stack_rnn_from_seed_count(h, s, count):
    assert budget.solve("rau-stack-rnn", count, ["hidden_units"],
                        {**SEED, "stack_size": s}).best.values == {"hidden_units": h}
    assert budget.solve("rau-stack-rnn", count, ["stack_size"],
                        {**SEED, "hidden_units": h}).best.values == {"stack_size": s}


@pytest.mark.parametrize("d,s,count", [(16, 16, 59_568), (20, 8, 111_340), (20, 16, 111_660),
                                       (24, 16, 187_848)])
def test_stack_transformer_from_seed_count(d, s, count):
    fixed = {"vocab_size": 64, "num_heads": 4, "layers": f"{d}-1.superposition-{s}.1"}
    r = budget.solve("rau-stack-transformer", count, ["d_model"], fixed, ties=FF)
    assert r.best.values["d_model"] == d and r.best.total == count


def test_two_free_hyperparameters_find_the_seed_pair():
    r = budget.solve("rau-stack-rnn", 113_827, ["hidden_units", "stack_size"], SEED,
                     ranges={"hidden_units": (16, 128), "stack_size": (1, 128)}, top=10)
    exact = [c.values for c in r.candidates if c.total == 113_827]
    assert {"hidden_units": 64, "stack_size": 32} in exact


def test_heads_constraint_is_applied_and_reported():
    r = budget.solve("rau-transformer", 154_176, ["d_model"], {**SEED, "num_heads": 5}, ties=FF)
    assert all(c.values["d_model"] % 5 == 0 for c in r.candidates)
    assert r.constraints["d_model must be divisible by num_heads"] > 0
    assert r.best.values["d_model"] == 65  # 64 is the seed's answer, not divisible by 5
    assert r.ranges["d_model"][1] < 200  # doubling steps over refused values, not past them


def test_under_never_exceeds():
    r = budget.solve("rau-lstm", 103_359, ["hidden_units"], SEED, under=True)
    assert r.best.values == {"hidden_units": 63}
    assert all(c.total <= 103_359 for c in r.candidates)


def test_tie_changes_the_answer():
    fixed = {**SEED, "num_heads": 4, "feedforward_size": 256}
    untied = budget.solve("rau-transformer", 603_264, ["d_model"], fixed)
    tied = budget.solve("rau-transformer", 603_264, ["d_model"], {**SEED, "num_heads": 4},
                        ties=FF)
    assert tied.best.values == {"d_model": 128, "feedforward_size": 512}
    assert untied.best.values["d_model"] != 128  # ff stays 256: a wider model is needed


def test_step_and_range():
    r = budget.solve("rau-lstm", 103_360, ["hidden_units"], SEED, ranges={"hidden_units": (8, 96)},
                     step=8)
    assert [c.values["hidden_units"] % 8 for c in r.candidates] == [0] * len(r.candidates)
    assert r.ranges["hidden_units"] == (8, 96, 8) and r.best.values == {"hidden_units": 64}


def test_million_vocabulary_is_bisected():
    r = budget.solve("rau-lstm", 10**9, ["vocab_size"], {"hidden_units": 512, "num_layers": 2},
                     under=True, top=2)
    assert r.method.startswith("bisection") and r.evaluations < 200
    # embedding rows * 512 + 2 layers * (8 * 512^2 + 4 * 512) + 2 * 512 <= 10^9
    fixed = 2 * (8 * 512**2 + 4 * 512) + 2 * 512
    assert r.best.values["vocab_size"] == (10**9 - fixed) // 512


def _synthetic(f):
    """A one-tensor architecture whose count is f(x): the search on a known function."""
    return Arch("synthetic", "test", (HParam("x", 1),),
                lambda hp: Prediction("synthetic", dict(hp), [expected("w", (f(hp["x"]),))]))


def test_non_monotone_count_is_searched_exhaustively():
    a = _synthetic(lambda x: (x - 3000) ** 2 + 1)
    r = budget.solve(a, 101, ["x"], {}, ranges={"x": (1, 6000)}, top=2)
    assert r.method.startswith("exhaustive")
    assert sorted(c.values["x"] for c in r.candidates) == [2990, 3010]


def test_monotone_bisection_is_exact_on_a_large_range():
    a = _synthetic(lambda x: 7 * x + 3)
    r = budget.solve(a, 7_000_000, ["x"], {}, ranges={"x": (1, 5_000_000)})
    assert r.best.values == {"x": 1_000_000} and r.method.startswith("bisection")  # 7,000,003
    r = budget.solve(a, 7_000_000, ["x"], {}, ranges={"x": (1, 5_000_000)}, under=True)
    assert r.best.values == {"x": 999_999} and r.best.total == 6_999_996


def test_compare_at_one_budget():
    rs = budget.compare(["rau-lstm", "rau-transformer", "rau-stack-rnn"], 103_360,
                        ["hidden_units", "d_model"], {**SEED, "num_heads": 4, "stack_size": 32},
                        ties=FF)
    got = {r.arch: r.best for r in rs}
    assert got["rau-lstm"].values == {"hidden_units": 64} and got["rau-lstm"].total == 103_360
    assert set(got["rau-transformer"].values) == {"d_model", "feedforward_size"}
    assert "stack_size" not in rs[0].hparams and rs[2].hparams["stack_size"] == 32


def test_cli_compare_json(capsys):
    code = main(["budget", "--compare", "--arch", "rau-lstm,rau-stack-rnn", "--set",
                 "vocab_size=64", "--set", "num_layers=3", "--set", "rau-stack-rnn:stack_size=20",
                 "--target", "30,423", "--solve", "hidden_units", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["schema"] == "inspector.budget/1"
    stack = out["results"][1]
    assert stack["candidates"][0] == {"values": {"hidden_units": 32}, "total": 30_423,
                                      "deviation": 0.0}


def test_cli_table(capsys):
    assert main(["budget", "--arch", "rau-transformer", "--set", "vocab_size=64", "--set",
                 "num_layers=3", "--set", "num_heads=4", "--target", "154176", "--solve",
                 "d_model", "--tie", "feedforward_size=4*d_model"]) == 0
    out = capsys.readouterr().out
    assert "constraint applied: d_model must be divisible by num_heads" in out
    assert "tie: feedforward_size = 4*d_model" in out
    assert [line.split() for line in out.splitlines() if line.endswith("exact")] == [
        ["64", "256", "154,176", "exact"]]


@pytest.mark.parametrize("argv,message", [
    (["--solve", "nope"], "has no hyperparameter nope"),
    (["--solve", "hidden_units", "--tie", "x=import os"], "--tie"),
    (["--solve", "hidden_units", "--tie", "num_layers=hidden_units/2"], "use //"),
    (["--solve", "hidden_units", "--range", "9:x"], "--range"),
    (["--solve", "hidden_units", "--set", "hidden_units=3"], "both set and solved"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    assert main(["budget", "--arch", "rau-lstm", "--target", "1000", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_target_forms():
    from inspector.budget_solver import parse_target

    assert [parse_target(t) for t in ("103360", "103,360", "150k", "1.5M", "1e6")] == [
        103_360, 103_360, 150_000, 1_500_000, 1_000_000]
    with pytest.raises(UsageError):
        parse_target("lots")


def test_budget_tables_right_align_numbers():
    """Counts and deviations line up on their last digit, as numbers do in a table."""
    from conftest import run_cli

    out = run_cli("budget", "--arch", "rau-lstm", "--set", "vocab_size=64", "--set",
                  "num_layers=3", "--target", "103360", "--solve", "hidden_units").stdout
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["hidden_units"])
    block = lines[start:start + 7]  # header, rule, five candidates
    ends = {len(line.rstrip()) for line in block if line.strip()}
    assert len(ends) == 1, block
    for col in ("parameters", "deviation"):
        right = block[0].index(col) + len(col)
        for row in block[2:]:
            assert row[right - 1] != " ", (col, row)
