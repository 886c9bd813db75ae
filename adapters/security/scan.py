"""``inspector scan``: a verdict per file for everything that can carry code, over files and trees.

Every file is recognised by its content (never by its extension alone) and examined for the way a
loader of that format would run code:

* pickles (torch zip with any root or extension, legacy torch, plain pickle and joblib streams,
  compressed or not, the pickle members of any zip, object ``.npy``/``.npz`` arrays): every
  global gets the verdict of :mod:`inspector.adapters.security.verdicts` from how a loader would
  use it; nothing is imported or run;
* Keras ``.keras``/``.h5`` configs: a ``Lambda`` layer holding marshalled bytecode (Keras runs it
  when it loads the model) is dangerous, a config naming a listed module is dangerous;
* TorchScript archives: their ``code/`` sections are reported (torch.jit.load compiles and runs
  them);
* safetensors: header length and tensor offsets inside the file;
* HDF5: external links, virtual datasets and external raw storage (data read from other files).

Verdicts: ``safe``, ``foreign`` (reported, nothing known to run), ``dangerous`` (a loader would run
code), ``error`` (could not be examined). Every read is bounded (member sizes, pickle sizes, object
counts), so a hostile file ends in a verdict or an error within seconds, and the scan goes on.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from inspector.adapters.errors import InspectorError
from inspector.adapters.security import verdicts as V
from inspector.adapters.security.restricted_pickle import (
    GlobalRef,
    PickleError,
    base_allowed,
    unpickle,
)
from inspector.adapters.source import Source, as_source, is_url

from .examination import DANGEROUS, ERROR, FOREIGN, LEVELS, FileResult

SCHEMA = "inspector.scan/1"
HEAD_BYTES = 4096
MAX_PICKLE_BYTES = 256 << 20  # one pickle held in memory (a 50,000-tensor state dict: ~5 MB)
MAX_JSON_BYTES = 64 << 20  # a Keras config
MAX_H5_MEMBER = 256 << 20  # a Keras weights file read from a .keras zip
MAX_MEMBERS = 200_000  # zip members examined
MAX_PICKLES = 16  # pickles read one after another from one stream
MAX_H5_LINKS = 1_000_000
MAX_CONFIG_NODES = 2_000_000
TORCH_MAGIC = 0x1950A86A20F9469CFC6C
JOBLIB_WRAPPER = "joblib.numpy_pickle.NumpyArrayWrapper"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
NPY_MAGIC = b"\x93NUMPY"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_STORAGE_RECORD = re.compile(r"(?:^|/)data/[^/]+$")
PICKLE_NAMES = (".pkl", ".pickle", ".joblib", ".dat", ".data", ".pt", ".pth", ".bin", ".ckpt")


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
    directories, dangling or looping are noted. A link given on the command line is followed.
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
    """The verdict on one file (a path, or a remote source); never raises for a bad file (it
    becomes an ``error`` item)."""
    res = FileResult(str(path))
    if isinstance(path, Unreadable):
        res.add(ERROR, _one_line(path.error))
        return res
    try:
        source = path if isinstance(path, Source) else as_source(path)
        if _examined_by_adapter(source, res):
            return res
        if isinstance(path, Source):
            with path.open() as f:
                head = f.read(HEAD_BYTES)
                _dispatch(path, f, head, path.size, res)
            return res
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
            size = os.fstat(f.fileno()).st_size
            _dispatch(path, f, head, size, res)
    except (InspectorError, OSError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        res.add(ERROR, _one_line(e))
    except (ValueError, KeyError, IndexError, TypeError, struct.error, EOFError,
            RuntimeError, MemoryError, RecursionError, NotImplementedError) as e:
        res.add(ERROR, f"{type(e).__name__}: {_one_line(e)}")
    return res


def _examined_by_adapter(source: Source, res: FileResult) -> bool:
    """The adapter that claims the file examines it with its own walk (the walk its reader
    uses), when it has an ``examine`` hook."""
    from inspector.adapters.registry import claim

    found = claim(source)
    if found is None or found[0].examine is None:
        return False
    adapter, variant = found
    res.kind = variant if variant != adapter.name else adapter.name
    adapter.examine(source, variant, res)
    return True


def _one_line(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return " ".join(text.split())[:500]


def _dispatch(
    path: Path | Source, f: BinaryIO, head: bytes, size: int, res: FileResult
) -> None:
    if head[:4] in ZIP_MAGICS:
        _scan_zip(f, res)
    elif head.startswith(NPY_MAGIC):
        res.kind = "npy"
        _scan_npy(f, size, res, None)
    elif _hdf5_offset(head) is not None:
        res.kind = "hdf5"
        _scan_hdf5(f if isinstance(path, Source) else path, res, None)
    elif _looks_safetensors(head, size):
        res.kind = "safetensors"
        _scan_safetensors(path, res)
    elif head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        _scan_pickle_stream(f, size, res)
    elif head and _scan_pickle_stream(f, size, res, optional=True):
        pass  # a protocol 0/1 pickle
    elif head.startswith(COMPRESSED) and _scan_compressed(f, head, res):
        pass  # joblib.dump(..., compress=...) and friends
    elif path.suffix == ".py":
        res.kind = "python"
        res.add(FOREIGN, "Python source: runs when imported (e.g. trust_remote_code)")
    elif _is_text(head):
        res.kind = "text"
    elif head[:8] == struct.pack("<Q", 0x112):
        res.kind = "mxnet"  # NDArray list: tensors only
    elif size == 0:
        res.kind = "empty"
    else:
        res.add(FOREIGN, "unrecognised binary content: not examined")


# zlib (joblib compress=N), gzip, bz2, xz: joblib's compressors (numpy_pickle_utils / compressor)
COMPRESSED = (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x1f\x8b", b"BZh",
              b"\xfd7zXZ\x00")


def _scan_compressed(f: BinaryIO, head: bytes, res: FileResult) -> bool:
    """A compressed pickle stream (decompressed to at most MAX_PICKLE_BYTES): False when the
    content is not a pickle."""
    import bz2
    import gzip
    import lzma
    import zlib

    f.seek(0)
    if head.startswith(b"\x1f\x8b"):
        stream: Any = gzip.GzipFile(fileobj=f)
    elif head.startswith(b"BZh"):
        stream = bz2.BZ2File(f)
    elif head.startswith(b"\xfd7zXZ"):
        stream = lzma.LZMAFile(f)
    else:
        stream = _ZlibReader(f, zlib.decompressobj())
    try:
        data = stream.read(MAX_PICKLE_BYTES + 1)
    except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError):
        return False
    if len(data) > MAX_PICKLE_BYTES:
        res.add(ERROR, f"decompresses past {MAX_PICKLE_BYTES:,} bytes: not examined")
        return True
    inner = FileResult(res.path)
    if not _scan_pickle_stream(io.BytesIO(data), len(data), inner, optional=True):
        return False
    res.kind = "compressed-" + inner.kind
    res.items, res.globals = inner.items, inner.globals
    return True


class _ZlibReader:
    def __init__(self, f: BinaryIO, d: Any) -> None:
        self.f, self.d = f, d

    def read(self, limit: int) -> bytes:
        out = bytearray()
        while len(out) <= limit:
            chunk = self.f.read(1 << 20)
            if not chunk:
                out += self.d.flush()
                break
            out += self.d.decompress(chunk, limit + 1 - len(out))
            if self.d.unconsumed_tail:
                break  # past the limit
        return bytes(out)


def _is_text(head: bytes) -> bool:
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 3  # a character cut at the end of the sample
    return True


def _hdf5_offset(head: bytes) -> int | None:
    for off in (0, 512, 1024, 2048):
        if head[off : off + 8] == HDF5_MAGIC:
            return off
    return None


def _looks_safetensors(head: bytes, size: int) -> bool:
    if len(head) < 10:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 0 < n and head[8:9] == b"{"


# ---------------------------------------------------------------------------------------------
# pickles


class _PersistentId:
    """What a persistent id (a torch storage reference) stands for while scanning: nothing."""

    __slots__ = ()


_PID = _PersistentId()


def _persistent(pid: Any) -> Any:
    """A storage reference stands for nothing; legacy torch's ("module", cls, file, source)
    stands for its class (a placeholder), which NEWOBJ then instantiates."""
    if type(pid) is tuple and len(pid) == 4 and pid[0] == "module" and isinstance(pid[1], type):
        return pid[1]
    return _PID


def _unpickle(data: bytes | BinaryIO) -> tuple[dict[str, GlobalRef], str | None]:
    """(globals, error) of one pickle read through the restricted unpickler (nothing runs)."""
    try:
        _, globals_ = unpickle(data, base_allowed(), _persistent)
        return globals_, None
    except PickleError as e:
        return e.globals or {}, str(e)


def _report_globals(res: FileResult, globals_: dict[str, GlobalRef], where: str | None) -> None:
    for g in globals_.values():
        v = g.verdict
        assert v is not None
        res.globals.append(
            {"name": g.name, "resolved": g.resolved, "verdict": v.level, "use": v.use,
             "why": v.why, "where": where}
        )
        if v.level != V.SAFE:
            also = f" = {g.resolved}" if g.resolved != g.name else ""
            res.add(v.level, f"{g.name}{also} ({v.use}: {v.why})", where)


def _scan_pickle_bytes(data: bytes, res: FileResult, where: str) -> None:
    globals_, err = _unpickle(data)
    _report_globals(res, globals_, where)
    if err:
        res.add(ERROR, f"{where}: {err}", where)


def _scan_pickle_stream(f: BinaryIO, size: int, res: FileResult, optional: bool = False) -> bool:
    """Pickles one after another from the start of ``f``: a plain pickle, a joblib stream or a
    legacy torch file (magic, version, sys_info, the data pickle, the storage keys). With
    ``optional`` (no PROTO opcode: protocol 0/1 or not a pickle at all), a stream whose first
    pickle does not parse and names no dangerous global is not a pickle: returns False and
    reports nothing."""
    f.seek(0)
    count = 0
    legacy = False
    while count < MAX_PICKLES and f.tell() < size:
        start = f.tell()
        if size - start > MAX_PICKLE_BYTES and not legacy and count == 0 and optional:
            return False
        try:
            obj, globals_ = unpickle(f, base_allowed(), _persistent)
            err = None
        except PickleError as e:
            obj, globals_, err = None, e.globals or {}, str(e)
        if count == 0 and err and any(g.resolved == JOBLIB_WRAPPER for g in globals_.values()):
            from .joblib_stream import read_joblib

            res.kind = "joblib"
            globals_, err = read_joblib(f, size, _persistent)
            _report_globals(res, globals_, "joblib stream")
            if err:
                res.add(ERROR, f"joblib stream: {err}")
            return True
        if count == 0:
            dangerous = any(
                g.verdict is not None and g.verdict.level == V.DANGEROUS for g in globals_.values()
            )
            if err and optional and not dangerous:
                return False  # text that happens to start like a pickle opcode
            legacy = obj == TORCH_MAGIC and type(obj) is int
            res.kind = "torch-legacy" if legacy else "pickle"
        where = f"pickle at offset {start}"
        _report_globals(res, globals_, where)
        count += 1
        if err:
            if count == 1 or globals_:
                res.add(ERROR, f"{where}: {err}", where)
            break  # joblib's raw arrays or trailing data: no further pickle to read
        if legacy and count == 5:
            break  # the raw storages follow
        nxt = f.read(2)
        f.seek(-len(nxt), os.SEEK_CUR)
        if not (nxt[:1] == b"\x80" and len(nxt) == 2 and 2 <= nxt[1] <= 5) and not legacy:
            break
    return True


def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    if info.file_size > limit:
        raise InspectorError(
            f"member {info.filename} declares {info.file_size:,} bytes uncompressed (limit "
            f"{limit:,}): not examined"
        )
    with z.open(info) as m:
        data = m.read(limit + 1)
    if len(data) > limit:
        raise InspectorError(f"member {info.filename} inflates past {limit:,} bytes")
    return data


# ---------------------------------------------------------------------------------------------
# zips: torch, npz, keras, anything


def _scan_zip(f: BinaryIO, res: FileResult) -> None:
    res.kind = "zip"
    with zipfile.ZipFile(f) as z:
        infos = z.infolist()
        if len(infos) > MAX_MEMBERS:
            res.add(ERROR, f"{len(infos):,} members (limit {MAX_MEMBERS:,}): not examined")
            return
        names = {i.filename for i in infos}
        code = [n for n in names if "/code/" in n or n.startswith("code/")]
        if any(n.endswith("data.pkl") for n in names):
            res.kind = "torchscript" if code else "torch-zip"
        elif "config.json" in names and ("model.weights.h5" in names or "metadata.json" in names):
            res.kind = "keras"
        elif any(n.endswith(".npy") for n in names):
            res.kind = "npz"
        if code:
            res.add(
                FOREIGN,
                f"TorchScript code: {len(code)} file(s) under code/ (torch.jit.load compiles and "
                "runs them; they cannot call Python)",
            )
        for info in infos:
            if info.is_dir():
                continue
            try:
                _scan_member(z, info, res)
            except (InspectorError, zipfile.BadZipFile, NotImplementedError, RuntimeError,
                    EOFError, OSError, ValueError) as e:
                res.add(ERROR, _one_line(e), info.filename)


def _scan_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, res: FileResult) -> None:
    name = info.filename
    low = name.lower()
    if info.flag_bits & 0x1:
        res.add(ERROR, f"member {name} is encrypted: not examined", name)
        return
    if res.kind in ("torch-zip", "torchscript") and _STORAGE_RECORD.search(name):
        return  # a raw storage record (<root>/data/<key>): torch.load never unpickles it
    with z.open(info) as m:
        head = m.read(16)
    is_pickle = head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5
    if is_pickle or low.endswith(PICKLE_NAMES):
        _scan_pickle_bytes(_read_member(z, info, MAX_PICKLE_BYTES), res, name)
    elif head.startswith(NPY_MAGIC):
        _npy_member(z, info, res)
    elif name == "config.json" and res.kind == "keras":
        config = json.loads(_read_member(z, info, MAX_JSON_BYTES))
        _scan_keras_config(config, res, name)
    elif head.startswith(HDF5_MAGIC):
        data = _read_member(z, info, MAX_H5_MEMBER)
        _scan_hdf5(io.BytesIO(data), res, name)


def _npy_is_object(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    from inspector.adapters.numpy_npy import parse_header

    with z.open(info) as m:
        dtype, *_ = parse_header(m, info.filename)  # type: ignore[arg-type]
    return dtype == "object"


def _npy_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, res: FileResult) -> None:
    try:
        is_object = _npy_is_object(z, info)
    except InspectorError as e:
        # numpy.load fails on such a header before any pickle is reached (mxnet 2.0.0b1 writes
        # one for sparse arrays' format.npy): nothing can run, but say so
        res.add(FOREIGN, f"{info.filename}: {e.message}; numpy cannot load it", info.filename)
        return
    if is_object:
        data = _read_member(z, info, MAX_PICKLE_BYTES)
        _scan_npy(io.BytesIO(data), len(data), res, info.filename)


# ---------------------------------------------------------------------------------------------
# npy


def _scan_npy(f: BinaryIO, size: int, res: FileResult, where: str | None) -> None:
    from inspector.adapters.numpy_npy import parse_header

    f.seek(0)
    dtype, shape, _, info = parse_header(f, where or res.path)
    if dtype != "object":
        return
    start = info["header_bytes"]
    if size - start > MAX_PICKLE_BYTES:
        res.add(ERROR, f"object array pickle of {size - start:,} bytes: not examined", where)
        return
    f.seek(start)
    globals_, err = _unpickle(f.read(size - start))
    label = f"{where or 'npy'} object array"
    _report_globals(res, globals_, label)
    if err:
        res.add(ERROR, f"{label}: {err}", label)


# ---------------------------------------------------------------------------------------------
# safetensors


def _scan_safetensors(path: Path | Source, res: FileResult) -> None:
    from inspector.adapters.registry import load

    load(path, "safetensors")  # header length, JSON, dtypes and offsets checked: else an error


# ---------------------------------------------------------------------------------------------
# Keras configs and HDF5


def _scan_keras_config(config: Any, res: FileResult, where: str) -> None:
    """Lambda layers with marshalled bytecode; objects naming a listed module."""
    stack = [config]
    nodes = 0
    while stack:
        node = stack.pop()
        nodes += 1
        if nodes > MAX_CONFIG_NODES:
            res.add(ERROR, f"config has more than {MAX_CONFIG_NODES:,} nodes", where)
            return
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        stack.extend(node.values())
        cls = node.get("class_name")
        conf = node.get("config") if isinstance(node.get("config"), dict) else {}
        if cls == "Lambda":
            _lambda_layer(conf, res, where)
        module = node.get("module")
        if isinstance(module, str) and isinstance(cls, str) and module:
            why = V.listed(module, cls)
            if why:
                res.add(DANGEROUS, f"config object {module}.{cls} ({why})", where)
            elif module.split(".", 1)[0] not in ("keras", "builtins", "tensorflow", "tf_keras"):
                res.add(FOREIGN, f"config object from module {module} ({cls})", where)


def _lambda_layer(conf: dict, res: FileResult, where: str) -> None:
    name = conf.get("name", "?")
    fn = conf.get("function")
    # Keras 3: {"class_name": "__lambda__", "config": {"code": base64 marshal, ...}}
    if isinstance(fn, dict) and fn.get("class_name") == "__lambda__":
        code = (fn.get("config") or {}).get("code") if isinstance(fn.get("config"), dict) else None
        res.add(
            DANGEROUS,
            f"Lambda layer {name!r} holds marshalled Python bytecode ({len(str(code or ''))} "
            "base64 chars): Keras runs it when it loads the model",
            where,
        )
    # Keras 2: function_type "lambda" and function = [base64 marshal, defaults, closure]
    elif conf.get("function_type") == "lambda" or (
        isinstance(fn, (list, tuple)) and fn and isinstance(fn[0], str)
    ):
        res.add(
            DANGEROUS,
            f"Lambda layer {name!r} holds marshalled Python bytecode (Keras 2 func_dump): "
            "Keras runs it when it loads the model",
            where,
        )
    else:
        res.add(FOREIGN, f"Lambda layer {name!r} calls a named function {fn!r:.80}", where)


def _scan_hdf5(source: Path | BinaryIO, res: FileResult, where: str | None) -> None:
    import h5py

    with h5py.File(source, "r") as f:
        if res.kind == "hdf5" and "model_config" in f.attrs:
            res.kind = "keras-h5"
        raw = f.attrs.get("model_config")
        if raw is not None:
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
            if len(text) > MAX_JSON_BYTES:
                res.add(ERROR, "model_config attribute too large: not examined", where)
            else:
                _scan_keras_config(json.loads(text), res, (where or "") + ":model_config")
        count = 0

        def visit(name: str, link: Any) -> Any:
            nonlocal count
            count += 1
            if count > MAX_H5_LINKS:
                res.add(ERROR, f"more than {MAX_H5_LINKS:,} HDF5 links", where)
                return True  # stop
            if isinstance(link, h5py.ExternalLink):
                _external(res, f"external link /{name} -> {link.filename}:{link.path}",
                          link.filename, where)
            elif isinstance(link, h5py.HardLink):
                obj = f.get(name)
                if isinstance(obj, h5py.Dataset):
                    _dataset_sources(obj, name, res, where)
            return None

        f.visititems_links(visit)


def _dataset_sources(ds: Any, name: str, res: FileResult, where: str | None) -> None:
    import h5py

    dcpl = ds.id.get_create_plist()
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        for i in range(min(dcpl.get_virtual_count(), 64)):
            src = dcpl.get_virtual_filename(i)
            _external(res, f"virtual dataset /{name} reads {src}:{dcpl.get_virtual_dsetname(i)}",
                      src, where)
    for i in range(min(dcpl.get_external_count(), 64)):
        src = dcpl.get_external(i)[0]
        src = src.decode("utf-8", "replace") if isinstance(src, bytes) else str(src)
        _external(res, f"dataset /{name} stores its data in external file {src}", src, where)


def _external(res: FileResult, text: str, target: str, where: str | None) -> None:
    """Data from another file: dangerous when the target is absolute or climbs out (a loader
    would read e.g. /etc/passwd as weights), foreign when it stays beside the file ('.' is the
    file itself, as HDF5 writes a virtual dataset's own-file sources)."""
    target = str(target)
    parts = Path(target).parts
    if target == ".":
        return
    level = DANGEROUS if Path(target).is_absolute() or ".." in parts else FOREIGN
    res.add(level, text + " (data from another file)", where)


# ---------------------------------------------------------------------------------------------
# reports


def scan(paths: list[str]) -> Iterator[FileResult]:
    files, _ = collect(paths)
    for p in files:
        yield scan_file(p)


def summary(results: list[FileResult], notes: list[str]) -> dict[str, Any]:
    counts = {lvl: 0 for lvl in LEVELS}
    for r in results:
        counts[r.verdict] += 1
    return {"files": len(results), **counts, "not_followed": len(notes)}
