"""orbax-checkpoint directories: listings equal orbax's own metadata() (names, shapes, dtypes;
for OCDBT read from tensorstore's database through zstandard), roles, values of uncompressed
zarr arrays equal orbax's restore; damaged metadata or a damaged OCDBT database fails in one
line; without zstandard OCDBT dtypes are named unknown with the install hint."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import sys

import numpy as np
import pytest

from inspector import values
from inspector.adapters import ocdbt
from inspector.adapters.errors import FormatError
from inspector.adapters.ocdbt import crc32c
from inspector.adapters.registry import load

from conftest import FIXTURES, load_truth

ORBAX = FIXTURES / "orbax"
LAYOUTS = ["ocdbt", "zarr2", "zarr2_raw", "zarr3", "manager"]


@pytest.mark.parametrize("name", LAYOUTS)
def test_listing_equals_orbax_metadata(name):
    truth = load_truth(ORBAX / f"{name}.truth.json")
    ckpt = load(ORBAX / name)
    assert ckpt.format == "orbax"
    got = {t.stored_name: t for t in ckpt.tensors}
    assert sorted(got) == sorted(w["stored_name"] for w in truth["tensors"])
    ocdbt = truth["layout"] in ("ocdbt", "manager")
    for w in truth["tensors"]:
        t = got[w["stored_name"]]
        assert list(t.shape) == w["shape"] and t.role.value == w["role"], w
        assert t.dtype == w["dtype"], w
    params = sum(t.numel for t in ckpt.tensors if t.role.value == "parameter")
    assert params == truth["parameter_count"]
    if ocdbt:
        assert any("read from each array's zarr metadata in the OCDBT" in f.message
                   for f in ckpt.findings)
        from inspector.reports.listing import listing

        # every size is known now: the totals name no tensor of unknown size
        assert "bytes_unknown_tensors" not in listing(ckpt)["totals"]


def test_sharded_arrays_list_their_global_shape():
    """orbax writes each device's piece (write_shape); the array's own .zarray in the OCDBT
    database holds the global shape, which equals orbax's metadata()."""
    truth = load_truth(ORBAX / "sharded.truth.json")
    ckpt = load(ORBAX / "sharded")
    assert sorted(t.stored_name for t in ckpt.tensors) == sorted(
        w["stored_name"] for w in truth["tensors"])
    for w in truth["tensors"]:
        t = ckpt[w["stored_name"]]
        assert (list(t.shape), t.dtype) == (w["shape"], w["dtype"]), w
        assert not t.extra.get("shape_is_write_shape")
    assert not any(f.severity == "warning" for f in ckpt.findings)
    # the write_shape really differs: the global shape did not come from _METADATA
    meta = json.loads((ORBAX / "sharded" / "_METADATA").read_text())["tree_metadata"]
    written = {".".join(k["key"] for k in leaf["key_metadata"]):
               leaf["value_metadata"]["write_shape"] for leaf in meta.values()}
    assert any(written[w["stored_name"]] != w["shape"] for w in truth["tensors"])


@pytest.mark.parametrize("name", ["ocdbt", "sharded"])
def test_without_zstandard_ocdbt_dtypes_are_unknown_with_the_hint(monkeypatch, name):
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard -> ImportError
    truth = load_truth(ORBAX / f"{name}.truth.json")
    ckpt = load(ORBAX / name)
    assert {t.dtype for t in ckpt.tensors} == {"unknown"}
    assert any("pip install 'ckpt-inspector[orbax]'" in f.message for f in ckpt.findings)
    if name == "sharded":
        # the shape is the piece one device wrote, and a warning says so
        assert all(t.extra.get("shape_is_write_shape") for t in ckpt.tensors)
        assert any("not the array's" in f.message and f.severity == "warning"
                   for f in ckpt.findings)
        assert any(list(ckpt[w["stored_name"]].shape) != w["shape"] for w in truth["tensors"])
    else:
        for w in truth["tensors"]:
            assert list(ckpt[w["stored_name"]].shape) == w["shape"], w


