"""Stream tensor values from a checkpoint file and compare two tensors chunk by chunk.

Values are read through what the adapters recorded (``offset``, ``file``, ``extra``), never
through a framework: safetensors, PyTorch zip and legacy files and MXNet ``.params`` by seek and
read from the recorded offset; NumPy ``.npy``/``.npz`` through their own headers (a zip member is
streamed, stored or deflated); HDF5 (Keras) by h5py dataset reads of ``stored_name``, also inside
a ``.keras`` zip. Peak memory is bounded by one chunk of :data:`CHUNK_ELEMENTS` elements per side
(plus the float64 copies of it), not by the tensor or the file.

NumPy is imported here and only here (lazily, when values are compared).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from adapters.errors import FormatError, UsageError
from adapters.model import Checkpoint, TensorEntry

CHUNK_ELEMENTS = 1 << 18  # elements per chunk and side: 2 MiB once upcast to float64
# A non-contiguous view is read as the byte span it covers; refuse when that span is larger.
MAX_VIEW_SPAN_BYTES = 64 << 20
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
ZIP_MAGIC = b"PK\x03\x04"
# canonical dtype -> numpy dtype string (little-endian; the byte order is swapped when needed).
# bfloat16 is read as its 16 bits and widened to float32 (its upper half) by a shift.
NUMPY_DTYPES = {
    "bool": "?",
    "uint8": "u1",
    "int8": "i1",
    "uint16": "<u2",
    "int16": "<i2",
    "uint32": "<u4",
    "int32": "<i4",
    "uint64": "<u8",
    "int64": "<i8",
    "float16": "<f2",
    "bfloat16": "<u2",
    "float32": "<f4",
    "float64": "<f8",
}
SEEK_FORMATS = ("safetensors", "safetensors-sharded", "torch-zip", "torch-legacy", "mxnet")


@dataclass(frozen=True, slots=True)
class ValueStats:
    """How two tensors' values compare (float64 arithmetic over every element).

    ``identical``: every element equal (NaN equal to NaN). ``max_abs``: max |a - b|.
    ``rel_l2``: ||a - b|| / ||a|| (0 when both are zero, inf when only a is). ``cosine``: None
    when either side is all zeros. ``changed``: some element has |a - b| > atol + rtol * |b|.
    """

    identical: bool
    max_abs: float
    rel_l2: float
    cosine: float | None
    changed: bool


def compare(
    ckpt_a: Checkpoint,
    a: TensorEntry,
    ckpt_b: Checkpoint,
    b: TensorEntry,
    atol: float = 0.0,
    rtol: float = 0.0,
    chunk: int = CHUNK_ELEMENTS,
) -> ValueStats:
    """Compare two tensors of equal element count, one chunk of each at a time."""
    import numpy as np

    if a.numel != b.numel:
        raise UsageError(f"cannot compare {a.name!r} ({a.numel} elements) with {b.numel}")
    if atol < 0 or rtol < 0:
        raise UsageError("--atol and --rtol must be >= 0")
    integral = _integral(a.dtype) and _integral(b.dtype)
    max_abs = 0.0
    ss_diff = ss_a = ss_b = dot = 0.0
    identical = True
    changed = False
    with ExitStack() as stack:
        chunks_a = stack.enter_context(_Reader(ckpt_a, a, chunk))
        chunks_b = stack.enter_context(_Reader(ckpt_b, b, chunk))
        for xa, xb in zip(chunks_a, chunks_b, strict=True):
            fa = xa.astype(np.float64)
            if np.array_equal(xa, xb):  # the common case of a frozen tensor: one dot product
                sq = float(np.dot(fa, fa))
                ss_a, ss_b, dot = ss_a + sq, ss_b + sq, dot + sq
                continue
            fb = xb.astype(np.float64)
            d = np.abs(fa - fb)
            if np.isnan(d).any():  # NaN equals NaN, inf equals inf; NaN vs a number: infinitely far
                same = (fa == fb) | (np.isnan(fa) & np.isnan(fb))
                d[same] = 0.0
                d[np.isnan(d)] = np.inf
                fa, fb = np.nan_to_num(fa), np.nan_to_num(fb)
            if integral or d.any():  # int64 beyond 2**53 can differ where float64 cannot tell
                identical = False
            max_abs = max(max_abs, float(d.max()))
            finite = np.where(np.isinf(d), 0.0, d)
            ss_diff += float(np.dot(finite, finite))
            changed = changed or bool((d > atol + rtol * np.abs(fb)).any())
            ss_a += float(np.dot(fa, fa))
            ss_b += float(np.dot(fb, fb))
            dot += float(np.dot(fa, fb))
    if ss_a > 0:
        rel = math.sqrt(ss_diff) / math.sqrt(ss_a)
    else:
        rel = 0.0 if ss_diff == 0 and max_abs == 0 else math.inf
    if max_abs == math.inf:
        rel = math.inf
    cosine = None
    if ss_a > 0 and ss_b > 0:  # clamped: rounding can put it a hair outside [-1, 1]
        cosine = max(-1.0, min(1.0, dot / (math.sqrt(ss_a) * math.sqrt(ss_b))))
    return ValueStats(identical, max_abs, rel, cosine, changed)


def iter_values(ckpt: Checkpoint, entry: TensorEntry, chunk: int = CHUNK_ELEMENTS) -> Iterator[Any]:
    """The tensor's elements in C order, as numpy arrays of at most ``chunk`` elements
    (bfloat16 widened to float32, everything else in its own dtype)."""
    with _Reader(ckpt, entry, chunk) as it:
        yield from it


def _integral(dtype: str) -> bool:
    return dtype == "bool" or "int" in dtype


class _Reader:
    """Context manager and iterator over one tensor's chunks."""

    def __init__(self, ckpt: Checkpoint, entry: TensorEntry, chunk: int) -> None:
        self.ckpt, self.entry, self.chunk = ckpt, entry, max(1, chunk)
        self.stack = ExitStack()
        self.it: Iterator[Any] | None = None

    def __enter__(self) -> _Reader:
        self.it = _open(self.ckpt, self.entry, self.chunk, self.stack)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def __iter__(self) -> Iterator[Any]:
        assert self.it is not None
        return self.it


