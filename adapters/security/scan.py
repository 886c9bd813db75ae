"""``inspector scan``: a verdict per file for everything that can carry code, over files and trees.

For each file: the registry's claim (the adapter whose sniff recognises the content, never the
extension alone), then that adapter's ``examine`` hook, which walks the container with the same
function its ``open`` uses (the torch zip as torch's miniz reads it, torch's legacy stream and
pre-0.4 tar, every pickle of a plain or compressed stream, NumPy object arrays of any dtype
form, safetensors headers, MXNet records). A file no adapter examines gets :func:`generic`: any
pickle stream, any zip (found from its end, so with data prepended too) and its members,
compressed streams, NumPy, HDF5 (Keras configs and external storage, examined here until the
Keras/HDF5 adapters take them over), Python source (read with ast), JSON configs (``auto_map``
code, chat templates), YAML (Hydra and NeMo targets): :mod:`.side_code`; other text. A zip
appended to a file claimed as something else is examined as a zip too.

Verdicts: ``safe``, ``foreign`` (reported, nothing known to run), ``dangerous`` (a loader would run
code), ``error`` (could not be fully examined: what was found before the break stays, and a
dangerous global found before it still makes the file dangerous). Every read is bounded (member
sizes, pickle sizes, object counts), so a hostile file ends in a verdict within seconds and the
scan goes on.
"""

from __future__ import annotations

import io
import json
import os
import stat
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.adapters.errors import InspectorError
from inspector.adapters.source import Source, as_source, is_url, refuse_special

from .examination import (
    ERROR,
    FOREIGN,
    LEVELS,
    MAX_PICKLE_BYTES,
    SAMPLE,
    FileResult,
    examine_npy,
    examine_pickles,
    examine_zip_members,
    is_pickle_start,
    one_line,
    parses_as_pickle,
    walks_as_pickle,
)

SCHEMA = "inspector.scan/1"
HEAD_BYTES = 4096
MAX_JSON_BYTES = 64 << 20  # a Keras config
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
NPY_MAGIC = b"\x93NUMPY"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------
# walking


@dataclass
class Unreadable:
    """A remote path whose listing failed: scanned as one ``error`` line."""

    where: str
    error: InspectorError

    def __str__(self) -> str:
        return self.where


def collect(paths: list[str]) -> tuple[list[Path | Source | Unreadable], list[str]]:
    """The regular files under ``paths`` (recursive, sorted, each real file once) and notes on
    what was not followed. Inside a directory, symbolic links are not followed: a link to a file
    of the tree is that file, scanned under its own name; links out of the tree, to
    directories, dangling or looping are noted, and so are FIFOs, sockets and devices (never
    opened). A link given on the command line is followed.
    A URL (``s3://bucket/runs/``, ``https://...``) is a remote file or every file below a
    remote directory or prefix."""
    files: list[Path | Source | Unreadable] = []
    notes: list[str] = []
    seen: set[tuple[int, int]] = set()

    def add(p: Path) -> None:
        try:
            st = p.stat()
        except OSError as e:  # dangling link, symlink loop, permission
            notes.append(f"{p}: not followed ({e.strerror or e})")
            return
        if not stat.S_ISREG(st.st_mode):
            if not stat.S_ISDIR(st.st_mode):  # a FIFO would block, a device never end
                try:
                    refuse_special(st.st_mode, str(p))
                except InspectorError as e:
                    notes.append(f"{p}: {e.message}")
            return
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            files.append(p)

    for arg in paths:
        if is_url(arg):
            remote = as_source(arg)
            try:
                if remote.is_dir():
                    files.extend(remote.walk())  # type: ignore[attr-defined]
                else:
                    files.append(remote)
            except InspectorError as e:
                files.append(Unreadable(remote.where, e))  # its error becomes its line
            continue
        top = Path(arg)
        if not top.is_dir():
            add(top)
            continue
        root = top.resolve()
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames.sort()
            for d in dirnames:
                if os.path.islink(os.path.join(dirpath, d)):
                    notes.append(f"{os.path.join(dirpath, d)}: directory link not followed")
            for name in sorted(filenames):
                p = Path(dirpath, name)
                if p.is_symlink():
                    try:
                        target = p.resolve(strict=True)
                    except (OSError, RuntimeError) as e:
                        notes.append(f"{p}: link not followed ({getattr(e, 'strerror', e)})")
                        continue
                    if not target.is_relative_to(root):
                        notes.append(f"{p}: link out of the tree not followed")
                    # a link inside the tree: its target is scanned under its own name
                    continue
                add(p)
    return files, notes


# ---------------------------------------------------------------------------------------------
# one file


