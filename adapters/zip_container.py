"""One zip walk for every reader of zips: the central directory as a loader's zip reader sees it.

Found from the end, as every zip reader does (so data prepended to the archive is allowed):
the last end-of-central-directory record (EOCD) within 64 KiB + 22 bytes of the end whose
directory parses, its zip64 records when a locator sits right before it, every central entry
in order, duplicates kept. What a reader could disagree on is kept as :attr:`Directory.notes`:
bytes before the first member, bytes after the EOCD (a stray EOCD among them), names that occur
more than once, a local header whose name differs from its central entry.

Name lookup follows torch's reader (``caffe2/serialize/inline_container.cc`` through miniz's
``mz_zip_reader_locate_file``): miniz heap-sorts the directory by name, ASCII case-insensitive
(``mz_zip_reader_sort_central_dir_offsets_by_filename`` / ``mz_zip_reader_filename_less``), and
binary-searches it (``mz_zip_locate_file_binary_search``), so ``ARCHIVE/DATA.PKL`` answers for
``archive/data.pkl`` and which of two equal names answers depends on the whole directory:
:meth:`Directory.find` reproduces that choice. miniz reads the data after the local header
using the local header's own name and extra lengths, and never compares the local name.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from .errors import FormatError

LOCAL_MAGIC = b"PK\x03\x04"
CENTRAL_MAGIC = b"PK\x01\x02"
END_MAGIC = b"PK\x05\x06"
ZIP64_END_MAGIC = b"PK\x06\x06"
ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
MAX_MEMBERS = 2_000_000  # central entries read (each costs 46 bytes of directory anyway)

_CD_ENTRY = struct.Struct("<4s4xHH8xIIHHH8xI")  # central directory file header, 46 bytes
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory, 22 bytes
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory, 56 bytes
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator, 20 bytes
_LOCAL = struct.Struct("<4s2xH18xHH")  # local file header: magic, flags, ..., name len, extra len


@dataclass(slots=True)
class Member:
    """One central directory entry (offsets are absolute in the file)."""

    name: str
    raw_name: bytes
    header: int  # local header offset
    method: int
    csize: int
    usize: int
    flags: int
    index: int  # position in the central directory

    @property
    def encrypted(self) -> bool:
        return bool(self.flags & 1)

    def is_dir(self) -> bool:
        return self.name.endswith("/")


@dataclass
class Directory:
    """The members of one zip, in central directory order, and what a reader might disagree
    on (``notes``)."""

    members: list[Member]
    size: int
    prepended: int = 0  # bytes before the archive's first offset
    trailing: int = 0  # bytes after the EOCD record used
    notes: list[str] = field(default_factory=list)
    _order: list[int] | None = None
    _by_name: dict[bytes, list[Member]] | None = None

    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def find(self, name: str) -> Member | None:
        """The member miniz's lookup returns for ``name`` (torch's reader): binary search over
        the directory heap-sorted by ASCII-lowercased name. A name held once is that member;
        only when it is held more than once is the sort computed, to know which one."""
        group = self._groups().get(_lower(name.encode("utf-8")))
        if group is None or len(group) == 1:
            return group[0] if group else None
        order = self._sorted()
        key = _lower(name.encode("utf-8"))
        lo, hi = 0, len(order) - 1
        while lo <= hi:
            mid = lo + ((hi - lo) >> 1)
            m = self.members[order[mid]]
            cand = _lower(m.raw_name)
            if cand == key:
                return m
            if cand < key:
                lo = mid + 1
            else:
                hi = mid - 1
        return None

    def same_name(self, name: str) -> list[Member]:
        """Every member whose name equals ``name`` ignoring ASCII case (what miniz may answer)."""
        return list(self._groups().get(_lower(name.encode("utf-8")), ()))

    def duplicates(self) -> dict[bytes, list[Member]]:
        """Names (ASCII-lowercased) held by more than one member."""
        return {k: v for k, v in self._groups().items() if len(v) > 1}

    def _groups(self) -> dict[bytes, list[Member]]:
        if self._by_name is None:
            groups: dict[bytes, list[Member]] = {}
            for m in self.members:
                groups.setdefault(_lower(m.raw_name), []).append(m)
            self._by_name = groups
        return self._by_name

    def _sorted(self) -> list[int]:
        if self._order is None:
            self._order = _heap_sort([_lower(m.raw_name) for m in self.members])
        return self._order


def _lower(name: bytes) -> bytes:
    """MZ_TOLOWER on every byte: ASCII A-Z only."""
    return name.translate(_LOWER)


_LOWER = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))


def _heap_sort(keys: list[bytes]) -> list[int]:
    """The index order miniz's heap sort leaves (not stable: equal names end up in an order that
    depends on the whole directory, which is why a duplicate's winner is computed, not guessed)."""
    idx = list(range(len(keys)))
    size = len(idx)

    def sift(root: int, end: int) -> None:
        while True:
            child = 2 * root + 1
            if child >= end:
                return
            if child + 1 < end and keys[idx[child]] < keys[idx[child + 1]]:
                child += 1
            if not keys[idx[root]] < keys[idx[child]]:
                return
            idx[root], idx[child] = idx[child], idx[root]
            root = child

    for start in range((size - 2) >> 1, -1, -1):
        sift(start, size)
    for end in range(size - 1, 0, -1):
        idx[end], idx[0] = idx[0], idx[end]
        sift(0, end)
    return idx


