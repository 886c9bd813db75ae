"""Grouping schemes: the engine, the scheme files, and the CLI's --scheme/--groups/--per-layer."""

from __future__ import annotations

import csv
import io
import json

import pytest

import inspector
from inspector import grouping
from inspector.adapters.errors import UsageError

from conftest import FIXTURES
from hostile import assert_clean_error

GOOD = """\
name: mine
description: two groups
detect:
  - {match: '^enc\\.', score: 3}
groups:
  - name: encoder
    match: '^enc\\.(?:l(?P<layer>\\d+)\\.)?'
  - name: "{top}"
    match: '^(?P<top>[^.]+)\\.'
"""


def write(tmp_path, text: str, name: str = "scheme.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_user_scheme_assign_templates_and_other(tmp_path):
    s = grouping.get_scheme(str(write(tmp_path, GOOD)))
    assert s.name == "mine" and s.source.endswith("scheme.yaml")
    a = s.assign("enc.l3.weight")
    assert (a.group, a.layer, a.key) == ("encoder", "3", "enc.l#.weight")
    assert s.assign("dec.bias").group == "dec"
    assert s.assign("bare").group == "other"
    # order: rule order, templated groups by first appearance, other last
    counts = grouping.group_counts(s, [("z.a", 1), ("bare", 7), ("enc.w", 2), ("y.b", 3)])
    assert list(counts.items()) == [("encoder", 2), ("z", 1), ("y", 3), ("other", 7)]


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (GOOD.replace("'^enc\\.(?:l", "'^enc\\.((?:l"), ["bad regex", "group 'encoder'", "line 6"]),
        (GOOD.replace("  - name: encoder\n", "  - nme: encoder\n"), ["missing field(s) name", "line 6"]),
        (GOOD.replace("groups:", "grups:"), ["missing field(s) groups"]),
        (GOOD.replace('"{top}"', '"{tpo}"'), ["lacks the capture(s) ['tpo']", "group '{tpo}'"]),
        (GOOD.replace("score: 3", "score: high"), ["score must be an integer", "line 4"]),
        (GOOD.replace("match: '^enc", "matc: '^enc", 1), ["unknown field(s) matc", "line 4"]),
        ("name: x\ngroups: [\n", ["not valid YAML", "line"]),
        (GOOD.replace("'^(?P<top>", "'${depth}(?P<top>"), ["undeclared parameter(s) ['depth']"]),
    ],
)
def test_bad_scheme_files_name_file_scheme_group_line(tmp_path, text, needles):
    p = write(tmp_path, text)
    with pytest.raises(UsageError) as e:
        grouping.get_scheme(str(p))
    msg = str(e.value)
    assert str(p) in msg and "\n" not in msg
    for n in needles:
        assert n in msg, (n, msg)


def test_unknown_scheme_and_parameter_range():
    with pytest.raises(UsageError, match="unknown scheme 'nope'.*sockeye-rnn"):
        grouping.get_scheme("nope")
    with pytest.raises(UsageError, match="depth must be an integer in"):
        grouping.get_scheme("prefix", {"depth": 0})
    with pytest.raises(UsageError, match="takes no parameter"):
        grouping.get_scheme("sockeye-rnn", {"depth": 2})


def test_every_builtin_loads_and_has_a_description():
    names = grouping.builtin_names()
    assert {"sockeye-rnn", "sockeye-transformer", "keras", "torch-rnn", "transformer-lm",
            "prefix"} <= set(names)
    for n in names:
        s = grouping.get_scheme(n)
        assert s.name == n and s.description and s.groups


