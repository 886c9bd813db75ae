"""Issue 20: output people can read and CLI conventions people expect.

Shape text without separators, counts with them (``--raw-numbers`` without), tables that fit
an 80-column terminal, full names when piped, colour only when asked for and never with
NO_COLOR, global options after the verb, CSV for check and diff, diff filters and collapse,
the Python API's mapping. Ground truth comes from the producers' truth files where a count is
asserted."""

from __future__ import annotations

import csv
import io
import json

import pytest

from conftest import FIXTURES, drain_pty, load_truth

SOCKEYE = FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l2-2_e8-8_h16_mlp_ctxgate_init-last_residual"
COVERAGE = FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l2-2_e8-8_h16_coverage"
LIGHTNING = FIXTURES / "security" / "lightning_tiny_lm.ckpt"
FINETUNE = FIXTURES / "diff" / "torch_finetune"
HPARAM = FIXTURES / "diff" / "hparam_ff"
SEED000 = ["--arch", "sockeye-rnn", "--set", "num_layers=2:2", "--set", "num_embed=512:512",
           "--set", "rnn_num_hidden=512", "--set", "rnn_attention_type=dot",
           "--set", "source_vocab_size=49410", "--set", "target_vocab_size=42767"]
WIDE = {"COLUMNS": "80"}


def test_shape_text_has_no_separators_counts_do():
    """Seed 000's (42767, 512) output layer, and its total as Sockeye logs it."""
    from conftest import run_cli

    out = run_cli("predict", *SEED000).stdout
    assert "(42767, 512)" in out and "(42,767" not in out
    assert "total: 79,638,799" in out
    raw = run_cli("predict", *SEED000, "--raw-numbers").stdout
    assert "total: 79638799" in raw and "(42767, 512)" in raw
    assert "," not in "".join(line.split("(")[0] for line in raw.splitlines()[2:20])


@pytest.mark.parametrize("verb", ["show", "check"])
def test_shape_text_in_show_and_check(cli, verb):
    out = cli(verb, str(COVERAGE), "--set", "rnn_attention_coverage_num_hidden=3").stdout \
        if verb == "check" else cli(verb, str(COVERAGE)).stdout
    assert "(6, 33)" in out  # the GRU coverage i2h weight: 3*2 gates x 33 inputs


def test_shape_text_in_diff(cli):
    out = cli("diff", str(HPARAM / "ff32.pt"), str(HPARAM / "ff48.safetensors")).stdout
    assert "(32, 16) float32" in out and "(48, 16) float32" in out


def test_raw_numbers_after_the_verb(cli):
    truth = load_truth(SOCKEYE / "params.best.truth.json")
    out = cli("show", str(SOCKEYE), "--raw-numbers").stdout
    assert f"parameters       {truth['sockeye_logged_parameter_count']}\n" in out
    out = cli("--raw-numbers", "show", str(SOCKEYE)).stdout
    assert f"parameters       {truth['sockeye_logged_parameter_count']}\n" in out


COMMANDS_80 = [
    ("show", str(SOCKEYE)),
    ("show", str(LIGHTNING)),
    ("show", str(FIXTURES / "keras" / "keras2_lm_adam.h5")),
    ("show", str(FIXTURES / "dirs" / "hf_gpt2_safetensors")),
    ("show", str(SOCKEYE), "--per-layer"),
    ("check", str(COVERAGE), "--set", "rnn_attention_coverage_num_hidden=3"),
    ("check", str(LIGHTNING)),
    ("diff", str(FINETUNE / "before.pt"), str(FINETUNE / "after.pt"), "--values"),
    ("diff", str(HPARAM / "ff32.pt"), str(HPARAM / "ff48.safetensors"), "--all"),
    ("predict", "--arch", "gpt2"),
    ("budget", "--arch", "rau-lstm", "--set", "vocab_size=64", "--set", "num_layers=3",
     "--target", "103360", "--solve", "hidden_units"),
    ("archs",),
    ("archs", "--format", "table"),
    ("formats",),
    ("schemes",),
    ("scan", str(FIXTURES / "dcp")),
    ("scan", str(FIXTURES / "gguf")),
    ("stats", str(FIXTURES / "gguf" / "kv_zoo_v2.gguf")),
    ("show", str(FIXTURES / "gguf" / "tiny_mixtral.gguf")),
    ("check", str(FIXTURES / "onmt" / "rnn.pt")),
]


