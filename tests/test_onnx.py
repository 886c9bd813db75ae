"""ONNX models: listings and values against onnx's own loader (the truth files written by
fixtures/onnx/make_fixtures.py with ``onnx.load`` and ``numpy_helper.to_array``), and hostile
files, built here from scratch with a few lines of protobuf encoding, refused in one line."""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from inspector.adapters import onnx as onnx_adapter
from inspector.adapters.errors import FormatError, InspectorError
from inspector.adapters.registry import detect, load
from inspector.adapters.source import LocalSource
from inspector.values import NUMPY_DTYPES, ValuesUnavailable, iter_values

from conftest import FIXTURES, load_truth, run_cli

ONNX = FIXTURES / "onnx"
MODELS = ["dtype_zoo.onnx", "transformer_legacy.onnx", "transformer_dynamo.onnx",
          "transformer_fp16.onnx", "lstm_external/lstm.onnx"]


def _truth(model: str) -> dict:
    return load_truth(ONNX / f"{model}.truth.json")


# -- listings and values against onnx ----------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_listing_is_onnx_initializers(model):
    truth = _truth(model)
    ckpt = load(ONNX / model)
    assert ckpt.format == "onnx"
    assert [t.stored_name for t in ckpt.tensors] == [t["stored_name"] for t in truth["tensors"]]
    for got, want in zip(ckpt.tensors, truth["tensors"], strict=True):
        assert list(got.shape) == want["shape"], got.stored_name
        assert got.dtype == want["dtype"], got.stored_name
        assert got.numel == want["numel"], got.stored_name
        assert got.extra.get("graph") == want.get("graph"), got.stored_name
        if want.get("sparse"):
            assert got.stored_numel == want["stored_numel"]
        external = want.get("external_data")
        if external:
            assert got.file == external["location"]
            assert got.offset == int(external.get("offset", 0))
            assert got.nbytes == int(external["length"])
        else:
            assert got.file is None
            assert got.extra.get("data", "none") in (want.get("data_field"), "string_data", "none")


@pytest.mark.parametrize("model", MODELS)
def test_model_facts_are_onnx_own(model):
    truth = _truth(model)
    ckpt = load(ONNX / model)
    hp = ckpt.hyperparameters
    assert hp["ir_version"] == truth["ir_version"]
    assert hp["opset_import"] == truth["opset_import"]
    assert hp.get("producer_name", "") == truth["producer_name"]
    assert hp.get("producer_version", "") == truth["producer_version"]
    assert hp["graph_name"] == truth["graph_name"]
    assert hp.get("metadata_props", {}) == truth["metadata_props"]
    assert hp.get("functions", 0) == truth["functions"]
    assert [o["name"] for o in hp["outputs"]] == truth["outputs"]
    initializers = {t["stored_name"] for t in truth["tensors"]}
    assert [i["name"] for i in hp["inputs"]] == [n for n in truth["inputs"]
                                                  if n not in initializers]
    assert ckpt.metadata["nodes"] == truth["nodes"]


def _canonical_sha(chunks: list[np.ndarray]) -> str:
    a = np.concatenate([c.reshape(-1) for c in chunks]) if chunks else np.zeros(0)
    if a.dtype.kind == "c":
        a = a.astype(np.complex128)
    elif a.dtype.kind in "iub":
        a = a.astype(np.int64)
    else:
        a = a.astype(np.float64)
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


@pytest.mark.parametrize("model", MODELS)
def test_values_are_numpy_helpers(model):
    """Every tensor whose dtype the value passes read gives exactly numpy_helper.to_array's
    values (raw_data, packed float/double fields, varint fields, external data); the others
    are refused with a reason, never read wrong."""
    truth = {t["stored_name"]: t for t in _truth(model)["tensors"]}
    ckpt = load(ONNX / model)
    unread = set()
    for entry in ckpt.tensors:
        want = truth[entry.stored_name]
        if entry.dtype in NUMPY_DTYPES and not want.get("sparse"):
            got = _canonical_sha(list(iter_values(ckpt, entry)))
            assert got == want["values"]["sha256"], entry.stored_name
        else:
            with pytest.raises(ValuesUnavailable):
                list(iter_values(ckpt, entry))
            unread.add("sparse" if want.get("sparse") else entry.dtype)
    # what the value passes do not decode: packed sub-byte types, strings, sparse layouts
    assert unread <= {"int4", "uint4", "int2", "uint2", "float4_e2m1fn", "float6_e2m3fn",
                      "float6_e3m2fn", "string", "sparse"}


