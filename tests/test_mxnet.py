"""MXNet NDArray reader on byte-built records: every layout, the 0-d quirk, hostile sizes.

Layouts follow shared/formats/mxnet-ndarray.md (MXNet ndarray.cc Save/Load); the real files of
mxnet 0.10, 0.11, 1.9.1 and 2.0 are checked against their producer in test_fixture_truth.py.
"""

from __future__ import annotations

import struct

import pytest

from inspector.adapters.registry import load

from hostile import assert_clean_error

V1, V2, V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA


def tshape(*dims: int) -> bytes:
    return struct.pack("<i", len(dims)) + struct.pack(f"<{len(dims)}q", *dims)


def dense_v2(*dims: int, flag: int = 0, itemsize: int = 4, magic: int = V2) -> bytes:
    n = 1
    for d in dims:
        n *= d
    return struct.pack("<Ii", magic, 0) + tshape(*dims) + struct.pack("<iii", 1, 0, flag) + bytes(n * itemsize)


def container(records: list[bytes], names: list[str] | None) -> bytes:
    out = struct.pack("<QQQ", 0x112, 0, len(records)) + b"".join(records)
    names = names or []
    out += struct.pack("<Q", len(names))
    for n in names:
        raw = n.encode()
        out += struct.pack("<Q", len(raw)) + raw
    return out


def test_v2_dict_with_arg_aux(tmp_path):
    p = tmp_path / "m.params"
    p.write_bytes(container([dense_v2(4, 3), dense_v2(4)], ["arg:fc_weight", "aux:bn_moving_var"]))
    ck = load(p)
    assert [(t.name, t.stored_name, t.shape, t.role.value) for t in ck.tensors] == [
        ("fc_weight", "arg:fc_weight", (4, 3), "parameter"),
        ("bn_moving_var", "aux:bn_moving_var", (4,), "buffer"),
    ]
    # header 24 + record 0 = magic/stype 8 + shape 4+16 + ctx/type 12 -> data at 64
    assert ck.tensors[0].offset == 24 + 8 + 20 + 12


def test_unnamed_list_gets_index_names(tmp_path):
    p = tmp_path / "l.params"
    p.write_bytes(container([dense_v2(2), dense_v2(3, flag=6, itemsize=8)], None))
    ck = load(p)
    assert [(t.name, t.dtype) for t in ck.tensors] == [("0", "float32"), ("1", "int64")]


def test_v1_and_v0_layouts(tmp_path):
    v1 = struct.pack("<II", V1, 2) + struct.pack("<2q", 2, 3) + struct.pack("<iii", 1, 0, 2) + bytes(12)
    v0 = struct.pack("<I", 1) + struct.pack("<I", 5) + struct.pack("<iii", 1, 0, 3) + bytes(5)
    p = tmp_path / "old.params"
    p.write_bytes(container([v1, v0], ["a", "b"]))
    ck = load(p)
    assert [(t.shape, t.dtype, t.extra["record"]) for t in ck.tensors] == [
        ((2, 3), "float16", "v1"),
        ((5,), "uint8", "v0"),
    ]


def test_v2_zero_d_written_by_save_is_read_as_scalar(tmp_path):
    # MXNet 1.9.1 Save: ndim 0, then context, type flag and 4 data bytes.
    scalar = struct.pack("<Ii", V2, 0) + struct.pack("<i", 0) + struct.pack("<iii", 1, 0, 0) + bytes(4)
    p = tmp_path / "s.params"
    p.write_bytes(container([scalar, dense_v2(2)], ["s", "after"]))
    ck = load(p)
    assert [(t.name, t.shape, t.numel) for t in ck.tensors] == [("s", (), 1), ("after", (2,), 2)]


def test_v3_zero_size_and_scalar(tmp_path):
    p = tmp_path / "np.params"
    p.write_bytes(container([dense_v2(magic=V3), dense_v2(0, 3, magic=V3)], ["scalar", "empty"]))
    ck = load(p)
    assert [(t.shape, t.numel, t.nbytes) for t in ck.tensors] == [((), 1, 4), ((0, 3), 0, 0)]


def test_row_sparse_counts_logical_and_stored(tmp_path):
    rec = (
        struct.pack("<Ii", V2, 1)
        + tshape(2, 4)  # storage shape: 2 stored rows
        + tshape(6, 4)  # logical shape
        + struct.pack("<iii", 1, 0, 0)
        + struct.pack("<i", 6)
        + tshape(2)  # aux indices: int64 (2,)
        + bytes(8 * 4)
        + bytes(2 * 8)
    )
    p = tmp_path / "rsp.params"
    p.write_bytes(container([rec], ["rsp"]))
    (t,) = load(p).tensors
    assert (t.shape, t.numel, t.stored_numel, t.nbytes) == ((6, 4), 24, 8, 32 + 16)
    assert t.extra["aux"] == {"indices": {"dtype": "int64", "shape": (2,)}}


HOSTILE = {
    "array count 2^60": (struct.pack("<QQQ", 0x112, 0, 2**60) + bytes(16), "cannot fit"),
    "ndim 2^31-1": (struct.pack("<QQQ", 0x112, 0, 1) + struct.pack("<Iii", V2, 0, 2**31 - 1) + bytes(16), "ndim"),
    "negative dim": (struct.pack("<QQQ", 0x112, 0, 1) + struct.pack("<Iii", V2, 0, 1) + struct.pack("<q", -5) + bytes(20), "negative"),
    "data past end": (container([dense_v2(1000)], ["a"])[:200], "truncated"),
    "shape product overflows int64": (
        struct.pack("<QQQ", 0x112, 0, 1) + struct.pack("<Iii", V2, 0, 2) + struct.pack("<2q", 2**62, 2**62) + struct.pack("<iii", 1, 0, 0) + bytes(8),
        "truncated",
    ),
    "unknown type flag": (struct.pack("<QQQ", 0x112, 0, 1) + struct.pack("<Ii", V2, 0) + tshape(1) + struct.pack("<iii", 1, 0, 99) + bytes(8), "type flag 99"),
    "unknown storage type": (struct.pack("<QQQ", 0x112, 0, 1) + struct.pack("<Ii", V2, 7) + bytes(16), "storage type 7"),
    "name count mismatch": (container([dense_v2(1)], None)[:-8] + struct.pack("<Q", 3) + bytes(8), "names for 1 arrays"),
    "name length huge": (container([dense_v2(1)], None)[:-8] + struct.pack("<QQ", 1, 2**62), "truncated"),
    "trailing garbage": (container([dense_v2(1)], ["a"]) + b"xyz", "unexpected bytes"),
    "header only": (struct.pack("<QQ", 0x112, 0), "truncated"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_records_are_one_clean_error(tmp_path, cli, case):
    data, needle = HOSTILE[case]
    p = tmp_path / "bad.params"
    p.write_bytes(data)
    assert_clean_error(cli("show", str(p)), str(p), needle)
