"""One parameter count, the producer's: ``show``, ``check`` and the value statistics agree with
the count the producer itself reports, and with each other.

The producers' facts come from the truth files their generators recorded (transformers'
``num_parameters()``, OpenNMT-py's logged ``* number of parameters``, the roles of the model
OpenNMT-py rebuilds from the checkpoint, torch's optimizer ``param_groups``); nothing here is
computed by the tool for itself.
"""

from __future__ import annotations

import json
import math

import pytest

from inspector.adapters.errors import InspectorError
from inspector.adapters.model import Role
from inspector.adapters.registry import load
from inspector.adapters.roles import stored_role
from inspector.formulas.check import MISMATCH, check
from inspector.formulas.structure import training_state
from inspector.reports.listing import listing

from conftest import FIXTURES, load_truth, run_cli, truth_files

ONMT = sorted((FIXTURES / "onmt").glob("*.pt"))
HF = sorted(p.parent for p in (FIXTURES / "hf").rglob("model.safetensors.truth.json"))
OPTIMIZERS = sorted((FIXTURES / "optimizer").glob("*.ckpt"))
FAIRSEQ = sorted((FIXTURES / "fairseq").glob("*.pt"))


def _hf_stored_count(truth: dict) -> int:
    """``num_parameters()`` less the parameters ``save_pretrained`` does not write (Marian's and
    FSMT's sinusoidal tables, rebuilt at load), with their shapes from the producer's
    ``state_dict``."""
    shapes = {t["name"]: t["shape"] for t in truth["state_dict"]}
    unsaved = sum(math.prod(shapes[n]) for n in truth["unsaved_parameters"])
    return truth["parameter_count"] - unsaved


def _ids(paths):
    return [str(p.relative_to(FIXTURES)) for p in paths]


@pytest.mark.parametrize("path", HF, ids=_ids(HF))
def test_hf_show_and_check_count_what_transformers_counts(path):
    truth = load_truth(path / "model.safetensors.truth.json")
    ckpt = load(path)
    shown = listing(ckpt)["totals"]["parameters"]
    result = check(ckpt)
    assert shown == result.found_total == _hf_stored_count(truth)
    assert result.verdict != MISMATCH
    # the roles are the producer's: its persistent buffers are buffers, nothing else is
    roles = {t.stored_name: t.role for t in ckpt.tensors}
    assert {n for n, r in roles.items() if r is Role.BUFFER} == {
        t["stored_name"] for t in truth["tensors"] if t["role"] == "buffer"}
    assert listing(ckpt)["totals"]["buffers"] == truth["persistent_buffer_count"]


def test_bert_position_ids_are_a_buffer_in_show_and_check_output():
    """Issue 29.1 as a user sees it: the text of ``show`` and ``check`` on the BERT that
    transformers 4.30 saved with its ``position_ids`` buffer give transformers' count."""
    path = FIXTURES / "hf" / "v4" / "bert_mlm"
    want = load_truth(path / "model.safetensors.truth.json")["parameter_count"]
    shown = json.loads(run_cli("show", str(path), "--format", "json").stdout)
    checked = json.loads(run_cli("check", str(path), "--format", "json").stdout)
    rows = {t["name"]: t for t in shown["tensors"]}
    assert rows["bert.embeddings.position_ids"]["role"] == "buffer"
    assert shown["totals"]["parameters"] == checked["totals"]["found"] == want == 7326


@pytest.mark.parametrize("path", ONMT, ids=_ids(ONMT))
def test_onmt_counts_and_roles_are_opennmt_pys(path):
    truth = load_truth(path.with_name(path.name + ".truth.json"))
    ckpt = load(path)
    got = {t.stored_name: t.role.value for t in ckpt.tensors}
    assert got == {t["stored_name"]: t["role"] for t in truth["tensors"]}
    totals = listing(ckpt)["totals"]
    result = check(ckpt)
    assert totals["parameters"] == result.found_total == truth["parameter_count"]
    assert ckpt.totals()["parameters"] == truth["parameter_count"]  # the Python API
    assert truth["parameter_count"] == sum(truth["logged"].values())
    assert totals["buffers"] == truth["buffer_count"]


@pytest.mark.parametrize("path", ONMT, ids=_ids(ONMT))
def test_onmt_checkpoints_are_never_mismatch(path):
    """The structural audit lines the optimizer's state up with every module the checkpoint
    stores, the separately stored generator included: a valid file has no finding."""
    result = check(load(path))
    assert result.verdict != MISMATCH
    assert result.findings == []
    truth = load_truth(path.with_name(path.name + ".truth.json"))
    # Adam keeps state for the parameters that got a gradient (not coverage's linear_cover)
    assert result.checked["optimizer_slots"] == len(truth["optimizer_state_keys"])


