"""The runs of chunk and storage records of a DCP ``.metadata`` pickle, read a run at a time.

A ``.metadata`` of many chunks is mostly two records repeated: a ``ChunkStorageMetadata``
(``offsets``, ``sizes``) in a tensor's ``chunks`` list, and a ``MetadataIndex`` ->
``_StorageInfo`` pair in ``storage_data``. Built as objects by the C unpickler they cost about
half a microsecond each and most of the load; here they are read as data.

:func:`split` walks the opcodes from the first byte to STOP, one at a time, as the C unpickler
reads them (every opcode's length from its byte and arguments; a frame as the C unpickler
buffers it, so an opcode crossing a frame's end, which it would read from after the frame, is
not modelled; anything outside the opcodes torch's writer uses ends the walk: the caller reads
the pickle the ordinary way). Where an
opcode starts a record whose every class, key and ``torch.Size`` is a memo get of a slot the
walk knows holds exactly that (the classes and ``torch.Size`` resolved earlier in the pickle
through the caller's allowlist, the keys as strings), the longest run of such records is matched
at once by a pattern of those opcodes (each alternative starts with its own opcode byte, so a
match at an opcode boundary is the one way the unpickler reads those bytes). The run is cut out
of the pickle and replaced by a persistent id whose object is the run's values; the memo gets
after it are renumbered by the slots the run filled (a get of a string the run wrote inline is
that string written again; a get of any other object a run made is not modelled). The rest,
every global included, is read by the caller's restricted unpickler as before: the runs name
no global, and every use they make (NEWOBJ and BUILD of the dataclass stand-ins,
``torch.Size`` called on a tuple of ints) is the use the same records make outside a run.

Anything the walk does not model (another opcode, a get of a slot it does not know, a string
whose length is not its bytes') makes :func:`split` return None: the pickle is then read whole
by the restricted unpickler.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate
from operator import itemgetter

_MOD = "torch.distributed.checkpoint.metadata"
CHUNK = f"{_MOD}.ChunkStorageMetadata"
INDEX = f"{_MOD}.MetadataIndex"
INFO = "torch.distributed.checkpoint.filesystem._StorageInfo"
SIZE = "torch.Size"
# The keys of the records, as torch 2.x pickles the dataclasses' __dict__ (field order).
_CHUNK_KEYS = ("offsets", "sizes")
_INDEX_KEYS = ("fqn", "index", "offset")
_INFO_KEYS = ("relative_path", "offset", "length")

# Opcodes without argument that the walk steps over (what they do is the C unpickler's business
# on the rewritten pickle; the walk only needs where the next opcode starts).
_PLAIN = frozenset(b"().0N)t\x85\x86\x87]ae}su\x81Rb\x88\x89\x8f\x90\x91l1d")
_FIXED = {ord("K"): 1, ord("M"): 2, ord("J"): 4, ord("G"): 8}

_INT = (rb"(?:K.|M..|J....|\x8a(?:\x00|\x01.|\x02..|\x03...|\x04....|\x05.{5}|\x06.{6}"
        rb"|\x07.{7}|\x08.{8}))")
_INT_RE = re.compile(_INT, re.DOTALL)


def _tuple(cap: bytes) -> bytes:
    """A tuple of ints as the pickler writes it (EMPTY_TUPLE is not memoized; the others are)."""
    return (cap + _INT + rb"(?:\x85\x94|" + _INT + rb"(?:\x86\x94|" + _INT + rb"\x87\x94))|\)|\("
            + _INT + rb"*t\x94)")


def _str(cap: bytes) -> bytes:
    """A string written inline (SHORT_BINUNICODE + MEMOIZE) or a memo get: the length byte is
    checked against the bytes up to the MEMOIZE after the match."""
    return cap + rb"\x8c.[^\x94]*\x94|h.|j....)"


MAX_PATTERNS = 64
_FIRST = itemgetter(0)
_GROUPS = re.Match.groups


class Fallback(Exception):
    """The pickle is not of the shape read here: read it whole the ordinary way."""


class ChunkRun:
    """A run of ChunkStorageMetadata records: their offsets and sizes."""

    __slots__ = ("offsets", "sizes", "used")

    def __init__(self, offsets: list[tuple[int, ...]], sizes: list[tuple[int, ...]]) -> None:
        self.offsets = offsets
        self.sizes = sizes
        self.used = False


class StorageRun:
    """A run of ``storage_data`` entries, as columns."""

    __slots__ = ("fqns", "offsets", "paths", "starts", "lengths", "value", "inline", "used")

    def __init__(self, fqns: list[str], offsets: list[tuple[int, ...]], paths: list[str],
                 starts: list[int], lengths: list[int]) -> None:
        self.fqns, self.offsets, self.paths = fqns, offsets, paths
        self.starts, self.lengths = starts, lengths
        self.value = _RunValue()
        self.used = False


class _RunValue:
    """The value pushed with a StorageRun's key (SETITEMS takes pairs)."""

    __slots__ = ()


