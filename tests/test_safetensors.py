"""safetensors adapter: header parsing and every validation rule, on byte-built files.

Counts in comments are computed by hand from the shapes written here; the real-producer fixtures
are compared with their ground truth in test_fixture_truth.py.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from inspector.adapters.errors import FormatError
from inspector.adapters.registry import load

from hostile import assert_clean_error


def write_st(
    path: Path, header: dict, data: bytes | None = None, *, raw_len: int | None = None
) -> Path:
    """Write a safetensors file from a header dict; ``data`` defaults to exactly what it indexes."""
    h = json.dumps(header).encode()
    if data is None:
        end = max(
            (v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0
        )
        data = bytes(end)
    n = len(h) if raw_len is None else raw_len
    path.write_bytes(struct.pack("<Q", n) + h + data)
    return path


def test_lists_header_in_order_with_metadata_and_offsets(tmp_path):
    p = write_st(
        tmp_path / "m.safetensors",
        {
            "__metadata__": {"format": "pt", "note": "x"},
            "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
            "b": {"dtype": "BF16", "shape": [3], "data_offsets": [24, 30]},
            "s": {"dtype": "I64", "shape": [], "data_offsets": [30, 38]},
        },
    )
    ck = load(p)
    assert ck.format == "safetensors"
    assert [(t.name, t.shape, t.dtype) for t in ck.tensors] == [
        ("w", (2, 3), "float32"),
        ("b", (3,), "bfloat16"),
        ("s", (), "int64"),
    ]
    assert ck.metadata["__metadata__"] == {"format": "pt", "note": "x"}
    data_start = 8 + len(
        json.dumps(
            {
                "__metadata__": {"format": "pt", "note": "x"},
                "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                "b": {"dtype": "BF16", "shape": [3], "data_offsets": [24, 30]},
                "s": {"dtype": "I64", "shape": [], "data_offsets": [30, 38]},
            }
        ).encode()
    )
    assert [t.offset for t in ck.tensors] == [data_start, data_start + 24, data_start + 30]
    # 6 + 3 + 1 elements; 24 + 6 + 8 bytes
    assert ck.totals()["all"] == 10
    assert ck.bytes_by_dtype() == {"bfloat16": 6, "float32": 24, "int64": 8}


@pytest.mark.parametrize(
    "tag,canonical,shape,nbytes",
    [
        ("BOOL", "bool", [3], 3),
        ("U8", "uint8", [3], 3),
        ("I8", "int8", [3], 3),
        ("U16", "uint16", [3], 6),
        ("I16", "int16", [3], 6),
        ("U32", "uint32", [3], 12),
        ("I32", "int32", [3], 12),
        ("U64", "uint64", [3], 24),
        ("I64", "int64", [3], 24),
        ("F16", "float16", [3], 6),
        ("BF16", "bfloat16", [3], 6),
        ("F32", "float32", [3], 12),
        ("F64", "float64", [3], 24),
        ("C64", "complex64", [3], 24),
        ("F8_E4M3", "float8_e4m3fn", [3], 3),
        ("F8_E5M2", "float8_e5m2", [3], 3),
        ("F8_E4M3FNUZ", "float8_e4m3fnuz", [3], 3),
        ("F8_E5M2FNUZ", "float8_e5m2fnuz", [3], 3),
        ("F8_E8M0", "float8_e8m0fnu", [3], 3),
        ("F6_E2M3", "float6_e2m3fn", [4], 3),  # 4 x 6 bits = 3 bytes
        ("F6_E3M2", "float6_e3m2fn", [4], 3),
        ("F4", "float4_e2m1fn", [2, 3], 3),  # 6 x 4 bits = 3 bytes
    ],
)
def test_every_spec_dtype(tmp_path, tag, canonical, shape, nbytes):
    p = write_st(
        tmp_path / "d.safetensors",
        {"t": {"dtype": tag, "shape": shape, "data_offsets": [0, nbytes]}},
    )
    (t,) = load(p).tensors
    assert (t.dtype, t.nbytes) == (canonical, nbytes)


def test_header_padding_and_empty_tensor(tmp_path):
    h = (
        json.dumps({"e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}}).encode()
        + b"    "
    )
    p = tmp_path / "p.safetensors"
    p.write_bytes(struct.pack("<Q", len(h)) + h)
    (t,) = load(p).tensors
    assert t.shape == (0, 3) and t.numel == 0 and t.nbytes == 0


def test_sniffs_by_content_not_extension(tmp_path):
    p = write_st(
        tmp_path / "weights.bin", {"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    )
    assert load(p).format == "safetensors"


BAD = {
    "overlap": (
        {
            "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
        },
        None,
        "overlaps",
    ),
    "hole": (
        {
            "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
            "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]},
        },
        None,
        "belong to no tensor",
    ),
    "trailing bytes": (
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
        bytes(8),
        "cover 4",
    ),
    "size mismatch": (
        {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
        None,
        "needs 12",
    ),
    "past the end": (
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
        bytes(8),
        "past the byte buffer",
    ),
    "unknown dtype": (
        {"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}},
        None,
        "unknown dtype 'F128'",
    ),
    "negative dim": (
        {"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}},
        None,
        "non-negative",
    ),
    "offsets reversed": (
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}},
        bytes(4),
        "end 0 < begin 4",
    ),
    "bad metadata": (
        {"__metadata__": {"a": 1}, "t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}},
        None,
        "__metadata__",
    ),
    "entry not an object": ({"a": [1, 2]}, b"", "not an object"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_header_is_one_clean_error(tmp_path, cli, case):
    header, data, needle = BAD[case]
    p = write_st(tmp_path / "bad.safetensors", header, data)
    with pytest.raises(FormatError, match="bad.safetensors"):
        load(p)
    assert_clean_error(cli("show", str(p)), str(p), needle)


def test_header_length_larger_than_file(tmp_path, cli):
    p = write_st(
        tmp_path / "long.safetensors",
        {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}},
        raw_len=5000,
    )
    assert_clean_error(cli("show", str(p)), str(p), "runs past the end of the file")


def test_header_length_2_pow_63_is_refused_before_allocating(tmp_path, cli):
    p = tmp_path / "huge.safetensors"
    p.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    # Sniffing rejects an absurd length, so force the adapter: the limit must still hold.
    assert_clean_error(cli("show", "--input-format", "safetensors", str(p)), str(p), "exceeds")


def test_duplicate_key(tmp_path, cli):
    h = b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    p = tmp_path / "dup.safetensors"
    p.write_bytes(struct.pack("<Q", len(h)) + h + b"\0")
    assert_clean_error(cli("show", str(p)), str(p), "duplicate key 'a'")


@pytest.mark.parametrize("cut", [3, 8, 20])
def test_truncated_file(tmp_path, cli, cut):
    full = write_st(
        tmp_path / "full.safetensors",
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
    )
    p = tmp_path / "cut.safetensors"
    p.write_bytes(full.read_bytes()[:cut])
    proc = cli("show", "--input-format", "safetensors", str(p))
    assert_clean_error(proc, str(p))


def test_truncated_data_section(tmp_path, cli):
    full = write_st(
        tmp_path / "full.safetensors",
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
    )
    p = tmp_path / "cut.safetensors"
    p.write_bytes(full.read_bytes()[:-5])
    assert_clean_error(cli("show", str(p)), str(p), "past the byte buffer")


# ---- sharded checkpoints ---------------------------------------------------------------


def make_shards(d: Path) -> Path:
    d.mkdir(exist_ok=True)
    write_st(
        d / "model-00001-of-00002.safetensors",
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
    )
    write_st(
        d / "model-00002-of-00002.safetensors",
        {
            "b": {"dtype": "F16", "shape": [3], "data_offsets": [0, 6]},
            "c": {"dtype": "F16", "shape": [1], "data_offsets": [6, 8]},
        },
    )
    index = d / "model.safetensors.index.json"
    index.write_text(
        json.dumps(
            {
                "metadata": {"total_size": 16},
                "weight_map": {
                    "a": "model-00001-of-00002.safetensors",
                    "b": "model-00002-of-00002.safetensors",
                    "c": "model-00002-of-00002.safetensors",
                },
            }
        )
    )
    return index


def test_sharded_index_opens_as_one_checkpoint(tmp_path):
    index = make_shards(tmp_path / "m")
    for target in (index, index.parent):
        ck = load(target)
        assert ck.format == "safetensors-sharded"
        assert [(t.name, t.file) for t in ck.tensors] == [
            ("a", "model-00001-of-00002.safetensors"),
            ("b", "model-00002-of-00002.safetensors"),
            ("c", "model-00002-of-00002.safetensors"),
        ]
        assert ck.totals()["all"] == 2 + 3 + 1
        assert ck.metadata["index_metadata"] == {"total_size": 16}


def _rewrite_index(index: Path, weight_map: dict) -> None:
    doc = json.loads(index.read_text())
    doc["weight_map"] = weight_map
    index.write_text(json.dumps(doc))


def test_sharded_missing_shard(tmp_path, cli):
    index = make_shards(tmp_path / "m")
    (index.parent / "model-00002-of-00002.safetensors").unlink()
    assert_clean_error(
        cli("show", str(index)), str(index), "shard 'model-00002-of-00002.safetensors'", "missing"
    )


def test_sharded_tensor_missing(tmp_path, cli):
    index = make_shards(tmp_path / "m")
    wm = json.loads(index.read_text())["weight_map"]
    wm["zzz"] = "model-00001-of-00002.safetensors"
    _rewrite_index(index, wm)
    assert_clean_error(cli("show", str(index)), str(index), "'zzz'", "not in shard")


def test_sharded_tensor_in_wrong_shard(tmp_path, cli):
    index = make_shards(tmp_path / "m")
    wm = json.loads(index.read_text())["weight_map"]
    wm["c"] = "model-00001-of-00002.safetensors"
    _rewrite_index(index, wm)
    assert_clean_error(cli("show", str(index)), str(index), "'c'")


def test_sharded_tensor_not_in_index(tmp_path, cli):
    index = make_shards(tmp_path / "m")
    wm = json.loads(index.read_text())["weight_map"]
    del wm["c"]
    _rewrite_index(index, wm)
    assert_clean_error(cli("show", str(index)), str(index), "missing from the index", "'c'")


@pytest.mark.parametrize(
    "shard", ["../outside.safetensors", "/etc/passwd", "sub/../../outside.safetensors"]
)
def test_sharded_refuses_paths_outside(tmp_path, cli, shard):
    index = make_shards(tmp_path / "m")
    write_st(
        tmp_path / "outside.safetensors",
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
    )
    _rewrite_index(index, {"a": shard})
    assert_clean_error(cli("show", str(index)), str(index), "shard name")


def test_sharded_refuses_symlink_outside(tmp_path, cli):
    index = make_shards(tmp_path / "m")
    outside = write_st(
        tmp_path / "outside.safetensors",
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
    )
    os.symlink(outside, index.parent / "link.safetensors")
    _rewrite_index(index, {"a": "link.safetensors"})
    assert_clean_error(cli("show", str(index)), str(index), "outside")


# The duplicate-key check's fast path (colons counted against parsed members) decides exactly
# as the object_pairs_hook check: every repeated key is still refused, by name.
_ENTRY = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}'
_DUPLICATES = {
    "top level, first value not an object": ('{"a":5,"a":' + _ENTRY + "}", "a"),
    "top level, both entries": ('{"a":' + _ENTRY + ',"a":' + _ENTRY + "}", "a"),
    "inside an entry": ('{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
                        "dtype"),
    "inside an entry, unknown key": (
        '{"a":{"x":1,"x":2,"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', "x"),
    "inside __metadata__": ('{"__metadata__":{"k":"v","k":"w"},"a":' + _ENTRY + "}", "k"),
    "nested in a list": ('{"a":{"dtype":"U8","shape":[{"q":1,"q":2}],"data_offsets":[0,1]}}',
                         "q"),
    "nested object": ('{"a":{"dtype":"U8","shape":{"n":{"m":1,"m":1}},"data_offsets":[0,1]}}',
                      "m"),
    "colon in a name hides nothing": ('{"a:b":' + _ENTRY + ',"a:b":' + _ENTRY + "}", "a:b"),
    "key tokens in a name": ('{"\\"dtype\\":":' + _ENTRY + ',"\\"dtype\\":":' + _ENTRY + "}",
                             '"dtype":'),
}


@pytest.mark.parametrize("case", sorted(_DUPLICATES))
def test_duplicate_keys_anywhere_are_refused(tmp_path, case):
    from inspector.adapters import safetensors as st

    header, key = _DUPLICATES[case]
    raw = header.encode()
    assert not st._surely_unique(json.loads(header), raw)
    p = tmp_path / "dup.safetensors"
    p.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0")
    with pytest.raises(FormatError, match=f"duplicate key {key!r}".replace("\\", "\\\\")):
        load(p)


@pytest.mark.parametrize(
    "names", [["a", "b"], ["enc:0/kernel", "x"], ['q"dtype"', "data_offsets"]])
def test_names_with_colons_or_key_tokens_list_as_before(tmp_path, names):
    """A header whose strings hold colons takes the exact check and lists as any other."""
    header: dict = {"__metadata__": {"note": "a: b"}}
    header.update({n: {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]}
                   for i, n in enumerate(names)})
    p = write_st(tmp_path / "n.safetensors", header)
    assert [t.name for t in load(p).tensors] == names


def test_fast_path_agrees_with_the_exact_check():
    """Random headers with repeated keys at any depth: whenever the fast path says unique, the
    exact check finds no repeated key."""
    from hypothesis import given, settings
    from hypothesis import strategies as st_

    from inspector.adapters import safetensors as st

    key = st_.sampled_from(["a", "b", "dtype", "shape", "x:y", '"dtype"'])
    leaf = st_.one_of(st_.integers(0, 9), st_.sampled_from(["U8", "v:w", "a"]))
    value = st_.recursive(leaf, lambda inner: st_.one_of(
        st_.lists(inner, max_size=3),
        st_.lists(st_.tuples(key, inner), max_size=4)), max_leaves=12)

    def text(v: object) -> str:
        if isinstance(v, list) and v and all(isinstance(x, tuple) for x in v):
            return "{" + ",".join(json.dumps(k) + ":" + text(x) for k, x in v) + "}"
        if isinstance(v, list):
            return "[" + ",".join(text(x) for x in v if not isinstance(x, tuple)) + "]"
        return json.dumps(v)

    @settings(max_examples=300, deadline=None)
    @given(st_.lists(st_.tuples(key, value), max_size=5))
    def check(members):
        header = "{" + ",".join(json.dumps(k) + ":" + text(v) for k, v in members) + "}"
        parsed = json.loads(header)
        if st._surely_unique(parsed, header.encode()):
            json.loads(header, object_pairs_hook=st._no_duplicates)  # raises on a repeat

    check()