def _data_source(ckpt: Checkpoint, entry: TensorEntry) -> tuple[Path, str, dict]:
    """(file holding the data, the format that file is in, its metadata)."""
    fmt, meta, path = ckpt.format, ckpt.metadata, Path(ckpt.path)
    if fmt == "sockeye":  # a model directory: the params file through its own adapter
        path = Path(ckpt.paths[1])
        fmt, meta = meta.get("params_format", ""), meta.get("params_metadata", {})
    if fmt == "safetensors-sharded" and entry.file:
        path = Path(ckpt.path).parent / entry.file
    return path, fmt, meta


def _refuse(entry: TensorEntry, path: Path, why: str) -> FormatError:
    return FormatError(f"tensor {entry.stored_name!r}: values cannot be compared: {why}", str(path))


def _open(ckpt: Checkpoint, entry: TensorEntry, chunk: int, stack: ExitStack) -> Iterator[Any]:
    path, fmt, meta = _data_source(ckpt, entry)
    extra = entry.extra
    if extra.get("stype") or entry.stored_numel is not None or extra.get("indices"):
        raise _refuse(entry, path, f"sparse {extra.get('stype') or 'layout'} is not supported")
    if entry.dtype not in NUMPY_DTYPES:
        raise _refuse(entry, path, f"dtype {entry.dtype} is not supported")
    if entry.numel == 0:
        return iter(())
    if fmt in SEEK_FORMATS:
        if entry.offset is None:
            why = "its data has no byte offset (a compressed zip member?)"
            raise _refuse(entry, path, why)
        big = meta.get("byteorder") == "big"
        f = stack.enter_context(_open_file(path))
        stride = extra.get("stride")
        if stride is not None and tuple(stride) != _c_strides(entry.shape):
            return _strided(f, entry, path, tuple(stride), big, chunk)
        return _contiguous(f, entry.offset, entry.dtype, entry.numel, big, chunk)
    if fmt.startswith("numpy"):
        return _numpy(path, fmt, entry, chunk, stack)
    return _hdf5(path, entry, chunk, stack)


