"""Read-only reader of tensorstore's OCDBT key-value database (the store orbax writes by
default), enough to fetch the values of chosen keys (orbax: each array's ``.zarray`` /
``zarr.json``).

Format (tensorstore ``kvstore/ocdbt/index.rst``, ``format/*.cc``): ``manifest.ocdbt`` (or the
newest ``manifest.<16 hex>`` when its kind is *numbered*) holds the config and the newest
versions inline; the newest version names its root B+tree node by (data file, offset, length).
Every manifest and node is ``magic u32be, length u64le, version varint, compression varint``,
a body (zstd when compression is 1), and a CRC-32C (u32le) of all that precedes it. Nodes hold
columnar arrays of prefix-compressed keys and (data file, offset, length) references; data file
paths are relative to the database directory, themselves prefix-compressed in a table.

Everything read is bounded: every length and count is checked against what is left before
anything is allocated, child nodes must be exactly one level lower (no cycle can be followed),
and the number of nodes read is capped. Damage is a :class:`FormatError` of one line. zstd comes
from the optional ``zstandard`` package, imported only when a compressed node is met; without it
:class:`ZstdMissing` is raised so that the caller can fall back.
"""

from __future__ import annotations

import re

from .errors import FormatError
from .source import Source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MANIFEST = "manifest.ocdbt"
MANIFEST_MAGIC = 0x0CDB3A2A
BTREE_MAGIC = 0x0CDB20DE
MAX_ENCODED = 64 << 20  # one manifest or node as stored
MAX_DECODED = 64 << 20  # its body once decompressed (tensorstore's default target is 8 MiB)
MAX_WINDOW = 64 << 20  # zstd window: a frame header may ask for gigabytes
MAX_ARITY = 1 << 20  # tensorstore's kMaxNodeArity
MAX_KEY = 65535  # kMaxKeyLength
MAX_PATH = 65535  # kMaxPathLength
MAX_HEIGHT = 64
MAX_NODES = 100_000
MAX_TOTAL = 1 << 30  # encoded node bytes read in one walk (shared children count each time)
MAX_VALUE = 16 << 20  # one wanted value (a zarr metadata JSON is a few hundred bytes)
MISSING = (1 << 64) - 1
INSTALL_HINT = "pip install 'ckpt-inspector[orbax]'"


class ZstdMissing(Exception):
    """A node is zstd-compressed and the ``zstandard`` package is not importable."""


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE: list[int] = []


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as OCDBT's footers hold it."""
    if not _CRC_TABLE:
        _CRC_TABLE.extend(_crc32c_table())
    t = _CRC_TABLE
    c = 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


class _Reader:
    """A cursor over one decoded body; every read checks what is left."""

    def __init__(self, data: bytes, what: str, where: str) -> None:
        self.data, self.pos, self.what, self.where = data, 0, what, where

    def fail(self, problem: str) -> FormatError:
        return FormatError(f"OCDBT {self.what}: {problem}", self.where)

    def left(self) -> int:
        return len(self.data) - self.pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise self.fail("truncated")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self, limit: int = MISSING) -> int:
        value = shift = 0
        for _ in range(10):
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if value > limit:
                    raise self.fail(f"value {value} over the limit {limit}")
                return value
            shift += 7
        raise self.fail("varint longer than 10 bytes")

    def count(self, limit: int) -> int:
        """A count of items that take at least one byte each: never more than is left."""
        n = self.varint(limit)
        if n > self.left():
            raise self.fail(f"{n} entries announced, {self.left()} bytes left")
        return n

    def raw(self, n: int) -> bytes:
        if n > self.left():
            raise self.fail(f"{n} bytes announced, {self.left()} left (truncated)")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def u64(self) -> int:
        return int.from_bytes(self.raw(8), "little")


def _zstd(body: bytes, what: str, where: str) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise ZstdMissing(what) from None
    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
    size = 0
    try:
        # first the size, bounded (a bomb stops at the cap) ...
        with dctx.stream_reader(body, read_across_frames=True) as r:
            while size <= MAX_DECODED:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                size += len(chunk)
        if size > MAX_DECODED:
            raise FormatError(f"OCDBT {what}: decompresses to over {MAX_DECODED} bytes", where)
        # ... then the bytes, knowing they fit, with the check that the frame is whole
        d = dctx.decompressobj()
        out = d.decompress(body)
    except zstandard.ZstdError as e:
        raise FormatError(f"OCDBT {what}: zstd data not decodable ({e})", where) from None
    if not d.eof or d.unused_data:
        raise FormatError(f"OCDBT {what}: zstd frame truncated or followed by other bytes", where)
    return out