def scan_file(path: Path | Source | Unreadable) -> FileResult:
    """The verdict on one file (a path, or a remote source); never raises for a bad file.

    The adapter whose sniff claims the file examines it with its own walk (the walk its
    reader uses: :attr:`~inspector.adapters.registry.Adapter.examine`); a file no adapter
    with a hook claims gets :func:`generic`. A walk that breaks off keeps what it found: the
    file is ``error``, or ``dangerous`` when a dangerous global was seen before the break."""
    from .archives import start_file

    start_file()
    res = FileResult(str(path))
    if isinstance(path, Unreadable):
        res.add(ERROR, one_line(path.error))
        return res
    try:
        source = path if isinstance(path, Source) else as_source(path)
        _examine(source, res)
    except _WALK_ERRORS as e:
        text = one_line(e)
        if not isinstance(e, (InspectorError, OSError)):
            text = f"{type(e).__name__}: {text}"
        res.add(ERROR, text)
    return res


_WALK_ERRORS = (InspectorError, OSError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError,
                KeyError, IndexError, TypeError, struct.error, EOFError, RuntimeError,
                MemoryError, RecursionError, NotImplementedError, AttributeError)


def _examine(source: Source, res: FileResult) -> None:
    from inspector.adapters.registry import claim

    found = claim(source)
    if found is not None and found[0].examine is not None:
        adapter, variant = found
        res.kind = variant if variant != adapter.name else adapter.name
        try:
            adapter.examine(source, variant, res)
        finally:
            if not res.zip_walked:
                zip_at_the_end(source, res)  # a zip appended to a pickle (or anything)
        return
    generic(source, res)


def zip_at_the_end(source: Source, res: FileResult) -> None:
    """A file claimed as something else that also ends like a zip (readers that look for the
    end record from the end, as Python's zipfile does, read it as one): its members too."""
    from inspector.adapters.zip_container import ends_like_zip

    with source.view() as mm:
        if not ends_like_zip(mm, len(mm)):
            return
    try:
        examine_zip_members(source, res, _other_member)
    except InspectorError:
        return  # an end-record signature in data, not a zip


def generic(source: Source, res: FileResult) -> None:
    """A file no adapter examines: found by content (any pickle stream, any zip and its
    members, NumPy, HDF5, compressed streams, Python source, text)."""
    from inspector.adapters.zip_container import ends_like_zip

    size = source.size
    head = source.head(HEAD_BYTES) if size else b""
    if size == 0:
        res.kind = "empty"
        return
    if head.startswith(NPY_MAGIC):
        res.kind = "npy"
        with source.open() as f:
            examine_npy(res, f, size, None)
        return
    if _archive(source, head, res):
        return
    if source.name == "saved_model.pb":
        from .tf_graph import MAX_BYTES, examine_saved_model

        if size > MAX_BYTES:
            res.add(ERROR, f"saved_model.pb of {size:,} bytes (limit {MAX_BYTES:,}): not "
                    "examined")
            return
        examine_saved_model(source.read(0, size), res)
        return
    with source.view() as mm:
        zip_end = ends_like_zip(mm, size)
    if head[:4] in ZIP_MAGICS or zip_end:
        try:
            _generic_zip(source, res)
            return
        except InspectorError:
            if head[:4] in ZIP_MAGICS:
                raise
            res.items = [i for i in res.items if not i.text.startswith("zip: ")]
    from inspector.adapters.keras import superblock_offset

    offset = superblock_offset(head, size, source.read)  # any user block the spec allows
    if offset is not None:
        res.kind = "hdf5"
        from .hdf5 import examine_hdf5
        from .user_block import examine_user_block

        examine_user_block(source.read, offset, res)
        examine_hdf5(source, res, None)
        return
    if is_pickle_start(head) or _looks_pickled(source, head, size):
        res.kind = "pickle"
        with source.open() as f:
            examine_pickles(res, f, size)
        return
    if _scan_compressed(source, head, res):
        return
    if source.where.endswith(".py") or _is_text(head):
        from .side_code import examine_text_file

        if examine_text_file(source, res):  # code, auto_map, chat templates, _target_
            return
    if _is_text(head):
        res.kind = "text"
    else:
        res.add(FOREIGN, "unrecognised binary content: not examined")


def _archive(source: Source, head: bytes, res: FileResult) -> bool:
    """A tar (plain or compressed) or a 7z: every member examined as a loose file."""
    from .archives import SEVEN_ZIP_MAGIC, compressed_tar, examine_7z, examine_tar, is_tar

    if head.startswith(SEVEN_ZIP_MAGIC):
        examine_7z(source, res, examine_loose)
        return True
    if is_tar(head):
        examine_tar(source, res, examine_loose)
        return True
    kind = compressed_tar(source)  # None at once unless the head is gzip, bzip2 or xz
    if kind is not None and kind.startswith("broken "):
        res.kind = "compressed"
        res.add(ERROR, f"the {kind[7:].split(':')[0]} stream breaks off "
                f"({kind.split(': ', 1)[1]}): not examined")
        return True
    if kind is not None:
        examine_tar(source, res, examine_loose, kind)
        return True
    return False


