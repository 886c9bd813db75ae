"""What examining one file found: the items behind its verdict and the globals its pickles name.

An adapter's ``examine(source, variant, result)`` hook (see :class:`~inspector.adapters.registry.
Adapter`) adds to a :class:`FileResult`; ``inspector scan`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SAFE, FOREIGN, DANGEROUS, ERROR = "safe", "foreign", "dangerous", "error"
LEVELS = (SAFE, FOREIGN, DANGEROUS, ERROR)


@dataclass
class Item:
    """One global or finding behind a verdict."""

    level: str
    text: str
    where: str | None = None


@dataclass
class FileResult:
    path: str
    kind: str = "unknown"
    items: list[Item] = field(default_factory=list)
    globals: list[dict[str, Any]] = field(default_factory=list)
    # the examination walked a zip's members (the file's own, or the members of a container
    # whose end is a zip): scan looks for no other zip at the end of the file
    zip_walked: bool = False

    @property
    def verdict(self) -> str:
        levels = {i.level for i in self.items}
        if DANGEROUS in levels:
            return DANGEROUS
        if ERROR in levels:
            return ERROR
        return FOREIGN if FOREIGN in levels else SAFE

    def add(self, level: str, text: str, where: str | None = None) -> None:
        self.items.append(Item(level, text, where))

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "verdict": self.verdict,
            "findings": [
                {"level": i.level, "text": i.text, "where": i.where} for i in self.items
            ],
            "globals": self.globals,
        }


# ---------------------------------------------------------------------------------------------
# the pieces every adapter's examine hook uses

MAX_PICKLE_BYTES = 256 << 20  # one pickle held in memory (a 50,000-tensor state dict: ~5 MB)
MAX_PICKLES = 16  # pickles read one after another from one stream
TORCH_MAGIC = 0x1950A86A20F9469CFC6C  # torch/serialization.py MAGIC_NUMBER
JOBLIB_WRAPPER = "joblib.numpy_pickle.NumpyArrayWrapper"


class _PersistentId:
    """What a persistent id (a torch storage reference) stands for while examining: nothing."""

    __slots__ = ()


_PID = _PersistentId()


def persistent(pid: Any) -> Any:
    """What torch's ``persistent_load`` hands the unpickler for ``pid``. A storage reference
    stands for nothing. Legacy torch returns ``data[0]`` of a ``("module", obj, ...)`` id (the
    type name may be bytes, ``_maybe_decode_ascii``; with any falsy field the source check is
    skipped), and the tar format returns the first element of any tuple: whatever the pickle put
    there (a placeholder), which the pickle may then call or instantiate."""
    if type(pid) is tuple and pid:
        head = pid[0]
        if isinstance(head, (bytes, bytearray)):
            head = bytes(head).decode("ascii", "replace")
        if head == "module" and len(pid) >= 2:
            return pid[1]
        if head != "storage":
            return pid[0]
    return _PID


def one_line(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return " ".join(text.split())[:500]


def report_globals(res: FileResult, globals_: dict[str, Any], where: str | None) -> None:
    """Each global as a row of ``res.globals`` and, unless safe, an item."""
    for g in globals_.values():
        v = g.verdict
        if v is None:
            continue
        res.globals.append(
            {"name": g.name, "resolved": g.resolved, "verdict": v.level, "use": v.use,
             "why": v.why, "where": where}
        )
        if v.level != SAFE:
            also = f" = {g.resolved}" if g.resolved != g.name else ""
            res.add(v.level, f"{g.name}{also} ({v.use}: {v.why})", where)


def examine_pickle(res: FileResult, data: Any, where: str) -> tuple[Any, bool]:
    """One pickle (bytes, or a file positioned at it) through the restricted unpickler: its
    globals reported (also those read before an error), an error item if it broke off.
    Returns (object, whether it loaded)."""
    from .restricted_pickle import PickleError, base_allowed, unpickle

    try:
        obj, globals_ = unpickle(data, base_allowed(), persistent)
    except PickleError as e:
        report_globals(res, e.globals or {}, where)
        res.add(ERROR, f"{where}: {e}", where)
        return None, False
    report_globals(res, globals_, where)
    return obj, True


def is_pickle_start(head: bytes) -> bool:
    """A protocol 2-5 PROTO opcode."""
    return len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5


def examine_stream(res: FileResult, f: Any, size: int, label: str = "pickle",
                   max_pickles: int = MAX_PICKLES) -> int:
    """Every pickle of a stream, one after another from where ``f`` stands, as repeated
    ``pickle.load`` calls would read them (a loader that reads one is fooled by none after it:
    each is reported). Stops at the end, at a broken pickle (reported) or at bytes that do not
    start a pickle (trailing data, noted). Returns the number of pickles read."""
    count = 0
    while count < max_pickles:
        start = f.tell()
        if start >= size:
            return count
        if size - start > MAX_PICKLE_BYTES and count:
            res.add(ERROR, f"{size - start:,} more bytes after pickle {count}: not examined")
            return count
        if count:
            nxt = f.read(SAMPLE)
            f.seek(start)
            if not could_start_pickle(nxt):
                res.add(FOREIGN, f"{size - start:,} bytes after the last pickle (offset "
                        f"{start}): not a pickle", f"offset {start}")
                return count
        where = label if count == 0 and label != "pickle" else f"{label} at offset {start}"
        _, ok = examine_pickle(res, f, where)
        count += 1
        if not ok:
            return count
    if f.tell() < size and max_pickles == MAX_PICKLES:  # (a legacy torch file: raw data)
        res.add(ERROR, f"more than {max_pickles} pickles in one stream: the rest not examined")
    return count


def could_start_pickle(head: bytes) -> bool:
    """Whether bytes could be one more pickle that ``pickle.load`` would read: a PROTO opcode,
    or an opcode stream (protocols 0/1) that the loaders' grammar (:mod:`.pickle_grammar`)
    walks to its STOP (or through at least 32 opcodes to the end of a long sample)."""
    if is_pickle_start(head):
        return True
    return parses_as_pickle(head)


SAMPLE = 1 << 20


def parses_as_pickle(data: bytes) -> bool:
    """An opcode walk of ``data`` reaches a STOP and the opcodes name a global or start a
    container: any protocol, whatever the bytes look like (a protocol-0 pickle is printable
    text). A stream without either (``1.18.115``: POP_MARK, STOP) can name nothing to run."""
    return walks_as_pickle(lambda n: data[:n], len(data))


def walks_as_pickle(read: Any, size: int) -> bool:
    """:func:`parses_as_pickle` over ``read(n)`` (the first ``n`` bytes): the first 1 MiB, and
    only when an opcode runs past it (one long string can), everything up to 256 MiB; 32
    opcodes that parse to the end of a cut sample and name a global count as a pickle."""
    head = read(min(size, SAMPLE))
    end, n, meaningful = _walk(head)
    if end == "stop":
        return meaningful and n > 1
    if _runs_before_its_end(head):  # no STOP, but the opcodes before the break call a global
        return True
    if end != "cut" or size <= SAMPLE:
        return False
    if meaningful and n >= 32:
        return True
    end, n, meaningful = _walk(read(min(size, MAX_PICKLE_BYTES)))
    return end == "stop" and meaningful and n > 1


def _runs_before_its_end(data: bytes) -> bool:
    from .pickle_grammar import runs_before_its_end

    return runs_before_its_end(data)


def _walk(data: bytes) -> tuple[str, int, bool]:
    """("stop" | "bad" | "cut", opcodes walked, whether one names a global or the first starts
    a container), in the loaders' grammar (:mod:`.pickle_grammar`)."""
    from .pickle_grammar import walk

    return walk(data)


