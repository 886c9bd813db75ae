"""A tensor's values as a NumPy array (``inspector.get_tensor``), like safetensors' ``get_tensor``.

Read where the checkpoint's adapter says the values are (:data:`~inspector.adapters.model.
ValueReader`): a plain little- or big-endian byte range of a local file is memory-mapped
(read-only, nothing copied until touched); anything else (a compressed zip member, an HDF5
dataset, a remote file, a strided view, bfloat16 and float8 widened to float32) is read
through the value pass of :mod:`inspector.values` into a new array. Nothing from the file runs.
"""

from __future__ import annotations

from typing import Any

from inspector.adapters.model import ByteRange, Checkpoint, TensorEntry, c_strides

from .values import FLOAT8, NUMPY_DTYPES, iter_values, refusal

WIDENED = ("bfloat16", "complex32")  # no NumPy dtype: widened to float32 / complex64


def get_tensor(ckpt: Checkpoint, name: str, mmap: bool = True) -> Any:
    """The values of tensor ``name`` (canonical or stored name) with its shape. ``mmap``: map
    the file where the bytes allow it (a read-only ``numpy.memmap``), else read a copy."""
    import numpy as np

    entry = ckpt[name]
    if mmap:
        mapped = _mapped(ckpt, entry)
        if mapped is not None:
            return mapped
    chunks = list(iter_values(ckpt, entry))
    flat = np.concatenate(chunks) if chunks else np.empty(0, dtype=_dtype(entry))
    return flat.reshape(entry.shape)


def _dtype(entry: TensorEntry) -> Any:
    import numpy as np

    if entry.dtype == "complex32":
        return np.complex64
    if entry.dtype in WIDENED or entry.dtype in FLOAT8:
        return np.float32
    return np.dtype(NUMPY_DTYPES.get(entry.dtype or "", "u1"))


def _mapped(ckpt: Checkpoint, entry: TensorEntry) -> Any:
    """A read-only memory map of a plain contiguous byte range of a local file, or None."""
    import numpy as np

    if entry.dtype not in NUMPY_DTYPES or entry.dtype in WIDENED or entry.dtype in FLOAT8:
        return None
    if ckpt.reader is None or entry.numel == 0 or entry.stored_numel is not None:
        return None
    if entry.extra.get("stype") or entry.extra.get("indices"):
        raise refusal(entry, ckpt.path, "a sparse layout has no dense array")
    loc = ckpt.reader(entry)
    if not isinstance(loc, ByteRange) or loc.source.local_path is None:
        return None
    if loc.stride is not None and loc.stride != c_strides(entry.shape):
        return None
    dtype = np.dtype(NUMPY_DTYPES[entry.dtype])
    if loc.big_endian:
        dtype = dtype.newbyteorder(">")
    if loc.offset + dtype.itemsize * entry.numel > loc.source.size:
        return None  # truncated: the value pass names the problem
    return np.memmap(loc.source.local_path, dtype=dtype, mode="r", offset=loc.offset,
                     shape=entry.shape)