@pytest.mark.parametrize("args", COMMANDS_80, ids=lambda a: " ".join(a)[-60:])
def test_tables_fit_80_columns(cli, args):
    proc = cli(*args, env=WIDE)
    assert proc.returncode in (0, 1, 3), proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) > 3
    too_long = [x for x in lines if len(x) > 80]
    assert not too_long, "\n".join(too_long)
    assert "\033[" not in proc.stdout  # never colour when piped, COLUMNS or not


def test_piped_output_keeps_full_names(cli):
    name = "optimizer_states.0.state.0.exp_avg_sq"
    piped = cli("show", str(LIGHTNING)).stdout
    assert f"{name}  {name}  (11, 4)" in piped  # name and 'stored as', in full
    # 60 columns: low-value columns go before names become unreadable
    sixty = cli("show", str(LIGHTNING), env={"COLUMNS": "60"}).stdout
    assert f"{name}  (11, 4)" in sixty and "stored as" not in sixty and "…" not in sixty
    assert all(len(x) <= 60 for x in sixty.splitlines())
    # 40 columns: then names are elided in the middle
    forty = cli("show", str(LIGHTNING), env={"COLUMNS": "40"}).stdout
    assert "optimizer_st…0.exp_avg_sq" in forty or "…" in forty
    assert all(len(x) <= 40 for x in forty.splitlines())


def test_hyperparameters_shape_first_rest_under_verbose(cli):
    out = cli("show", str(LIGHTNING)).stdout
    assert "hyper_parameters.dim: 4" in out
    assert "_batches_that_stepped" not in out and "--verbose lists them" in out
    verbose = cli("show", str(LIGHTNING), "--verbose").stdout
    assert "_batches_that_stepped" in verbose
    assert verbose.index("hyper_parameters.dim") < verbose.index("epoch")
    keras = cli("show", str(FIXTURES / "keras" / "keras2_lm_adam.h5")).stdout
    assert "config.layers[2]: LSTM(units=16, use_bias=true)" in keras
    assert "training_config" not in keras and "learning_rate" not in keras
    assert "learning_rate" in cli("show", str(FIXTURES / "keras" / "keras2_lm_adam.h5"),
                                  "-v").stdout


def test_colour_only_when_asked_and_never_with_no_color(cli):
    args = ("check", str(COVERAGE), "--set", "rnn_attention_coverage_num_hidden=3")
    assert "\033[" not in cli(*args).stdout
    coloured = cli(*args, "--color", "always").stdout
    assert "\033[31mMISMATCH\033[0m" in coloured and "\033[31mwrong_shape" in coloured
    # NO_COLOR is about auto; on a pipe auto is off anyway
    assert "\033[" not in cli(*args, "--color", "auto", env={"NO_COLOR": "1"}).stdout


def test_no_color_on_a_terminal():
    """On a real pseudo-terminal colour is on by default, and NO_COLOR turns it off."""
    import os
    import pty
    import subprocess
    import sys

    from conftest import ROOT

    def on_tty(env: dict[str, str]) -> str:
        master, slave = pty.openpty()
        base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "inspector", "check", str(COVERAGE), "--set",
             "rnn_attention_coverage_num_hidden=3"],
            stdout=slave, stderr=subprocess.DEVNULL, cwd=ROOT, env={**base, **env})
        os.close(slave)
        data = drain_pty(master)
        proc.wait(timeout=60)
        os.close(master)
        return data.decode()

    assert "\033[31m" in on_tty({"TERM": "xterm"})
    assert "\033[" not in on_tty({"TERM": "xterm", "NO_COLOR": "1"})


def test_debug_after_the_verb(cli, tmp_path):
    missing = str(tmp_path / "nope.pt")
    plain = cli("show", missing)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    for args in (("show", missing, "--debug"), ("--debug", "show", missing),
                 ("diff", missing, missing, "--debug")):
        proc = cli(*args)
        assert proc.returncode != 0 and "Traceback" in proc.stderr, args


def test_help_keeps_example_line_breaks_and_lists_exit_codes(cli):
    help_text = cli("budget", "--help").stdout
    assert ("    $ inspector budget --arch rau-lstm --set vocab_size=64 \\\n"
            "        --set num_layers=3 --target 103360 --solve hidden_units\n") in help_text
    top = cli("--help").stdout
    for verb in ("show", "check", "diff", "scan", "report", "predict", "budget"):
        assert f"\n  {verb} " in top.split("exit codes:")[1], verb
    assert "3 incomplete" in top
    assert "output format" in cli("diff", "--help").stdout