@pytest.mark.parametrize("path", ONMT, ids=_ids(ONMT))
def test_onmt_optimizer_state_is_named_after_the_producers_parameter_order(path):
    """State ``N`` belongs to the producer's ``N``-th parameter (``model.parameters()`` order,
    the generator last): its moments have that parameter's shape."""
    truth = load_truth(path.with_name(path.name + ".truth.json"))
    shapes = {t["stored_name"].removeprefix("model."): t["shape"] for t in truth["tensors"]
              if t["role"] == "parameter"}
    order = truth["optimizer_parameters"]
    assert order[-1].startswith("generator.")
    ckpt = load(path)
    seen = 0
    for t in ckpt.tensors:
        parts = t.name.split(".")
        if t.role is Role.OPTIMIZER and parts[-1] in ("exp_avg", "exp_avg_sq"):
            name = order[int(parts[-2])]
            assert list(t.shape) == shapes[name], (t.name, name)
            seen += 1
    assert seen == 2 * len(truth["optimizer_state_keys"])


def test_a_wrong_optimizer_moment_is_still_a_mismatch():
    """Aligning across modules never hides a real fault: a moment with no parameter's shape."""
    ckpt = load(ONMT[0])
    bad = next(i for i, t in enumerate(ckpt.tensors) if t.name.endswith(".exp_avg"))
    ckpt.tensors[bad] = ckpt.tensors[bad].replace(shape=(7, 5, 3))
    assert check(ckpt).verdict == MISMATCH


def test_state_of_a_module_stored_apart_is_not_flagged():
    """A toolkit whose separately stored module is not known as part of the model: its
    optimizer state has that module's shapes, which is incomplete, never a mismatch."""
    ckpt = load(FIXTURES / "onmt" / "rnn.pt")
    ckpt.tensors = [t.replace(role=Role.OTHER) if t.name.startswith("generator.") else t
                    for t in ckpt.tensors]
    findings, notes, _ = training_state(ckpt)  # (the onmt-rnn formula misses the generator)
    assert findings == []
    assert any("outside the model" in n for n in notes)


@pytest.mark.parametrize("path", OPTIMIZERS, ids=_ids(OPTIMIZERS))
def test_a_bare_optimizer_state_dict_is_optimizer_state(path):
    truth = load_truth(path.with_name(path.name + ".truth.json"))
    ckpt = load(path)
    assert {t.stored_name for t in ckpt.tensors} == {t["stored_name"] for t in truth["tensors"]}
    assert {t.role for t in ckpt.tensors} == {Role.OPTIMIZER}
    assert ckpt.metadata["container"] == "optimizer"
    totals = listing(ckpt)["totals"]
    assert totals["parameters"] == truth["parameter_count"] == 0
    for t in ckpt.tensors:  # each moment has its parameter's shape (param_groups order)
        parts = t.stored_name.split(".")
        if parts[-1] in ("exp_avg", "exp_avg_sq", "momentum_buffer"):
            assert list(t.shape) == truth["state_parameter_shapes"][parts[1]]


def test_stats_group_norms_leave_buffers_and_index_tensors_out():
    """The L2 norm per group (``stats``, the HTML report) is over parameters only: BERT's
    int64 ``position_ids`` is in no group."""
    from inspector import value_stats as stats

    path = FIXTURES / "hf" / "v4" / "bert_mlm"
    result = stats.file_stats(path)
    params = [r for r in result.tensors if r.entry.role is Role.PARAMETER]
    assert len(params) < len(result.tensors)  # the buffer was read, as a tensor
    assert sum(g.tensors for g in result.groups) == len(params)
    report = stats.report(result)
    total = sum(g["tensors"] for g in report["groups"])
    assert total == len(params)