def examine_loose(source: Source, res: FileResult) -> None:
    """The walk of one loose file (an archive's member too): the adapter that claims it, else
    :func:`generic`."""
    _examine(source, res)


def _looks_pickled(source: Source, head: bytes, size: int) -> bool:
    """An opcode walk reaches a STOP (any protocol; a protocol-0 pickle is text)."""
    if size <= len(head):
        return parses_as_pickle(head)
    return walks_as_pickle(lambda n: source.read(0, n), size)


def _generic_zip(source: Source, res: FileResult) -> None:
    from inspector.adapters.zip_container import read_directory

    with source.view() as mm:
        names = read_directory(mm, len(mm), source.where).names()
    res.kind = ("keras" if "config.json" in names and (
        "model.weights.h5" in names or "metadata.json" in names)
        else "npz" if names and all(n.endswith(".npy") for n in names) else "zip")
    if any(n.endswith("/constants.pkl") for n in names):
        res.kind = "torchscript"
    from .archives import path_finding

    for n in names:  # what unpacking (zipfile.extractall, unzip) would write outside
        found = path_finding(n)
        if found:
            res.add(*found, n)
    examine_zip_members(source, res, lambda n, d, r: _other_member(n, d, r, names))


def _other_member(name: str, data: bytes, res: FileResult, names: list[str] | None = None
                  ) -> None:
    """Zip members that are neither pickles nor ``.npy``: a Keras ``config.json`` (at the
    root), HDF5 files, a TorchServe manifest; any other member that a walk recognises (an
    archive, code, a checkpoint) is examined as a loose file."""
    from .torchserve import MANIFEST

    if name == "config.json" and res.kind == "keras":
        if len(data) > MAX_JSON_BYTES:
            res.add(ERROR, "config.json too large: not examined", name)
            return
        from .keras_config import examine_keras_config

        examine_keras_config(json.loads(data), res, name)
    elif data.startswith(HDF5_MAGIC):
        from .hdf5 import examine_hdf5

        examine_hdf5(io.BytesIO(data), res, name, len(data))
    elif name == MANIFEST:
        from .torchserve import examine_manifest

        examine_manifest(data, names or [], res)
    elif res.kind == "torchscript" and "/code/" in name:
        return  # TorchScript source: compiled by torch.jit, never imported as Python
    else:
        from .archives import examine_bytes_member

        examine_bytes_member(data, name, res, examine_loose, quiet_unknown=True)


def _scan_compressed(source: Source, head: bytes, res: FileResult) -> bool:
    """A stream joblib would decompress (every compressor it detects by prefix:
    :mod:`inspector.adapters.joblib_compression`), decompressed to at most MAX_PICKLE_BYTES,
    holding pickles, as ``joblib.load`` reads ``compress=`` files: False when it does not
    decompress or holds no pickle."""
    from inspector.adapters.joblib_compression import compression, decompress

    kind = compression(head)
    if kind is None:
        return False
    try:
        if not decompress(kind, source.read(0, min(source.size, SAMPLE)), SAMPLE, partial=True):
            return False
    except (OSError, EOFError, ValueError):
        return False
    if source.size > MAX_PICKLE_BYTES:
        res.add(ERROR, f"{kind} stream of {source.size:,} bytes: not examined")
        return True
    try:
        data = decompress(kind, source.read(0, source.size), MAX_PICKLE_BYTES)
    except (OSError, EOFError, ValueError) as e:
        res.add(ERROR, f"{kind} stream is corrupt ({e}): not examined")
        return True
    if len(data) > MAX_PICKLE_BYTES:
        res.add(ERROR, f"decompresses past {MAX_PICKLE_BYTES:,} bytes: not examined")
        return True
    if not (is_pickle_start(data[:2]) or parses_as_pickle(data)):
        return False
    inner = FileResult(res.path)
    examine_pickles(inner, io.BytesIO(data), len(data))
    res.kind = "compressed-" + (inner.kind if inner.kind != "unknown" else "pickle")
    res.items += inner.items
    res.globals += inner.globals
    return True


def _is_text(head: bytes) -> bool:
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3  # a character cut at the end of the sample
    return True


def scan(paths: list[str]) -> Iterator[FileResult]:
    files, _ = collect(paths)
    for p in files:
        yield scan_file(p)


def summary(results: list[FileResult], notes: list[str]) -> dict[str, Any]:
    counts = {lvl: 0 for lvl in LEVELS}
    for r in results:
        counts[r.verdict] += 1
    return {"files": len(results), **counts, "not_followed": len(notes)}