def test_zoo_reads_every_data_field_kind():
    ckpt = load(ONNX / "dtype_zoo.onnx")
    fields = {t.extra.get("data") for t in ckpt.tensors}
    assert {"raw_data", "float_data", "double_data", "int32_data", "int64_data",
            "uint64_data", "string_data"} <= fields
    assert ckpt["then_w"].extra["graph"] == "pick/then_branch"


def test_stats_and_diff_values_through_the_cli():
    proc = run_cli("stats", str(ONNX / "lstm_external" / "lstm.onnx"))
    assert proc.returncode == 0, proc.stderr
    assert "onnx::LSTM_195" in proc.stdout
    proc = run_cli("diff", "--values", str(ONNX / "transformer_legacy.onnx"),
                   str(ONNX / "transformer_dynamo.onnx"))
    assert proc.returncode in (0, 1), proc.stderr
    assert "values equal" in proc.stdout


def test_torch_module_names_are_kept_and_grouped():
    ckpt = load(ONNX / "transformer_dynamo.onnx")
    torch_names = set(_truth("transformer_dynamo.onnx")["torch_parameter_names"])
    assert "encoder.layers.1.self_attn.out_proj.weight" in ckpt
    assert {t.name for t in ckpt.tensors} & torch_names
    proc = run_cli("show", "--groups", str(ONNX / "transformer_dynamo.onnx"))
    assert proc.returncode == 0, proc.stderr
    assert "attention" in proc.stdout and "transformer-lm" in proc.stdout