def read_directory(mm: Any, size: int, where: str) -> Directory:
    """The central directory of the zip in ``mm`` (a buffer over the file, sliced only).

    Tries each EOCD signature from the end, as a reader that scans backwards does, and uses the
    last one whose directory parses; a later one that does not is reported as trailing data."""
    tail_start = max(0, size - (_EOCD.size + 0xFFFF))
    tail = bytes(mm[tail_start:size])
    pos = len(tail)
    first_error: FormatError | None = None
    while True:
        pos = tail.rfind(END_MAGIC, 0, pos)
        if pos < 0:
            break
        at = tail_start + pos
        if at + _EOCD.size > size:
            continue
        try:
            d = _parse(mm, size, at, where)
        except FormatError as e:
            first_error = first_error or e
            continue
        if at + _EOCD.size < size:
            _, *_rest, clen = _EOCD.unpack(mm[at : at + _EOCD.size])
            d.trailing = size - (at + _EOCD.size + clen)
            if d.trailing > 0:
                stray = tail.count(END_MAGIC, pos + _EOCD.size)
                d.notes.append(
                    f"{d.trailing} bytes after the end-of-central-directory record"
                    + (f" (holding {stray} more such record(s))" if stray else "")
                )
        return d
    if first_error is not None:
        raise first_error
    raise FormatError(
        f"no zip end-of-central-directory record: the file ({size} bytes) is truncated or not "
        "a zip",
        where,
    )


def _parse(mm: Any, size: int, pos: int, where: str) -> Directory:
    _, _disk, _cd_disk, _n_here, count, cd_size, cd_offset, _clen = _EOCD.unpack(
        mm[pos : pos + _EOCD.size]
    )
    cd_end = pos
    loc = pos - _ZIP64_LOCATOR.size
    if loc >= 0 and mm[loc : loc + 4] == ZIP64_LOCATOR_MAGIC:
        _, _, z64, _ = _ZIP64_LOCATOR.unpack(mm[loc : loc + _ZIP64_LOCATOR.size])
        right_before = loc - _ZIP64_EOCD.size
        if right_before >= 0 and mm[right_before : right_before + 4] == ZIP64_END_MAGIC:
            z64 = right_before  # miniz looks right before the locator first
        if z64 + _ZIP64_EOCD.size > loc or mm[z64 : z64 + 4] != ZIP64_END_MAGIC:
            raise FormatError(
                "zip64 end-of-central-directory record missing", where, f"offset {z64}"
            )
        _, _, _, _, _, _, _, count, cd_size, cd_offset = _ZIP64_EOCD.unpack(
            mm[z64 : z64 + _ZIP64_EOCD.size]
        )
        cd_end = z64
    elif count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        raise FormatError("zip64 sizes without a zip64 locator", where, f"offset {pos}")
    concat = cd_end - cd_size - cd_offset  # bytes prepended to the archive shift every offset
    gap = 0
    if concat > 0 and _central_at(mm, size, cd_offset) and not _central_at(
        mm, size, cd_offset + concat
    ):
        # not prepended bytes but bytes between the directory and this end record (a second
        # EOCD appended): the offsets are meant as written, as torch's miniz reads them
        gap, concat = concat, 0
    start = cd_offset + concat
    if concat < 0 or start < 0:
        raise FormatError(
            f"central directory ({cd_size} bytes at {cd_offset}) does not fit before its end "
            f"record at {cd_end}: truncated or corrupt zip",
            where,
        )
    if count > cd_size // _CD_ENTRY.size or count > MAX_MEMBERS:
        raise FormatError(f"zip declares {count} members in a {cd_size}-byte directory", where)
    if gap and not (count and _first_local_ok(mm, size, start, concat)):
        raise FormatError("central directory does not match its end record", where)
    members: list[Member] = []
    unpack = _CD_ENTRY.unpack_from
    cd = bytes(mm[start:cd_end])
    end = len(cd)
    p = 0
    for i in range(count):
        if p + 46 > end:
            raise FormatError("zip central directory is truncated", where, f"offset {start + p}")
        magic, flags, method, csize, usize, nlen, elen, clen, hoff = unpack(cd, p)
        if magic != CENTRAL_MAGIC:
            raise FormatError("bad zip central directory entry", where, f"offset {start + p}")
        q = p + 46
        raw = cd[q : q + nlen]
        name = str(raw, "utf-8" if flags & 0x800 else "cp437", "replace")
        if csize == 0xFFFFFFFF or usize == 0xFFFFFFFF or hoff == 0xFFFFFFFF:
            usize, csize, hoff = _zip64_extra(
                cd[q + nlen : q + nlen + elen], usize, csize, hoff, where, name
            )
        members.append(Member(name, raw, hoff + concat, method, csize, usize, flags, i))
        p = q + nlen + elen + clen
    d = Directory(members, size, prepended=concat)
    if gap:
        d.notes.append(f"{gap} bytes between the central directory and the end record read "
                       "(another end-of-central-directory record, or data, inserted)")
    if concat > 0:
        d.notes.append(f"{concat} bytes before the archive (a loader that checks the first "
                       "bytes does not take it for a zip; one that reads from the end does)")
    for group in d.duplicates().values():
        d.notes.append(
            f"{len(group)} members named {group[0].name!r} (ignoring case: a reader that looks "
            "names up picks one, a reader that walks the directory reads each)"
        )
    return d