_OTHER = object()  # a memo value the walk does not model


def _get(slot: int) -> bytes:
    return (b"h" + bytes((slot,))) if slot < 256 else (b"j" + slot.to_bytes(4, "little"))


def _esc(slot: int) -> bytes:
    return re.escape(_get(slot))


_patterns: dict[tuple[str, tuple[int, ...]], re.Pattern[bytes]] = {}


def _compiled(kind: str, slots: tuple[int, ...]) -> re.Pattern[bytes]:
    """One record, its values as groups, whose classes, keys and ``torch.Size`` are the memo
    gets of ``slots``. A run is matched record by record with ``Pattern.scanner(...).match``,
    each match anchored where the last one ended."""
    key = (kind, slots)
    found = _patterns.get(key)
    if found is not None:
        return found
    g = [_esc(s) for s in slots]

    def record(cap: bytes) -> bytes:
        if kind == "chunk":  # cls offsets-key sizes-key Size
            cls, offk, szk, size = g
            return (cls + rb"\)\x81\x94\}\x94\(" + offk + size + _tuple(cap)
                    + rb"\x85\x94R\x94" + szk + size + _tuple(cap) + rb"\x85\x94R\x94ub")
        # index-cls fqn-key index-key offset-key Size info-cls path-key length-key
        icls, fqnk, idxk, offk, size, infocls, pathk, lenk = g
        return (icls + rb"\)\x81\x94\}\x94\(" + fqnk + _str(cap) + idxk + rb"(?:N|" + _INT
                + rb")" + offk + size + _tuple(cap) + rb"\x85\x94R\x94ub"
                + infocls + rb"\)\x81\x94\}\x94\(" + pathk + _str(cap) + offk + cap + _INT
                + rb")" + lenk + cap + _INT + rb")ub")

    if len(_patterns) >= MAX_PATTERNS:
        _patterns.clear()
    found = _patterns[key] = re.compile(record(b"("), re.DOTALL)
    return found


def _int(tok: bytes) -> int:
    op = tok[0]
    if op == 0x4B:  # K
        return tok[1]
    if op == 0x4D:  # M
        return tok[1] | tok[2] << 8
    if op == 0x4A:  # J
        return int.from_bytes(tok[1:5], "little", signed=True)
    return int.from_bytes(tok[2:], "little", signed=True)  # LONG1


class _Tuples(dict):  # type: ignore[type-arg]
    """Tuple token -> tuple of ints (most tokens repeat: decoded once)."""

    def __missing__(self, tok: bytes) -> tuple[int, ...]:
        if tok == b")":
            value: tuple[int, ...] = ()
        else:
            inner = tok[1:-2] if tok[0] == 0x28 else tok[:-2]
            toks = _INT_RE.findall(inner)
            if sum(map(len, toks)) != len(inner):
                raise Fallback
            value = tuple(map(_int, toks))
        self[tok] = value
        return value


class _Get:
    """A memo get among a run's strings (resolved after the run is matched)."""

    __slots__ = ("slot", "token")

    def __init__(self, slot: int, token: bytes) -> None:
        self.slot, self.token = slot, token


class _Strs(dict):  # type: ignore[type-arg]
    """String token -> its string (inline) or a _Get."""

    def __missing__(self, tok: bytes) -> object:
        if tok[0] == 0x8C:
            raw = tok[2:-1]
            if len(raw) != tok[1]:
                raise Fallback
            try:
                value: object = raw.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise Fallback from None
        else:
            value = _Get(tok[1] if tok[0] == 0x68 else int.from_bytes(tok[1:5], "little"), tok)
        self[tok] = value
        return value


