"""What an input that matches no supported format is, said in a few words for the error line.

Only magic bytes and directory entries are looked at; nothing is parsed beyond the first bytes.
An input that starts with the signature of a format an adapter reads (:attr:`Adapter.magic
<inspector.adapters.registry.Adapter.magic>`) is named after that adapter; the look-alikes
named here are only formats nothing reads (GGML's ``ggjt`` magic, TF Lite, a SavedModel's
graph, ...), containers many formats use (zip, HDF5) and things that are not checkpoints at all
(HTML, JSON, text).
"""

from __future__ import annotations

from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from .registry import Adapter

_SHOWN = 3


def describe_file(head: bytes, source: Source, adapters: Iterable[Adapter] = ()) -> str:
    """A short phrase for a file no adapter recognised (``head`` is non-empty); ``adapters``:
    those whose signatures (``magic``) name what the file starts like."""
    for adapter in adapters:
        if any(head.startswith(m) for m in adapter.magic):
            return (f"a file with the {adapter.name} signature that its reader does not accept "
                    f"(--input-format {adapter.name} says why)")
    name = source.name
    text = head.lstrip()[:64].lower()
    if head.startswith(b"GGML") or head.startswith(b"ggjt") or head.startswith(b"ggml"):
        return "a GGML file (llama.cpp)"
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return "a TensorFlow Lite flatbuffer"
    if name == "saved_model.pb":
        return "a TensorFlow SavedModel graph"
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<!--")):
        return "an HTML page"
    if text.startswith((b"{", b"[")):
        return "a JSON file"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive of no known checkpoint layout"
    if head.startswith(b"\x89HDF\r\n\x1a\n"):  # a container many formats use
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
