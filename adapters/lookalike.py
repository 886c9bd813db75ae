"""What an input that matches no supported format is, said in a few words for the error line.

Only magic bytes and directory entries are looked at (the formats' own signatures: GGML's
``ggjt`` magic, ONNX's ``ModelProto`` field layout, TF SavedModel's ``saved_model.pb``, ...);
nothing is parsed beyond the first bytes.
"""

from __future__ import annotations

from .source import Source

# ONNX ModelProto field tags that can follow ir_version (field 1, varint): producer_name (2),
# producer_version (3), domain (4), model_version (5), doc_string (6), graph (7), opset_import (8).
_ONNX_NEXT_TAGS = frozenset(b"\x12\x1a\x22\x28\x32\x3a\x42")
_SHOWN = 3


def describe_file(head: bytes, source: Source) -> str:
    """A short phrase for a file no adapter recognised (``head`` is non-empty)."""
    name = source.name
    text = head.lstrip()[:64].lower()
    if head.startswith(b"GGML") or head.startswith(b"ggjt") or head.startswith(b"ggml"):
        return "a GGML file (llama.cpp)"
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return "a TensorFlow Lite flatbuffer"
    if name == "saved_model.pb":
        return "a TensorFlow SavedModel graph"
    if len(head) >= 3 and head[0] == 0x08 and 1 <= head[1] <= 0x20 and head[2] in _ONNX_NEXT_TAGS:
        return "an ONNX model (protobuf)"
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<!--")):
        return "an HTML page"
    if text.startswith((b"{", b"[")):
        return "a JSON file"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive of no known checkpoint layout"
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "an HDF5 file of no known layout"
    if all(32 <= b < 127 or b in (9, 10, 13) for b in head[:512]):
        return "a text file"
    return "no known checkpoint signature"


def describe_dir(source: Source, names: list[str]) -> str:
    """A short phrase for a directory no adapter recognised."""
    if not names:
        return "an empty directory"
    if "saved_model.pb" in names or "saved_model.pbtxt" in names:
        return "a TensorFlow SavedModel directory"
    if "variables" in names and "assets" in names:
        return "a TensorFlow SavedModel directory"
    shown = ", ".join(names[:_SHOWN]) + (f", ... ({len(names)})" if len(names) > _SHOWN else "")
    return f"a directory of {shown}"
