"""``inspector check``, ``predict`` and ``archs`` as a user runs them (exit codes, output)."""

from __future__ import annotations

import json

from tests.conftest import FIXTURES, load_truth, run_cli

MLP = FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp"
SEED000 = ["--arch", "sockeye-rnn", "--set", "num_layers=2:2", "--set", "num_embed=512:512",
           "--set", "rnn_num_hidden=512", "--set", "rnn_attention_type=dot",
           "--set", "source_vocab_size=49410", "--set", "target_vocab_size=42767"]


def test_check_passes_with_exit_0():
    r = run_cli("check", str(MLP))
    assert r.returncode == 0, r.stderr
    assert "total: found 6,182, predicted 6,182, delta 0: VERIFIED" in r.stdout


def test_check_json_flags_the_dependent_groups_and_exits_1():
    r = run_cli("check", str(MLP), "--set", "rnn_num_hidden=20", "--format", "json")
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert rep["schema"] == "inspector.check/1" and rep["status"] == "mismatch"
    assert rep["verdict"] == "mismatch" and rep["parts"] == [] and rep["findings"] == []
    assert rep["hyperparameters"]["rnn_num_hidden"] == {"value": 20, "source": "set", "used": True}
    bad = {g["name"] for g in rep["groups"] if g["status"] == "mismatch"}
    assert bad == {"enc2decinit", "hidden", "decoder_lx", "birnn", "io", "attention"}
    row = next(t for t in rep["tensors"] if t["name"] == "decoder_rnn_l0_i2h_weight")
    assert row == {"name": "decoder_rnn_l0_i2h_weight", "status": "wrong_shape",
                   "group": "decoder_lx", "expected": [80, 28], "found": [64, 24],
                   "op": "reshaped"}  # op: the comparison engine's word, shared with diff
    truth = load_truth(MLP / "params.best.truth.json")
    assert rep["totals"]["found"] == truth["sockeye_logged_parameter_count"]


def test_check_markdown_lists_wrong_tensors():
    r = run_cli("check", str(MLP), "--set", "target_vocab_size=30", "--format", "markdown")
    assert r.returncode == 1
    assert "| wrong_shape | target_output_bias" in r.stdout


def test_check_errors_exit_2():
    assert run_cli("check", str(MLP), "--set", "nonsense=1").returncode == 2
    assert run_cli("check", str(MLP), "--set", "rnn_num_hidden").returncode == 2
    r = run_cli("check", str(MLP), "--arch", "no-such-arch")
    assert r.returncode == 2 and "unknown architecture" in r.stderr
    gluon = FIXTURES / "mxnet" / "mxnet-1.9.1" / "gluon_save_parameters.params"
    r = run_cli("check", str(gluon), "--set", "num_layers=2")
    assert r.returncode == 2 and "--arch" in r.stderr


def test_predict_seed000_json():
    r = run_cli("predict", *SEED000, "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["total"] == 79_638_799
    assert len(rep["tensors"]) == 34
    shapes = {t["name"]: t["shape"] for t in rep["tensors"]}
    assert shapes["decoder_rnn_l0_i2h_weight"] == [2048, 1024]  # seed 000
    assert shapes["encoder_birnn_forward_l0_h2h_weight"] == [1024, 256]
    groups = {g["name"]: g["parameters"] for g in rep["groups"]}
    # seed 000's io group: 49410*512 + 42767*512 + 42767 + 42767*512
    assert groups["io"] == 69_134_095


def test_predict_formula():
    r = run_cli("predict", *SEED000, "--formula", "--symbol",
                "b=source_vocab_size,target_vocab_size@1", "--format", "json")
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)["formula"]
    assert f["total"].startswith("8*h^2*sn + 10*h^2*tn")
    assert "b*se" in f["total"] and "enc2decinit" in f["groups"]
    text = run_cli("predict", *SEED000, "--formula").stdout
    assert "total = " in text and "total: 79,638,799" in text


def test_archs_lists_hyperparameters_and_defaults():
    r = run_cli("archs")
    assert r.returncode == 0
    assert "sockeye-rnn" in r.stdout and "sockeye-transformer" in r.stdout
    one = run_cli("archs", "sockeye-rnn").stdout
    assert "rnn_attention_type" in one and "mlp" in one
    # the list is one line per architecture; the hyperparameters come with a name or --verbose
    from inspector.formulas import archs

    names = [a.name for a in archs()]
    assert "rnn_attention_type" not in r.stdout
    # (this process may have registered them in another order: other tests imported formulas)
    assert sorted(line.split()[0] for line in r.stdout.splitlines()[: len(names)]) == sorted(names)
    every = run_cli("archs", "--verbose").stdout
    assert all(h.name in every for a in archs() for h in a.hparams)


def test_check_shows_the_hyperparameters_the_formula_read():
    """The quickstart model's config holds Transformer and convolution options too; the formula
    for an RNN model reads none of them: they are listed with --verbose and in JSON only."""
    path = "fixtures/sockeye/sockeye1_rnn_lstm_l2-2_e8-8_h16_mlp_ctxgate_init-last_residual"
    plain = run_cli("check", path)
    verbose = run_cli("check", path, "--verbose")
    rep = json.loads(run_cli("check", path, "--format", "json").stdout)
    hp = rep["hyperparameters"]
    assert hp["rnn_num_hidden"]["used"] and hp["num_embed"]["used"]
    assert not hp["transformer_model_size"]["used"] and not hp["conv_embed_num_filters"]["used"]
    for name, h in hp.items():
        shown_plain = any(line.split()[:1] == [name] for line in plain.stdout.splitlines())
        shown_verbose = any(line.split()[:1] == [name] for line in verbose.stdout.splitlines())
        assert shown_verbose, name
        assert shown_plain == h["used"], name
    # changing an unused hyperparameter leaves the verdict alone; a used one does not
    unused = run_cli("check", path, "--set", "transformer_model_size=64:64")
    used = run_cli("check", path, "--set", "rnn_num_hidden=20")
    assert (unused.returncode, used.returncode) == (0, 1)
    assert "transformer_model_size" in unused.stdout  # a value given with --set is shown