@pytest.mark.parametrize("verb,extra", [
    ("show", ()), ("check", ()), ("diff", ()), ("predict", ("--arch", "gpt2")),
    ("budget", ("--arch", "rau-lstm", "--target", "1000", "--solve", "hidden_units")),
    ("formats", ()), ("archs", ()), ("schemes", ()),
])
def test_every_tabular_verb_has_format_csv(cli, verb, extra):
    paths = {"show": (str(SOCKEYE),), "check": (str(SOCKEYE),),
             "diff": (str(HPARAM / "ff32.pt"), str(HPARAM / "ff48.safetensors"))}
    proc = cli(verb, *paths.get(verb, ()), *extra, "--format", "csv")
    assert proc.returncode in (0, 1), proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert rows
    for fmt in ("markdown", "json"):
        assert cli(verb, *paths.get(verb, ()), *extra, "--format", fmt).returncode in (0, 1)


def test_check_csv_counts_match_sockeye(cli):
    truth = load_truth(SOCKEYE / "params.best.truth.json")
    rows = list(csv.DictReader(io.StringIO(cli("check", str(SOCKEYE), "--format", "csv").stdout)))
    groups = [r for r in rows if r["kind"] == "group"]
    total = [r for r in rows if r["kind"] == "total"]
    assert sum(int(r["found_count"]) for r in groups) == truth["sockeye_logged_parameter_count"]
    assert total[0]["status"] == "verified" and int(total[0]["delta"]) == 0
    bad = list(csv.DictReader(io.StringIO(cli(
        "check", str(COVERAGE), "--set", "rnn_attention_coverage_num_hidden=3",
        "--format", "csv").stdout)))
    wrong = {r["name"]: (json.loads(r["expected"]), json.loads(r["found"]))
             for r in bad if r["kind"] == "tensor"}
    assert wrong["cov_grui2h_weight"] == ([9, 33], [6, 33])


def test_diff_csv_one_row_per_tensor(cli):
    pair = load_truth(HPARAM / "pair.truth.json") if (HPARAM / "pair.truth.json").exists() \
        else None
    proc = cli("diff", str(HPARAM / "ff32.pt"), str(HPARAM / "ff48.safetensors"), "--all",
               "--format", "csv")
    assert proc.returncode == 1
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    reshaped = [r for r in rows if r["op"] == "reshaped"]
    assert len(reshaped) == 12  # 4 layers x ff.0.weight, ff.0.bias, ff.2.weight
    assert all(r["values_compared"] == "no" for r in rows)
    if pair is not None:
        assert len(rows) == len(pair["tensors"])


def test_diff_without_values_says_not_compared(cli):
    out = cli("diff", str(FINETUNE / "before.pt"), str(FINETUNE / "after.pt")).stdout
    assert "unchanged" not in out and "values not compared" in out
    assert "35 of the same shape and dtype (values not compared)" in out


def test_diff_match_role_and_expand(cli):
    a, b = str(HPARAM / "ff32.pt"), str(HPARAM / "ff48.safetensors")
    doc = json.loads(cli("diff", a, b, "--format", "json", "--match", r"layers\.0\.").stdout)
    assert doc["filter"]["kept"] < doc["filter"]["of"]
    assert {t["name"] for t in doc["tensors"]} and all(
        "layers.0." in t["name"] for t in doc["tensors"])
    assert doc["summary"]["reshaped"] == 3
    collapsed = json.loads(cli("diff", a, b, "--format", "json").stdout)["collapsed"]
    assert collapsed and not json.loads(
        cli("diff", a, b, "--format", "json", "--expand").stdout)["collapsed"]
    text = cli("diff", a, b, "--expand").stdout
    assert "#" not in text.split("groups")[0]
    # a Lightning checkpoint against itself: --role parameter leaves the optimizer rows out
    both = json.loads(cli("diff", str(LIGHTNING), str(LIGHTNING), "--all", "--format",
                          "json").stdout)
    params = json.loads(cli("diff", str(LIGHTNING), str(LIGHTNING), "--all", "--role",
                            "parameter", "--format", "json").stdout)
    roles = {t["a"]["role"] for t in both["tensors"]}
    assert "optimizer" in roles
    assert {t["a"]["role"] for t in params["tensors"]} == {"parameter"}


