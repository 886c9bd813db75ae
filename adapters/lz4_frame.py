"""LZ4 frames (the format ``lz4.frame`` writes: joblib's ``compress='lz4'``), decoded in pure
Python with a cap on the output, so that a stream is examined whether or not the ``lz4``
package is installed. From the LZ4 frame and block format descriptions (lz4/doc): frames one
after another, skippable frames skipped; block and content checksums are not verified (a loader
that verifies them reads a subset of what is decoded here).
"""

from __future__ import annotations

MAGIC = b"\x04\x22\x4d\x18"
_SKIPPABLE = range(0x184D2A50, 0x184D2A60)


class LZ4Error(ValueError):
    """Not an LZ4 frame, or a corrupt one."""


def decompress(data: bytes, limit: int, partial: bool = False) -> bytes:
    """At most ``limit + 1`` decoded bytes of the frames in ``data`` (more than ``limit`` means
    the stream is longer); ``partial``: ``data`` is a prefix of the stream, so ending inside a
    block is not an error."""
    out = bytearray()
    i, n = 0, len(data)
    frames = 0
    while i < n and len(out) <= limit:
        if n - i < 4:
            if partial:
                break
            raise LZ4Error("trailing bytes after the last LZ4 frame")
        magic = int.from_bytes(data[i:i + 4], "little")
        if magic in _SKIPPABLE:
            size = int.from_bytes(data[i + 4:i + 8], "little")
            i += 8 + size
            continue
        if data[i:i + 4] != MAGIC:
            if frames:
                raise LZ4Error(f"bytes at offset {i} are not an LZ4 frame")
            raise LZ4Error("not an LZ4 frame")
        frames += 1
        try:
            i = _frame(data, i + 4, out, limit)
        except IndexError:
            if partial:
                break
            raise LZ4Error("LZ4 frame truncated") from None
    return bytes(out[:limit + 1])


def _frame(data: bytes, i: int, out: bytearray, limit: int) -> int:
    flg = data[i]
    if flg >> 6 != 1:
        raise LZ4Error(f"LZ4 frame version {flg >> 6} is not 1")
    block_checksum, content_size, content_checksum, dict_id = (
        flg & 0x10, flg & 0x08, flg & 0x04, flg & 0x01)
    i += 2 + (8 if content_size else 0) + (4 if dict_id else 0) + 1  # FLG BD [size] [dict] HC
    while len(out) <= limit:
        if i + 4 > len(data):
            raise IndexError
        word = int.from_bytes(data[i:i + 4], "little")
        i += 4
        if word == 0:
            return i + (4 if content_checksum else 0)
        size = word & 0x7FFFFFFF
        block = data[i:i + size]
        if len(block) < size:
            if word & 0x80000000:
                out += block
            else:
                _block(block, out, limit, partial=True)
            raise IndexError
        i += size + (4 if block_checksum else 0)
        if word & 0x80000000:
            out += block  # stored uncompressed
        else:
            _block(block, out, limit)
    return i


def _block(src: bytes, out: bytearray, limit: int, partial: bool = False) -> None:
    """One compressed block appended to ``out`` (matches may reach into earlier blocks: linked
    blocks), stopping once ``out`` passes ``limit``."""
    i, n = 0, len(src)
    while i < n and len(out) <= limit:
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while True:
                if i >= n:
                    if partial:
                        return
                    raise LZ4Error("LZ4 block truncated in a literal length")
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        out += src[i:i + lit]
        i += lit
        if i >= n:
            if i > n and not partial:
                raise LZ4Error("LZ4 block truncated in its literals")
            return  # the last sequence has literals only
        if i + 2 > n:
            if partial:
                return
            raise LZ4Error("LZ4 block truncated in a match offset")
        offset = src[i] | (src[i + 1] << 8)
        i += 2
        if offset == 0 or offset > len(out):
            raise LZ4Error(f"LZ4 match offset {offset} points before the start of the data")
        mlen = token & 15
        if mlen == 15:
            while True:
                if i >= n:
                    if partial:
                        return
                    raise LZ4Error("LZ4 block truncated in a match length")
                b = src[i]
                i += 1
                mlen += b
                if b != 255:
                    break
        mlen += 4
        mlen = min(mlen, limit + 2 - len(out))  # never far past the cap
        start = len(out) - offset
        if offset >= mlen:
            out += out[start:start + mlen]
        else:  # overlapping: the last ``offset`` bytes repeated
            pattern = bytes(out[start:])
            out += (pattern * (mlen // offset + 1))[:mlen]