def test_prefix_depth_like_fvcore():
    # fvcore's parameter_count_table(max_depth=N) rows for seed 001's TransformerLM, by hand:
    # depth 1 = top-level modules, depth 2 = their children; a tensor name itself is never a row.
    names = [t.name for t in inspector.load(FIXTURES / "torch/seed001_transformer_lm.pt").tensors]
    items = [(n, 1) for n in names]
    assert list(grouping.group_counts(grouping.get_scheme("prefix"), items)) == [
        "word_to_embedding", "pos_to_embedding", "model", "lm_head"]
    d2 = grouping.group_counts(grouping.get_scheme("prefix", {"depth": 2}), items)
    assert list(d2) == ["word_to_embedding", "pos_to_embedding", "model.self_attention",
                        "model.mlp", "model.norm_after_attn", "model.norm_after_mlp", "lm_head"]
    assert d2["model.self_attention"] == 8
    # underscore names (Sockeye 1 / MXNet) split at underscores
    s = grouping.get_scheme("prefix", {"depth": 2})
    assert s.assign("decoder_rnn_l0_i2h_weight").group == "decoder_rnn"
    assert s.assign("weight").group == "weight" and s.assign("").group == "(unnamed)"


def test_choose_scheme_ties_are_deterministic(tmp_path):
    names = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert grouping.choose_scheme(names).name == "torch-rnn"
    assert grouping.choose_scheme(["foo.bar"]).name == "prefix"
    assert grouping.choose_scheme([]).name == "prefix"
    assert grouping.choose_scheme(list(reversed(names))).name == "torch-rnn"


# -- transformer-lm on the usual Hugging Face naming (names as those libraries write them) --

HF_NAMES = {
    "gpt2": {
        "transformer.wte.weight": "token_embedding", "transformer.wpe.weight": "position_embedding",
        "transformer.h.0.ln_1.weight": "norms", "transformer.h.0.attn.c_attn.weight": "attention",
        "transformer.h.0.attn.c_proj.bias": "attention", "transformer.h.0.ln_2.bias": "norms",
        "transformer.h.0.mlp.c_fc.weight": "mlp", "transformer.h.0.mlp.c_proj.weight": "mlp",
        "transformer.ln_f.weight": "norms", "lm_head.weight": "lm_head",
    },
    "bert": {
        "bert.embeddings.word_embeddings.weight": "token_embedding",
        "bert.embeddings.position_embeddings.weight": "position_embedding",
        "bert.embeddings.token_type_embeddings.weight": "token_type_embedding",
        "bert.embeddings.LayerNorm.weight": "norms",
        "bert.encoder.layer.0.attention.self.query.weight": "attention",
        "bert.encoder.layer.0.attention.output.dense.weight": "attention",
        "bert.encoder.layer.0.attention.output.LayerNorm.bias": "norms",
        "bert.encoder.layer.0.intermediate.dense.weight": "mlp",
        "bert.encoder.layer.0.output.dense.weight": "mlp",
        "bert.encoder.layer.0.output.LayerNorm.weight": "norms",
        "bert.pooler.dense.weight": "pooler", "cls.predictions.decoder.weight": "lm_head",
    },
    "llama": {
        "model.embed_tokens.weight": "token_embedding",
        "model.layers.0.self_attn.q_proj.weight": "attention",
        "model.layers.0.self_attn.o_proj.weight": "attention",
        "model.layers.0.mlp.gate_proj.weight": "mlp", "model.layers.0.mlp.down_proj.weight": "mlp",
        "model.layers.0.input_layernorm.weight": "norms",
        "model.layers.0.post_attention_layernorm.weight": "norms",
        "model.norm.weight": "norms", "lm_head.weight": "lm_head",
    },
    "t5": {
        "shared.weight": "token_embedding",
        "encoder.block.0.layer.0.SelfAttention.q.weight": "attention",
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": "attention",
        "encoder.block.0.layer.0.layer_norm.weight": "norms",
        "encoder.block.0.layer.1.DenseReluDense.wi.weight": "mlp",
        "decoder.block.0.layer.1.EncDecAttention.k.weight": "attention",
        "decoder.block.0.layer.2.DenseReluDense.wo.weight": "mlp",
        "encoder.final_layer_norm.weight": "norms", "lm_head.weight": "lm_head",
    },
}


@pytest.mark.parametrize("family", sorted(HF_NAMES))
def test_transformer_lm_on_common_lm_naming(family):
    names = HF_NAMES[family]
    s = grouping.choose_scheme(list(names))
    assert s.name == "transformer-lm"
    assert {n: s.assign(n).group for n in names} == names
    layered = [n for n in names if ".0." in n and s.assign(n).group in ("attention", "mlp")]
    assert all(s.assign(n).layer == "0" for n in layered)
    if family == "t5":
        assert s.assign("decoder.block.0.layer.1.EncDecAttention.k.weight").block == "decoder"


