"""Flax msgpack (flax.serialization.to_bytes): listings, roles and values equal what flax's own
loader (msgpack_restore) reported for fixtures flax wrote; hostile files fail in one line."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

from inspector import values
from inspector.adapters.errors import FormatError, InspectorError
from inspector.adapters.registry import detect, load

from conftest import FIXTURES, load_truth

FLAX = FIXTURES / "flax"
FILES = sorted(str(p.relative_to(FLAX))[: -len(".truth.json")] for p in FLAX.rglob("*.truth.json"))


@pytest.mark.parametrize("name", FILES)
def test_listing_roles_and_values_equal_msgpack_restore(name):
    truth = load_truth(FLAX / f"{name}.truth.json")
    ckpt = load(FLAX / name)
    assert ckpt.format == "flax-msgpack"
    got = {t.stored_name: t for t in ckpt.tensors}
    stored, want = [t.stored_name for t in ckpt.tensors], [w["stored_name"] for w in truth["tensors"]]
    # msgpack_restore keeps the stored order; from_pretrained's params tree is re-sorted
    assert stored == want if "msgpack_restore" in truth["reader"] else sorted(stored) == sorted(want)
    for w in truth["tensors"]:
        t = got[w["stored_name"]]
        assert (list(t.shape), t.dtype, t.role.value, t.nbytes) == (
            w["shape"], w["dtype"], w["role"], w["nbytes"]), w["stored_name"]
        parts = list(values.iter_values(ckpt, t, chunk=7))  # several chunks per tensor
        x = np.concatenate(parts).astype("<f4") if parts else np.zeros(0, "<f4")
        assert hashlib.sha256(x.tobytes()).hexdigest() == w["values"]["sha256_f32le"], t.name
    assert ckpt.metadata.get("scalars", {}) == truth["python_scalars"]


def test_train_state_roles_and_names():
    ckpt = load(FLAX / "transformer_train_state.msgpack")
    truth = load_truth(FLAX / "transformer_train_state.msgpack.truth.json")
    mu = [t for t in ckpt.tensors if ".mu." in t.stored_name]
    nu = [t for t in ckpt.tensors if ".nu." in t.stored_name]
    assert mu and nu and all(t.role.value == "optimizer" for t in mu + nu)
    assert ckpt["opt_state.0.count"].role.value == "optimizer"
    # params listed without the collection key; their count is flax's own tree count
    params = [t for t in ckpt.tensors if t.role.value == "parameter"]
    assert sum(t.numel for t in params) == truth["parameter_count_flax"]
    assert "layers_0.Dense_0.kernel" in ckpt and ckpt.metadata["scalars"] == {"step": 1}


def test_chunked_array_is_one_tensor_of_several_ranges():
    ckpt = load(FLAX / "chunked.msgpack")
    t = ckpt["embed"]
    assert t.shape == (30, 10) and len(t.extra["chunks"]) > 1 and t.offset is None


def test_mlp_variables_batch_stats_are_buffers():
    ckpt = load(FLAX / "mlp_variables.msgpack")
    roles = {t.stored_name.split(".")[0]: t.role.value for t in ckpt.tensors}
    assert roles == {"params": "parameter", "batch_stats": "buffer"}


def test_check_of_a_flax_model_beside_its_config_is_never_a_mismatch(cli):
    """transformers' Flax BERT beside its config.json: the HF formulas model PyTorch's names and
    layout (weight, (out, in)), not Flax's (kernel, (in, out)): incomplete, never mismatch."""
    for target in (FLAX / "hf_bert", FLAX / "hf_bert" / "flax_model.msgpack"):
        r = cli("check", str(target))
        assert r.returncode != 1 and "MISMATCH" not in r.stdout, r.stdout


def test_scan_says_safe(cli):
    r = cli("scan", str(FLAX))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dangerous" not in r.stdout.replace("0 dangerous", "")


# --- hostile files ------------------------------------------------------------------------------

def _str(s: str) -> bytes:
    b = s.encode()
    return bytes([0xA0 | len(b)]) + b if len(b) < 32 else b"\xd9" + bytes([len(b)]) + b


def _ext1(shape, dtype: str, data: bytes, code: int = 1) -> bytes:
    payload = b"\x93" + bytes([0x90 | len(shape)]) + b"".join(
        b"\xce" + struct.pack(">I", d) for d in shape) + _str(dtype) + b"\xc6" + struct.pack(
        ">I", len(data)) + data
    return b"\xc9" + struct.pack(">I", len(payload)) + bytes([code]) + payload


def _map(**items: bytes) -> bytes:
    return bytes([0x80 | len(items)]) + b"".join(_str(k) + v for k, v in items.items())


GOOD = _map(params=_map(w=_ext1((2, 3), "float32", b"\0" * 24)))


def _deep(n: int) -> bytes:
    body = _ext1((1,), "float32", b"\0" * 4)
    for _ in range(n):
        body = _map(a=body)
    return body


@pytest.mark.parametrize("what,data,match", [
    ("deep nesting", _deep(400), "nested deeper than 128"),
    ("bad dtype", _map(w=_ext1((2,), "object", b"\0" * 16)), "dtype 'object' is not"),
    ("bytes disagree", _map(w=_ext1((2, 3), "float32", b"\0" * 20)), "needs 24 bytes"),
    ("huge bin", _map(w=b"\xc7\x10\x01\x93\x91\x01\xa7float32\xc6\xff\xff\xff\xff"),
     "runs past the end|needs"),
    ("huge map", b"\x81\xa1w\xdf\xff\xff\xff\xff" + _ext1((1,), "float32", b"\0" * 4),
     "cannot fit"),
    ("huge ext", b"\x81\xa1w\xc9\x7f\xff\xff\xff\x01\x93", "runs past the end"),
    ("truncated", GOOD[:-5], "runs past the end|ended early|needs"),
    ("trailing bytes", GOOD + b"\x00", "after the msgpack value"),
    ("bad marker", _map(w=_ext1((1,), "float32", b"\0" * 4), x=b"\xc1"), "not a msgpack type"),
    ("negative dim", _map(w=_ext1((1,), "float32", b"\0" * 4).replace(
        b"\x91\xce\x00\x00\x00\x01", b"\x91\xff\xff\xff\xff\xff")), "shape"),
])
def test_hostile_files_fail_in_one_line(tmp_path, what, data, match):
    path = tmp_path / "x.msgpack"
    path.write_bytes(data)
    with pytest.raises(FormatError, match=match) as e:
        load(path, format="flax-msgpack")
    assert "\n" not in str(e.value) and path.name in str(e.value)


def test_truncated_anywhere(tmp_path):
    data = (FLAX / "mlp_variables.msgpack").read_bytes()
    path = tmp_path / "t.msgpack"
    for n in range(1, len(data), 37):
        path.write_bytes(data[:n])
        with pytest.raises(FormatError):
            load(path, format="flax-msgpack")


def test_hostile_file_on_the_command_line(cli, tmp_path):
    path = tmp_path / "deep.msgpack"
    path.write_bytes(_deep(400))
    r = cli("show", str(path))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_sniff_claims_flax_and_nothing_else(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(GOOD)
    assert detect(path)[0].name == "flax-msgpack"
    path.write_bytes(_map(a=_str("plain msgpack, no arrays")))  # a msgpack map, not flax's
    with pytest.raises(InspectorError, match="not a checkpoint"):
        detect(path)
