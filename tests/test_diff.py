"""``inspector diff``: each fixture pair against the verdict its producer recorded, alignment,
collapsing, group deltas, output formats and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inspector.adapters.model import TensorEntry
from inspector.diffing import (
    ADDED,
    CHANGED,
    REMOVED,
    RESHAPED,
    RETYPED,
    UNCHANGED,
    align,
    collapse,
    diff,
    load_map,
)

from conftest import FIXTURES, load_truth

DIFF = FIXTURES / "diff"
PAIRS = sorted(p.parent for p in DIFF.glob("*/pair.truth.json"))


def _expected_op(row: dict) -> str | None:
    """The op a truth row calls for, from the producer's shapes, dtypes and equality."""
    if "shape_a" not in row:
        return ADDED
    if "shape_b" not in row:
        return REMOVED
    if row["shape_a"] != row["shape_b"]:
        return RESHAPED
    if row["dtype_a"] != row["dtype_b"]:
        return RETYPED
    return UNCHANGED if row["equal"] else CHANGED


def _plain(name: str) -> str:
    # the producers record MXNet names with their arg:/aux: prefix; the diff aligns without it
    return name.split(":", 1)[1] if name[:4] in ("arg:", "aux:") else name


def _check_pair(a: Path, b: Path, rows: list[dict]) -> None:
    result = diff(a, b, values=True)
    got = {r.name: r for r in result.records}
    assert sorted(got) == sorted(_plain(r["name"]) for r in rows)
    for row in rows:
        r = got[_plain(row["name"])]
        assert r.op == _expected_op(row), row["name"]
        if r.values is not None:
            assert r.values.identical == (row["max_abs_diff"] == 0), row["name"]
            assert r.values.max_abs == pytest.approx(row["max_abs_diff"], rel=1e-12, abs=0)
    assert result.structural == any(
        _expected_op(r) in (ADDED, REMOVED, RESHAPED, RETYPED) for r in rows
    )


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name)
def test_pair_verdict_matches_the_producer(pair: Path):
    truth = load_truth(pair / "pair.truth.json")
    _check_pair(pair / truth["a"], pair / truth["b"], truth["tensors"])


def test_legacy_torch_vs_safetensors_identical():
    pair = DIFF / "state_dict_vs_safetensors"
    rows = load_truth(pair / "pair.truth.json")["legacy_vs_safetensors"]
    assert all(r["equal"] for r in rows)
    _check_pair(pair / "zoo_legacy.pt", pair / "zoo.safetensors", rows)


@pytest.mark.parametrize("pair", ["torch_finetune", "torch_finetune_bf16"])
def test_frozen_layers_report_identical(pair: str):
    truth = load_truth(DIFF / pair / "pair.truth.json")
    result = diff(DIFF / pair / truth["a"], DIFF / pair / truth["b"], values=True)
    frozen = tuple(truth["frozen_prefixes"])
    for r in result.records:
        is_frozen = any(r.name == f or r.name.startswith(f + ".") for f in frozen)
        assert (r.op == UNCHANGED) == is_frozen, r.name
        assert r.values.identical == is_frozen


def test_sockeye_consecutive_checkpoints_show_the_fixed_encoder():
    truth = load_truth(DIFF / "sockeye1_consecutive/pair.truth.json")
    assert "all_except_decoder" in truth["command"]
    result = diff(DIFF / "sockeye1_consecutive/params.00001",
                  DIFF / "sockeye1_consecutive/params.00002", values=True)
    changed = {r.name for r in result.records if r.op == CHANGED}
    assert changed == {_plain(r["name"]) for r in truth["tensors"] if not r["equal"]}
    assert changed and all(n.startswith("decoder_") for n in changed)
    assert not result.structural


def test_hyperparameter_pair_group_delta():
    """ff 32 -> 48 in 4 blocks: the producer's shapes give the element delta; groups sum to it."""
    truth = load_truth(DIFF / "hparam_ff/pair.truth.json")
    result = diff(DIFF / "hparam_ff/ff32.pt", DIFF / "hparam_ff/ff48.safetensors")
    n = lambda s: __import__("math").prod(s)  # noqa: E731
    want = sum(n(r["shape_b"]) - n(r["shape_a"]) for r in truth["tensors"])
    assert sum(g.delta for g in result.groups) == want == 4 * (16 * 16 + 16 + 16 * 16)
    moved = [g for g in result.groups if g.delta]
    assert len(moved) == 1 and moved[0].tensors.get(RESHAPED) == 12
    rows = [c for c in collapse([r for r in result.records if r.op == RESHAPED])]
    assert [(c.pattern, c.count) for c in rows] == [
        ("encoder.layers.#.ff.0.weight", 4),
        ("encoder.layers.#.ff.0.bias", 4),
        ("encoder.layers.#.ff.2.weight", 4),
    ]


# ------------------------------------------------------------------------------ alignment


def E(name: str, shape=(2, 3), dtype="float32", stored: str | None = None) -> TensorEntry:
    return TensorEntry(stored_name=stored or name, name=name, shape=tuple(shape), dtype=dtype)


def ops(records):
    return {r.name: r.op for r in records}


def test_builtin_prefixes_align_mxnet_ddp_compile_and_hf_names():
    a = [E("arg:enc.w"), E("module.dec.w"), E("_orig_mod.model.head.w"), E("aux:bn.mean", (3,))]
    b = [E("enc.w"), E("dec.w"), E("head.w"), E("bn.mean", (4,))]
    assert ops(align(a, b)) == {"enc.w": UNCHANGED, "dec.w": UNCHANGED, "head.w": UNCHANGED,
                                "bn.mean": RESHAPED}


