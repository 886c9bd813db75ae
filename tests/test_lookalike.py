"""What an unrecognised input is: an adapter's own signature (``Adapter.magic``) names the
adapter; the hand-written look-alikes are formats nothing reads and containers."""

from __future__ import annotations

from inspector.adapters.lookalike import describe_file
from inspector.adapters.registry import Adapter, formats
from inspector.adapters.source import LocalSource

from conftest import FIXTURES


def _adapter(name: str, magic: tuple[bytes, ...]) -> Adapter:
    return Adapter(name, f"{name} files", (".x",), lambda head, source: None,
                   lambda source, variant: None, magic=magic)  # type: ignore[arg-type,return-value]


def test_a_declined_file_with_an_adapters_signature_names_the_adapter(tmp_path):
    p = tmp_path / "model.bin"
    p.write_bytes(b"XYZ1" + b"\x00" * 60)
    said = describe_file(p.read_bytes(), LocalSource(p), [_adapter("xyz", (b"XYZ1",))])
    assert "xyz signature" in said and "--input-format xyz" in said


def test_formats_nothing_reads_keep_their_names(tmp_path):
    p = tmp_path / "model.bin"
    p.write_bytes(b"ggjt" + b"\x00" * 60)
    assert describe_file(p.read_bytes(), LocalSource(p), formats()) == "a GGML file (llama.cpp)"


def test_builtin_signatures_are_their_formats_own():
    # each declared signature belongs to one adapter
    pairs = [(m, a.name) for a in formats() for m in a.magic]
    assert len({m for m, _ in pairs}) == len(pairs)
    assert {(b"GGUF", "gguf"), (b"\x93NUMPY", "numpy")} <= set(pairs)
    html = FIXTURES / "dirs" / "lookalikes" / "pytorch_model.bin"
    assert describe_file(html.read_bytes()[:4096], LocalSource(html), formats()) == "an HTML page"
