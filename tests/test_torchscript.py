"""TorchScript archives (``torch.jit.save``) against what ``torch.jit.load`` reported.

``fixtures/dirs/torchscript_*.pt.truth.json``: roles from ``named_parameters()`` /
``named_buffers()`` of the loaded module, plain tensor attributes from the source module's
``__dict__`` (``fixtures/dirs/make_fixtures.py``, torch 2.13.0).
"""

from __future__ import annotations

import pytest

from inspector.adapters.registry import load
from inspector.diffing import diff
from inspector.reports.listing import listing

from conftest import FIXTURES, load_truth

DIRS = FIXTURES / "dirs"


@pytest.mark.parametrize("name", ["torchscript_script.pt", "torchscript_trace.pt"])
def test_torchscript_lists_parameters_buffers_and_plain_attributes(name):
    truth = load_truth(DIRS / f"{name}.truth.json")
    ckpt = load(DIRS / name)
    assert ckpt.format == truth["format"] == "torchscript"
    report = listing(ckpt)
    got = {t["stored_name"]: (t["shape"], t["dtype"], t["role"], t["numel"])
           for t in report["tensors"]}
    want = {t["stored_name"]: (t["shape"], t["dtype"], t["role"], t["numel"])
            for t in truth["tensors"]}
    assert got == want
    assert report["totals"]["tensors"] == truth["tensor_count"]
    assert report["totals"]["parameters"] == truth["parameter_count"]
    assert report["totals"]["buffers"] == truth["buffer_count"]
    # tracing folds plain attributes into code constants: not module state, not listed
    for attr in truth["plain_tensor_attributes_folded_to_constants"]:
        assert attr not in got
    # TorchScript's own classes (__torch__.*) are no foreign globals
    assert not [f for f in ckpt.findings if f.severity != "info"], ckpt.findings
    assert all(cls.startswith("__torch__.") for cls in ckpt.metadata["module_classes"])


def test_torchscript_values_are_readable():
    ckpt = load(DIRS / "torchscript_script.pt")
    res = diff(ckpt, load(DIRS / "torchscript_script.pt"), values=True)
    assert not res.different and res.values_changed == 0


def test_input_format_torchscript_on_a_torch_save_file_is_refused_cleanly():
    from inspector.adapters.errors import InspectorError

    with pytest.raises(InspectorError):
        load(DIRS / "old_optimizer" / "run1.pt", "torchscript")