def test_manager_lists_the_latest_step_and_names_the_others():
    truth = load_truth(ORBAX / "manager.truth.json")
    ckpt = load(ORBAX / "manager")
    assert ckpt.metadata["steps"] == truth["all_steps"]
    assert ckpt.metadata["step"] == truth["latest_step"]
    assert any("steps here" in f.message for f in ckpt.findings)
    # a step folder alone is one checkpoint too
    assert len(load(ORBAX / "manager" / "1").tensors) == len(truth["tensors"])


def test_uncompressed_zarr_values_equal_orbax_restore():
    truth = load_truth(ORBAX / "zarr2_raw.truth.json")
    ckpt = load(ORBAX / "zarr2_raw")
    for w in truth["tensors"]:
        t = ckpt[w["stored_name"]]
        x = np.concatenate(list(values.iter_values(ckpt, t))).astype("<f4")
        assert hashlib.sha256(x.tobytes()).hexdigest() == w["values"]["sha256_f32le"], t.name


@pytest.mark.parametrize("name,why", [("zarr2", "zstd-compressed"), ("ocdbt", "values not readable: chunks are zstd"),
                                      ("zarr3", "zarr v3")])
def test_unreadable_values_say_why(name, why):
    ckpt = load(ORBAX / name)
    with pytest.raises(FormatError, match=why):
        list(values.iter_values(ckpt, ckpt.tensors[1]))


def _copy(tmp_path, name="zarr2_raw"):
    dst = tmp_path / name
    shutil.copytree(ORBAX / name, dst)
    return dst


@pytest.mark.parametrize("edit,match", [
    (lambda d: (d / "_METADATA").write_text("{not json"), "not readable JSON"),
    (lambda d: (d / "_METADATA").write_text('{"x": 1}'), "no 'tree_metadata'"),
    (lambda d: shutil.rmtree(d / "params.Dense_0.kernel"), "folder is missing"),
    (lambda d: (d / "params.Dense_0.kernel" / ".zarray").write_text(
        json.dumps({"shape": [-1], "dtype": "<f4"})), "not a list of non-negative"),
    (lambda d: (d / "params.Dense_0.kernel" / ".zarray").write_text(
        json.dumps({"shape": [2], "dtype": "|O"})), "zarr dtype '|O' not known"),
    (lambda d: (d / "_METADATA").write_text("[" * 100000 + "]" * 100000), "JSON|tree_metadata"),
])
def test_damaged_metadata_fails_in_one_line(tmp_path, edit, match):
    d = _copy(tmp_path)
    edit(d)
    with pytest.raises(FormatError, match=match) as e:
        load(d)
    assert "\n" not in str(e.value)


