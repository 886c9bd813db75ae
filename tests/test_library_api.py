"""The verbs as library functions (``inspector.check/diff/scan/stats/predict/budget``): each
result's ``to_dict()`` is exactly what ``inspector VERB --format json`` prints, on the bundled
fixtures, and the exit code is the CLI's; ``show``'s JSON is ``inspector.listing``'s report.

The CLI runs in-process here (``inspector.cli.main``: the same code a shell runs, without a
fresh interpreter per fixture); one test runs it as a subprocess too."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

import inspector
from inspector.cli import main

from conftest import FIXTURES, ROOT, run_cli, truth_files

CHECKPOINTS = sorted({p.with_name(p.name[: -len(".truth.json")]) for p in truth_files()}
                     - {p for p in FIXTURES.rglob("*") if p.suffix == ".json"})
CHECKPOINTS = [p for p in CHECKPOINTS if p.exists()]


def _cli_json(capsys, *argv: str) -> tuple[int, dict | None, str]:
    """(exit code, the JSON document printed or None, stderr) of ``inspector argv``."""
    capsys.readouterr()
    code = main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def _same(capsys, argv: list[str], call) -> object:
    """The CLI's JSON and exit code equal the function's ``to_dict()`` and ``exit_code``; an
    error is the same error (InspectorError, the same one line) both ways."""
    code, doc, err = _cli_json(capsys, *argv)
    try:
        result = call()
    except inspector.InspectorError as e:
        assert code == 2 and doc is None, (argv, code)
        assert err.strip() == f"inspector: {e}".strip() or str(e).split("\n")[0] in err, err
        return None
    assert doc == result.to_dict(), argv
    assert code == result.exit_code, argv
    assert doc["schema"] == result.schema
    return result


def test_dir_lists_the_public_names_only():
    names = dir(inspector)
    assert names == sorted(inspector.__all__)
    for verb in ("check", "diff", "scan", "stats", "predict", "budget", "load", "listing"):
        assert verb in names and callable(getattr(inspector, verb))
    for private in ("TYPE_CHECKING", "annotations", "import_module"):
        assert private not in names and not hasattr(inspector, private)


def test_a_submodule_import_does_not_shadow_a_verb():
    import inspector.budget_solver  # noqa: F401
    import inspector.diffing  # noqa: F401
    import inspector.value_stats  # noqa: F401

    assert callable(inspector.diff) and callable(inspector.stats) and callable(inspector.budget)


@pytest.mark.parametrize("path", CHECKPOINTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_check_and_show_equal_the_cli(capsys, path):
    rel = str(path)
    r = _same(capsys, ["check", rel], lambda: inspector.check(rel))
    if r is not None:
        assert r.verdict in ("verified", "mismatch", "incomplete", "unsafe")
        assert r.verdict in repr(r) and r._repr_html_().startswith(f"<div><p><strong>{r.verdict}")
    code, doc, _ = _cli_json(capsys, "show", rel)
    if code == 0:
        from inspector.reports import strict_json

        listed = inspector.listing(inspector.load(rel))
        assert doc == json.loads(strict_json.dumps(listed))


def test_check_options_reach_the_function(capsys):
    path = str(FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp")
    argv = ["check", path, "--arch", "sockeye-rnn", "--set", "rnn_num_hidden=32", "--strict"]
    r = _same(capsys, argv, lambda: inspector.check(path, arch="sockeye-rnn",
                                                    set={"rnn_num_hidden": "32"}, strict=True))
    assert r.verdict == "mismatch" and r.exit_code == 1
    assert r.to_dict()["hyperparameters"]["rnn_num_hidden"]["source"] == "set"


def test_scan_equals_the_cli_on_every_scan_fixture(capsys):
    paths = [str(FIXTURES), str(ROOT / "tests" / "corpus")]
    r = _same(capsys, ["scan", *paths], lambda: inspector.scan(paths))
    assert r.summary["files"] == len(r.to_dict()["files"]) > 100
    assert r.verdict == "dangerous" and r.exit_code == 1
    assert len(r.to_pandas()) == r.summary["files"]


def test_scan_record_by_record_as_scanned(tmp_path):
    seen = []
    r = inspector.scan(FIXTURES / "security", on_file=seen.append, jobs=2)
    assert seen == r.to_dict()["files"]
    # a whole pickled module of a user's class (whole_module_legacy.pt) is dangerous there
    assert r.verdict == "dangerous" and r.exit_code == 1


def test_scan_in_a_fresh_process():
    path = str(FIXTURES / "security")
    proc = run_cli("scan", path, "--format", "json")
    r = inspector.scan(path)
    assert json.loads(proc.stdout) == r.to_dict()
    assert proc.returncode == r.exit_code == 1


DIFFS = [
    ("torch_finetune/before.pt", "torch_finetune/after.pt", ["--values"]),
    ("torch_finetune/before.pt", "torch_finetune/after.pt", ["--all", "--expand"]),
    ("nan_inf/a.pt", "nan_inf/b.pt", ["--values", "--atol", "0.5"]),
    ("state_dict_vs_safetensors/zoo.pt", "state_dict_vs_safetensors/zoo.safetensors",
     ["--role", "parameter", "--match", "layers"]),
    ("hparam_ff/ff32.pt", "hparam_ff/ff48.safetensors", []),
    ("sockeye1_consecutive/params.00001", "sockeye1_consecutive/params.00002", ["--values"]),
    ("torch_finetune_bf16/before.bf16.safetensors", "torch_finetune_bf16/after.bf16.safetensors",
     ["--values", "--rtol", "0.01"]),
]


def _kwargs(options: list[str]) -> dict:
    out: dict = {}
    words = iter(options)
    for w in words:
        key = w[2:].replace("-", "_")
        if key in ("values", "all", "expand"):
            out[key] = True
        elif key in ("atol", "rtol"):
            out[key] = float(next(words))
        elif key == "role":
            out.setdefault("role", []).append(next(words))
        else:
            out[key] = next(words)
    return out


@pytest.mark.parametrize("a,b,options", DIFFS, ids=lambda x: str(x))
def test_diff_equals_the_cli(capsys, a, b, options):
    pa, pb = str(FIXTURES / "diff" / a), str(FIXTURES / "diff" / b)
    r = _same(capsys, ["diff", pa, pb, *options],
              lambda: inspector.diff(pa, pb, **_kwargs(options)))
    assert r.verdict in ("same", "different")
    assert len(r.to_pandas()) == len(r.to_dict()["tensors"])


def test_diff_takes_loaded_checkpoints(capsys):
    pa, pb = (str(FIXTURES / "diff" / "torch_finetune" / n) for n in ("before.pt", "after.pt"))
    r = _same(capsys, ["diff", pa, pb, "--values"],
              lambda: inspector.diff(inspector.load(pa), inspector.load(pb), values=True))
    assert r.different and r.summary["changed"] > 0


STATS = [
    ([FIXTURES / "stats" / "torch" / "lm_nan_zero.pt"], []),
    ([FIXTURES / "stats" / "torch" / "dtypes.safetensors"], ["--match", "^f"]),
    ([FIXTURES / "stats" / "keras" / "lstm_lm.h5"], ["--groups"]),
    ([FIXTURES / "stats" / "sockeye1_run"], []),
    ([FIXTURES / "stats" / "sockeye1_run" / f"params.0000{i}" for i in (1, 3)], []),
]


@pytest.mark.parametrize("paths,options", STATS, ids=lambda x: str(x)[-40:])
def test_stats_equals_the_cli(capsys, paths, options):
    names = [str(p) for p in paths]
    kwargs = {"groups": True} if "--groups" in options else \
        {"match": options[1]} if options else {}
    r = _same(capsys, ["stats", *names, *options], lambda: inspector.stats(names, **kwargs))
    assert r.verdict in ("error", "warning", "clean")
    assert len(r.to_pandas()) == len(r.rows()) > 0


def test_stats_nan_is_an_error_and_null_in_the_document():
    r = inspector.stats(FIXTURES / "stats" / "torch" / "lm_nan_zero.pt")
    assert r.verdict == "error" and r.exit_code == 1
    text = json.dumps(r.to_dict(), allow_nan=False)  # strict JSON, as the CLI writes it
    assert "nonfinite" in text


PREDICTS = [
    ("sockeye-rnn", ["num_layers=2:2", "num_embed=512:512", "rnn_num_hidden=512",
                     "rnn_attention_type=dot"], []),
    ("sockeye-rnn", ["rnn_attention_type=dot"], ["--formula"]),
    ("rau-transformer", ["vocab_size=64", "num_layers=3", "num_heads=4", "d_model=32",
                         "feedforward_size=64"], []),
]


@pytest.mark.parametrize("arch,sets,options", PREDICTS, ids=lambda x: str(x)[:30])
def test_predict_equals_the_cli(capsys, arch, sets, options):
    argv = ["predict", "--arch", arch, *[w for s in sets for w in ("--set", s)], *options]
    r = _same(capsys, argv, lambda: inspector.predict(arch, set=sets,
                                                      formula="--formula" in options))
    assert r.total == r.to_dict()["total"] > 0
    assert len(r.to_pandas()) == len(r.to_dict()["tensors"])


BUDGETS = [
    (["--arch", "rau-lstm", "--set", "vocab_size=64", "--set", "num_layers=3", "--target",
      "103360", "--solve", "hidden_units"],
     dict(arch="rau-lstm", set=["vocab_size=64", "num_layers=3"], target=103360,
          solve="hidden_units")),
    (["--compare", "--arch", "rau-lstm,rau-transformer", "--set", "vocab_size=64", "--set",
      "num_layers=3", "--set", "num_heads=4", "--tie", "feedforward_size=4*d_model",
      "--target", "100k", "--solve", "hidden_units,d_model", "--under"],
     dict(arch="rau-lstm,rau-transformer", set={"vocab_size": "64", "num_layers": "3",
                                                "num_heads": "4"},
          tie=["feedforward_size=4*d_model"], target="100k", solve=["hidden_units", "d_model"],
          under=True, compare=True)),
]


@pytest.mark.parametrize("argv,kwargs", BUDGETS, ids=["solve", "compare"])
def test_budget_equals_the_cli(capsys, argv, kwargs):
    kw = dict(kwargs)
    arch = kw.pop("arch")
    r = _same(capsys, ["budget", *argv], lambda: inspector.budget(arch, **kw))
    assert r.best and all(r.best.values())
    assert r.to_pandas()["total"].min() > 0


def test_results_are_immutable_and_copies_are_fresh():
    r = inspector.predict("sockeye-rnn", set=["rnn_attention_type=dot"])
    with pytest.raises(AttributeError):
        r.document = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.document["total"] = 0  # type: ignore[index]
    d = r.to_dict()
    d["total"] = -1
    assert r.to_dict()["total"] == r.total > 0


def test_errors_are_the_inspector_hierarchy(tmp_path):
    with pytest.raises(inspector.NotFoundError):
        inspector.scan(tmp_path / "missing")
    with pytest.raises(inspector.UsageError):
        inspector.budget("rau-lstm,rau-transformer", target=10, solve="hidden_units")
    with pytest.raises(inspector.UsageError):
        inspector.check(FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp",
                        set=["no-equals-sign"])
    evil = tmp_path / "evil.pkl"

    class Payload:
        def __reduce__(self):
            import os

            return (os.system, ("echo never run",))

    evil.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(inspector.UnsafeContentError):
        inspector.check(evil)
    assert inspector.scan(evil).verdict == "dangerous"


def test_render_is_the_cli_text(capsys):
    path = str(FIXTURES / "sockeye" / "sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp")
    capsys.readouterr()
    assert main(["check", path, "--format", "markdown"]) == 0
    assert capsys.readouterr().out == inspector.check(path).render("markdown")


def test_html_display_puts_the_verdict_first():
    r = inspector.scan(FIXTURES / "security")
    html = r._repr_html_()
    assert html.startswith("<div><p><strong>dangerous</strong>")
    assert html.count("<tr>") == min(20, r.summary["files"]) + 1
    assert "inspector.scan/1" in html and len(repr(r).splitlines()) == 1


def test_import_inspector_loads_no_verb_machinery():
    import subprocess
    import sys

    code = ("import sys, inspector; dir(inspector); "
            "print(sorted(m for m in sys.modules if m.startswith(('inspector.', 'dataclasses', "
            "'pandas', 'typing'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(ROOT), check=True).stdout
    assert json.loads(out.replace("'", '"')) in ([], ["inspector.adapters"])