# -- a few lines of protobuf ---------------------------------------------------------------------


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _f(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _tensor(name: str, dims: list[int], raw: bytes | None = None, data_type: int = 1,
            external: dict[str, str] | None = None) -> bytes:
    out = b"".join(_f(1, d) for d in dims) + _f(2, data_type) + _f(8, name)
    if raw is not None:
        out += _f(9, raw)
    if external is not None:
        out += b"".join(_f(13, _f(1, k) + _f(2, v)) for k, v in external.items()) + _f(14, 1)
    return out


def _model(*initializers: bytes, nodes: tuple[bytes, ...] = ()) -> bytes:
    graph = b"".join(_f(1, n) for n in nodes) + _f(2, "g")
    graph += b"".join(_f(5, t) for t in initializers)
    return _f(1, 9) + _f(2, "hostile") + _f(7, graph) + _f(8, _f(2, 21))


def _write(tmp_path: Path, data: bytes, name: str = "model.onnx") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _refused(path: Path, *needles: str) -> str:
    with pytest.raises(InspectorError) as e:
        load(path)
    message = str(e.value)
    assert "\n" not in message and path.name in message, message
    for needle in needles:
        assert needle in message, message
    return message


def test_built_model_lists(tmp_path):
    w = np.arange(6, dtype=np.float32)
    path = _write(tmp_path, _model(_tensor("w", [2, 3], w.tobytes())))
    ckpt = load(path)
    assert [(t.name, t.shape, t.dtype) for t in ckpt.tensors] == [("w", (2, 3), "float32")]
    assert np.array_equal(np.concatenate(list(iter_values(ckpt, ckpt["w"]))), w)


def test_truncated_anywhere_is_one_line(tmp_path):
    data = _model(_tensor("w", [4, 4], bytes(64)), _tensor("b", [4], bytes(16)))
    claimed = 0
    for cut in range(len(data) - 1, 3, -7):
        path = _write(tmp_path, data[:cut])
        try:
            adapter, variant = detect(LocalSource(path))
        except InspectorError as e:  # too short to say it is ONNX: refused as unknown
            assert "\n" not in str(e)
            continue
        assert adapter.name == "onnx"
        _refused(path, "truncated")
        claimed += 1
    assert claimed > len(data) // 7 - 3
    path = _write(tmp_path, data[:40])
    proc = run_cli("show", str(path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "truncated" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("length", [2**31, 2**62, 2**64 - 1])
def test_huge_length_varint(tmp_path, length):
    tensor = _f(8, "w") + _f(2, 1) + _varint(9 << 3 | 2) + _varint(length) + b"\0" * 8
    path = _write(tmp_path, _model(tensor))
    _refused(path, "runs past the end")


def test_overlong_varint_and_bad_wire_type(tmp_path):
    path = _write(tmp_path, _model(_f(8, "w") + _varint(1 << 3) + b"\xff" * 11 + b"\x01"))
    _refused(path, "longer than 10 bytes")
    path = _write(tmp_path, _model(_f(8, "w") + bytes([2 << 3 | 7, 0])))
    _refused(path, "wire type 7")


def _if_node(graph: bytes) -> bytes:
    """An If node whose then_branch is ``graph``."""
    attribute = _f(1, "then_branch") + _f(20, 5) + _f(6, graph)
    return _f(1, "cond") + _f(2, "out") + _f(4, "If") + _f(5, attribute)


def test_deep_nesting_is_refused_as_protobuf_refuses_it(tmp_path):
    graph = _f(2, "leaf") + _f(5, _tensor("deep", [1], bytes(4)))
    for _ in range(40):  # 40 graphs inside If nodes: 3 messages each, over protobuf's 100
        graph = _f(1, _if_node(graph)) + _f(2, "g")
    data = _f(1, 9) + _f(7, graph) + _f(8, _f(2, 21))
    _refused(_write(tmp_path, data), "nested more than 100 deep")


def test_nested_subgraphs_within_the_limit_are_listed(tmp_path):
    graph = _f(2, "leaf") + _f(5, _tensor("deep", [1], bytes(4)))
    for _ in range(20):
        graph = _f(1, _if_node(graph)) + _f(2, "g")
    ckpt = load(_write(tmp_path, _f(1, 9) + _f(7, graph) + _f(8, _f(2, 21))))
    assert [t.name for t in ckpt.tensors] == ["deep"]
    assert ckpt["deep"].extra["graph"].count("then_branch") == 20


@pytest.mark.parametrize("location", ["../../etc/passwd", "/etc/passwd", "sub/../../x.bin",
                                      "..", "C:\\Windows\\x.bin"])
def test_external_location_leaving_the_directory_is_refused(tmp_path, location):
    tensor = _tensor("w", [2], external={"location": location, "offset": "0", "length": "8"})
    path = _write(tmp_path, _model(tensor))
    _refused(path, "external data location", repr(location), "refused")
    proc = run_cli("show", str(path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert repr(location) in proc.stderr


def test_external_symlink_pointing_out_is_refused(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(bytes(64))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    os.symlink(outside, model_dir / "weights.bin")
    tensor = _tensor("w", [2], external={"location": "weights.bin"})
    _refused(_write(model_dir, _model(tensor)), "weights.bin", "outside")


def test_external_data_problems_are_findings_and_values_refused(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    tensors = [
        _tensor("ok", [4], external={"location": "w.bin", "offset": "0", "length": "16"}),
        _tensor("past_end", [4], external={"location": "w.bin", "offset": "8"}),
        _tensor("missing", [4], external={"location": "gone.bin"}),
        _tensor("short_raw", [4], bytes(12)),
    ]
    ckpt = load(_write(tmp_path, _model(*tensors)))
    assert np.array_equal(np.concatenate(list(iter_values(ckpt, ckpt["ok"]))), np.arange(4))
    subjects = {f.subject for f in ckpt.findings}
    assert subjects == {"past_end", "missing", "short_raw"}
    for name in ("past_end", "missing", "short_raw"):
        with pytest.raises(ValuesUnavailable):
            list(iter_values(ckpt, ckpt[name]))
    with pytest.raises(FormatError, match="not a non-negative integer"):
        load(_write(tmp_path, _model(_tensor("w", [1], external={
            "location": "w.bin", "offset": "-4"})), "bad.onnx"))


def test_not_claimed_protobufs_and_lookalikes(tmp_path):
    # a TF SavedModel: field 1 varint, field 2 message: no graph (field 7)
    saved = _f(1, 1) + _f(2, _f(1, _f(1, "serve")) * 50)
    # the first bytes of a model, then noise where the graph should start
    noise = _f(1, 9) + _f(2, "x") + bytes([7 << 3 | 2, 5]) + b"\xff\xff\xff\xff\xff"
    for data in (saved, noise, b"\x08\x00\x00\x00{\"a\": 1}", b"\x08" + os.urandom(64)):
        path = _write(tmp_path, data, "x.pb")
        assert onnx_adapter.sniff(data[:4096], LocalSource(path)) is None
    # the fixtures of other formats are never claimed
    for other in ("safetensors", "torch", "mxnet", "keras"):
        for p in sorted((FIXTURES / other).rglob("*"))[:20]:
            if p.is_file() and p.stat().st_size:
                head = p.read_bytes()[:4096]
                assert onnx_adapter.sniff(head, LocalSource(p)) is None, p


class _CountingSource(LocalSource):
    """A local source whose views count the bytes sliced out of them."""

    sliced = 0

    @contextmanager
    def view(self):
        with super().view() as v:
            outer = self

            class Counting:
                def __len__(self):
                    return len(v)

                def __getitem__(self, key):
                    data = v[key]
                    outer.sliced += len(data)
                    return data

            yield Counting()


def test_listing_reads_the_structure_not_the_bytes(tmp_path):
    """Three 4 MiB initializers inline: the listing slices a few KiB of the 12 MiB file."""
    big = [_tensor(f"layer{i}.weight", [1024, 1024], bytes(4 << 20)) for i in range(3)]
    path = _write(tmp_path, _model(*big))
    source = _CountingSource(path)
    ckpt = load(source)
    assert len(ckpt.tensors) == 3 and ckpt.totals()["parameters"] == 3 << 20
    assert source.sliced < 16 << 10, source.sliced


def test_typed_fields_packed_unpacked_and_too_many(tmp_path):
    """int64_data packed, int64_data unpacked (one field per element), and more unpacked
    elements than are kept: the first two read as written, the third listed, values refused."""
    packed = _f(1, 3) + _f(2, 7) + _f(8, "packed") + _f(7, b"".join(_varint(v) for v in
                                                               (-1, 2**40, 3)))
    unpacked = _f(1, 3) + _f(2, 7) + _f(8, "unpacked") + b"".join(_f(7, v) for v in (5, -6, 7))
    n = onnx_adapter.MAX_SPANS + 1
    many = _f(1, n) + _f(2, 7) + _f(8, "many") + _f(7, 1) * n
    ckpt = load(_write(tmp_path, _model(packed, unpacked, many)))
    assert np.concatenate(list(iter_values(ckpt, ckpt["packed"]))).tolist() == [-1, 2**40, 3]
    assert np.concatenate(list(iter_values(ckpt, ckpt["unpacked"]))).tolist() == [5, -6, 7]
    assert ckpt["many"].shape == (n,)
    with pytest.raises(ValuesUnavailable, match="unpacked data fields"):
        list(iter_values(ckpt, ckpt["many"]))


def test_absurd_rank_is_refused(tmp_path):
    tensor = b"".join(_f(1, 1) for _ in range(onnx_adapter.MAX_RANK + 1)) + _f(2, 1) + _f(8, "w")
    _refused(_write(tmp_path, _model(tensor)), "dimensions")


def test_scan_verdicts(tmp_path):
    """scan: an exported model is safe, its external data named; a location leaving the
    directory is dangerous (onnx before 1.16 read it, CVE-2024-27318); a corrupt one an error."""
    from inspector.adapters.security.scan import scan_file

    res = scan_file(ONNX / "lstm_external" / "lstm.onnx")
    assert (res.kind, res.verdict) == ("onnx", "safe")
    assert "lstm.onnx.data" in res.items[0].text
    assert scan_file(ONNX / "transformer_dynamo.onnx").verdict == "safe"
    evil = _write(tmp_path, _model(
        _tensor("w", [2], external={"location": "../../etc/passwd"}),
        _tensor("v", [2], external={"location": "/etc/shadow"})))
    res = scan_file(evil)
    assert res.verdict == "dangerous"
    assert ["../../etc/passwd" in res.items[0].text, "/etc/shadow" in res.items[1].text] == [
        True, True]
    data = _model(_tensor("w", [4, 4], bytes(64)))
    res = scan_file(_write(tmp_path, data[:40], "cut.onnx"))
    assert res.verdict == "error" and "truncated" in res.items[0].text


def test_over_http_requests_grow_with_initializers_not_bytes(tmp_path):
    """16 inline 1 MiB initializers served with Range: one request for the head and one per
    initializer (the next header lies past each skipped raw_data), 64 KiB each, never the
    16 MiB; a model with external data lists in a request or two plus the data file's size."""
    import shutil
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from remote_servers import RangeServer

    tensors = [_tensor(f"layers.{i}.weight", [512, 512], bytes(1 << 20)) for i in range(16)]
    _write(tmp_path, _model(*tensors))
    shutil.copytree(ONNX / "lstm_external", tmp_path / "lstm")
    with RangeServer(tmp_path) as server:
        ckpt = load(f"{server.url}/model.onnx")
        assert [t.name for t in ckpt.tensors] == [f"layers.{i}.weight" for i in range(16)]
        gets = [r for r in server.log if r.method == "GET"]
        assert len(gets) <= 1 + 16, [(r.range, r.sent) for r in gets]
        assert server.bytes_sent() <= (1 + 16) * 64 << 10, server.bytes_sent()
        server.reset()
        ckpt = load(f"{server.url}/lstm/lstm.onnx")
        assert ckpt["onnx::LSTM_195"].file == "lstm.onnx.data"
        assert len(server.log) <= 3, [(r.method, r.path, r.range) for r in server.log]
        values = np.concatenate(list(iter_values(ckpt, ckpt["encoder.weight"])))
        want = {t["stored_name"]: t for t in _truth("lstm_external/lstm.onnx")["tensors"]}
        assert _canonical_sha([values]) == want["encoder.weight"]["values"]["sha256"]


def test_field_numbers_and_data_types_are_onnx_own():
    """The reader's table of field numbers and data types equals what onnx's generated
    classes say (recorded by make_fixtures.make_proto_facts from their descriptors)."""
    facts = load_truth(ONNX / "onnx_proto.json")
    for message, fields in onnx_adapter.FIELDS.items():
        assert fields.items() <= facts["fields"][message].items(), message
    numpy_names = {"object": "string"}  # STRING: numpy_helper's object arrays
    for name, rec in facts["data_types"].items():
        spelled = onnx_adapter.DTYPES[rec["number"]]
        assert spelled == numpy_names.get(rec["numpy"], rec["numpy"]), name
    assert len(onnx_adapter.DTYPES) == len(facts["data_types"])


def test_sniff_reads_past_a_long_doc_string(tmp_path):
    """Fields before the graph longer than the 4 KiB head (a doc_string) are skipped by
    ranged reads; opset_import before the graph (declaration order) is accepted too."""
    graph = _f(2, "g") + _f(5, _tensor("w", [2], bytes(8)))
    data = _f(1, 9) + _f(8, _f(2, 21)) + _f(6, "d" * 20000) + _f(7, graph)
    path = _write(tmp_path, data)
    assert onnx_adapter.sniff(data[:4096], LocalSource(path)) == "model"
    assert [t.name for t in load(path).tensors] == ["w"]


def test_training_info_and_function_subgraphs_are_listed(tmp_path):
    """Initializers of a TrainingInfoProto's algorithm graph and of a graph inside a
    model-local function's node are listed, with the graph they belong to; a name that a
    subgraph repeats gets its graph path as its canonical name."""
    algorithm = _f(2, "train") + _f(5, _tensor("lr", [], bytes(4)))
    sub = _f(2, "then") + _f(5, _tensor("w", [1], bytes(4)))
    function = _f(1, "F") + _f(7, _if_node(sub))
    graph = _f(2, "g") + _f(5, _tensor("w", [2], bytes(8)))
    data = (_f(1, 9) + _f(7, graph) + _f(8, _f(2, 21)) + _f(20, _f(2, algorithm))
            + _f(25, function))
    ckpt = load(_write(tmp_path, data))
    assert [(t.stored_name, t.name, t.extra.get("graph")) for t in ckpt.tensors] == [
        ("w", "w", None),
        ("lr", "lr", "training_info.algorithm"),
        ("w", "function F/If/then_branch/w", "function F/If/then_branch"),
    ]
    assert ckpt.hyperparameters["functions"] == 1


def test_escape_that_old_onnx_followed_is_refused_and_never_read(monkeypatch):
    """tests/corpus/onnx_escape: onnx 1.15.0 loaded the outside file as the tensor's values
    (recorded by make_onnx_escape.py, CVE-2024-27318); the tool refuses the listing, scan
    calls it dangerous, and neither ever opens the outside file."""
    hostile = Path(__file__).parent / "corpus" / "onnx_escape"
    record = load_truth(hostile / "model" / "escape.onnx.loaders.json")
    old, new = record["loaders"]
    assert old["onnx"] == "1.15.0" and old["loaded"] and old["values"] == record["secret_values"]
    assert not new["loaded"] and "outside" in new["error"]

    opened: list[str] = []
    for method in ("read", "open", "view"):
        original = getattr(LocalSource, method)

        def spy(self, *args, _original=original, **kwargs):
            opened.append(self.path.name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(LocalSource, method, spy)
    from inspector.adapters.security.scan import scan_file

    _refused(hostile / "model" / "escape.onnx", record["location"], "refused")
    assert scan_file(hostile / "model" / "escape.onnx").verdict == "dangerous"
    assert opened and "secret.bin" not in opened
