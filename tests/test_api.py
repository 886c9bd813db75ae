"""The Python API as a notebook user meets it: importable from the checkout, values as NumPy
arrays (memory-mapped where the bytes allow), a flat view of the hyperparameters, a rich display.

Ground truth: the value statistics the producers (torch, Keras) computed when they wrote the
fixtures under ``fixtures/stats`` and the HF config written by transformers."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import inspector

from conftest import FIXTURES, ROOT, load_truth

STATS_TRUTHS = sorted((FIXTURES / "stats").glob("*/*.truth.json"))


def _rows(truth: dict) -> dict:
    if "weights" in truth:
        return {w["path"]: w for w in truth["weights"]}
    return {t["stored_name"]: t for t in truth["tensors"]}


@pytest.mark.parametrize("truth_path", STATS_TRUTHS, ids=lambda p: p.parent.name + "/" + p.name)
@pytest.mark.parametrize("mmap", [True, False])
def test_get_tensor_gives_the_producers_values(truth_path, mmap):
    target = truth_path.with_name(truth_path.name[: -len(".truth.json")])
    ckpt = inspector.load(target)
    keras = "weights" in load_truth(truth_path)
    by_name = {(t.name if keras else t.stored_name): t for t in ckpt.tensors}
    for name, want in _rows(load_truth(truth_path)).items():
        entry = by_name[name]
        arr = inspector.get_tensor(ckpt, entry.stored_name, mmap=mmap)
        assert list(arr.shape) == list(want["shape"]), name
        s = want["stats"]
        assert arr.size == s["count"], name
        x = np.asarray(arr)
        if x.dtype.kind == "c" or x.dtype == np.bool_:
            continue
        x = x.astype(np.float64)
        assert int(np.isnan(x).sum()) == s.get("nan", 0), name
        finite = x[np.isfinite(x)]
        if finite.size and s.get("min") is not None and math.isfinite(s["min"]):
            assert finite.min() == pytest.approx(s["min"], rel=1e-6, abs=1e-12), name
            assert finite.max() == pytest.approx(s["max"], rel=1e-6, abs=1e-12), name


def test_a_plain_local_byte_range_is_memory_mapped():
    ckpt = inspector.load(FIXTURES / "dirs" / "hf_gpt2_safetensors")
    arr = inspector.get_tensor(ckpt, "transformer.wte.weight")
    assert isinstance(arr, np.memmap) and not arr.flags.writeable
    copy = inspector.get_tensor(ckpt, "transformer.wte.weight", mmap=False)
    assert not isinstance(copy, np.memmap) and np.array_equal(arr, copy)


def test_flat_hyperparameters_lift_the_producers_config():
    path = FIXTURES / "dirs" / "hf_gpt2_safetensors"
    config = json.loads((path / "config.json").read_text())
    ckpt = inspector.load(path)
    flat = ckpt.flat_hyperparameters
    for key in ("model_type", "n_embd", "n_layer", "vocab_size"):
        assert flat[key] == config[key]


def test_notebook_display_escapes_and_summarises(tmp_path):
    truth = load_truth(FIXTURES / "dirs" / "hf_gpt2_safetensors.truth.json")
    ckpt = inspector.load(FIXTURES / "dirs" / "hf_gpt2_safetensors")
    html = ckpt._repr_html_()
    assert f"{truth['parameter_count']:,} parameters" in html and "<table>" in html
    assert "transformer.wte.weight" in html
    # a hostile tensor name (a safetensors header written per the format's spec) stays text
    name = "</td><script>alert(1)</script>"
    header = json.dumps({name: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    shown = inspector.load(path)._repr_html_()
    assert "<script>" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown


def test_the_checkout_is_importable_with_a_regular_install(tmp_path):
    """``import inspector`` in the repository root picks the source tree (it shadows the
    installed package); its ``inspector.adapters`` must resolve to the sibling ``adapters/``."""
    code = (
        "import inspector, inspector.adapters.registry as r;"
        "c = inspector.load('fixtures/torch/seed001_transformer_lm.pt');"
        "print(inspector.__file__, r.__file__, c.totals()['parameters'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # -I would drop the cwd from sys.path; -c keeps it first, as a user's shell does
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    init, registry, params = out.stdout.split()
    assert init == str(ROOT / "inspector" / "__init__.py")
    assert registry == str(ROOT / "adapters" / "registry.py")
    assert int(params) > 0
