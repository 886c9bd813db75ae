"""GGUF: listings equal ``gguf.GGUFReader``'s, values equal gguf's own ``quants.dequantize``,
``check`` of Llama / Mixtral files against their own metadata, hostile files in one line.

The fixtures and their truths were written by the real ``gguf`` package (fixtures/gguf/
make_fixtures.py); the hostile variants are built here byte by byte from the GGUF spec.
"""

from __future__ import annotations

import hashlib
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from inspector import values
from inspector.adapters.errors import FormatError, InspectorError
from inspector.adapters.registry import load
from inspector.formulas.check import check

from conftest import FIXTURES, load_truth

GGUF = FIXTURES / "gguf"
FILES = sorted(p.name[: -len(".truth.json")] for p in GGUF.glob("*.gguf.truth.json"))
LONG = 256  # the adapter summarises longer arrays (length + head)


def _flat(v):
    if isinstance(v, list):
        return [y for x in v for y in _flat(x)]
    return [v]


@pytest.mark.parametrize("name", FILES)
def test_listing_equals_gguf_reader(name):
    truth = load_truth(GGUF / f"{name}.truth.json")
    ckpt = load(GGUF / name)
    assert ckpt.format == "gguf"
    assert ckpt.metadata["gguf_version"] == truth["version"]
    assert ckpt.metadata["alignment"] == truth["alignment"]
    assert ckpt.metadata["data_offset"] == truth["data_offset"]
    assert (ckpt.metadata.get("byteorder") == "big") == (truth["byte_order"] == "S")
    assert [t.stored_name for t in ckpt.tensors] == [t["stored_name"] for t in truth["tensors"]]
    for t, w in zip(ckpt.tensors, truth["tensors"], strict=True):
        assert list(t.shape) == w["shape"] == w["ggml_ne"][::-1], t.name
        assert (t.dtype, t.numel, t.nbytes, t.offset, t.file) == (
            w["dtype"], w["numel"], w["nbytes"], w["offset"], w.get("file")), t.name
    assert ckpt.totals()["parameters"] == truth["parameter_count"]
    kv = ckpt.hyperparameters
    assert set(kv) == set(truth["kv"])
    for key, w in truth["kv"].items():
        got, want = kv[key], w["value"]
        if w["types"][0] != "ARRAY":
            assert got == want, key
        elif isinstance(got, dict):  # a long array: its length and first items
            assert len(want) > LONG and got["length"] == len(want), key
            assert got["head"] == want[: len(got["head"])], key
        else:  # GGUFReader's contents() flattens nested arrays
            assert _flat(got) == want, key


def test_every_ggml_type_is_listed_with_its_block_size():
    """kv_zoo holds one tensor of every type gguf-py knows (34): sizes are GGML_QUANT_SIZES'."""
    truth = load_truth(GGUF / "kv_zoo_v2.gguf.truth.json")
    types = {t["ggml_type"] for t in truth["tensors"]}
    assert {"Q2_K", "IQ2_XXS", "IQ1_M", "TQ1_0", "MXFP4", "BF16", "F64", "I64"} <= types
    assert len(types) == 34
    ckpt = load(GGUF / "kv_zoo_v2.gguf")
    assert all(ckpt[t["stored_name"]].nbytes == t["nbytes"] for t in truth["tensors"])


def _decoded(ckpt, entry) -> np.ndarray:
    parts = list(values.iter_values(ckpt, entry, chunk=96))  # several chunks per tensor
    return np.concatenate(parts).astype("<f4") if parts else np.zeros(0, "<f4")


@pytest.mark.parametrize("name", FILES)
def test_values_equal_gguf_dequantize(name):
    """F32/F16/BF16 and Q8_0/Q4_0 decoded bit for bit as gguf-py's quants.dequantize."""
    truth = load_truth(GGUF / f"{name}.truth.json")
    ckpt = load(GGUF / name)
    checked = 0
    for w in truth["tensors"]:
        if "values" not in w:
            continue
        x = _decoded(ckpt, ckpt[w["stored_name"]])
        assert hashlib.sha256(x.tobytes()).hexdigest() == w["values"]["sha256_f32le"], w
        assert list(x[:4]) == w["values"]["first"]
        checked += 1
    assert checked