def _central_at(mm: Any, size: int, cd_offset: int) -> bool:
    """Whether a central directory entry sits at ``cd_offset``."""
    return 0 <= cd_offset <= size - 4 and mm[cd_offset : cd_offset + 4] == CENTRAL_MAGIC


def _first_local_ok(mm: Any, size: int, start: int, concat: int) -> bool:
    if start + _CD_ENTRY.size > size:
        return False
    hoff = _CD_ENTRY.unpack(mm[start : start + _CD_ENTRY.size])[-1] + concat
    return hoff + 4 <= size and mm[hoff : hoff + 4] == LOCAL_MAGIC


def _zip64_extra(
    extra: bytes, usize: int, csize: int, hoff: int, where: str, name: str
) -> tuple[int, int, int]:
    i = 0
    while i + 4 <= len(extra):
        tag, ln = struct.unpack_from("<HH", extra, i)
        if tag == 1:
            vals = list(struct.unpack_from(f"<{min(ln, len(extra) - i - 4) // 8}Q", extra, i + 4))
            if usize == 0xFFFFFFFF and vals:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if hoff == 0xFFFFFFFF and vals:
                hoff = vals.pop(0)
            return usize, csize, hoff
        i += 4 + ln
    raise FormatError(f"member {name!r} needs zip64 sizes but has no zip64 extra field", where)


def local_header(mm: Any, size: int, m: Member, where: str,
                 with_name: bool = True) -> tuple[int, bytes]:
    """(data offset, local name) of a member, from its 30-byte local header (the name, read
    from after it, only ``with_name``: a remote file pays a request per read)."""
    if m.header + _LOCAL.size > size:
        raise FormatError(
            f"local header of {m.name} at offset {m.header} is past the end of the file "
            f"({size} bytes): truncated zip",
            where,
            m.name,
        )
    magic, _flags, nlen, elen = _LOCAL.unpack(mm[m.header : m.header + _LOCAL.size])
    if magic != LOCAL_MAGIC:
        raise FormatError(f"no local file header for {m.name} at offset {m.header}", where,
                          m.name)
    start = m.header + 30
    return start + nlen + elen, bytes(mm[start : start + nlen]) if with_name else b""


def read_member(mm: Any, size: int, m: Member, where: str, limit: int) -> bytes:
    """A member's bytes (every method Python's zipfile reads: :func:`decompress`), at most
    ``limit`` of them, else a FormatError."""
    if m.usize > limit:
        raise FormatError(f"{m.name} declares {m.usize:,} bytes (limit {limit:,})", where, m.name)
    if m.encrypted:
        raise FormatError(f"{m.name} is encrypted", where, m.name)
    start, _ = local_header(mm, size, m, where, with_name=False)
    if start + m.csize > size:
        raise FormatError(
            f"{m.name} ({m.csize} bytes at offset {start}) runs past the end of the file "
            f"({size} bytes): truncated zip",
            where,
            m.name,
        )
    return decompress(bytes(mm[start : start + m.csize]), m, where)


# The compression methods Python's zipfile reads (the readers of .npz, .keras and every zip a
# Python loader opens), by number (APPNOTE.TXT 4.4.5); the others are named in the refusal.
METHODS = {0: "stored", 8: "deflate", 12: "bzip2", 14: "lzma"}
OTHER_METHODS = {1: "shrink", 6: "implode", 9: "deflate64", 10: "PKWARE DCL implode",
                 18: "IBM TERSE", 19: "IBM LZ77", 93: "zstd", 95: "xz", 96: "JPEG", 97: "WavPack",
                 98: "PPMd", 99: "AES-encrypted"}