def decode_envelope(encoded: bytes, magic: int, what: str, where: str) -> _Reader:
    """The body of a manifest or node: header and checksum checked, decompressed."""
    if len(encoded) < 16:
        raise FormatError(f"OCDBT {what}: {len(encoded)} bytes, shorter than a header", where)
    got = int.from_bytes(encoded[:4], "big")
    if got != magic:
        raise FormatError(f"OCDBT {what}: magic {got:08x}, {magic:08x} expected", where)
    length = int.from_bytes(encoded[4:12], "little")
    if length != len(encoded):
        raise FormatError(f"OCDBT {what}: header says {length} bytes, {len(encoded)} stored",
                          where)
    crc = int.from_bytes(encoded[-4:], "little")
    if crc32c(encoded[:-4]) != crc:
        raise FormatError(f"OCDBT {what}: CRC-32C checksum mismatch (damaged)", where)
    r = _Reader(encoded[12:-4], what, where)
    version = r.varint()
    if version != 0:
        raise r.fail(f"format version {version} (only 0 is known)")
    compression = r.varint()
    if compression == 0:
        return _Reader(r.data[r.pos:], what, where)
    if compression == 1:
        return _Reader(_zstd(r.data[r.pos:], what, where), what, where)
    raise r.fail(f"compression format {compression} (0 or 1 known)")


def _data_file_table(r: _Reader, transitive: str) -> list[tuple[str, str]]:
    """(full path, transitive path for what it references) of each data file."""
    n = r.count(MAX_ARITY)
    prefix = [0] + [r.varint(MAX_PATH) for _ in range(n - 1)]
    suffix = [r.varint(MAX_PATH) for _ in range(n)]
    base = [r.varint(MAX_PATH) for _ in range(n)]
    out: list[tuple[str, str]] = []
    prev = b""
    for i in range(n):
        if prefix[i] > len(prev):
            raise r.fail(f"data file {i}: prefix {prefix[i]} longer than the previous path")
        path = prev[:prefix[i]] + r.raw(suffix[i])
        if base[i] > len(path) or len(transitive) + len(path) > MAX_PATH:
            raise r.fail(f"data file {i}: base path length {base[i]} or path length invalid")
        try:
            text = path.decode("utf-8")
            base_text = path[:base[i]].decode("utf-8")
        except UnicodeDecodeError:
            raise r.fail(f"data file {i}: path is not UTF-8") from None
        out.append((transitive + text, transitive + base_text))
        prev = path
    return out


def _refs(r: _Reader, n: int, files: list[tuple[str, str]], lengths: bool = True,
          ) -> list[tuple[int, int, int]]:
    """Columnar (file index, offset, length) references."""
    ids = [r.varint() for _ in range(n)]
    offsets = [r.varint() for _ in range(n)]
    sizes = [r.varint() for _ in range(n)] if lengths else [0] * n
    for i, f in enumerate(ids):
        if f >= len(files) and not (offsets[i] == MISSING and sizes[i] == MISSING):
            raise r.fail(f"data file id {f} outside the table of {len(files)}")
    return list(zip(ids, offsets, sizes, strict=True))


def _keys(r: _Reader, n: int, interior: bool) -> tuple[list[bytes], list[int]]:
    prefix = [0] + [r.varint(MAX_KEY) for _ in range(n - 1)]
    suffix = [r.varint(MAX_KEY) for _ in range(n)]
    common = [r.varint(MAX_KEY) for _ in range(n)] if interior else []
    keys: list[bytes] = []
    prev = b""
    for i in range(n):
        if prefix[i] > len(prev):
            raise r.fail(f"key {i}: prefix {prefix[i]} longer than the previous key")
        key = prev[:prefix[i]] + r.raw(suffix[i])
        if len(key) > MAX_KEY:
            raise r.fail(f"key {i}: longer than {MAX_KEY} bytes")
        if i and key <= prev:
            raise r.fail("keys out of order")
        if interior and common[i] > len(key):
            raise r.fail(f"key {i}: subtree prefix longer than the key")
        keys.append(key)
        prev = key
    return keys, common


def _read_range(root: Source, path: str, offset: int, length: int, cap: int, what: str) -> bytes:
    f = root.child(path)  # refuses a path leaving the database directory
    if not f.is_file():
        raise FormatError(f"OCDBT {what}: data file {path!r:.120} is missing", root.where)
    if length > cap:
        raise FormatError(f"OCDBT {what}: {length} bytes, over the {cap}-byte limit", root.where)
    if offset > f.size or length > f.size - offset:
        raise FormatError(f"OCDBT {what}: bytes {offset}+{length} past the end of {path!r:.120} "
                          f"({f.size} bytes)", root.where)
    return f.read(offset, length)


def _read_manifest(m: Source) -> bytes:
    if not m.is_file():
        raise FormatError(f"OCDBT: {m.name} is missing", m.where)
    if m.size > MAX_ENCODED:
        raise FormatError(f"OCDBT manifest: {m.size} bytes, over the {MAX_ENCODED}-byte limit",
                          m.where)
    return m.read(0, m.size)