@pytest.mark.parametrize(("name", "ndim", "dtype", "role"), [
    ("bert.embeddings.position_ids", 2, "int64", Role.BUFFER),
    ("encoder.embeddings.make_embedding.pe.pe", 3, "float32", Role.BUFFER),
    ("encoder.version", 1, "float32", Role.BUFFER),
    ("decoder.embed_positions._float_tensor", 1, "float32", Role.BUFFER),
    ("final_logits_bias", 2, "float16", Role.BUFFER),
    ("layers.0.attention.bias", 4, "bool", Role.BUFFER),
    ("model.layers.0.self_attn.q_proj.qweight", 2, "int32", Role.BUFFER),  # GPTQ buffers
    ("model.layers.0.mlp.down_proj.weight", 2, "int8", Role.PARAMETER),  # bitsandbytes Int8Params
    ("h.0.attn.bias", 1, "float32", Role.PARAMETER),  # a real attention bias, not GPT-2's mask
    ("encoder.pe.weight", 2, "float32", Role.PARAMETER),
])
def test_stored_role_rules(name, ndim, dtype, role):
    assert stored_role(name, ndim, dtype) is role


def test_html_report_norm_chart_has_parameters_only(tmp_path):
    """The HTML report of the same BERT: its "L2 norm per group" chart has no bar for the
    integer ``position_ids`` (the group it alone would make), and the listing and the check on
    the page give transformers' count."""
    path = FIXTURES / "hf" / "v4" / "bert_mlm"
    out = tmp_path / "r.html"
    assert run_cli("report", "--values", str(path), "-o", str(out)).returncode == 0
    html = out.read_text(encoding="utf-8")
    chart = html[html.index("L2 norm per group"):html.index("L2 norm per layer")]
    assert "norms" in chart and 'id="norms-chart-0"' in chart
    assert ">other<" not in chart and "other:" not in chart
    assert '"parameters": 7326, "buffers": 40' in html
    assert '"found": 7326' in html


# every fixture with a producer's truth (value and security truths describe other things)
TARGETS = sorted({p.with_name(p.name[: -len(".truth.json")]) for p in truth_files()
                  if p.relative_to(FIXTURES).parts[0] not in ("security", "stats",
                                                              "code_config")})


@pytest.mark.parametrize("path", TARGETS, ids=_ids(TARGETS))
def test_show_and_check_give_one_parameter_count(path):
    """For every fixture in the repository the listing's parameters are the check's found
    total, and no valid fixture is MISMATCH."""
    if not path.exists():
        pytest.skip(f"{path.name}: the truth describes several files")
    try:
        ckpt = load(path)
    except InspectorError as e:  # directories of look-alikes, several checkpoints: refused
        pytest.skip(f"not one checkpoint: {e}")
    result = check(ckpt)
    assert listing(ckpt)["totals"]["parameters"] == result.found_total
    assert (result.verdict == MISMATCH) == (path.name in WRITTEN_INCONSISTENT), path.name


# fixtures whose generator wrote metadata that contradicts the tensors, on purpose
WRITTEN_INCONSISTENT = {
    "tiny_llama_wrong_ff.gguf",  # llama.feed_forward_length 96, ffn tensors 64 wide
    "gpt_wrong_ffn",  # Megatron args.ffn_hidden_size 48, linear_fc1/fc2 64 wide
}


@pytest.mark.parametrize("path", ONMT, ids=_ids(ONMT))
def test_onmt_groups_cover_the_producers_parameters(path):
    """The ``opennmt-py`` scheme is chosen and no parameter OpenNMT-py counts falls into a
    catch-all: every group is one of the scheme's own, the generator is its own group."""
    truth = load_truth(path.with_name(path.name + ".truth.json"))
    report = listing(load(path))
    assert report["scheme"]["name"] == "opennmt-py"
    groups = {g["name"]: g for g in report["groups"]}
    assert "other" not in groups
    assert sum(g["parameters"] for g in groups.values()) == truth["parameter_count"]
    assert {t["group"] for t in report["tensors"] if t["name"].startswith("generator.")} == {
        "generator"}


@pytest.mark.parametrize("path", FAIRSEQ, ids=_ids(FAIRSEQ))
def test_fairseq_counts_and_roles_are_fairseqs(path):
    """fairseq's ``version`` buffers are buffers, ``last_optimizer_state`` is optimizer state,
    and the count is the one ``fairseq-train`` logs; the file is never MISMATCH."""
    truth = load_truth(path.with_name(path.name + ".truth.json"))
    ckpt = load(path)
    got = {t.stored_name: t.role.value for t in ckpt.tensors}
    assert got == {t["stored_name"]: t["role"] for t in truth["tensors"]}
    totals = listing(ckpt)["totals"]
    result = check(ckpt)
    assert totals["parameters"] == result.found_total == truth["parameter_count"]
    assert totals["buffers"] == truth["buffer_count"]
    assert result.verdict != MISMATCH and result.findings == []