def _record_starts(base: int, fqn_tok: list[bytes], path_tok: list[bytes],
                   offsets: list[tuple[int, ...]]) -> list[int]:
    """The first memo slot of each record of a storage run."""
    counts = [6 + (len(o) > 0) + (a[0] == 0x8C) + (b[0] == 0x8C)
              for o, a, b in zip(offsets, fqn_tok, path_tok, strict=True)]
    return list(accumulate(counts, initial=base))


def _record_start(base: int, fqn_tok: list[bytes], path_tok: list[bytes],
                  offsets: list[tuple[int, ...]], i: int) -> int:
    return _record_starts(base, fqn_tok[:i + 1], path_tok[:i + 1], offsets[:i + 1])[i]


def _run_strings(base: int, fqn_tok: list[bytes], path_tok: list[bytes],
                 offsets: list[tuple[int, ...]]) -> dict[int, str]:
    """Memo slot -> string of the strings a storage run writes inline (the MetadataIndex's
    fqn after its NEWOBJ and dict; the path after the offset's tuple, TUPLE1, REDUCE and the
    _StorageInfo's NEWOBJ and dict)."""
    out = {}
    for s, a, b, o in zip(_record_starts(base, fqn_tok, path_tok, offsets), fqn_tok, path_tok,
                          offsets, strict=False):
        fa = a[0] == 0x8C
        if fa:
            out[s + 2] = a[2:-1].decode("utf-8", "surrogatepass")
        if b[0] == 0x8C:
            out[s + 6 + fa + (len(o) > 0)] = b[2:-1].decode("utf-8", "surrogatepass")
    return out


class _Ints(dict):  # type: ignore[type-arg]
    def __missing__(self, tok: bytes) -> int:
        value = self[tok] = _int(tok)
        return value


def _text(data: bytes, start: int, end: int, n: int) -> str:
    """A pickled string's text as the unpickler decodes it; one it would not read: the pickle
    is read whole (:class:`Fallback`)."""
    if end > n:
        raise Fallback
    try:
        return data[start:end].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise Fallback from None


