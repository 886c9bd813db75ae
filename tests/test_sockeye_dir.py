"""Sockeye model directories: params via the right adapter, config/args parsed inertly."""

from __future__ import annotations

import json

import pytest

from inspector.adapters.errors import FormatError
from inspector.adapters.registry import load
from inspector.adapters.yaml_safe import TAG_KEY, load_yaml

from conftest import FIXTURES, sockeye_true_count

SOCKEYE = sorted(p for p in (FIXTURES / "sockeye").glob("sockeye*") if p.is_dir())


@pytest.mark.skipif(not SOCKEYE, reason="no Sockeye fixtures")
@pytest.mark.parametrize("model", SOCKEYE, ids=lambda p: p.name)
def test_model_dir_opens_with_hyperparameters(model):
    ck = load(model)
    assert ck.format == "sockeye"
    version = (model / "version").read_text().strip()
    assert ck.metadata["sockeye_version"] == version
    assert ck.metadata["flavour"].startswith(f"sockeye{version[0]}")
    hp = ck.hyperparameters
    assert hp["config"][TAG_KEY] == "!ModelConfig"
    # Vocabulary sizes are the number of entries in the vocab files Sockeye wrote.
    src = json.loads((model / "vocab.src.0.json").read_text())
    assert hp["vocab_sizes"]["source"][0] == len(src)
    assert hp["summary"]["num_layers"] == hp["args"]["num_layers"]
    # Sockeye 1/2 write params by mx.nd.save; the listing is the params file's.
    assert ck.tensors == load(model / "params.best").tensors


def test_python_tags_are_not_constructed(tmp_path):
    marker = tmp_path / "pwned"
    p = tmp_path / "config"
    p.write_text(
        "!ModelConfig\n"
        "shape: !!python/tuple [1, 2]\n"
        f"evil: !!python/object/apply:os.system ['touch {marker}']\n"
        "obj: !!python/object:collections.OrderedDict {a: 1}\n"
        "name: !!python/name:os.system ''\n"
    )
    data = load_yaml(p)
    assert not marker.exists()
    assert data[TAG_KEY] == "!ModelConfig"
    assert data["shape"] == [1, 2]
    assert data["evil"] == [f"touch {marker}"]
    assert data["obj"] == {TAG_KEY: "tag:yaml.org,2002:python/object:collections.OrderedDict", "a": 1}


def test_alias_bomb_is_refused(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
        prev = name
    p = tmp_path / "config"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match="expands to more than"):
        load_yaml(p)


def test_broken_yaml_is_a_format_error(tmp_path):
    p = tmp_path / "config"
    p.write_text("a: [1, 2\n")
    with pytest.raises(FormatError, match="not valid YAML"):
        load_yaml(p)


def _logged(model):
    truth = json.loads((model / "params.best.truth.json").read_text())
    return truth.get("sockeye_logged_parameter_count"), truth.get("sockeye_log_line")


@pytest.mark.skipif(not SOCKEYE, reason="no Sockeye fixtures")
@pytest.mark.parametrize("model", SOCKEYE, ids=lambda p: p.name)
def test_parameter_total_equals_sockeyes_own_log_line(model):
    """Sockeye logs 'Total # of parameters: N' (1.x) / '# of parameters: N' (2.x, 3.x) when it trains
    (Sockeye 2's length-task models: the log leaves out the deferred-shape weights; see
    ``sockeye_true_count``)."""
    logged, line = _logged(model)
    assert logged is not None and str(logged) in line
    truth = json.loads((model / "params.best.truth.json").read_text())
    assert load(model).totals()["parameters"] == sockeye_true_count(truth)
