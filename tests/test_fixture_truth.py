"""Every real fixture's listing equals what its producer reported when it wrote the file.

The ``*.truth.json`` files were recorded by the producing framework itself (torch, safetensors,
mxnet, Sockeye) in the generator scripts beside the fixtures; nothing here is computed by the tool.
"""

from __future__ import annotations

import re

import pytest

from inspector.adapters.registry import load
from inspector.reports.listing import listing

from conftest import FIXTURES, load_truth, truth_files

# Fixture folders whose adapter does not exist yet: their truths are skipped, visibly, not dropped.
PENDING: dict[str, str] = {
    "dirs": "issue 14's truths (directories, look-alikes, TorchScript, pickles) describe more than "
    "one listing: checked by tests/test_dirs.py, test_torchscript.py and test_pickled.py",
    "stats": "value-statistics truths (per-tensor numbers from the producer): checked with "
    "their names, shapes and dtypes by tests/test_stats.py",
    "security": "security-verdict fixtures: their truths record globals, not tensors "
    "(checked by tests/test_scan.py)",
    "code_config": "configurations that carry code: their truths record what the real loader "
    "ran, not tensors (checked by tests/test_code_config.py)",
    "lineage": "a store of checkpoints: its truth records the derivation edges and the "
    "producer's num_parameters() (checked by tests/test_lineage.py, test_inventory.py)",
}
# Single truths that describe no listing.
NOT_LISTINGS: dict[str, str] = {
    "orbax/ocdbt_small_nodes.truth.json": "a bare OCDBT key-value store written by tensorstore "
    "(no orbax checkpoint): its keys and values are checked by tests/test_orbax.py",
}
TRUTHS = truth_files()
# Formats whose stored order is meaningful and reproduced by the producer's loader.
ORDERED = ("torch", "mxnet", "sockeye")


def _fixture_path(truth_path):
    name = truth_path.name[: -len(".truth.json")]
    return truth_path.with_name(name)


@pytest.mark.skipif(not TRUTHS, reason="no fixtures generated")
@pytest.mark.parametrize("truth_path", TRUTHS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_listing_matches_producer(truth_path):
    folder = truth_path.relative_to(FIXTURES).parts[0]
    if folder in PENDING:
        pytest.skip(PENDING[folder])
    rel = truth_path.relative_to(FIXTURES).as_posix()
    if rel in NOT_LISTINGS:
        pytest.skip(NOT_LISTINGS[rel])
    truth = load_truth(truth_path)
    target = truth.get("open") or _fixture_path(truth_path).name
    ckpt = load(truth_path.parent / target, allow_unsafe=True)  # Keras 2 Lambda fixtures
    report = listing(ckpt)
    if folder == "keras":
        _check_keras(truth, report, {t.name for t in ckpt.tensors
                                     if (t.extra or {}).get("name_guessed")})
        return
    got = {t["stored_name"]: t for t in report["tensors"]}
    want = {t["stored_name"]: t for t in truth["tensors"]}
    assert sorted(got) == sorted(want), "tensor names differ from the producer's"
    for name, w in want.items():
        g = got[name]
        assert g["shape"] == w["shape"], name
        if "torch_shape" in w and w["dtype"] == "float4_e2m1fn_x2":
            # torch's float4_e2m1fn_x2 packs two 4-bit values per element; safetensors stores the
            # 4-bit elements (F4) with the last dim doubled. Same bytes, counted per value here.
            assert g["dtype"] == "float4_e2m1fn" and g["numel"] == 2 * w["torch_numel"], name
        else:
            assert g["dtype"] == w["dtype"], name
        # safetensors stores no roles: the producer's label there is intent, not file content.
        if "role" in w and not ckpt.format.startswith("safetensors"):
            assert g["role"] == w["role"], name
        if "numel" in w:
            assert g["numel"] == w["numel"], name
    if ckpt.format.startswith(ORDERED):
        assert list(got) == [t["stored_name"] for t in truth["tensors"]], "stored order differs"
    # Where the producer stored one tensor under several names (Sockeye 3's tied embeddings), its
    # unique count is the one a tool that counts tied weights once must report.
    expected = truth.get("unique_parameter_count", truth.get("parameter_count"))
    if truth.get("persistent_buffer_count") is not None:
        # transformers' truths: the file's elements less the persistent buffers it holds
        expected -= truth["persistent_buffer_count"]
    if expected is not None:
        assert report["totals"]["parameters"] == expected
    if truth.get("buffer_count") is not None:
        assert report["totals"]["buffers"] == truth["buffer_count"]
    groups = truth.get("tied", truth.get("shared_groups"))
    if groups is not None:
        tied = {frozenset([r["stored_name"], *r["shared_with"]]) for r in report["tensors"] if r.get("shared_with")}
        assert tied == {frozenset(g) for g in groups}


def _keras_name(var: dict) -> str:
    """Keras 3's variable path, or a Keras 2 TF variable name without its ``:0``; for a model
    reloaded where it was built (TF 1.x scopes ``lstm_1_1/``), the name it was built with."""
    return var["path"] or re.sub(r":\d+$", "", var.get("name_as_built") or var["name"])


def _check_keras(truth: dict, report: dict, guessed: set[str]) -> None:
    """Names, shapes, dtypes and the trainable split exactly as Keras reported them at save time;
    stored names exactly the HDF5 datasets h5py found in the file."""
    want = {}
    for layer in truth["layers"]:
        for w in layer["weights"]:
            want[_keras_name(w)] = (w["shape"], w["dtype"], "parameter" if w["trainable"] else "buffer")
    for v in truth.get("optimizer_variables") or []:
        want[_keras_name(v)] = (v["shape"], v["dtype"], "optimizer")
    got = {t["name"]: (t["shape"], t["dtype"], t["role"]) for t in report["tensors"]}
    # a name the reader had to guess (flagged, see keras_v3): same layer, shape, dtype and role
    for name in guessed:
        layer = name.rpartition("/")[0]
        alt = [n for n in want if n.rpartition("/")[0] == layer and n not in got]
        if name not in want and len(alt) == 1 and want[alt[0]] == got[name]:
            got[alt[0]] = got.pop(name)
    assert got == want
    assert len(report["tensors"]) == len(want), "a variable listed twice"
    stored = {t["stored_name"]: (t["shape"], t["dtype"]) for t in report["tensors"]}
    assert stored == {d["path"]: (d["shape"], d["dtype"]) for d in truth["h5_datasets"]}
    totals = report["totals"]
    assert totals["parameters"] == truth["trainable_params"]
    assert totals["buffers"] == truth["non_trainable_params"]
    assert totals["parameters"] + totals["buffers"] == truth["count_params"]
