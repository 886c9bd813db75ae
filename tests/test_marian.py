"""Marian model.npz: listings equal what NumPy reads from the files Marian itself wrote,
``special:model.yml`` as the hyperparameters, ``check`` of Marian Transformers against those
options, hostile files in one line, scan.

The fixtures were trained and saved by Marian (pymarian 1.12.42, fixtures/marian/
make_marian_fixtures.py); hostile variants are built here from Marian's layout
(src/common/io.cpp ``saveItemsNpz`` / ``addMetaToItems``).
"""

from __future__ import annotations

import io
import pickletools
import zipfile

import numpy as np
import pytest

from inspector.adapters.errors import InspectorError, UnsafeContentError
from inspector.adapters.model import Role
from inspector.adapters.registry import load
from inspector.arrays import get_tensor
from inspector.formulas.check import check

from conftest import FIXTURES, load_truth

MARIAN = FIXTURES / "marian"
NAMES = sorted(p.name[: -len(".truth.json")] for p in MARIAN.glob("*.npz.truth.json"))


@pytest.mark.parametrize("name", NAMES)
def test_listing_and_options_equal_the_file(name):
    truth = load_truth(MARIAN / f"{name}.truth.json")
    ckpt = load(MARIAN / name)
    assert ckpt.format == "marian-npz"
    assert ckpt.hyperparameters == truth["model_yml"]
    assert ckpt.metadata["model_yml_bytes"] == truth["model_yml_bytes"]
    assert ckpt.metadata["marian_version"] == truth["model_yml"]["version"]
    assert [(t.stored_name, list(t.shape), t.dtype, str(t.role)) for t in ckpt.tensors] == \
        [(r["stored_name"], r["shape"], r["dtype"], r["role"]) for r in truth["tensors"]]
    assert ckpt.totals()["parameters"] == truth["parameter_count"]


@pytest.mark.parametrize("name", NAMES)
def test_values_equal_numpy_load(name):
    ckpt = load(MARIAN / name)
    with np.load(MARIAN / name, allow_pickle=False) as z:
        for t in ckpt.tensors:
            assert np.array_equal(get_tensor(ckpt, t.name), z[t.stored_name]), t.name


@pytest.mark.parametrize("name", NAMES)
def test_check_verifies_marian_transformers(name):
    result = check(load(MARIAN / name))
    assert result.arch == "marian-transformer"
    assert result.verdict == "verified", [(i.name, i.status) for i in result.issues]
    assert result.provenance["dim-emb"] == "checkpoint"


@pytest.mark.parametrize(("name", "override"), [
    ("transformer.npz", {"transformer-dim-ffn": 32}),
    ("transformer.npz", {"enc-depth": 3}),
    ("transformer_prenorm.npz", {"transformer-ffn-depth": 2}),
    ("transformer_prenorm.npz", {"transformer-postprocess-top": ""}),
    ("transformer_untied.npz", {"tied-embeddings": True}),
])
def test_a_wrong_option_is_a_mismatch(name, override):
    assert check(load(MARIAN / name), overrides=override).verdict == "mismatch"