def _open_file(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as e:
        raise FormatError(f"cannot read ({e.strerror})", str(path)) from None


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _decode(raw: bytes | Any, dtype: str, big: bool) -> Any:
    import numpy as np

    nd = np.dtype(NUMPY_DTYPES[dtype])
    if big:
        nd = nd.newbyteorder(">")
    x = np.frombuffer(raw, dtype=nd)
    if dtype == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x


def _read_exact(f: BinaryIO, n: int, what: str) -> bytes:
    raw = f.read(n)
    if len(raw) != n:
        raise FormatError(f"{what}: expected {n} bytes, the file ends after {len(raw)}")
    return raw


def _contiguous(
    f: BinaryIO, offset: int, dtype: str, numel: int, big: bool, chunk: int
) -> Iterator[Any]:
    size = _itemsize(dtype)
    f.seek(offset)
    done = 0
    while done < numel:
        n = min(chunk, numel - done)
        yield _decode(_read_exact(f, n * size, f"data at offset {f.tell()}"), dtype, big)
        done += n


def _itemsize(dtype: str) -> int:
    import numpy as np

    return np.dtype(NUMPY_DTYPES[dtype]).itemsize


def _blocks(shape: tuple[int, ...], chunk: int) -> Iterator[tuple[tuple[int, ...], int, int]]:
    """Cover ``shape`` in C order by blocks (index prefix, start, stop) along one dimension,
    each block holding at most ``chunk`` elements (or one innermost row if that is larger)."""
    if not shape:
        yield (), 0, 1
        return
    inner = 1
    dim = len(shape) - 1
    # the outermost dim whose sub-blocks still fit in a chunk
    while dim > 0 and inner * shape[dim] <= chunk:
        inner *= shape[dim]
        dim -= 1
    if inner * shape[dim] <= chunk:
        inner *= shape[dim]
        yield (), 0, shape[0]  # the whole tensor fits in one chunk
        return
    rows = max(1, chunk // inner)
    outer = shape[:dim]
    for prefix in _ndindex(outer):
        for start in range(0, shape[dim], rows):
            yield prefix, start, min(start + rows, shape[dim])


def _ndindex(shape: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    if not shape:
        yield ()
        return
    for i in range(shape[0]):
        for rest in _ndindex(shape[1:]):
            yield (i, *rest)


def _strided(
    f: BinaryIO, entry: TensorEntry, path: Path, stride: tuple[int, ...], big: bool, chunk: int
) -> Iterator[Any]:
    """A non-contiguous view (transpose, every other row, ...): each block is read as the byte
    span it covers and its elements picked out with numpy strides."""
    import numpy as np

    if any(s < 0 for s in stride):
        raise _refuse(entry, path, f"negative stride {list(stride)}")
    size = _itemsize(entry.dtype)
    shape = entry.shape
    assert entry.offset is not None
    for prefix, start, stop in _blocks(shape, chunk):
        dim = len(prefix)
        sub_shape = (stop - start, *shape[dim + 1 :]) if shape else ()
        sub_stride = stride[dim:]
        first = sum(i * s for i, s in zip(prefix, stride, strict=False)) + (
            start * stride[dim] if shape else 0
        )
        span = 1 + sum((d - 1) * s for d, s in zip(sub_shape, sub_stride, strict=True))
        if span * size > MAX_VIEW_SPAN_BYTES:
            raise _refuse(
                entry,
                path,
                f"strided view (shape {list(shape)}, stride {list(stride)}) needs a "
                f"{span * size}-byte span per block, over the {MAX_VIEW_SPAN_BYTES}-byte limit",
            )
        f.seek(entry.offset + first * size)
        flat = _decode(_read_exact(f, span * size, f"view of {entry.stored_name!r}"), entry.dtype,
                       big)
        view = np.lib.stride_tricks.as_strided(
            flat, sub_shape, tuple(s * flat.itemsize for s in sub_stride), writeable=False
        )
        yield np.ascontiguousarray(view).reshape(-1)


def _numpy(path: Path, fmt: str, entry: TensorEntry, chunk: int, stack: ExitStack) -> Iterator[Any]:
    """``.npy`` or an ``.npz`` member: numpy's own header parser gives byte order and layout;
    the data is then streamed (a deflated member decompresses as it is read)."""
    import numpy as np

    if fmt == "numpy-npz":
        z = stack.enter_context(zipfile.ZipFile(path))
        member = entry.stored_name + ".npy"
        try:
            f = stack.enter_context(z.open(member))
        except KeyError:
            raise _refuse(entry, path, f"no zip member {member!r}") from None
    else:
        f = stack.enter_context(_open_file(path))
    fmt_mod = np.lib.format
    readers = {(1, 0): fmt_mod.read_array_header_1_0, (2, 0): fmt_mod.read_array_header_2_0}
    try:
        version = fmt_mod.read_magic(f)
        if version not in readers:
            raise ValueError(f"version {version} is not supported")
        shape, fortran, nd = readers[version](f)
    except ValueError as e:
        raise _refuse(entry, path, f"bad .npy header ({e})") from None
    if tuple(shape) != entry.shape:
        raise _refuse(entry, path, f".npy header shape {list(shape)} differs from the listing")
    big = nd.byteorder == ">"
    if not fortran or len(shape) < 2:
        return _stream(f, entry.dtype, entry.numel, big, chunk)
    # Fortran order is a transposed C array: read it whole when small enough.
    nbytes = entry.numel * nd.itemsize
    if nbytes > MAX_VIEW_SPAN_BYTES:
        raise _refuse(entry, path, f"Fortran-ordered array of {nbytes} bytes is too large")
    flat = _decode(_read_exact(f, nbytes, entry.stored_name), entry.dtype, big)
    return iter(
        np.array_split(flat.reshape(shape[::-1]).T.reshape(-1), max(1, -(-entry.numel // chunk)))
    )


def _stream(f: BinaryIO, dtype: str, numel: int, big: bool, chunk: int) -> Iterator[Any]:
    size = _itemsize(dtype)
    done = 0
    while done < numel:
        n = min(chunk, numel - done)
        yield _decode(_read_exact(f, n * size, "array data"), dtype, big)
        done += n


def _hdf5(path: Path, entry: TensorEntry, chunk: int, stack: ExitStack) -> Iterator[Any]:
    """HDF5 dataset ``stored_name`` of the file, or of the ``.h5`` member of a ``.keras`` zip."""
    import h5py

    with open(path, "rb") as probe:
        head = probe.read(8)
    if head.startswith(ZIP_MAGIC):
        z = stack.enter_context(zipfile.ZipFile(path))
        names = [n for n in z.namelist() if n.endswith(".h5")]
        member = entry.file if entry.file in names else (names[0] if len(names) == 1 else None)
        if member is None:
            raise _refuse(entry, path, "no single .h5 member in the zip")
        fobj = stack.enter_context(z.open(member))
        h5 = stack.enter_context(h5py.File(fobj, "r"))
    elif head == HDF5_MAGIC:
        h5 = stack.enter_context(h5py.File(path, "r"))
    else:
        raise _refuse(entry, path, "no value reader for this format")
    ds = h5.get(entry.stored_name)
    if not isinstance(ds, h5py.Dataset):
        raise _refuse(entry, path, f"no HDF5 dataset {entry.stored_name!r}")
    if tuple(ds.shape) != entry.shape:
        raise _refuse(entry, path, f"HDF5 dataset shape {list(ds.shape)} differs from the listing")
    return _h5_blocks(ds, entry.shape, chunk)


def _h5_blocks(ds: Any, shape: tuple[int, ...], chunk: int) -> Iterator[Any]:
    import numpy as np

    for prefix, start, stop in _blocks(shape, chunk):
        if not shape:
            yield np.asarray(ds[()]).reshape(-1)
        else:
            yield np.asarray(ds[(*prefix, slice(start, stop))]).reshape(-1)
