"""NumPy ``.npy`` and ``.npz`` files, headers only: what MXNet 2.x writes for ``.params``.

Format: NumPy's ``format.py`` (NEP 1): ``\\x93NUMPY`` | u8 major | u8 minor | header length
(u16 for version 1.0, u32 for 2.0 and 3.0) | an ASCII (3.0: UTF-8) Python dict literal with
``descr``, ``fortran_order``, ``shape``, padded with spaces and a newline | raw data.
An ``.npz`` is a zip of ``<key>.npy`` members (stored or deflated).

MXNet 2.0 (``src/c_api/c_api.cc`` ``MXNDArraySave``, ``src/serialization/cnpy.cc``) writes a
single dense array as ``.npy`` and everything else as ``.npz`` whatever the file is called;
unnamed arrays are keyed ``arr_<i>``; a sparse array becomes ``<key>/data.npy``,
``<key>/indices.npy``, ``<key>/indptr.npy`` (csr), ``<key>/shape.npy`` and ``<key>/format.npy``.
Gluon 2 keys carry the ``arg:``/``aux:`` prefixes of MXNet 1. The header dict is parsed with
:func:`ast.literal_eval` (literals only, nothing is executed); object arrays are listed, never
unpickled.
"""

from __future__ import annotations

import math
import struct
import zipfile
from contextlib import ExitStack
from typing import BinaryIO

from .errors import FormatError
from .model import Checkpoint, Finding, Stream, TensorEntry, ValueLocation, ValueReader
from .mxnet import split_prefix
from .npy_header import (  # the header readers, importable from here as before
    MAGIC,
    MAX_HEADER,
    has_object,
    parse_header,
    read_header,
)
from .registry import Adapter
from .source import Source
from .zip_container import open_member
from .zip_errors import ZIP_ERRORS

__all__ = ["ADAPTER", "MAGIC", "MAX_HEADER", "has_object", "parse_header", "read_header"]

NAME = "numpy"
MAX_MEMBERS = 1_000_000
SPARSE_PARTS = ("data", "indices", "indptr", "shape", "format")


def sniff(head: bytes, source: Source) -> str | None:
    if head.startswith(MAGIC):
        return "npy"
    if head.startswith(b"PK\x03\x04") and source.is_file():
        try:
            with source.open() as raw, zipfile.ZipFile(raw) as z:
                names = z.namelist()
                if names and all(n.endswith(".npy") for n in names):
                    return "npz"
                if names and len(names) <= MAX_SNIFFED and all(_npy_member(z, n) for n in names):
                    return "npz"  # numpy.load reads any member that starts like an .npy
        except ZIP_ERRORS:
            return None
    return None


MAX_SNIFFED = 1000  # members whose first bytes the sniff reads (names not ending in .npy)


def _npy_member(z: zipfile.ZipFile, name: str) -> bool:
    """Whether ``numpy.load``'s ``NpzFile`` reads member ``name`` as an array: it starts with the
    ``.npy`` magic, whatever it is called (``NpzFile.__getitem__``)."""
    if name.endswith(".npy"):
        return True
    with z.open(name) as f:
        return f.read(len(MAGIC)) == MAGIC


def _key(filename: str) -> str:
    """The key ``NpzFile`` gives a member: its name without a trailing ``.npy``."""
    return filename[: -len(".npy")] if filename.endswith(".npy") else filename


def _entry(key: str, dtype: str, shape: tuple[int, ...], itemsize: int, **kw) -> TensorEntry:
    name, role = split_prefix(key)
    return TensorEntry(
        stored_name=key,
        name=name,
        shape=shape,
        dtype=dtype,
        role=role,
        nbytes=math.prod(shape) * itemsize,
        **kw,
    )


def _open_npy(source: Source) -> Checkpoint:
    where = source.where
    size = source.size
    with source.open() as f:
        dtype, shape, itemsize, info = parse_header(f, where)
    if dtype == "object":
        # numpy.load(allow_pickle=True) unpickles the rest of the file: its globals with their
        # verdicts (for the policy), then the arrays inside, read through the same unpickler
        from .pickled import object_array_entries

        start = info["header_bytes"]
        if size - start > MAX_OBJECT_PICKLE:
            raise FormatError(f"object array pickle exceeds {MAX_OBJECT_PICKLE} bytes", where)
        body = source.read(start, size - start)
        info["pickle_globals"], findings = object_array_globals(body, where)
        try:
            entries, _ = object_array_entries(body, where)
        except FormatError as e:  # a structured or subarray object dtype: globals still judged
            entries = []
            findings.append(Finding("warning", f"arrays inside not listed: {e.message}", where))
        return Checkpoint(paths=(where,), format=NAME + "-npy", tensors=entries,
                          metadata={**info, "pickled_object": True}, findings=findings)
    data = math.prod(shape) * itemsize
    if info["header_bytes"] + data > size:
        raise FormatError(
            f"truncated: shape {list(shape)} of {dtype} needs {data} data bytes, "
            f"{size - info['header_bytes']} present",
            where,
        )
    entry = _entry("0", dtype, shape, itemsize, offset=info["header_bytes"])
    return Checkpoint(paths=(where,), format=NAME + "-npy", tensors=[entry], metadata=info)