def test_stats_equal_gguf_dequantize():
    from inspector.value_stats import file_stats

    truth = load_truth(GGUF / "tiny_mixtral.gguf.truth.json")
    fs = file_stats(GGUF / "tiny_mixtral.gguf")
    by_name = {t.entry.name: t for t in fs.tensors}
    assert len(by_name) == len(truth["tensors"])
    for w in truth["tensors"]:
        s = by_name[w["stored_name"]].stats
        v = w["values"]
        assert (s.min, s.max) == (v["min"], v["max"]), w["stored_name"]
        assert math.isclose(s.mean, v["mean"], rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(s.std, v["std"], rel_tol=1e-6)


def test_other_block_types_are_named_never_decoded():
    ckpt = load(GGUF / "kv_zoo_v2.gguf")
    for name, dtype in (("zoo.q4_k", "q4_K"), ("zoo.iq2_xxs", "iq2_xxs"), ("zoo.mxfp4", "mxfp4")):
        with pytest.raises(values.ValuesUnavailable, match=f"{dtype} values are not decoded"):
            _decoded(ckpt, ckpt[name])
    big = load(GGUF / "tiny_bigendian.gguf")
    with pytest.raises(values.ValuesUnavailable, match="big-endian q8_0"):
        _decoded(big, big["big.q8_0"])


def test_diff_values(cli):
    same = cli("diff", "--values", str(GGUF / "tiny_llama.gguf"), str(GGUF / "tiny_llama.gguf"))
    assert same.returncode == 0, same.stdout + same.stderr
    other = cli("diff", "--values", "--format", "json", str(GGUF / "tiny_llama.gguf"),
                str(GGUF / "tiny_llama_wrong_ff.gguf"))
    assert other.returncode == 1, other.stderr
    assert "q4_0" in other.stdout and "changed" in other.stdout


@pytest.mark.parametrize("name", ["tiny_llama.gguf", "tiny_llama_tied.gguf", "tiny_mixtral.gguf",
                                  "tiny_llama_split-00001-of-00003.gguf"])
def test_check_verifies_llama_and_mixtral(name):
    result = check(load(GGUF / name))
    assert result.arch == "gguf-llama"
    assert result.verdict == "verified", [(i.name, i.status) for i in result.issues]
    truth = load_truth(GGUF / f"{name}.truth.json")
    assert result.found_total == truth["parameter_count"]
    assert result.provenance["embedding_length"] == "checkpoint"
    if "mixtral" in name:
        assert result.hparams["expert_count"] == truth["kv"]["llama.expert_count"]["value"]
        groups = {g.name: g.found for g in result.groups}
        exps = sum(t["numel"] for t in truth["tensors"] if "_exps." in t["stored_name"])
        assert groups["experts"] == exps


def test_wrong_hyperparameter_is_mismatch():
    result = check(load(GGUF / "tiny_llama_wrong_ff.gguf"))  # metadata says 96, tensors 64
    assert result.verdict == "mismatch"
    assert {i.name for i in result.issues if i.mismatch} == {
        f"blk.{i}.ffn_{p}.weight" for i in range(2) for p in ("gate", "up", "down")}
    overridden = check(load(GGUF / "tiny_llama.gguf"), overrides={"head_count_kv": 4})
    assert overridden.verdict == "mismatch"


def test_without_a_known_architecture_is_incomplete(tmp_path):
    for name in ("kv_zoo_v2.gguf", "tiny_bigendian.gguf"):
        assert check(load(GGUF / name)).verdict == "incomplete"
    # llama.cpp's tensor names under another architecture: incomplete, never a mismatch
    path = tmp_path / "qwen.gguf"
    path.write_bytes(_gguf([("general.architecture", 8, "qwen2"), ("qwen2.block_count", 4, 1)],
                           [("blk.0.attn_q.weight", (32, 32), 0)]))
    assert check(load(path)).verdict == "incomplete"


def test_groups_follow_llama_cpp_names():
    from inspector.reports.listing import listing

    report = listing(load(GGUF / "tiny_mixtral.gguf"))
    assert report["scheme"]["name"] == "gguf"
    groups = {g["name"]: g["tensors"] for g in report["groups"]}
    assert groups == {"token_embedding": 1, "norms": 5, "attention": 8, "router": 2,
                      "experts": 6, "lm_head": 1}


# --- hostile files, built from the spec -------------------------------------------------------

def _str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
        12: "d"}


def _val(vtype: int, v) -> bytes:
    if vtype == 8:
        return _str(v)
    if vtype == 9:
        itype, items = v
        return struct.pack("<IQ", itype, len(items)) + b"".join(_val(itype, x) for x in items)
    return struct.pack("<" + _FMT[vtype], v)