class _Walk:
    """The opcode walk and its records of memo slots."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.memo: list[object] = []
        self.slots: dict[object, int] = {}  # str / ("G", dotted) -> its first memo slot
        self.runs: list[object] = []
        self.pieces: list[bytes] = []
        self.stored: list[tuple[int, int, StorageRun]] = []  # (first slot, end, run)
        # The memo slots of the runs (cut out: ``memo`` holds the others, numbered as the C
        # unpickler numbers them in the cut pickle): first slots, ends, slots cut up to each end.
        self.bases: list[int] = []
        self.ends: list[int] = []
        self.cum: list[int] = []
        self.removed = 0
        self.strs = _Strs()
        self.tuples = _Tuples()
        self.ints = _Ints()

    def value(self, slot: int) -> object:
        """What memo ``slot`` (numbered as in the pickle as written) holds."""
        bases = self.bases
        if bases and slot >= bases[0]:
            i = bisect_right(bases, slot) - 1
            if slot < self.ends[i]:
                return self.run_string(slot)
            slot -= self.cum[i]
        memo = self.memo
        if slot >= len(memo):
            raise Fallback
        return memo[slot]

    def run_string(self, slot: int) -> str:
        """A string a storage run wrote inline (any other slot of a run is refused)."""
        for base, end, run in self.stored:
            if base <= slot < end:
                found = _run_strings(base, *run.inline[1:], run.offsets).get(slot)
                if found is not None:
                    return found
        raise Fallback

    def renumbered(self, slot: int) -> bytes:
        """The get of ``slot`` in the cut pickle: its new number, or, for a string written
        inside a run, that string written again."""
        i = bisect_right(self.bases, slot) - 1
        if i < 0:
            return _get(slot)
        if slot < self.ends[i]:
            raw = self.run_string(slot).encode("utf-8", "surrogatepass")
            if len(raw) < 256:
                return b"\x8c" + bytes((len(raw),)) + raw
            return b"X" + len(raw).to_bytes(4, "little") + raw
        return _get(slot - self.cum[i])

    def slot_tuple(self, names: tuple[object, ...]) -> tuple[int, ...] | None:
        out = []
        for n in names:
            s = self.slots.get(n)
            if s is None:
                return None
            out.append(s)
        return tuple(out)

    def chunk_run(self, pos: int, slots: tuple[int, ...], lim: int) -> int:
        ms = list(iter(_compiled("chunk", slots).scanner(self.data, pos, lim).match, None))
        if not ms:
            return pos
        end = ms[-1].end()
        found = list(map(_GROUPS, ms))
        dec = self.tuples.__getitem__
        offsets = list(map(dec, map(itemgetter(0), found)))
        sizes = list(map(dec, map(itemgetter(1), found)))
        filled = 6 * len(found) + sum(map(bool, offsets)) + sum(map(bool, sizes))
        self.cut(pos, end, ChunkRun(offsets, sizes), filled)
        return end

    def storage_run(self, pos: int, slots: tuple[int, ...], lim: int) -> int:
        ms = list(iter(_compiled("storage", slots).scanner(self.data, pos, lim).match, None))
        if not ms:
            return pos
        end = ms[-1].end()
        found = list(map(_GROUPS, ms))
        offsets = list(map(self.tuples.__getitem__, map(itemgetter(1), found)))
        fqn_tok = list(map(itemgetter(0), found))
        path_tok = list(map(itemgetter(2), found))
        strs = self.strs.__getitem__
        fqns = list(map(strs, fqn_tok))
        paths = list(map(strs, path_tok))
        inline = (list(map(_FIRST, fqn_tok)).count(0x8C)
                  + list(map(_FIRST, path_tok)).count(0x8C))
        filled = 6 * len(found) + sum(map(bool, offsets)) + inline
        base = len(self.memo) + self.removed
        if _Get in {*map(type, fqns)} or _Get in {*map(type, paths)}:
            self.resolve(fqns, paths, fqn_tok, path_tok, offsets, base)
        ints = self.ints.__getitem__
        run = StorageRun(fqns, offsets, paths, list(map(ints, map(itemgetter(3), found))),
                         list(map(ints, map(itemgetter(4), found))))
        run.inline = (base, fqn_tok, path_tok)
        self.cut(pos, end, run, filled)
        self.stored.append((base, base + filled, run))
        return end

    def resolve(self, fqns: list[object], paths: list[object], fqn_tok: list[bytes],
                path_tok: list[bytes], offsets: list[tuple[int, ...]], base: int) -> None:
        """The strings of the memo gets among a run's fqns and paths: a get of a slot before
        the run, or of a string written inline earlier in the run."""
        for vals, toks in ((fqns, fqn_tok), (paths, path_tok)):
            found: dict[bytes, str] = {}
            for g in {v for v in vals if type(v) is _Get}:
                if g.slot < base:
                    v = self.value(g.slot)
                else:
                    inner = _run_strings(base, fqn_tok, path_tok, offsets)
                    v = inner.get(g.slot)
                    first = toks.index(g.token)
                    if v is None or _record_start(base, fqn_tok, path_tok, offsets,
                                                  first) <= g.slot:
                        raise Fallback
                if type(v) is not str:
                    raise Fallback
                found[g.token] = v
            if found:
                get = found.get
                vals[:] = [get(t, v) for t, v in zip(toks, vals, strict=True)]

    def cut(self, pos: int, end: int, run: object, filled: int) -> None:
        self.pieces.append(self.data[self.copied:pos])
        n = len(self.runs)
        self.runs.append(run)
        marker = b"J" + n.to_bytes(4, "little") + b"Q"
        if isinstance(run, StorageRun):
            self.runs.append(run.value)
            marker += b"J" + (n + 1).to_bytes(4, "little") + b"Q"
        self.pieces.append(marker)
        base = len(self.memo) + self.removed
        self.bases.append(base)
        self.ends.append(base + filled)
        self.removed += filled
        self.cum.append(self.removed)
        self.copied = end

    def walk(self) -> None:  # noqa: C901 - one loop over the opcodes, by frequency
        data = self.data
        n = len(data)
        memo = self.memo
        slots = self.slots
        fixed = _FIXED
        plain = _PLAIN
        top: object = _OTHER
        below: object = _OTHER
        chunk_names = (("G", CHUNK), *_CHUNK_KEYS[:1], _CHUNK_KEYS[1], ("G", SIZE))
        storage_names = (("G", INDEX), *_INDEX_KEYS, ("G", SIZE), ("G", INFO), _INFO_KEYS[0],
                         _INFO_KEYS[2])
        chunk_slots: tuple[int, ...] | None = None
        storage_slots: tuple[int, ...] | None = None
        self.copied = 0
        pos = 0
        if data[:1] != b"\x80" or n < 2:
            raise Fallback
        pos = 2
        # The end of what the C unpickler has buffered: a frame's end inside one, else the
        # data's. Reading on past a frame's end, it drops the rest of the frame and reads what
        # follows it: an opcode that crosses a frame's end is not read as written here.
        lim = n
        while True:
            if pos >= lim:
                if pos > lim or lim == n:
                    raise Fallback
                lim = n  # the frame is read up to its end: on from the data
            op = data[pos]
            if op == 0x94:  # MEMOIZE
                if top.__class__ is str or top.__class__ is tuple:
                    slots.setdefault(top, len(memo) + self.removed)
                memo.append(top)
                pos += 1
                continue
            if op == 0x68 or op == 0x6A:  # BINGET, LONG_BINGET
                at = pos
                if op == 0x68:
                    slot = data[pos + 1]
                    pos += 2
                else:
                    slot = int.from_bytes(data[pos + 1:pos + 5], "little")
                    pos += 5
                below, top = top, self.value(slot)
                if self.removed:
                    new = self.renumbered(slot)
                    if new != data[at:pos]:
                        self.pieces.append(data[self.copied:at])
                        self.pieces.append(new)
                        self.copied = pos
                continue
            if op == 0x8C:  # SHORT_BINUNICODE
                end = pos + 2 + data[pos + 1]
                below, top = top, _text(data, pos + 2, end, n)
                pos = end
                continue
            if op in plain:
                below = top = _OTHER
                pos += 1
                if op == 0x28 or op == 0x62:  # MARK, BUILD: where a run of records may start
                    if chunk_slots is None:
                        chunk_slots = self.slot_tuple(chunk_names)
                    if chunk_slots is not None:
                        pos = self.chunk_run(pos, chunk_slots, lim)
                    if storage_slots is None:
                        storage_slots = self.slot_tuple(storage_names)
                    if storage_slots is not None:
                        pos = self.storage_run(pos, storage_slots, lim)
                elif op == 0x2E:  # STOP
                    self.pieces.append(data[self.copied:pos])
                    return
                continue
            size = fixed.get(op)
            if size is not None:
                below = top = _OTHER
                pos += 1 + size
                continue
            if op == 0x93:  # STACK_GLOBAL
                if below.__class__ is not str or top.__class__ is not str:
                    raise Fallback
                below, top = _OTHER, ("G", f"{below}.{top}")
                pos += 1
                continue
            if op == 0x8A:  # LONG1
                if pos + 1 >= n:
                    raise Fallback
                below = top = _OTHER
                pos += 2 + data[pos + 1]
                continue
            if op == 0x58:  # BINUNICODE
                end = pos + 5 + int.from_bytes(data[pos + 1:pos + 5], "little")
                below, top = top, _text(data, pos + 5, end, n)
                pos = end
                continue
            if op == 0x43:  # SHORT_BINBYTES
                below = top = _OTHER
                pos += 2 + data[pos + 1]
                continue
            if op == 0x95:  # FRAME: dropped from the rewritten pickle (framing is optional)
                size = int.from_bytes(data[pos + 1:pos + 9], "little")
                if pos + 9 + size > lim:  # past the data, or a frame in a frame past its end
                    raise Fallback
                self.pieces.append(data[self.copied:pos])
                if lim == n:
                    lim = pos + 9 + size
                # else: inside the frame the C unpickler has read: it reads on in it
                pos += 9
                self.copied = pos
                continue
            raise Fallback  # anything else: not modelled


def used(runs: list[object]) -> bool:
    """Every run's marker was found where its records stand (and taken once)."""
    return all(r.used for r in runs if type(r) is not _RunValue)  # type: ignore[attr-defined]


def split(data: bytes) -> tuple[bytes, list[object]] | None:
    """(the pickle with its runs of records cut out, the runs by persistent id) or None when
    the pickle is not of the shape read here (or has no run)."""
    w = _Walk(data)
    try:
        w.walk()
    except (Fallback, IndexError, MemoryError):
        return None
    if not w.runs:
        return None
    return b"".join(w.pieces), w.runs
