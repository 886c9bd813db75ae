"""A third-party format, registered only through the entry-point group, gets `show`, `check`,
`diff --values` and `stats` with no change to the core: its adapter records byte offsets and the registry's
default value reader does the rest.

The plugin's format ("tinyckpt": b"TINY", a version byte, a u32 header length, a JSON header, raw
data) is filled
with the real tensors of the GPT-2 fixture written by transformers, copied byte for byte by this
test (the safetensors header is parsed here with json, not by the tool), so the check has a
producer's truth to meet: transformers' own num_parameters() in the fixture's truth file.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

import inspector.adapters.registry as registry
from inspector.adapters.errors import FormatError
from inspector.adapters.model import Checkpoint, TensorEntry
from inspector.adapters.source import Source
from inspector.cli import main

from conftest import FIXTURES

GPT2 = FIXTURES / "hf" / "gpt2_tiny"
MAGIC = b"TINY"
ST_DTYPES = {"F32": ("float32", 4), "F16": ("float16", 2), "I64": ("int64", 8)}


def _sniff(head: bytes, source: Source) -> str | None:
    return "v1" if head.startswith(MAGIC) else None


def _open(source: Source, variant: str) -> Checkpoint:
    """The whole third-party adapter: metadata only, through the source."""
    raw = source.read(0, 9)
    (n,) = struct.unpack_from("<I", raw, 5)
    if n > source.size - 9:
        raise FormatError("header runs past the end", source.where)
    header = json.loads(source.read(9, n))
    base = 9 + n
    tensors = [
        TensorEntry(
            stored_name=t["name"],
            name=t["name"],
            shape=tuple(t["shape"]),
            dtype=t["dtype"],
            nbytes=t["nbytes"],
            storage=t["name"],
            offset=base + t["offset"],
        )
        for t in header["tensors"]
    ]
    return Checkpoint(paths=(source.where,), format="tinyckpt", tensors=tensors)


TINY = registry.Adapter("tinyckpt", "a third-party test format", (".tiny",), _sniff, _open)


class _EntryPoint:
    name, value = "tinyckpt", "tinyckpt_plugin:ADAPTER"

    def load(self) -> registry.Adapter:
        return TINY


@pytest.fixture
def plugin(monkeypatch):
    import importlib.metadata

    real = importlib.metadata.entry_points

    def entry_points(**kw):
        if kw.get("group") == registry.ENTRY_POINT_GROUP:
            return [_EntryPoint()]
        return real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(registry, "_cache", None)
    yield
    registry._cache = None


def _write_tiny(out: Path, change: str | None = None) -> dict:
    """The GPT-2 fixture's tensors in the tiny format; ``change`` flips one byte of one tensor."""
    blob = (GPT2 / "model.safetensors").read_bytes()
    (n,) = struct.unpack_from("<Q", blob)
    header = json.loads(blob[8 : 8 + n])
    header.pop("__metadata__", None)
    data, entries = bytearray(), []
    for name, info in header.items():
        begin, end = info["data_offsets"]
        chunk = bytearray(blob[8 + n + begin : 8 + n + end])
        if name == change:
            chunk[0] ^= 0x40
        dtype, _ = ST_DTYPES[info["dtype"]]
        entries.append({"name": name, "dtype": dtype, "shape": info["shape"],
                        "offset": len(data), "nbytes": len(chunk)})
        data += chunk
    head = json.dumps({"tensors": entries}).encode()
    out.write_bytes(MAGIC + b"\x01" + struct.pack("<I", len(head)) + head + bytes(data))
    return header


def test_listed(plugin, tmp_path, capsys):
    header = _write_tiny(tmp_path / "model.tiny")
    assert main(["show", str(tmp_path / "model.tiny"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "tinyckpt"
    assert {t["name"]: t["shape"] for t in doc["tensors"]} == {
        k: v["shape"] for k, v in header.items()
    }


def test_checked_against_transformers_count(plugin, tmp_path, capsys):
    _write_tiny(tmp_path / "model.tiny")
    shutil.copy(GPT2 / "config.json", tmp_path / "config.json")
    truth = json.loads((GPT2 / "model.safetensors.truth.json").read_text())
    rc = main(["check", str(tmp_path / "model.tiny"), "--arch", "gpt2", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    assert doc["totals"]["found"] == doc["totals"]["predicted"] == truth["parameter_count"]  # transformers' num_parameters()


def test_value_diffed(plugin, tmp_path, capsys):
    header = _write_tiny(tmp_path / "same.tiny")
    changed = sorted(header)[3]
    _write_tiny(tmp_path / "changed.tiny", change=changed)
    st = str(GPT2 / "model.safetensors")
    assert main(["diff", str(tmp_path / "same.tiny"), st, "--values", "--format", "json"]) == 0
    capsys.readouterr()
    rc = main(["diff", str(tmp_path / "changed.tiny"), st, "--values", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert [t["name"] for t in doc["tensors"] if t["op"] == "changed"] == [changed]


def test_stats_equal_numpy(plugin, tmp_path, capsys):
    """`stats` reads the plugin's values through the registry's default reader; its numbers
    equal numpy's on the same bytes (taken from the transformers-written safetensors here)."""
    import numpy as np

    _write_tiny(tmp_path / "model.tiny")
    assert main(["stats", str(tmp_path / "model.tiny"), "--format", "json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "tinyckpt" and doc["complete"]
    blob = (GPT2 / "model.safetensors").read_bytes()
    (n,) = struct.unpack_from("<Q", blob)
    header = json.loads(blob[8 : 8 + n])
    header.pop("__metadata__", None)
    np_dtypes = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}
    rows = {t["name"]: t["stats"] for t in doc["tensors"]}
    assert set(rows) == set(header)
    for name, info in header.items():
        begin, end = info["data_offsets"]
        x = np.frombuffer(blob[8 + n + begin : 8 + n + end], np_dtypes[info["dtype"]])
        x = x.astype(np.float64)
        got = rows[name]
        assert got["count"] == x.size
        assert got["zeros"] == int((x == 0).sum())
        for key, want in (("min", x.min()), ("max", x.max()), ("mean", x.mean()),
                          ("l2", np.sqrt((x * x).sum()))):
            assert got[key] == pytest.approx(want, rel=1e-6, abs=1e-12), (name, key)