MAX_OBJECT_PICKLE = 256 << 20


def object_array_globals(data: bytes, where: str) -> tuple[list[dict], list[Finding]]:
    """The globals of an object array's pickle with their verdicts (nothing is run)."""
    from .security.findings import pickle_findings
    from .security.restricted_pickle import PickleError, base_allowed, unpickle

    if len(data) > MAX_OBJECT_PICKLE:
        raise FormatError(f"object array pickle exceeds {MAX_OBJECT_PICKLE} bytes", where)
    try:
        _, globals_ = unpickle(data, base_allowed())
    except PickleError as e:
        rows, findings = pickle_findings(e.globals or {}, where)
        if any(f.severity == "danger" for f in findings):
            return rows, findings + [Finding("warning", f"object array pickle: {e}", where)]
        raise FormatError(f"object array pickle: {e}", where) from None
    return pickle_findings(globals_, where)


def _member_offset(f: BinaryIO, info: zipfile.ZipInfo) -> int | None:
    """Absolute offset of a stored member's data (local header is 30 bytes + name + extra)."""
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    f.seek(info.header_offset)
    local = f.read(30)
    if len(local) < 30 or not local.startswith(b"PK\x03\x04"):
        return None
    name_len, extra_len = struct.unpack_from("<HH", local, 26)
    return info.header_offset + 30 + name_len + extra_len


def _open_npz(source: Source) -> Checkpoint:
    where = source.where
    with source.open() as zfile, source.open() as raw:
        try:
            z = zipfile.ZipFile(zfile)
        except ZIP_ERRORS as e:
            raise FormatError(f"not a readable zip ({e})", where) from None
        return _read_npz(z, raw, where)


def _read_npz(z: zipfile.ZipFile, raw: BinaryIO, where: str) -> Checkpoint:
    with z:
        infos = z.infolist()
        if len(infos) > MAX_MEMBERS:
            raise FormatError(f"{len(infos)} zip members exceed {MAX_MEMBERS}", where)
        headers: dict[str, tuple] = {}
        findings: list[Finding] = []
        pickled: dict[str, list[TensorEntry]] = {}  # object members: the arrays inside them
        globals_rows: list[dict] = []
        for info in infos:
            member = f"{where}:{info.filename}"
            try:
                with open_member(z, info, where) as f:
                    dtype, shape, itemsize, hinfo = parse_header(f, member)
            except FormatError:  # first: a FormatError is also a ValueError, one of ZIP_ERRORS
                # mxnet 2.0.0b1 writes a broken header for a sparse array's format.npy
                # (cnpy.cc save_format_array); the storage type is told by its sibling members.
                if not info.filename.endswith("/format.npy"):
                    raise
                findings.append(
                    Finding("info", "unreadable .npy header (mxnet 2.0.0b1 bug)", member)
                )
                headers[_key(info.filename)] = ("unknown", (), 0, None)
                continue
            except ZIP_ERRORS as e:
                raise FormatError(f"zip member cannot be read ({e})", member) from None
            if dtype == "object":
                from .pickled import MAX_PICKLE_BYTES, object_array_entries

                if info.file_size > MAX_PICKLE_BYTES:
                    raise FormatError(f"object member of {info.file_size} bytes", member)
                with open_member(z, info, where) as f:
                    raw_member = f.read()
                key = _key(info.filename)
                body = raw_member[hinfo["header_bytes"] :]
                # the globals with their verdicts (for the policy), then the arrays inside
                rows, found = object_array_globals(body[: MAX_OBJECT_PICKLE + 1], member)
                globals_rows.extend(rows)
                findings.extend(found)
                try:
                    pickled[key], _ = object_array_entries(body, member, key)
                except FormatError as e:
                    pickled[key] = []
                    findings.append(Finding("warning", f"arrays inside not listed: {e.message}",
                                            member))
                continue
            data = math.prod(shape) * itemsize
            if hinfo["header_bytes"] + data != info.file_size:
                raise FormatError(
                    f"member holds {info.file_size} bytes, header says "
                    f"{hinfo['header_bytes']} + {data}",
                    member,
                )
            base = _member_offset(raw, info)
            offset = None if base is None else base + hinfo["header_bytes"]
            headers[_key(info.filename)] = (dtype, shape, itemsize, offset)
        tensors = _group_sparse(headers, z, where)
        if pickled:  # member order, the arrays of an object member where it stood
            by_name = {t.stored_name: t for t in tensors}
            ordered: list[TensorEntry] = []
            for info in infos:
                key = _key(info.filename)
                ordered.extend(pickled.get(key, [by_name.pop(key)] if key in by_name else []))
            tensors = ordered + [t for t in tensors if t.stored_name in by_name]
    return Checkpoint(
        paths=(where,),
        format=NAME + "-npz",
        tensors=tensors,
        metadata={"members": len(infos)}
        | ({"pickle_globals": globals_rows} if globals_rows else {}),
        findings=findings,
    )