def unsupported_method(method: int) -> str | None:
    """None for a method Python's zipfile reads, else the one sentence every verb and ``scan``
    say about it."""
    if method in METHODS:
        return None
    name = OTHER_METHODS.get(method, "unknown")
    return (f"zip compression method {method} ({name}), which Python's zipfile (every Python "
            "loader's zip reader) does not read: not examined")


def open_member(z: Any, member: Any, where: str = "") -> Any:
    """``z.open(member)`` for the readers that go through Python's zipfile (``.npz``,
    ``.keras``, Marian ``.npz``): a member in a method zipfile does not read is refused with
    the sentence ``scan`` says (:func:`unsupported_method`), not zipfile's own."""
    info = z.getinfo(member) if isinstance(member, str) else member
    refusal = unsupported_method(info.compress_type)
    if refusal is not None:
        # a ZipFile over an open file names it by that file's ``name``, which is the
        # descriptor (an int) for files opened by descriptor: name the file from ``where``
        name = getattr(z, "filename", None)
        archive = where or (name if isinstance(name, str) else "")
        raise FormatError(f"uses {refusal}", f"{archive}:{info.filename}" if archive
                          else info.filename)
    return z.open(info)


def decompress(raw: bytes, m: Member, where: str) -> bytes:
    """A member's compressed bytes as Python's zipfile decompresses them (stored, deflate,
    bzip2, lzma), checked against the directory's size; never more than ``m.usize + 1`` bytes
    are produced, so a member lying about its size is caught without inflating a bomb."""
    import bz2
    import lzma

    refusal = unsupported_method(m.method)
    if refusal is not None:
        raise FormatError(f"{m.name} uses {refusal}", where, m.name)
    if m.method == 0:
        return raw
    try:
        if m.method == 8:
            out = zlib.decompressobj(-15).decompress(raw, m.usize + 1)
        elif m.method == 12:
            out = bz2.BZ2Decompressor().decompress(raw, m.usize + 1)
        else:
            out = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[_lzma_filter(raw, m, where)]
                                        ).decompress(raw[4 + _LZMA_HEADER.unpack(raw[:4])[2]:],
                                                     m.usize + 1)
    except (zlib.error, OSError, lzma.LZMAError, EOFError, ValueError, struct.error) as e:
        raise FormatError(f"{m.name} is not valid {METHODS[m.method]} data ({e})", where,
                          m.name) from None
    if len(out) != m.usize:
        raise FormatError(
            f"{m.name} decompresses to {len(out)}{'+' * (len(out) > m.usize)} bytes, the "
            f"directory says {m.usize}", where, m.name,
        )
    return out


_LZMA_HEADER = struct.Struct("<BBH")  # zip's LZMA member: version major, minor, props size


def _lzma_filter(raw: bytes, m: Member, where: str) -> dict[str, int]:
    """The LZMA1 filter of a zip member's 5-byte properties (APPNOTE 5.8.8: lc/lp/pb packed in
    one byte, then the dictionary size)."""
    import lzma

    if len(raw) < 4:
        raise FormatError(f"{m.name}: LZMA header cut short", where, m.name)
    _, _, n = _LZMA_HEADER.unpack(raw[:4])
    props = raw[4 : 4 + n]
    if n != 5 or len(props) != 5 or props[0] >= 9 * 5 * 5:
        raise FormatError(f"{m.name}: LZMA properties are not the 5 bytes zip uses", where,
                          m.name)
    d = props[0]
    lc, lp, pb = d % 9, d // 9 % 5, d // 45
    return {"id": lzma.FILTER_LZMA1, "dict_size": struct.unpack("<I", props[1:])[0],
            "lc": lc, "lp": lp, "pb": pb}


def local_name_notes(mm: Any, size: int, d: Directory, where: str,
                     members: list[Member] | None = None) -> list[str]:
    """A note per member whose local header names it differently from the directory (Python's
    zipfile refuses such a member; miniz, torch's reader, reads it by the directory's name)."""
    out = []
    for m in members if members is not None else d.members:
        try:
            _, local = local_header(mm, size, m, where)
        except FormatError:
            continue
        if local != m.raw_name:
            out.append(f"local header of {m.name!r} names it {local.decode('utf-8', 'replace')!r} "
                       "(torch reads it by the directory's name, Python's zipfile refuses it)")
    return out


def ends_like_zip(mm: Any, size: int) -> bool:
    """Whether an EOCD signature sits within the last 64 KiB + 22 bytes (cheap: one slice)."""
    return bytes(mm[max(0, size - (_EOCD.size + 0xFFFF)) : size]).rfind(END_MAGIC) >= 0