def examine_pickles(res: FileResult, f: Any, size: int) -> None:
    """A pickle file as ``pickle.load`` / ``joblib.load`` read it: every pickle in the stream;
    a joblib stream (its first pickle names ``NumpyArrayWrapper`` and breaks where raw array
    bytes follow) through the joblib reader, which skips the arrays as joblib reads them."""
    from .restricted_pickle import PickleError, base_allowed, unpickle

    start = f.tell()
    try:
        unpickle(f, base_allowed(), persistent)
        joblib = False
    except PickleError as e:
        joblib = any(g.resolved == JOBLIB_WRAPPER for g in (e.globals or {}).values())
    f.seek(start)
    if not joblib:
        examine_stream(res, f, size, "pickle")
        return
    from .joblib_stream import read_joblib

    res.kind = "joblib"
    globals_, err = read_joblib(f, size, persistent)
    report_globals(res, globals_, "joblib stream")
    if err:
        res.add(ERROR, f"joblib stream: {err}")


NPY_MAGIC = b"\x93NUMPY"
MAX_NPY_HEADER = 1 << 20
MAX_ZIP_MEMBERS = 200_000  # zip members examined


def examine_npy(res: FileResult, f: Any, size: int, where: str | None) -> None:
    """An ``.npy`` (``f`` at its start): when its dtype holds objects, the pickle(s) after
    the header, which ``numpy.load(allow_pickle=True)`` unpickles."""
    from ..errors import FormatError
    from ..npy_header import has_object, read_header

    start = f.tell()
    try:
        # numpy.load(allow_pickle=True) lifts its 10,000-byte header limit
        header, info = read_header(f, where or res.path, MAX_NPY_HEADER)
    except FormatError as e:
        if where is None:
            raise
        if "exceeds" in str(e.message):  # numpy.load(allow_pickle=True) reads it all the same
            res.add(ERROR, f"{where}: {e.message}: not examined", where)
            return
        res.add(FOREIGN, f"{where}: {e.message}; numpy.load fails on this header before "
                "reading any data", where)
        return
    if not has_object(header["descr"]):
        return
    body = start + info["header_bytes"]
    f.seek(body)
    examine_stream(res, f, size, f"{where or 'npy'} object array")