def test_collapse_merges_only_equal_results():
    """Twelve layers whose values changed: rows merge only where the results are equal."""
    from inspector.adapters.model import Role, TensorEntry
    from inspector.diffing import CHANGED, TensorDiff, collapse
    from inspector.values import ValueStats

    def entry(name: str) -> TensorEntry:
        return TensorEntry(stored_name=name, name=name, shape=(4, 4), dtype="float32",
                           role=Role.PARAMETER, nbytes=64)

    same = ValueStats(False, 0.5, 0.1, 0.99, True)
    other = ValueStats(False, 0.0234, 0.01, 0.999, True)
    records = []
    for i in range(4):
        name = f"layers.{i}.input_layernorm.weight"
        stats = other if i == 3 else same
        records.append(TensorDiff(name, CHANGED, entry(name), entry(name), "name", stats))
    rows = collapse(records)
    assert [(r.pattern, r.count) for r in rows] == [
        ("layers.#.input_layernorm.weight", 3), ("layers.3.input_layernorm.weight", 1)]
    assert {m.values for m in rows[0].members} == {same}
    # identical contents are one result, whatever rounding did to the cosine
    ident = [ValueStats(True, 0.0, 0.0, c, False) for c in (1.0, 0.9999999999999998)]
    records = [TensorDiff(f"layers.{i}.w", "unchanged", entry(f"layers.{i}.w"),
                          entry(f"layers.{i}.w"), "name", v) for i, v in enumerate(ident)]
    assert [(r.pattern, r.count) for r in collapse(records)] == [("layers.#.w", 2)]


def test_api_mapping_repr_totals_errors(tmp_path):
    import inspector
    from inspector.adapters.errors import FormatError, InspectorError, NotFoundError

    truth = load_truth(FIXTURES / "dirs" / "hf_llama_bin.truth.json")
    ckpt = inspector.load(FIXTURES / "dirs" / "hf_llama_bin")
    by_name = {t["stored_name"]: t for t in truth["tensors"]}
    assert list(ckpt["lm_head.weight"].shape) == by_name["lm_head.weight"]["shape"]
    assert len(ckpt) == truth["tensor_count"] and set(ckpt) <= set(by_name)
    first = truth["tensors"][0]["stored_name"]
    assert first in ckpt and ckpt.get(first) is ckpt[first]
    text = repr(ckpt)
    assert "\n" not in text and len(text) < 200
    assert f"{truth['tensor_count']} tensors" in text
    assert ckpt.totals()["parameters"] == truth["parameter_count"]
    assert set(ckpt.totals()) == {"parameters", "buffers", "optimizer", "other", "all"}
    listed = inspector.listing(ckpt)["totals"]
    assert {k: listed[k] for k in ckpt.totals()} == ckpt.totals()
    with pytest.raises(TypeError):
        ckpt["x"] = None  # read-only

    gpt2 = load_truth(FIXTURES / "dirs" / "hf_gpt2_safetensors.truth.json")
    tied = inspector.load(FIXTURES / "dirs" / "hf_gpt2_safetensors")
    for dropped in gpt2["dropped_tied"]:  # save_pretrained did not store it
        with pytest.raises(KeyError):
            tied[dropped]

    with pytest.raises(FileNotFoundError) as e:
        inspector.load(tmp_path / "nope.pt")
    assert isinstance(e.value, NotFoundError) and isinstance(e.value, InspectorError)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(ValueError) as e:
        inspector.load(bad)
    assert isinstance(e.value, (FormatError, InspectorError))


# architecture hyperparameters that are not config keys a listing would show: closed-form
# letters, whole configs, provenance, name scopes, and names of stored buffers the formulas read
NOT_CONFIG_KEYS = {"e", "h", "v", "x", "config", "model_config", "module", "name", "prefix",
                   "keras_version", "sockeye_version", "transformers_version", "pad_token_id",
                   "length_task_weight",
                   "_remove_final_layer_norm", "rnn_cell_scope", "stored_shapes",
                   "naming", "te_norms", "stacked", "stage_copy"}  # megatron: from the names


def test_shape_keys_follow_the_formula_engine():
    """The listing's shape-determining keys are every hyperparameter name and alias the
    built-in architectures read (so a new architecture's names show up by default)."""
    from inspector.formulas import archs
    from inspector.reports.hyperparameters import FORMULA_KEYS

    names = set()
    for a in archs():
        names.update(h.name for h in a.hparams)
        names.update(a.aliases)
    names = {n for n in names if not n.startswith("saved_")} - NOT_CONFIG_KEYS
    assert names - FORMULA_KEYS == set()
    assert FORMULA_KEYS - names == set()  # nothing stale either