def _gguf(kv, tensors, version: int = 3, align: int = 32) -> bytes:
    """A GGUF file per the spec: kv = [(key, type, value)], tensors = [(name, numpy shape,
    ggml type)] of F32 data, packed in order (a huge tensor's data is left out)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, vtype, v in kv:
        out += _str(key) + struct.pack("<I", vtype) + _val(vtype, v)
    offset, data = 0, b""
    for name, shape, gtype in tensors:
        ne = shape[::-1]
        out += _str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", gtype, offset)
        n = 4 * math.prod(shape)
        n = n if n < 1 << 20 else 0
        data += b"\0" * n + b"\0" * (-n % align)
        offset = len(data)
    return out + b"\0" * (-len(out) % align) + data


def _one(path: Path, data: bytes, match: str) -> None:
    path.write_bytes(data)
    with pytest.raises(FormatError, match=match) as e:
        load(path)
    assert "\n" not in str(e.value) and path.name in str(e.value)


OK_KV = [("general.architecture", 8, "llama")]
W = [("w", (2, 32), 0)]


@pytest.mark.parametrize("what,data,match", [
    ("version 1", _gguf(OK_KV, W, version=1), "version 1 is not supported"),
    ("version 4", _gguf(OK_KV, W, version=4), "version 4 is not supported"),
    ("huge tensor count", b"GGUF" + struct.pack("<IQQ", 3, 2**63, 0), "tensor count"),
    ("huge kv count", b"GGUF" + struct.pack("<IQQ", 3, 0, 2**64 - 1), "kv count"),
    ("huge key length", b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**62) + b"k" * 16,
     "string length 4611686018427387904 runs past"),
    ("huge string value", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k")
     + struct.pack("<IQ", 8, 2**40), "runs past the end"),
    ("huge array", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k")
     + struct.pack("<IIQ", 9, 6, 2**61), "array of 2305843009213693952 float32"),
    ("bad value type", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k")
     + struct.pack("<IB", 13, 0), "unknown value type 13"),
    ("bad ggml type", _gguf(OK_KV, [("w", (2, 32), 77)]), "unknown ggml type 77"),
    ("removed ggml type", _gguf(OK_KV, [("w", (2, 32), 31)]), r"Q4_0_4_4\) was removed"),
    ("row not a block multiple", _gguf(OK_KV, [("w", (2, 16), 8)]), "not a multiple"),
    ("duplicate key", _gguf(OK_KV + OK_KV, W), "duplicate key"),
    ("duplicate tensor", _gguf(OK_KV, W + W), "duplicate tensor name"),
    ("alignment 0", _gguf([("general.alignment", 4, 0)], W), "not a power of two"),
    ("alignment 48", _gguf([("general.alignment", 4, 48)], W), "not a power of two"),
    ("alignment u64", _gguf([("general.alignment", 10, 64)], W), "must be a uint32"),
    ("dims overflow", _gguf(OK_KV, [("w", (2**40, 2**40, 32), 0)]), "exceed int64|past the end"),
    ("data past the end", _gguf(OK_KV, W)[:-8], "run past the end of the file"),
])
def test_hostile_files_fail_in_one_line(tmp_path, what, data, match):
    _one(tmp_path / "x.gguf", data, match)


def test_nested_arrays_are_bounded(tmp_path):
    v = (6, [1.0])
    for _ in range(40):
        v = (9, [v])
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("deep") + struct.pack("<I", 9)
    data += _val(9, v)
    _one(tmp_path / "deep.gguf", data, "nested deeper than")


def test_truncated_anywhere(tmp_path):
    """Cut anywhere before the last tensor's last byte: one line (the padding after it is not
    needed: llama.cpp's loader checks each tensor's bytes, not the padding)."""
    whole = (GGUF / "tiny_bigendian.gguf").read_bytes()
    truth = load_truth(GGUF / "tiny_bigendian.gguf.truth.json")
    end = max(t["offset"] + t["nbytes"] for t in truth["tensors"])
    path = tmp_path / "cut.gguf"
    for cut in range(0, end):
        path.write_bytes(whole[:cut])
        try:
            load(path)
        except InspectorError as e:
            assert "\n" not in str(e) and "cut.gguf" in str(e)
        else:
            raise AssertionError(f"a file cut at {cut} of {len(whole)} bytes was listed")


def test_hostile_file_on_the_command_line(cli, tmp_path):
    path = tmp_path / "huge.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**62))
    proc = cli("show", str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "huge.gguf" in proc.stderr


def test_header_read_in_small_slices_lists_the_same(monkeypatch):
    """The cursor refills its buffer wherever a field crosses its end: with 7-byte first reads
    every string, array and tensor info crosses one, and every listing is unchanged."""
    from inspector.adapters import gguf

    whole = {name: load(GGUF / name) for name in FILES}
    monkeypatch.setattr(gguf, "FIRST_READ", 7)
    for name, ckpt in whole.items():
        small = load(GGUF / name)
        assert small.tensors == ckpt.tensors and small.hyperparameters == ckpt.hyperparameters


def test_listing_imports_neither_gguf_nor_numpy():
    import subprocess
    import sys

    probe = ("import io, sys, contextlib\nfrom inspector.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    rc = main(sys.argv[1:])\n"
             "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in ('gguf', 'numpy')))")
    for args in (["show", "--format", "json"], ["check"]):
        proc = subprocess.run([sys.executable, "-c", probe, *args, str(GGUF / "tiny_mixtral.gguf")],
                              capture_output=True, text=True, timeout=60)
        assert proc.stdout.split() == ["0", "[]"], proc.stdout + proc.stderr


def test_scan_verdicts(tmp_path):
    """GGUF holds no code a loader runs: safe; a chat template is examined (one that stays in
    Jinja's sandbox is safe); a broken header is an error, never safe."""
    from inspector.adapters.security.scan import scan_file

    assert scan_file(GGUF / "tiny_mixtral.gguf").verdict == "safe"
    chat = tmp_path / "chat.gguf"
    chat.write_bytes(_gguf(OK_KV + [("tokenizer.chat_template", 8, "{{ messages }}")], W))
    res = scan_file(chat)
    assert res.kind == "gguf" and res.verdict == "safe", res.to_dict()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**62))
    assert scan_file(broken).verdict == "error"