def _rewrite(src, dest, yml: bytes | None = None, extra: dict | None = None) -> None:
    """Copy a Marian npz, replacing ``special:model.yml`` (padded as addMetaToItems pads) or
    adding members, with NumPy's own .npy writer."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if yml is not None and info.filename == "special:model.yml.npy":
                size = -(-(len(yml) + 1) // 256) * 256
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(yml.ljust(size, b"\0"), dtype=np.int8))
                data = buf.getvalue()
            zout.writestr(info.filename, data)
        for name, data in (extra or {}).items():
            zout.writestr(name, data)


def test_an_option_not_modelled_is_incomplete(tmp_path):
    source = MARIAN / "transformer.npz"
    cfg = load(source).hyperparameters
    yml = _yaml_text(cfg | {"transformer-decoder-autoreg": "average-attention"})
    path = tmp_path / "aan.npz"
    _rewrite(source, path, yml)
    assert check(load(path)).verdict == "incomplete"


def _yaml_text(cfg: dict) -> bytes:
    import yaml

    return yaml.safe_dump(cfg, sort_keys=True).encode()


def test_a_plain_npz_is_not_marian(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, a=np.zeros(3))
    assert load(path).format == "numpy-npz"


@pytest.mark.parametrize(("what", "yml", "match"), [
    ("not YAML", b"dim-emb: [1, 2\n", "not readable YAML"),
    ("not a mapping", b"- 1\n- 2\n", "not a YAML mapping"),
])
def test_bad_model_yml_in_one_line(tmp_path, what, yml, match):
    path = tmp_path / "bad.npz"
    _rewrite(MARIAN / "transformer.npz", path, yml)
    with pytest.raises(InspectorError, match=match) as err:
        load(path)
    assert "\n" not in str(err.value) and "bad.npz" in str(err.value)


def test_model_yml_of_the_wrong_type_or_size(tmp_path):
    path = tmp_path / "typed.npz"
    with zipfile.ZipFile(MARIAN / "transformer.npz") as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "special:model.yml.npy":
                buf = io.BytesIO()
                np.save(buf, np.zeros((4, 4), dtype=np.float32))
                data = buf.getvalue()
            zout.writestr(info.filename, data)
    with pytest.raises(InspectorError, match="not the bytes of a YAML text"):
        load(path)
    # a header that declares a huge array: refused from its header, nothing allocated
    huge = tmp_path / "huge.npz"
    header = b"{'descr': '|i1', 'fortran_order': False, 'shape': (1099511627776,), }"
    npy = b"\x93NUMPY\x01\x00" + len(header + b"\n").to_bytes(2, "little") + header + b"\n"
    with zipfile.ZipFile(MARIAN / "transformer.npz") as zin, zipfile.ZipFile(huge, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info.filename, npy + b"x" * 16
                          if info.filename == "special:model.yml.npy" else data)
    with pytest.raises(InspectorError) as err:
        load(huge)
    assert "\n" not in str(err.value)


def test_truncated_files_in_one_line(tmp_path):
    whole = (MARIAN / "transformer_untied.npz").read_bytes()
    path = tmp_path / "cut.npz"
    for cut in range(0, len(whole), 401):
        path.write_bytes(whole[:cut] or b"P")
        try:
            load(path, format="marian")
        except InspectorError as e:
            assert "\n" not in str(e) and "cut.npz" in str(e)


def test_hostile_file_on_the_command_line(cli, tmp_path):
    path = tmp_path / "model.npz"
    _rewrite(MARIAN / "transformer.npz", path, b"dim-emb: *nothing\n")
    proc = cli("show", str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def _object_npy(payload: bytes) -> bytes:
    header = b"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
    header = header.ljust(127 - 10, b" ") + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + payload


def test_an_object_member_is_dangerous_and_refused(tmp_path):
    """numpy.load(allow_pickle=True) would unpickle an object member: os.system here. Marian
    itself aborts on it (loadItemsFromNpz knows no 'O' type); scan and load say so."""
    from inspector.adapters.security.scan import scan_file

    payload = b"cos\nsystem\n(S'echo pwned'\ntR."
    pickletools.dis(payload, out=io.StringIO())  # a well-formed pickle
    path = tmp_path / "model.npz"
    _rewrite(MARIAN / "transformer.npz", path, extra={"evil.npy": _object_npy(payload)})
    with pytest.raises(UnsafeContentError):
        load(path)
    assert scan_file(path).verdict == "dangerous"


def test_scan_calls_the_fixtures_safe():
    from inspector.adapters.security.scan import scan_file

    for name in NAMES:
        assert scan_file(MARIAN / name).verdict == "safe", name


def test_special_items_are_not_parameters():
    ckpt = load(MARIAN / "transformer.npz")
    assert ckpt["special:model.yml"].role is Role.OTHER
    assert all(t.role is Role.PARAMETER for t in ckpt.tensors if ":" not in t.name)


def test_ctranslate2s_marian_converter_reads_the_same_model():
    """CTranslate2's Marian converter (a real reader of Marian npz: np.load + its own YAML
    parse) converted fixtures/marian/transformer.npz (fixtures/ctranslate2/marian_transformer_*):
    its spec has this listing's options, counts and values."""
    ckpt = load(MARIAN / "transformer.npz")
    cfg = ckpt.hyperparameters
    truth = load_truth(FIXTURES / "ctranslate2" / "marian_transformer_none.truth.json")
    rows = {r["stored_name"]: r for r in truth["tensors"]}
    sums = truth["values"]
    assert truth["parameter_count"] == ckpt.totals()["parameters"]
    layers = {n.split("/")[1] for n in rows if n.startswith("encoder/layer_")}
    assert len(layers) == cfg["enc-depth"]
    assert rows["decoder/embeddings/weight"]["shape"] == list(ckpt["Wemb"].shape)
    assert truth["tied"][0] == ["decoder/embeddings/weight", "decoder/projection/weight",
                                "encoder/embeddings_0/weight"]  # tied-embeddings-all
    v = {t.name: np.asarray(get_tensor(ckpt, t.name), dtype=np.float64) for t in ckpt.tensors}
    pairs = [("Wemb", ["decoder/embeddings/weight"]),
             ("decoder_ff_logit_out_b", ["decoder/projection/bias"])]
    for i in range(1, cfg["enc-depth"] + 1):
        p, q = f"encoder_l{i}_self_", f"encoder/layer_{i - 1}/self_attention/"
        pairs.append(((p + "Wq", p + "Wk", p + "Wv"), [q + "linear_0/weight"]))  # fused, transposed
        pairs.append((p + "Wo_ln_scale", [q + "layer_norm/gamma"]))
        pairs.append((f"encoder_l{i}_ffn_W1", [f"encoder/layer_{i - 1}/ffn/linear_0/weight"]))
    for ours, theirs in pairs:
        names = ours if isinstance(ours, tuple) else (ours,)
        total = sum(v[n].sum() for n in names)
        squares = sum((v[n] ** 2).sum() for n in names)
        assert np.isclose(total, sum(sums[t]["sum"] for t in theirs), rtol=1e-5, atol=1e-5)
        assert np.isclose(squares, sum(sums[t]["sum_squares"] for t in theirs), rtol=1e-5)