# -- the CLI --


def test_show_groups_json_csv_markdown(cli):
    path = str(FIXTURES / "sockeye/sockeye1_rnn_gru_l2-2_e8-6_h16_dot")
    doc = json.loads(cli("show", path, "--format", "json").stdout)
    assert doc["scheme"]["name"] == "sockeye-rnn" and doc["scheme"]["auto"] is True
    assert all("group" in t for t in doc["tensors"])
    g = {x["name"]: x for x in doc["groups"]}
    assert set(g["decoder_lx"]) >= {"name", "tensors", "parameters", "bytes", "share", "layers"}
    assert sum(x["parameters"] for x in doc["groups"]) == doc["totals"]["parameters"] == 7818
    rows = list(csv.DictReader(io.StringIO(cli("show", path, "--groups", "--format", "csv").stdout)))
    assert [r["group"] for r in rows] == [x["name"] for x in doc["groups"]]
    md = cli("show", path, "--per-layer", "--format", "markdown").stdout
    assert "| decoder_lx" in md and "layers.1" in md
    table = cli("show", path).stdout
    header = next(line for line in table.splitlines() if line.startswith("name"))
    assert header.split()[-1] == "group"


def test_show_scheme_file_and_errors(tmp_path, cli):
    path = str(FIXTURES / "torch/lstm_bidir.pt")
    p = write(tmp_path, GOOD)
    doc = json.loads(cli("show", path, "--scheme", str(p), "--format", "json").stdout)
    assert doc["scheme"]["name"] == "mine" and doc["scheme"]["auto"] is False
    assert {g["name"] for g in doc["groups"]} == {"other"}
    bad = write(tmp_path, GOOD.replace("'^enc\\.(?:l", "'^enc\\.((?:l"), "bad.yaml")
    assert_clean_error(cli("show", path, "--scheme", str(bad)), str(bad), "bad regex", "line 6")
    assert_clean_error(cli("show", path, "--scheme", "nope"), "nope", "unknown scheme")


def test_schemes_verb(cli):
    proc = cli("schemes")
    assert proc.returncode == 0
    for n in grouping.builtin_names():
        assert n in proc.stdout
    one = cli("schemes", "sockeye-rnn")
    assert one.returncode == 0 and "enc2decinit" in one.stdout and "detect" in one.stdout


def test_per_layer_collapses_identical_layers():
    ckpt = inspector.load(FIXTURES / "sockeye/sockeye1_transformer_l2-2_m16_h2_ff32")
    groups = {g["name"]: g for g in inspector.listing(ckpt)["groups"]}
    (row,) = groups["encoder_self_attention"]["repeats"]
    assert (row["label"], row["layers"], row["count"]) == ("layers.#", ["0", "1"], 2)
    # transformer model size 16: fused qkv (48, 16) + output (16, 16), no biases in Sockeye 1
    assert row["parameters"] == 48 * 16 + 16 * 16
    rnn = inspector.listing(inspector.load(FIXTURES / "sockeye/sockeye1_rnn_lstm_l3-2_e8-6_h32_bilinear_init-avg"))
    dec = {g["name"]: g for g in rnn["groups"]}["decoder_lx"]
    # layer 0 takes embedding + attention context (input feeding), layer 1 does not: no collapse
    assert [r["label"] for r in dec["repeats"]] == ["layers.0", "layers.1"]


def test_python_tags_in_a_scheme_file_are_inert(tmp_path):
    """A scheme file goes through the project's inert YAML loader: the tag builds nothing."""
    marker = tmp_path / "pwned"
    bad = tmp_path / "evil.yaml"
    bad.write_text(
        "name: evil\ndescription: d\n"
        f"groups: !!python/object/apply:os.system ['touch {marker}']\n"
    )
    with pytest.raises(UsageError):
        grouping.get_scheme(str(bad))
    assert not marker.exists()