ESCAPE = "{{ cycler.__init__.__globals__.os.popen('touch /tmp/x').read() }}"


@pytest.mark.parametrize("key", ["tokenizer.chat_template", "tokenizer.chat_template.tool_use"])
def test_chat_template_leaving_the_sandbox_is_dangerous_and_refused(tmp_path, key):
    """CVE-2024-34359: a template rendered outside Jinja's sandbox reaches os.popen through a
    helper's __globals__: dangerous in scan, refused by show and load."""
    from inspector.adapters.errors import UnsafeContentError
    from inspector.adapters.security.scan import scan_file
    from inspector.cli import main

    path = tmp_path / "evil.gguf"
    path.write_bytes(_gguf(OK_KV + [(key, 8, ESCAPE)], W))
    res = scan_file(path)
    assert res.verdict == "dangerous" and "__globals__" in res.items[0].text, res.to_dict()
    with pytest.raises(UnsafeContentError, match="sandbox"):
        load(path)
    assert main(["show", str(path)]) == 2


def test_over_http_in_a_few_requests():
    """A GGUF file lists over HTTP range reads as it does locally, values included, in a
    handful of requests counted by the server."""
    from remote_servers import RangeServer

    local = load(GGUF / "tiny_mixtral.gguf")
    with RangeServer(GGUF) as srv:
        remote = load(f"{srv.url}/tiny_mixtral.gguf")
        listed = len(srv.log)
        assert [(t.name, t.shape, t.dtype, t.offset) for t in remote.tensors] == [
            (t.name, t.shape, t.dtype, t.offset) for t in local.tensors]
        assert remote.hyperparameters == local.hyperparameters
        entry = remote["blk.1.ffn_down_exps.weight"]  # q4_0
        assert np.array_equal(_decoded(remote, entry), _decoded(local, local[entry.name]))
    assert listed <= 3, [r.__dict__ for r in srv.log]


def test_split_set_opens_whole_and_refuses_a_missing_split(tmp_path):
    first = "tiny_llama_split-00001-of-00003.gguf"
    ckpt = load(GGUF / first)
    assert len(ckpt.paths) == 3 and ckpt.metadata["shards"][0] == first
    assert {t.file for t in ckpt.tensors} == {None, first.replace("00001-of", "00002-of"),
                                              first.replace("00001-of", "00003-of")}
    for name in (first, first.replace("00001-of", "00002-of")):
        (tmp_path / name).write_bytes((GGUF / name).read_bytes())
    with pytest.raises(FormatError, match="split 3 of 3 .* is missing"):
        load(tmp_path / first)
    alone = load(tmp_path / first.replace("00001-of", "00002-of"))  # a later split: itself
    assert len(alone.paths) == 1 and alone.tensors
    assert check(alone).verdict == "incomplete"