def test_prefix_clash_keeps_both_names():
    a = [E("model.w"), E("w")]
    assert ops(align(a, [E("w")])) == {"model.w": REMOVED, "w": UNCHANGED}


def test_strip_prefix_and_map(tmp_path):
    m = tmp_path / "renames.txt"
    m.write_text("# sockeye 1 -> sockeye 3 style\n^encoder_birnn_(\\w+)_l(\\d+)_ -> enc.\\2.\\1.\n")
    a = [E("net.encoder_birnn_forward_l0_i2h_weight"), E("net.x")]
    b = [E("enc.0.forward.i2h_weight"), E("x", dtype="float16")]
    records = align(a, b, strip_prefixes=["net."], renames=load_map(m))
    assert ops(records) == {"enc.0.forward.i2h_weight": UNCHANGED, "x": RETYPED}


@pytest.mark.parametrize("text,msg", [("no arrow here", "expected 'REGEX -> REPLACEMENT'"),
                                      ("( -> x", "bad rename"), ("a -> \\3", "bad rename")])
def test_bad_map_is_a_usage_error(tmp_path, cli, text, msg):
    m = tmp_path / "m.txt"
    m.write_text(text)
    f = DIFF / "keras_h5_vs_keras"
    proc = cli("diff", str(f / "model.h5"), str(f / "model.keras"), "--map", str(m))
    assert proc.returncode == 2 and msg in proc.stderr and str(m) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_align_shapes_pairs_unique_leftovers_only():
    a = [E("w_in", (4, 8)), E("p", (5,)), E("q", (5,)), E("same", (1,))]
    b = [E("W_input", (4, 8)), E("r", (5,)), E("s", (5,)), E("same", (1,))]
    got = ops(align(a, b, align_mode="shapes"))
    assert got == {"w_in ~ W_input": UNCHANGED, "same": UNCHANGED, "p": REMOVED, "q": REMOVED,
                   "r": ADDED, "s": ADDED}
    assert ops(align(a, b))["w_in"] == REMOVED


# ------------------------------------------------------------------------------- collapsing


def test_collapse_twelve_layers_and_two_levels():
    a = [E(f"encoder.layers.{i}.ff.weight", (8, 4)) for i in range(12)]
    b = [E(f"encoder.layers.{i}.ff.weight", (8, 6)) for i in range(12)]
    a += [E(f"dec.{i}.head.{j}.w", (3,)) for i in range(2) for j in range(3)]
    rows = collapse(align(a, b))
    assert [(c.pattern, c.op, c.count) for c in rows] == [
        ("encoder.layers.#.ff.weight", RESHAPED, 12),
        ("dec.#.head.#.w", REMOVED, 6),
    ]


def test_collapse_keeps_different_shapes_apart():
    a = [E(f"l.{i}.w", (i + 1,)) for i in range(3)]
    assert [c.count for c in collapse(align(a, []))] == [1, 1, 1]


# -------------------------------------------------------------------------------- the CLI


def test_cli_exit_codes(cli, tmp_path):
    ft, kr = DIFF / "torch_finetune", DIFF / "keras_h5_vs_keras"
    assert cli("diff", str(ft / "before.pt"), str(ft / "after.pt")).returncode == 0
    assert cli("diff", str(ft / "before.pt"), str(ft / "after.pt"), "--values").returncode == 1
    loose = cli("diff", str(ft / "before.pt"), str(ft / "after.pt"), "--values", "--atol", "0.02")
    assert loose.returncode == 0, loose.stdout
    assert cli("diff", str(kr / "model.h5"), str(kr / "model.keras"), "--values").returncode == 0
    hp = DIFF / "hparam_ff"
    assert cli("diff", str(hp / "ff32.pt"), str(hp / "ff48.safetensors")).returncode == 1
    missing = cli("diff", str(ft / "before.pt"), str(tmp_path / "nope.pt"))
    assert missing.returncode == 2 and "nope.pt" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_cli_table_collapses_and_hides_unchanged(cli):
    ft = DIFF / "torch_finetune"
    out = cli("diff", str(ft / "before.pt"), str(ft / "after.pt"), "--values").stdout
    # layers 2 and 3 changed by different amounts: one row each, never one merged row
    # (before issue 20 they merged as "encoder.layers.#.ff.0.weight ×2" with the max of both)
    assert "encoder.layers.#" not in out
    assert "encoder.layers.2.ff.0.weight" in out and "encoder.layers.3.ff.0.weight" in out
    assert "(17 unchanged tensors not shown; --all lists them)" in out
    assert "18 changed, 17 unchanged" in out
    full = cli("diff", str(ft / "before.pt"), str(ft / "after.pt"), "--values", "--all").stdout
    assert "embed.weight" in full and "embed.weight" not in out


def test_cli_json_and_markdown(cli):
    hp = DIFF / "hparam_ff"
    doc = json.loads(cli("diff", str(hp / "ff32.pt"), str(hp / "ff48.safetensors"),
                         "--format", "json").stdout)
    assert doc["schema"] == "inspector.diff/1"
    assert doc["summary"]["reshaped"] == 12 and doc["structural_difference"] is True
    assert {c["pattern"]: c["count"] for c in doc["collapsed"]}["encoder.layers.#.ff.0.bias"] == 4
    assert doc["a"]["format"] == "torch-zip" and doc["b"]["format"] == "safetensors"
    md = cli("diff", str(hp / "ff32.pt"), str(hp / "ff48.safetensors"), "--format", "markdown")
    assert "| reshaped" in md.stdout and "|---" in md.stdout
