"""CTranslate2 model.bin: listings and values equal the spec CTranslate2's converters serialized,
``check`` of the converted OpenNMT-py and fairseq Transformers, every binary version of the
reader, hostile files in one line, scan.

The fixtures and truths were written by CTranslate2 4.8.5's own converters
(fixtures/ctranslate2/make_ct2_fixtures.py); older binary versions and hostile files are built
here byte by byte from CTranslate2's reader (src/models/model.cc ``Model::load``).
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from inspector.adapters.errors import FormatError, InspectorError
from inspector.adapters.model import Role
from inspector.adapters.registry import load
from inspector.arrays import get_tensor
from inspector.formulas.check import check

from conftest import FIXTURES, load_truth

CT2 = FIXTURES / "ctranslate2"
TRUTHS = sorted(CT2.glob("*.truth.json"))
IDS = [p.name[: -len(".truth.json")] for p in TRUTHS]


@pytest.mark.parametrize("truth_path", TRUTHS, ids=IDS)
def test_listing_equals_the_serialized_spec(truth_path):
    truth = load_truth(truth_path)
    ckpt = load(CT2 / truth["open"])
    assert ckpt.format == "ctranslate2"
    assert ckpt.metadata["binary_version"] == truth["binary_version"]
    assert ckpt.metadata["spec"] == truth["spec"]
    assert ckpt.metadata["spec_revision"] == truth["revision"]
    assert ckpt.hyperparameters["config"] == truth["config"]
    got = {t.stored_name: t for t in ckpt.tensors}
    assert sorted(got) == sorted(r["stored_name"] for r in truth["tensors"])
    for r in truth["tensors"]:
        t = got[r["stored_name"]]
        assert (list(t.shape), t.dtype, str(t.role)) == (r["shape"], r["dtype"], r["role"]), t.name
        if "alias_of" in r:
            assert t.extra["alias_of"] == r["alias_of"]
            assert t.identity == got[r["alias_of"]].identity  # the same tensor, counted once
        else:
            assert t.nbytes == r["num_bytes"], t.name
    assert ckpt.totals()["parameters"] == truth["parameter_count"]
    assert ckpt.totals()["buffers"] == truth["buffer_count"]
    sizes = ckpt.hyperparameters["vocabulary_sizes"]
    vocabularies = [f for f in truth["files"] if f.endswith("vocabulary.json")]
    assert sorted(sizes) == sorted(f[: -len(".json")] for f in vocabularies)
    for f in vocabularies:
        tokens = json.loads((CT2 / truth["open"] / f).read_text(encoding="utf-8"))
        assert sizes[f[: -len(".json")]] == len(tokens)


@pytest.mark.parametrize("truth_path", TRUTHS, ids=IDS)
def test_values_equal_the_spec_and_its_dequantization(truth_path):
    """Stored values as the spec held them; int8/int16 with a scale as ``value / scale``."""
    truth = load_truth(truth_path)
    ckpt = load(CT2 / truth["open"])
    for name, want in truth["values"].items():
        a = np.asarray(get_tensor(ckpt, name), dtype=np.float64)
        want = want.get("dequantized", want)
        assert np.isclose(a.sum(), want["sum"], rtol=1e-5, atol=1e-4), name
        assert np.isclose((a * a).sum(), want["sum_squares"], rtol=1e-5, atol=1e-6), name


def test_int8_is_the_float_model_within_half_a_step():
    """The int8 conversion of the same model, dequantized, is the float32 one within half a
    quantization step of each row (``amax / 127 / 2``)."""
    plain = load(CT2 / "onmt_transformer_none")
    quantized = load(CT2 / "onmt_transformer_int8")
    checked = 0
    for t in quantized.tensors:
        if "quantization_scale" not in t.extra:
            continue
        a = np.asarray(get_tensor(plain, t.name), dtype=np.float64)
        b = np.asarray(get_tensor(quantized, t.name), dtype=np.float64)
        step = np.abs(a).max(axis=1, keepdims=True) / 127
        assert (np.abs(a - b) <= step / 2 + 1e-6).all(), t.name
        checked += 1
    assert checked == 25  # 22 linear weights, 2 embeddings, the projection


def test_model_bin_alone_opens_and_checks():
    whole = load(CT2 / "fairseq_transformer_int8")
    alone = load(CT2 / "fairseq_transformer_int8" / "model.bin")
    assert [(t.name, t.shape, t.dtype, t.role) for t in alone.tensors] == \
        [(t.name, t.shape, t.dtype, t.role) for t in whole.tensors]
    assert "config" not in alone.hyperparameters
    assert check(alone).verdict == "verified"


@pytest.mark.parametrize("name", [p.name for p in sorted(CT2.iterdir()) if p.is_dir()])
def test_check_verifies_the_converted_models(name):
    result = check(load(CT2 / name))
    assert result.arch == "ctranslate2-transformer"
    assert result.verdict == "verified", [(i.name, i.status) for i in result.issues]


def test_hyperparameters_come_from_the_model_and_its_vocabularies():
    ckpt = load(CT2 / "onmt_transformer_none")
    attrs = ckpt.hyperparameters["attributes"]
    assert attrs["encoder/num_heads"] == 2 and attrs["encoder/pre_norm"] == 1
    result = check(ckpt)
    assert result.hparams["num_heads"] == 2 and result.hparams["pre_norm"] is True
    assert result.provenance["source_vocab"] == "checkpoint"


@pytest.mark.parametrize("override", [{"ffn": 32}, {"decoder_layers": 3},
                                      {"target_vocab": 40}, {"quantization": "int16"}])
def test_a_wrong_hyperparameter_is_a_mismatch(override):
    assert check(load(CT2 / "onmt_transformer_int8"), overrides=override).verdict == "mismatch"


def test_wrong_vocabulary_file_is_a_mismatch(tmp_path):
    import shutil

    d = tmp_path / "m"
    shutil.copytree(CT2 / "onmt_transformer_none", d)
    vocab = json.loads((d / "target_vocabulary.json").read_text())
    (d / "target_vocabulary.json").write_text(json.dumps(vocab + ["extra"]))
    assert check(load(d)).verdict == "mismatch"


# --- every binary version, built from a version-6 file as model.cc reads each ------------------

def _records(data: bytes):
    """(spec, revision, variables, aliases) of a version-6 model.bin, parsed here by the
    layout of model.cc (independently of the adapter)."""
    pos = 4

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<H", data, pos)
        s = data[pos + 2:pos + 2 + n - 1].decode()
        pos += 2 + n
        return s

    spec = string()
    revision, count = struct.unpack_from("<II", data, pos)
    pos += 8
    variables = []
    for _ in range(count):
        name = string()
        rank = data[pos]
        dims = struct.unpack_from(f"<{rank}I", data, pos + 1)
        pos += 1 + 4 * rank
        type_id, nbytes = struct.unpack_from("<BI", data, pos)
        pos += 5
        variables.append((name, dims, type_id, data[pos:pos + nbytes]))
        pos += nbytes
    (n,) = struct.unpack_from("<I", data, pos)
    pos += 4
    aliases = [(string(), string()) for _ in range(n)]
    return spec, revision, variables, aliases


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack("<H", len(raw) + 1) + raw + b"\0"


def _write(version: int, spec: str, revision: int, variables, aliases) -> bytes:
    out = struct.pack("<I", version)
    if version >= 2:
        out += _string(spec) + struct.pack("<I", revision)
    out += struct.pack("<I", len(variables))
    for name, dims, type_id, raw in variables:
        out += _string(name) + struct.pack(f"<B{len(dims)}I", len(dims), *dims)
        if version >= 4:
            out += struct.pack("<BI", type_id, len(raw))
        else:  # item size and element count
            size = {0: 4, 1: 1, 2: 2}[type_id]
            out += struct.pack("<BI", size, len(raw) // size)
        out += raw
    if version >= 3:
        out += struct.pack("<I", len(aliases))
        for a, b in aliases:
            out += _string(a) + _string(b)
    return out


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_older_binary_versions_list_the_same(tmp_path, version):
    source = CT2 / "onmt_transformer_int16" / "model.bin"  # float32, int16, int8 only
    spec, revision, variables, aliases = _records(source.read_bytes())
    path = tmp_path / "model.bin"
    path.write_bytes(_write(version, spec, revision, variables, aliases))
    old, new = load(path), load(source)
    kept = new.tensors if version >= 3 else [t for t in new.tensors if "alias_of" not in t.extra]
    assert [(t.name, t.shape, t.dtype, t.role) for t in old.tensors] == \
        [(t.name, t.shape, t.dtype, t.role) for t in kept]
    assert old.metadata["binary_version"] == version
    assert old.metadata["spec"] == (spec if version >= 2 else "")
    w = "encoder/layer_0/ffn/linear_0/weight"
    assert np.array_equal(get_tensor(old, w), get_tensor(new, w))


# --- hostile files -------------------------------------------------------------------------------

def _var(name: str, dims, type_id: int, nbytes: int, payload: bytes | None = None) -> bytes:
    out = _string(name) + struct.pack(f"<B{len(dims)}I", len(dims), *dims)
    out += struct.pack("<BI", type_id, nbytes)
    return out + (payload if payload is not None else b"\0" * nbytes)


HEAD = struct.pack("<I", 6) + _string("TransformerSpec") + struct.pack("<I", 7)
OK = HEAD + struct.pack("<I", 1) + _var("w", (2, 2), 0, 16) + struct.pack("<I", 0)


def _one_line(path, data: bytes, match: str) -> None:
    path.write_bytes(data)
    with pytest.raises(InspectorError, match=match) as err:
        load(path, format="ctranslate2")
    assert "\n" not in str(err.value) and path.name in str(err.value)


@pytest.mark.parametrize(("what", "data", "match"), [
    ("newer version", struct.pack("<I", 7) + OK[4:], "binary version 7"),
    ("huge variable count", HEAD + struct.pack("<I", 2**32 - 1), "cannot fit"),
    ("huge alias count", OK[:-4] + struct.pack("<I", 2**31), "alias count"),
    ("unknown type", HEAD + struct.pack("<I", 1) + _var("w", (2,), 9, 8), "unknown type id 9"),
    ("payload size lies", HEAD + struct.pack("<I", 1) + _var("w", (2, 2), 0, 12),
     "expected"),
    ("payload past the end", HEAD + struct.pack("<I", 1) + _var("w", (1000,), 0, 4000, b""),
     "run past the end"),
    ("zero-length string", HEAD + struct.pack("<IH", 1, 0) + b"\0" * 16, "string length 0"),
    ("name not UTF-8", HEAD + struct.pack("<IH", 1, 3) + b"\xff\xfe\0" + b"\0" * 16,
     "not UTF-8"),
])
def test_hostile_files_fail_in_one_line(tmp_path, what, data, match):
    _one_line(tmp_path / "model.bin", data, match)


def test_truncated_anywhere(tmp_path):
    whole = (CT2 / "fairseq_transformer_int8_float16" / "model.bin").read_bytes()
    path = tmp_path / "cut.bin"
    for cut in [*range(1, 400), *range(400, len(whole), 997)]:
        path.write_bytes(whole[:cut])
        try:
            ckpt = load(path, format="ctranslate2")
        except InspectorError as e:
            assert "\n" not in str(e) and "cut.bin" in str(e)
        else:
            raise AssertionError(f"a file cut at {cut} of {len(whole)} bytes was listed: {ckpt}")


def test_alias_to_nothing_and_duplicates_are_findings_as_ctranslate2_ignores_them(tmp_path):
    data = HEAD + struct.pack("<I", 2) + _var("w", (2,), 0, 8) + _var("w", (3,), 0, 12)
    data += struct.pack("<I", 1) + _string("v") + _string("missing")
    path = tmp_path / "model.bin"
    path.write_bytes(data)
    ckpt = load(path)
    assert [t.name for t in ckpt.tensors] == ["w"] and ckpt["w"].shape == (2,)
    messages = " | ".join(f.message for f in ckpt.findings)
    assert "stored twice" in messages and "ignores the alias" in messages


def test_hostile_file_on_the_command_line(cli, tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(HEAD + struct.pack("<I", 1) + _var("w", (2**31, 2**31), 0, 0))
    proc = cli("show", str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "model.bin" in proc.stderr


def test_not_claimed_without_the_layout(tmp_path):
    from inspector.adapters.registry import claim
    from inspector.adapters.source import LocalSource

    path = tmp_path / "model.bin"
    path.write_bytes(struct.pack("<I", 6) + b"hello world, not a model")
    found = claim(LocalSource(path))
    assert found is None or found[0].name != "ctranslate2"
    with pytest.raises(FormatError):
        load(path, format="ctranslate2")


def test_roles_follow_ctranslate2():
    ckpt = load(CT2 / "onmt_transformer_int16")
    assert ckpt["encoder/layer_0/ffn/linear_0/weight_scale"].shape == ()
    assert ckpt["encoder/layer_0/ffn/linear_0/weight_scale"].role is Role.BUFFER
    assert ckpt["encoder/num_heads"].role is Role.OTHER
    assert ckpt["decoder/position_encodings/encodings"].role is Role.BUFFER


def test_scan_calls_the_fixtures_safe():
    from inspector.adapters.security.scan import scan_file

    for d in sorted(p for p in CT2.iterdir() if p.is_dir()):
        res = scan_file(d / "model.bin")
        assert res.kind == "ctranslate2" and res.verdict == "safe", d


def test_scan_of_a_broken_model_is_an_error(tmp_path):
    from inspector.adapters.security.scan import scan_file

    path = tmp_path / "model.bin"
    path.write_bytes(OK[:-10])
    assert scan_file(path).verdict == "error"


# --- the converters' name mapping, against the real source checkpoints ---------------------------

@pytest.mark.parametrize(("converted", "source", "framework"), [
    ("fairseq_transformer_none", FIXTURES / "fairseq" / "transformer.pt", "fairseq"),
    # the committed OpenNMT-py transformer has the converted one's options and names (only its
    # self_attn_type, which CTranslate2 refuses, differs: it changes no tensor)
    ("onmt_transformer_none", FIXTURES / "onmt" / "transformer.pt", "opennmt-py"),
])
def test_every_converted_parameter_maps_to_its_source_tensors(converted, source, framework):
    from inspector.adapters.ctranslate2_names import ct2_name, source_names

    ct2 = load(CT2 / converted)
    src = load(source, allow_unsafe=True)  # OpenNMT-py / fairseq pickles hold Namespaces
    seen = set()
    for t in ct2.unique():
        if t.role is Role.OTHER:
            continue
        found = source_names(t.name, framework)
        assert found is not None, t.name
        how, names = found
        if how == "rows_after_padding":  # fairseq's sinusoidal table is not in its state dict
            assert all(n not in src for n in names)
            continue
        shapes = [src[n].shape for n in names]
        if how == "same":
            assert shapes == [t.shape], t.name
        elif how == "concat0":
            assert sum(s[0] for s in shapes) == t.shape[0], t.name
            assert all(s[1:] == t.shape[1:] for s in shapes), t.name
        else:  # squeeze
            assert [tuple(d for d in s if d != 1) for s in shapes] == [t.shape], t.name
        for n in names:
            assert ct2_name(n, framework) == t.name
        seen.update(names)
    params = {t.name for t in src.tensors if t.role is Role.PARAMETER}
    assert params <= seen, sorted(params - seen)  # every source parameter went somewhere


def test_stats_of_quantized_weights_are_of_the_dequantized_values(cli):
    truth = load_truth(CT2 / "fairseq_transformer_int16.truth.json")
    proc = cli("stats", "--format", "json", str(CT2 / "fairseq_transformer_int16"))
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)["tensors"]}
    checked = 0
    for name, want in truth["values"].items():
        if "dequantized" not in want:
            continue
        s = rows[name]["stats"]
        assert rows[name]["of"] == "values"
        assert np.isclose(s["mean"] * s["count"], want["dequantized"]["sum"], atol=1e-4)
        assert np.isclose(s["l2"] ** 2, want["dequantized"]["sum_squares"], rtol=1e-5)
        checked += 1
    assert checked == 14  # 1+1 layers: 11 linear weights, 2 embeddings, the projection


def test_every_variable_converted_from_marian_maps_to_its_marian_tensors():
    from inspector.adapters.ctranslate2_names import source_names

    ct2 = load(CT2 / "marian_transformer_none")
    src = load(FIXTURES / "marian" / "transformer.npz")
    seen = set()
    for t in ct2.unique():
        if t.role is Role.OTHER or t.name.endswith("position_encodings/encodings"):
            continue  # attributes; CTranslate2 generates Marian's sinusoidal table
        how, names = source_names(t.name, "marian")
        if how.endswith("first_present"):
            names = (next(n for n in names if n in src),)
        shapes = [src[n].shape for n in names]
        if how == "concat0_of_transposed":
            assert sum(s[1] for s in shapes) == t.shape[0] and {s[0] for s in shapes} == \
                {t.shape[1]}, t.name
        elif how == "concat_of_squeezed":
            assert sum(s[-1] for s in shapes) == t.shape[0], t.name
        elif how == "transpose":
            assert [s[::-1] for s in shapes] == [t.shape], t.name
        elif how.startswith("squeeze"):
            assert [tuple(d for d in s if d != 1) for s in shapes] == [t.shape], t.name
        else:
            assert shapes == [t.shape], t.name
        seen.update(names)
    params = {t.name for t in src.tensors if t.role is Role.PARAMETER}
    assert params <= seen, sorted(params - seen)