def examine_zip_members(source: Any, res: FileResult,
                        other: Any = None) -> None:
    """Every member of any zip as Python's zipfile reads it (numpy's ``NpzFile``, Keras): each
    copy of a duplicated name, pickles by first bytes or name, object ``.npy`` members; the
    rest handed to ``other(name, read, head)`` when given (Keras configs, HDF5). The
    directory's disagreements are reported."""
    import io

    from ..zip_container import local_name_notes, read_directory, read_member

    where = source.where
    with source.view() as mm:
        size = len(mm)
        d = read_directory(mm, size, where)
        if len(d.members) > MAX_ZIP_MEMBERS:
            res.add(ERROR, f"{len(d.members):,} members (limit {MAX_ZIP_MEMBERS:,}): not "
                    "examined")
            return
        res.zip_walked = True
        for note in d.notes:
            res.add(FOREIGN, f"zip: {note}")
        for note in local_name_notes(mm, size, d, where):
            res.add(FOREIGN, f"zip: {note}")
        for m in d.members:
            if m.is_dir():
                continue
            if m.encrypted:
                res.add(ERROR, f"member {m.name} is encrypted: not examined", m.name)
                continue
            try:
                if m.usize > MAX_PICKLE_BYTES:
                    raise ValueError(f"member {m.name} declares {m.usize:,} bytes uncompressed "
                                     f"(limit {MAX_PICKLE_BYTES:,}): not examined")
                data = read_member(mm, size, m, where, MAX_PICKLE_BYTES)
                head = data[:16]
                low = m.name.lower()
                # The .npy magic before the opcode walk: numpy.load reads such a member as an
                # array, and as a pickle "\x93" (STACK_GLOBAL on an empty stack) runs nothing,
                # while an array's float bytes can walk as opcodes by chance.
                if is_pickle_start(head) or low.endswith(PICKLE_NAMES):
                    examine_stream(res, io.BytesIO(data), len(data), m.name)
                elif head.startswith(NPY_MAGIC):
                    examine_npy(res, io.BytesIO(data), len(data), m.name)
                elif parses_as_pickle(data):
                    examine_stream(res, io.BytesIO(data), len(data), m.name)
                elif other is not None:
                    other(m.name, data, res)
            except Exception as e:  # noqa: BLE001 - one member's damage is that member's error
                res.add(ERROR, one_line(e), m.name)


PICKLE_NAMES = (".pkl", ".pickle", ".joblib", ".debug_pkl")


def as_findings(res: FileResult) -> list[Any]:
    """The items of an examination as checkpoint findings (dangerous -> ``danger``, which the
    policy refuses; foreign and error -> ``warning``), so the listing and the API carry what
    ``scan`` reports."""
    from ..model import Finding

    out = []
    for i in res.items:
        severity = "danger" if i.level == DANGEROUS else "warning"
        text = i.text if i.level != ERROR else f"not examined: {i.text}"
        out.append(Finding(severity, text, i.where or res.path))
    return out