def _group_sparse(headers: dict[str, tuple], z: zipfile.ZipFile, where: str) -> list[TensorEntry]:
    """Turn ``<key>/data``, ``<key>/indices``, ... members back into one sparse entry."""
    out: list[TensorEntry] = []
    done: set[str] = set()
    for key, (dtype, shape, itemsize, offset) in headers.items():
        base, _, part = key.rpartition("/")
        if (
            base
            and part in SPARSE_PARTS
            and f"{base}/data" in headers
            and f"{base}/shape" in headers
        ):
            if base in done:
                continue
            done.add(base)
            out.append(_sparse_entry(base, headers, z, where))
            continue
        out.append(_entry(key, dtype, shape, itemsize, offset=offset))
    return out


def _sparse_entry(
    base: str, headers: dict[str, tuple], z: zipfile.ZipFile, where: str
) -> TensorEntry:
    dtype, data_shape, itemsize, offset = headers[f"{base}/data"]
    s_dtype, s_shape, s_size, _ = headers[f"{base}/shape"]
    if s_dtype not in ("int64", "int32") or len(s_shape) != 1 or s_shape[0] > 64:
        raise FormatError(f"sparse array {base!r}: shape.npy is not a short integer vector", where)
    # The logical shape is data, not metadata: read its few bytes (at most 64 integers).
    with open_member(z, f"{base}/shape.npy", where) as f:
        _, _, _, info = parse_header(f, f"{where}:{base}/shape.npy")
        raw = f.read(s_shape[0] * s_size)
    shape = struct.unpack(f"<{s_shape[0]}{'q' if s_size == 8 else 'i'}", raw)
    stype = "csr" if f"{base}/indptr" in headers else "row_sparse"
    aux = {
        part: {"dtype": headers[f"{base}/{part}"][0], "shape": headers[f"{base}/{part}"][1]}
        for part in ("indptr", "indices")
        if f"{base}/{part}" in headers
    }
    nbytes = math.prod(data_shape) * itemsize + sum(
        math.prod(h[1]) * h[2] for p in ("indptr", "indices") if (h := headers.get(f"{base}/{p}"))
    )
    return _entry(base, dtype, tuple(shape), itemsize, offset=offset).replace(
        nbytes=nbytes,
        stored_numel=math.prod(data_shape),
        extra={"stype": stype, "storage_shape": data_shape, "aux": aux},
    )


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    if variant == "npy":
        ckpt = _open_npy(source)
    elif variant == "npz":
        ckpt = _open_npz(source)
    else:
        raise FormatError(f"unsupported numpy variant {variant!r}", source.where)
    ckpt.reader = _values(source, npz=variant == "npz")
    return ckpt


def _values(source: Source, npz: bool) -> ValueReader:
    """Each array's elements streamed after its own .npy header (a deflated ``.npz`` member
    decompresses as it is read); byte order and Fortran order come from that header."""

    def member(entry: TensorEntry, stack: ExitStack) -> BinaryIO:
        raw = stack.enter_context(source.open())
        if not npz:
            return raw
        z = stack.enter_context(zipfile.ZipFile(raw))
        name = entry.stored_name + ".npy"
        if name not in z.NameToInfo and entry.stored_name in z.NameToInfo:
            name = entry.stored_name  # a member that starts like an .npy without the suffix
        try:
            return stack.enter_context(open_member(z, name, source.where))
        except KeyError:
            raise FormatError(f"no zip member {name!r}", source.where) from None

    def locate(entry: TensorEntry) -> ValueLocation:
        with ExitStack() as stack:
            _, shape, _, info = parse_header(member(entry, stack), source.where)
        if tuple(shape) != entry.shape:
            raise FormatError(
                f"tensor {entry.stored_name!r}: .npy header shape {list(shape)} differs from the "
                "listing",
                source.where,
            )

        def open_data(stack: ExitStack) -> BinaryIO:
            f = member(entry, stack)
            parse_header(f, source.where)
            return f

        return Stream(open_data, info.get("byteorder") == "big", info["fortran_order"])

    return locate


def examine(source: Source, variant: str, res: object) -> None:
    """``scan``: what ``numpy.load(allow_pickle=True)`` unpickles: the data of an ``.npy`` whose
    dtype holds objects (any descr form); in an ``.npz`` every member that starts with the
    ``.npy`` magic (as ``NpzFile`` reads them), duplicates included (zipfile reads the last)."""
    from .security.examination import examine_npy

    if variant == "npy":
        res.kind = "npy"  # type: ignore[attr-defined]
        with source.open() as f:
            examine_npy(res, f, source.size, None)  # type: ignore[arg-type]
        return
    from .security.examination import examine_zip_members

    res.kind = "npz"  # type: ignore[attr-defined]
    examine_zip_members(source, res)  # type: ignore[arg-type]


ADAPTER = Adapter(
    name=NAME,
    description="NumPy .npy / .npz (headers only): MXNet 2.x .params, np.save/np.savez",
    extensions=(".npy", ".npz", ".params"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,  # type: ignore[arg-type]
    magic=(MAGIC,),
)
