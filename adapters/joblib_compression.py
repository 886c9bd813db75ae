"""The compressors ``joblib.load`` recognises, by the prefix it checks (joblib/compressor.py and
numpy_pickle_utils.py ``_detect_compressor``), and a bounded decompression of each.

joblib looks at the first bytes only: ``ZF`` (joblib < 0.10: ``ZF``, the uncompressed size in
hexadecimal padded to 19 bytes, then a zlib stream), then ``x`` (zlib), ``1f 8b`` (gzip), ``BZ``
(bz2), ``5d 00`` (LZMA "alone"), ``fd 7zXZ`` (xz), ``04 22 4d 18`` (LZ4 frame). LZ4 is decoded by
:mod:`.lz4_frame` (no ``lz4`` package needed). A prefix that does not decompress is no joblib
file: joblib fails on it too.
"""

from __future__ import annotations

import zlib
from typing import Any

PREFIXES = (
    ("compat", b"ZF"),
    ("zlib", b"\x78"),
    ("gzip", b"\x1f\x8b"),
    ("bz2", b"BZ"),
    ("lzma", b"\x5d\x00"),
    ("xz", b"\xfd\x37\x7a\x58\x5a"),
    ("lz4", b"\x04\x22\x4d\x18"),
)
KINDS = tuple(k for k, _ in PREFIXES)
_COMPAT_HEADER = 2 + 19  # "ZF" + hex(size) padded (joblib's _MAX_LEN)


def compression(head: bytes) -> str | None:
    """The compressor joblib would pick for a file starting with ``head``, or None."""
    for kind, prefix in PREFIXES:
        if head.startswith(prefix):
            return kind
    return None


def decompress(kind: str, data: bytes, limit: int, partial: bool = False) -> bytes:
    """At most ``limit + 1`` decompressed bytes of ``data`` (more than ``limit``: the stream is
    longer than the caller allows). ``partial``: ``data`` is only the start of the stream.
    Raises ValueError (or OSError/EOFError) when the bytes are not such a stream."""
    if kind == "lz4":
        from .lz4_frame import decompress as lz4

        return lz4(data, limit, partial)
    if kind == "compat":
        try:
            int(data[2:_COMPAT_HEADER].decode("ascii"), 16)
        except (UnicodeDecodeError, ValueError):
            raise ValueError("not a joblib < 0.10 'ZF' header") from None
        data, kind = data[_COMPAT_HEADER:], "zlib"
    return _streams(kind, data, limit, partial)


def _streams(kind: str, data: bytes, limit: int, partial: bool) -> bytes:
    """One stream after another, as joblib's file objects (and gzip/bz2/lzma's) read them."""
    import bz2
    import lzma

    out = bytearray()
    first = True
    while (data or first) and len(out) <= limit:
        first = False
        if kind == "bz2":
            d: Any = bz2.BZ2Decompressor()
        elif kind in ("xz", "lzma"):
            d = lzma.LZMADecompressor()  # FORMAT_AUTO: xz and "alone", as LZMAFile reads
        else:
            d = zlib.decompressobj(zlib.MAX_WBITS | (16 if kind == "gzip" else 0))
        try:
            out += d.decompress(data, limit + 1 - len(out))
        except (lzma.LZMAError, zlib.error) as e:
            raise ValueError(str(e)) from None
        if not d.eof:
            if kind in ("zlib", "gzip") and len(out) <= limit:
                out += d.flush()
            if not partial and len(out) <= limit:
                raise EOFError("compressed stream ended before its end marker")
            break
        data = d.unused_data
    return bytes(out[:limit + 1])