def test_scan_says_nothing_dangerous(cli):
    r = cli("scan", str(ORBAX / "ocdbt"), str(ORBAX / "zarr2"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 dangerous" in r.stdout


def test_crc32c_check_value():
    # the CRC-32C check value (RFC 3720 / iSCSI); the fixtures' real manifests and nodes pass it
    assert crc32c(b"123456789") == 0xE3069283


# -- a hand-built OCDBT database (tensorstore's format, kvstore/ocdbt/index.rst) -------------

def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _envelope(magic, body, compression=0):
    """magic u32be, length u64le, version 0, compression (0 none, 1 zstd), body, CRC-32C."""
    inner = _varint(0) + _varint(compression) + body
    head = struct.pack(">I", magic) + struct.pack("<Q", 12 + len(inner) + 4)
    return head + inner + struct.pack("<I", crc32c(head + inner))


def _table(paths):
    """A data file table without prefix compression, base paths empty."""
    v = _varint
    return (v(len(paths)) + b"".join(v(0) for _ in paths[1:])
            + b"".join(v(len(p)) for p in paths) + b"".join(v(0) for _ in paths) + b"".join(paths))


def _manifest(height, offset, length, num_keys=1, path=b"d/nodes"):
    v = _varint
    body = (bytes(16) + v(0) + v(100) + v(1 << 20) + bytes([4]) + v(0) + _table([path])
            + v(1) + v(1) + bytes([height]) + v(0) + v(offset) + v(length)
            + v(num_keys) + v(length) + v(0) + struct.pack("<Q", 0))
    return _envelope(0x0CDB3A2A, body)


def _leaf(entries, files=(b"d/values",)):
    """entries: (key, value bytes) inline, or (key, (length, file index, offset)) indirect."""
    v = _varint
    keys = [k for k, _ in entries]
    inline = [x for _, x in entries if isinstance(x, bytes)]
    ind = [x for _, x in entries if not isinstance(x, bytes)]
    body = (bytes([0]) + _table(list(files)) + v(len(entries))
            + b"".join(v(0) for _ in keys[1:]) + b"".join(v(len(k)) for k in keys) + b"".join(keys)
            + b"".join(v(len(x) if isinstance(x, bytes) else x[0]) for _, x in entries)
            + bytes(0 if isinstance(x, bytes) else 1 for _, x in entries)
            + b"".join(v(x[1]) for x in ind) + b"".join(v(x[2]) for x in ind) + b"".join(inline))
    return _envelope(0x0CDB20DE, body)


def _interior(children, height):
    """children: (key, offset, length) of nodes in d/nodes."""
    v = _varint
    keys = [k for k, _, _ in children]
    n = len(children)
    body = (bytes([height]) + _table([b"d/nodes"]) + v(n)
            + b"".join(v(0) for _ in keys[1:]) + b"".join(v(len(k)) for k in keys)
            + b"".join(v(0) for _ in keys) + b"".join(keys)
            + b"".join(v(0) for _ in keys) + b"".join(v(o) for _, o, _ in children)
            + b"".join(v(ln) for _, _, ln in children) + b"".join(v(1) + v(ln) + v(0) for _, _, ln in children))
    return _envelope(0x0CDB20DE, body)


def _zarray(shape, dtype):
    return json.dumps({"shape": shape, "chunks": shape, "dtype": dtype, "compressor": None,
                       "zarr_format": 2}).encode()


def _db(tmp_path, nodes, manifest, values=b""):
    """The sharded fixture with its database replaced by a hand-built one."""
    d = tmp_path / "db"
    shutil.copytree(ORBAX / "sharded", d)
    (d / "manifest.ocdbt").write_bytes(manifest)
    (d / "d" / "nodes").write_bytes(nodes)
    (d / "d" / "values").write_bytes(values)
    return d


def test_hand_built_database_is_read_inline_indirect_and_through_an_interior_node(tmp_path):
    r_meta, v_meta = _zarray([5, 7], "<i2"), _zarray([9], "bfloat16")
    leaf = _leaf([(b"params.r/.zarray", r_meta), (b"params.v/.zarray", (len(v_meta), 0, 3))])
    root = _interior([(b"params.", 0, len(leaf))], height=1)
    d = _db(tmp_path, leaf + root, _manifest(1, len(leaf), len(root)), b"xyz" + v_meta)
    ckpt = load(d)
    assert (ckpt["params.r"].shape, ckpt["params.r"].dtype) == ((5, 7), "int16")
    assert (ckpt["params.v"].shape, ckpt["params.v"].dtype) == ((9,), "bfloat16")
    # params.w has no .zarray in this database: said, not guessed
    assert ckpt["params.w"].dtype == "unknown"
    assert any("no .zarray in the OCDBT database" in f.message for f in ckpt.findings)
    with pytest.raises(FormatError, match="values not readable"):
        list(values.iter_values(ckpt, ckpt["params.r"]))


def _good_leaf():
    return _leaf([(b"params.r/.zarray", _zarray([2], "<f4"))])


@pytest.mark.parametrize("make,match", [
    # manifest: truncated, bad magic, huge length, flipped byte (checksum)
    (lambda: (_good_leaf(), _manifest(0, 0, len(_good_leaf()))[:20]), "header says"),
    (lambda: (_good_leaf(), b"\x00" + _manifest(0, 0, len(_good_leaf()))[1:]), "magic"),
    (lambda: (_good_leaf(), _manifest(0, 0, len(_good_leaf()))[:4] + struct.pack("<Q", 1 << 62)
              + _manifest(0, 0, len(_good_leaf()))[12:]), "header says"),
    (lambda: (_good_leaf(), (lambda m: m[:30] + bytes([m[30] ^ 1]) + m[31:])(
        _manifest(0, 0, len(_good_leaf())))), "CRC-32C"),
    # node reference past the end of its data file, or a node shorter than a header
    (lambda: (_good_leaf(), _manifest(0, 0, 1 << 40)), "over the|past the end"),
    (lambda: (_good_leaf(), _manifest(0, 5, 8)), "shorter than a header"),
    # a data file path that leaves the checkpoint
    (lambda: (_good_leaf(), _manifest(0, 0, len(_good_leaf()), path=b"../../etc/x")),
     "leaves the directory"),
    # an interior node that names itself (a cycle): its height is not one below its parent's
    (lambda: (_self_node(), _manifest(1, 0, len(_self_node()))), "height 1, 0 expected"),
    # a leaf announcing 2**40 entries, or 500000 in a few bytes, or a value of 2**60 bytes
    (lambda: (_envelope(0x0CDB20DE, bytes([0]) + _table([]) + _varint(1 << 40)),
              None), "over the limit 1048576"),
    (lambda: (_envelope(0x0CDB20DE, bytes([0]) + _table([]) + _varint(500_000)),
              None), "entries announced"),
    (lambda: (_envelope(0x0CDB20DE, bytes([0]) + _table([]) + _varint(1) + _varint(1) + b"k"
                        + _varint(1 << 60) + bytes([0])), None), "bytes announced"),
])
def test_damaged_ocdbt_database_fails_in_one_line(tmp_path, make, match):
    nodes, manifest = make()
    if manifest is None:
        manifest = _manifest(0, 0, len(nodes))
    d = _db(tmp_path, nodes, manifest)
    with pytest.raises(FormatError, match=match) as e:
        load(d)
    msg = str(e.value)
    assert "\n" not in msg and ("OCDBT" in msg or "leaves the directory" in msg), msg


@pytest.mark.parametrize("edit,match", [
    (lambda d: (d / "manifest.ocdbt").write_bytes((d / "manifest.ocdbt").read_bytes()[:-9]),
     "header says"),
    (lambda d: (d / "manifest.ocdbt").write_bytes(b""), "shorter than a header"),
    # one flipped byte in each real data file (B+tree nodes, values): the checksum says so
    (lambda d: [f.write_bytes(f.read_bytes()[:40] + bytes([f.read_bytes()[40] ^ 0x10])
                              + f.read_bytes()[41:]) for f in (d / "d").iterdir()], "CRC-32C"),
    (lambda d: shutil.rmtree(d / "d"), "is missing"),
])
def test_damaged_real_ocdbt_fixture_fails_in_one_line(tmp_path, edit, match):
    d = _copy(tmp_path, "ocdbt")
    edit(d)
    with pytest.raises(FormatError, match=match) as e:
        load(d)
    assert "\n" not in str(e.value)


def _self_node():
    """An interior node at offset 0 of d/nodes whose one child is itself."""
    probe = _interior([(b"p", 0, 0)], 1)
    return _interior([(b"p", 0, len(probe))], 1)


def test_self_referencing_node_is_refused_by_the_cli(tmp_path, cli):
    node = _self_node()
    d = _db(tmp_path, node, _manifest(1, 0, len(node)))
    r = cli("show", str(d))
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "height 1, 0 expected" in r.stdout + r.stderr


def test_numbered_manifest_kind_reads_the_newest_generation(tmp_path):
    """manifest_kind 1: manifest.ocdbt holds the config only; versions are in the newest
    manifest.<16 hex digits>."""
    leaf = _leaf([(b"params.r/.zarray", _zarray([5, 7], "<u1"))])
    config = _envelope(0x0CDB3A2A, bytes(16) + _varint(1) + _varint(100) + _varint(1 << 20)
                       + bytes([4]) + _varint(0))
    d = _db(tmp_path, leaf, config)
    (d / "manifest.0000000000000001").write_bytes(_manifest(0, 0, 0))  # older: empty reference
    (d / "manifest.0000000000000002").write_bytes(_manifest(0, 0, len(leaf)))
    ckpt = load(d)
    assert (ckpt["params.r"].shape, ckpt["params.r"].dtype) == ((5, 7), "uint8")
    (d / "manifest.0000000000000001").rename(d / "keep")
    (d / "manifest.0000000000000002").unlink()
    with pytest.raises(FormatError, match="numbered kind but no manifest"):
        load(d)


def _zstd_leaf(payload_size):
    zstandard = pytest.importorskip("zstandard")
    body = bytes([0]) + _table([]) + _varint(1) + _varint(1) + b"k" + _varint(payload_size) \
        + bytes([0]) + bytes(payload_size)
    return _envelope(0x0CDB20DE, zstandard.ZstdCompressor().compress(body), compression=1)


def test_zstd_nodes_are_decoded_and_bounded(tmp_path, monkeypatch):
    d = _db(tmp_path, _zstd_leaf(5000), _manifest(0, 0, len(_zstd_leaf(5000))))
    load(d)  # a compressed leaf is read (its one key is no array's: nothing listed from it)
    monkeypatch.setattr(ocdbt, "MAX_DECODED", 1000)
    with pytest.raises(FormatError, match="decompresses to over 1000 bytes"):
        load(d)
    monkeypatch.undo()
    zstandard = pytest.importorskip("zstandard")
    whole = zstandard.ZstdCompressor().compress(bytes(range(256)) * 20)
    for i, (bad, why) in enumerate([(b"\x28\xb5\x2f\xfd" + bytes(20), "not decodable|truncated"),
                                    (whole[:-3], "truncated"), (whole + b"x", "followed by|not decodable")]):
        node = _envelope(0x0CDB20DE, bad, compression=1)
        d = _db(tmp_path / str(i), node, _manifest(0, 0, len(node)))
        with pytest.raises(FormatError, match=why):
            load(d)


def test_multi_level_tensorstore_database_equals_tensorstore_reads():
    """A database tensorstore wrote with 512-byte nodes (a B+tree of height 3), inline and
    out-of-line values, three commits and an overwrite: every key of the newest version and
    its value equal tensorstore's own list() and read()."""
    truth = load_truth(ORBAX / "ocdbt_small_nodes.truth.json")
    from inspector.adapters.source import LocalSource

    got = ocdbt.read_values(LocalSource(ORBAX / "ocdbt_small_nodes"), lambda k: True)
    assert {k: hashlib.sha256(v).hexdigest() for k, v in got.items()} == truth["values_sha256"]
    only = ocdbt.read_values(LocalSource(ORBAX / "ocdbt_small_nodes"),
                             lambda k: k.endswith("/.zarray"))
    assert len(only) == 120 and json.loads(only["layer000.w/.zarray"])["rewritten"] is True


def test_a_node_referenced_many_times_stops_at_the_read_budget(tmp_path, monkeypatch):
    leaf = _good_leaf()
    root = _interior([(b"k%04d" % i, 0, len(leaf)) for i in range(1000)], height=1)
    d = _db(tmp_path, leaf + root, _manifest(1, len(leaf), len(root)))
    monkeypatch.setattr(ocdbt, "MAX_TOTAL", 100 * len(leaf))
    with pytest.raises(FormatError, match="total over"):
        load(d)