def _parse_manifest(data: bytes, where: str) -> tuple[int, list[tuple[str, str]], tuple] | None:
    """(kind, data files, (root height, file, offset, length, num_keys)) of the newest version;
    the version part is None for the numbered kind's config-only manifest."""
    r = decode_envelope(data, MANIFEST_MAGIC, "manifest", where)
    r.raw(16)  # uuid
    kind = r.varint(1)
    r.varint()  # max_inline_value_bytes
    r.varint()  # max_decoded_node_bytes
    r.byte()  # version_tree_arity_log2
    method = r.varint()
    if method == 1:
        r.raw(4)  # zstd level
    elif method != 0:
        raise r.fail(f"compression method {method} (0 or 1 known)")
    if kind == 1:
        return None
    files = _data_file_table(r, "")
    n = r.count(MAX_ARITY)
    if n == 0:
        raise r.fail("no version")
    gens = [r.varint() for _ in range(n)]
    if any(b <= a for a, b in zip(gens, gens[1:], strict=False)) or gens[0] == 0:
        raise r.fail("generation numbers not increasing")
    heights = [r.byte() for _ in range(n)]
    refs = _refs(r, n, files)
    num_keys = [r.varint() for _ in range(n)]
    return kind, files, (heights[-1], *refs[-1], num_keys[-1])


def read_values(root: Source, want: Callable[[str], bool]) -> dict[str, bytes]:
    """The values of the newest version's keys for which ``want(key)`` is true."""
    m = root.child(MANIFEST)
    parsed = _parse_manifest(_read_manifest(m), m.where)
    if parsed is None:  # numbered kind: the versions are in the newest manifest.<16 hex>
        numbered = sorted(n for n in root.list() if re.fullmatch(r"manifest\.[0-9a-f]{16}", n))
        if not numbered:
            raise FormatError("OCDBT manifest: numbered kind but no manifest.<generation> file",
                              root.where)
        m = root.child(numbered[-1])
        parsed = _parse_manifest(_read_manifest(m), m.where)
        if parsed is None:
            raise FormatError(f"OCDBT {m.name}: holds no versions", root.where)
    _, files, (height, file_id, offset, length, num_keys) = parsed
    out: dict[str, bytes] = {}
    if num_keys == 0 or (offset == MISSING and length == MISSING):
        return out
    if height > MAX_HEIGHT:
        raise FormatError(f"OCDBT manifest: root height {height} over {MAX_HEIGHT}", m.where)
    # (data file path, its transitive path, offset, length, height, key prefix)
    stack = [(*files[file_id], offset, length, height, b"")]
    nodes = total = 0
    while stack:
        path, transitive, offset, length, height, prefix = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise FormatError(f"OCDBT: over {MAX_NODES} B+tree nodes", root.where)
        what = f"B+tree node at {path}:{offset}"
        total += min(length, MAX_ENCODED)
        if total > MAX_TOTAL:
            raise FormatError(f"OCDBT: B+tree nodes total over {MAX_TOTAL} bytes (nodes "
                              "referenced many times?)", root.where)
        r = decode_envelope(_read_range(root, path, offset, length, MAX_ENCODED, what),
                            BTREE_MAGIC, what, root.where)
        got = r.byte()
        if got != height:
            raise r.fail(f"height {got}, {height} expected from its parent")
        table = _data_file_table(r, transitive)
        n = r.count(MAX_ARITY)
        if n == 0:
            raise r.fail("empty node")
        keys, common = _keys(r, n, interior=height > 0)
        if height > 0:
            refs = _refs(r, n, table)
            for key, c, (fid, off, ln) in zip(keys, common, refs, strict=True):
                if fid >= len(table):
                    raise r.fail("child reference missing")
                stack.append((*table[fid], off, ln, height - 1, prefix + key[:c]))
            continue
        lengths = [r.varint() for _ in range(n)]
        kinds = [r.byte() for _ in range(n)]
        if any(k > 1 for k in kinds):
            raise r.fail("value kind other than 0 (inline) or 1 (out of line)")
        indirect = [i for i in range(n) if kinds[i] == 1]
        refs = _refs(r, len(indirect), table, lengths=False)
        where_of = dict(zip(indirect, refs, strict=True))
        for i in range(n):
            key = prefix + keys[i]
            value = r.raw(lengths[i]) if kinds[i] == 0 else None
            name = key.decode("utf-8", "replace")
            if not want(name):
                continue
            if value is None:
                fid, off, _ = where_of[i]
                if fid >= len(table):
                    raise r.fail(f"value of {name!r:.80}: reference missing")
                value = _read_range(root, table[fid][0], off, lengths[i], MAX_VALUE,
                                    f"value of {name!r:.80}")
            out[name] = value
    return out
