"""PyTorch checkpoints written by ``torch.save``: metadata only, no torch, no code from the file.

Two on-disk variants (``torch/serialization.py``):

* **zip** (torch >= 1.6, the default): a STORED zip whose members sit under one root directory
  of any name (``archive/`` since torch 2.x, the file stem before, whatever a re-zipper chose):
  ``<root>/data.pkl`` (the object, pickle protocol 2 by default), ``<root>/data/<key>`` (one raw
  record per storage, 64-byte aligned), ``<root>/byteorder``, ``<root>/.format_version``,
  ``<root>/.storage_alignment``, ``<root>/version``, ``<root>/.data/serialization_id``.
  Only the central directory, ``data.pkl``, the small text records and the 30-byte local header
  of each storage record are read.
* **legacy** (``_use_new_zipfile_serialization=False``, torch < 1.6): five concatenated pickles
  -- the magic number, the protocol version (1001), a ``sys_info`` dict, the object, the list of
  storage keys -- then per storage in that order an 8-byte little-endian element count and the
  raw bytes, which are skipped. torch's even older tar format is recognised and refused.

Tensors arrive through torch's rebuild functions, implemented here as record builders
(:class:`_Builder`): ``_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
backward_hooks[, metadata])`` for dtypes with a legacy typed storage, where the storage is the
persistent id ``('storage', torch.FloatStorage, key, location, numel)`` (legacy: plus a view
tuple); ``_rebuild_tensor_v3(..., dtype[, metadata])`` with ``torch.storage.UntypedStorage``
(numel = bytes) and the dtype as a global for the dtypes without one (uint16/32/64,
complex32, float8_*, float4_e2m1fn_x2, bits*); ``_rebuild_parameter[_with_state]`` around them
for parameters, ``_rebuild_qtensor`` for quantized tensors (QInt8Storage, ... plus a qscheme
global), ``_rebuild_sparse_tensor`` for COO/CSR/CSC/BSR/BSC. See ``ALLOWED`` for the full list.

Names (see :func:`_classify`): ``stored_name`` is the dotted path through dicts, lists, tuples
and module attributes (``model.encoder.weight``, ``optimizer.state.0.exp_avg``); a pickled
``nn.Module`` contributes ``<module path>.<name>`` from its ``_parameters``/``_buffers``/
``_modules``. ``name`` drops the model container key of a training dict (``MODEL_KEYS``) and a
DDP ``module.`` / torch.compile ``_orig_mod.`` prefix carried by every model tensor.

Roles: exact for a pickled module (``_parameters`` vs ``_buffers``) and for ``nn.Parameter``
records; under an optimizer key (``OPTIMIZER_KEYS``) optimizer; elsewhere in a training dict
other; in a state dict buffer for the well-known buffer names of ``BUFFER_NAMES``, parameter
otherwise. Quantized per-channel scales/zero points are kept in ``extra`` (``q_scales``,
``q_zero_points``), not as entries, so counts match torch's ``numel()``; a sparse tensor is one
entry of its logical shape whose ``stored_numel`` is its number of stored values, with
``extra["indices"]``/``extra["values"]`` describing the parts.
"""

from __future__ import annotations

import math
import mmap
import os
import pickletools
import struct
import zlib
from pathlib import Path
from typing import Any

from .dtypes import BITS
from .errors import FormatError
from .model import Checkpoint, Finding, Role, TensorEntry
from .registry import Adapter
from .restricted_pickle import (
    GlobalRef,
    PickleError,
    Placeholder,
    base_allowed,
    gc_paused,
    is_placeholder_type,
    render,
    unpickle,
)

NAME = "torch"
MAGIC_NUMBER = 0x1950A86A20F9469CFC6C  # torch/serialization.py MAGIC_NUMBER
PROTOCOL_VERSION = 1001  # torch/serialization.py PROTOCOL_VERSION
ZIP_LOCAL_MAGIC = b"PK\x03\x04"
ZIP_CENTRAL_MAGIC = b"PK\x01\x02"
ZIP_END_MAGIC = b"PK\x05\x06"
ZIP64_END_MAGIC = b"PK\x06\x06"
ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
TAR_MAGIC = b"ustar"  # at offset 257 of a tar header
# The members torch's pre-0.4 tar format starts with (torch/serialization.py _legacy_load).
TAR_MEMBERS = (b"sys_info", b"pickle", b"storages", b"tensors")
# data.pkl / a legacy pickle bigger than this is refused: a 1M-tensor state dict is ~120 MB.
MAX_PICKLE_BYTES = 1 << 30
# Small text records (byteorder, version, ...) are read only up to this many bytes.
MAX_TEXT_RECORD = 256
# metadata key -> record under <root>/ (torch/serialization.py _save, inline_container.cc).
TEXT_RECORDS = (
    ("byteorder", "byteorder"),
    ("format_version", ".format_version"),
    ("storage_alignment", ".storage_alignment"),
    ("version", "version"),
    ("serialization_id", ".data/serialization_id"),
)
# Nesting of containers below the top object; deeper is refused (a tensor path, not a proof).
MAX_DEPTH = 200
# Containers + tensors a walk may visit per pickle byte: shared sub-containers could otherwise
# make a small pickle expand exponentially.
MAX_VISITS_PER_BYTE = 4

# Training-dict keys holding the model, most specific first; the first present one wins.
MODEL_KEYS = ("model", "state_dict", "model_state_dict", "model_state", "module", "net", "network")
# Training-dict keys holding optimizer state (lightning: optimizer_states, a list).
OPTIMIZER_KEYS = (
    "optimizer",
    "optimizer_state_dict",
    "optimizer_state",
    "optimizer_states",
    "optimizers",
    "optim",
    "optim_state",
    "opt",
    "opt_state",
)
# Well-known buffer names of a bare state dict: (dotted suffix, minimum ndim). Only names no
# layer uses for a parameter; GPT-2's causal mask "attn.bias" is 4-D, a real attn bias is not.
BUFFER_NAMES = (
    ("running_mean", 0),
    ("running_var", 0),
    ("num_batches_tracked", 0),
    ("position_ids", 0),
    ("token_type_ids", 0),
    ("inv_freq", 0),
    ("relative_position_index", 0),
    ("attn.masked_bias", 0),
    ("attn.bias", 4),
)
# Prefixes stripped from model names when every model tensor has them.
WRAPPER_PREFIXES = ("module.", "_orig_mod.")

# Legacy typed storages (torch/storage.py _dtype_to_storage_type_map) -> canonical dtype.
STORAGE_DTYPES = {
    "DoubleStorage": "float64",
    "FloatStorage": "float32",
    "HalfStorage": "float16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "BFloat16Storage": "bfloat16",
    "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64",
    "QInt8Storage": "qint8",
    "QInt32Storage": "qint32",
    "QUInt8Storage": "quint8",
    "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4",
}
# torch.<name> dtype globals -> canonical dtype (aliases included for hand-written pickles).
TORCH_DTYPES = {
    name: name for name in BITS if name not in ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")
}
TORCH_DTYPES.update(
    {
        "float": "float32",
        "double": "float64",
        "half": "float16",
        "cfloat": "complex64",
        "cdouble": "complex128",
        "chalf": "complex32",
        "long": "int64",
        "int": "int32",
        "short": "int16",
    }
)
QSCHEMES = (
    "per_tensor_affine",
    "per_channel_affine",
    "per_channel_affine_float_qparams",
    "per_tensor_symmetric",
    "per_channel_symmetric",
)
LAYOUTS = (
    "strided",
    "sparse_coo",
    "sparse_csr",
    "sparse_csc",
    "sparse_bsr",
    "sparse_bsc",
    "_mkldnn",
    "jagged",
)


class _Marker(str):
    """A torch constant from the pickle (dtype, storage type, qscheme, layout, class): a string.

    Slot-less str subclasses cannot be mutated by BUILD, so the shared instances stay inert.
    """

    __slots__ = ()


class TorchDType(_Marker):
    __slots__ = ()


class StorageType(_Marker):
    """Value: the storage class's dotted name; ``STORAGE_TYPE_DTYPES`` maps it to a dtype."""

    __slots__ = ()


class QScheme(_Marker):
    __slots__ = ()


class Layout(_Marker):
    __slots__ = ()


class TorchClass(_Marker):
    __slots__ = ()


STORAGE_TYPE_DTYPES: dict[str, str] = {}
for _cls, _dt in STORAGE_DTYPES.items():
    STORAGE_TYPE_DTYPES[f"torch.{_cls}"] = _dt
    STORAGE_TYPE_DTYPES[f"torch.cuda.{_cls}"] = _dt
for _cls in (
    "torch.storage.UntypedStorage",
    "torch.UntypedStorage",
    "torch.cuda.UntypedStorage",
    "torch.storage._UntypedStorage",
):
    STORAGE_TYPE_DTYPES[_cls] = "uint8"
# Bytes per storage element: a QUInt4x2Storage / QUInt2x4Storage counts bytes, while the tensors
# viewing it count 4-/2-bit values (dtypes.BITS).
ITEMSIZE = {
    **{name: bits // 8 for name, bits in BITS.items() if bits % 8 == 0},
    "quint4x2": 1,
    "quint2x4": 1,
}
VALUE_BITS = BITS


class StorageRef:
    """One storage: from a persistent id, completed with its place in the file after the load."""

    __slots__ = (
        "key",
        "dtype",
        "numel",
        "location",
        "type_name",
        "nbytes",
        "offset",
        "base",
        "view_offset",
        "compressed",
    )

    def __init__(self, key: str, dtype: str, numel: int, location: str, type_name: str) -> None:
        self.key = key
        self.dtype = dtype
        self.numel = numel  # elements of ``dtype`` (bytes for UntypedStorage)
        self.location = location
        self.type_name = type_name
        self.nbytes: int | None = None  # bytes the file holds for it
        self.offset: int | None = None  # absolute file offset of its first byte
        self.base: StorageRef | None = None  # legacy storage views: the root storage
        self.view_offset = 0  # legacy storage views: element offset into ``base``
        self.compressed = False

    def __setstate__(self, state: Any) -> None:
        raise PickleError("BUILD applied to a storage")

    @property
    def root(self) -> StorageRef:
        return self.base if self.base is not None else self


class TensorRecord:
    """A tensor as the pickle describes it: a view (offset, shape, stride) of a storage."""

    __slots__ = (
        "storage",
        "storage_offset",
        "shape",
        "stride",
        "span",
        "dtype",
        "requires_grad",
        "parameter",
        "layout",
        "extra",
    )

    def __init__(
        self,
        storage: StorageRef | None,
        storage_offset: int,
        shape: tuple[int, ...],
        stride: tuple[int, ...] | None,
        dtype: str,
        requires_grad: bool,
        span: int = 0,
    ) -> None:
        self.storage = storage
        self.storage_offset = storage_offset
        self.shape = shape
        self.stride = stride
        self.span = span  # elements from storage_offset to the last element, inclusive
        self.dtype = dtype
        self.requires_grad = requires_grad
        self.parameter = False
        self.layout = "strided"
        self.extra: dict[str, Any] | None = None

    def __setstate__(self, state: Any) -> None:
        raise PickleError("BUILD applied to a tensor")

    def copy(self) -> TensorRecord:
        t = TensorRecord(
            self.storage,
            self.storage_offset,
            self.shape,
            self.stride,
            self.dtype,
            self.requires_grad,
            self.span,
        )
        t.parameter, t.layout = self.parameter, self.layout
        t.extra = dict(self.extra) if self.extra else None
        return t

    def add_extra(self, **kw: Any) -> None:
        if self.extra is None:
            self.extra = {}
        self.extra.update(kw)


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if type(value) is not tuple:
        if not isinstance(value, (tuple, list)):
            raise PickleError(f"tensor {what} is {type(value).__name__}, not a tuple of ints")
        value = tuple(value)
    for d in value:
        if type(d) is not int or d < 0:
            raise PickleError(f"tensor {what} {value!r} is not a tuple of non-negative ints")
    return value


def _geometry(size: Any, stride: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Validated (shape, stride, span): span = elements from the first to the last, inclusive."""
    shape = _ints(size, "size")
    strides = _ints(stride, "stride")
    if len(strides) != len(shape):
        raise PickleError(f"tensor size {shape} and stride {strides} differ in length")
    span = 0 if 0 in shape else 1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))
    return shape, strides, span


class _Builder:
    """The allowlisted rebuild functions for one load; they build records, never tensors."""

    def __init__(self) -> None:
        # (size, stride) -> _geometry(): a model repeats a few shapes thousands of times.
        self._geometries: dict[Any, tuple[tuple[int, ...], tuple[int, ...], int]] = {}

    # -- dense tensors -------------------------------------------------------------------------
    def _dense(
        self,
        storage: Any,
        storage_offset: Any,
        size: Any,
        stride: Any,
        requires_grad: Any,
        dtype: str | None,
        metadata: Any,
    ) -> TensorRecord:
        if type(storage) is not StorageRef:
            raise PickleError(
                f"a tensor's storage is {_describe(storage)}, not a storage of this file"
            )
        if type(storage_offset) is not int or storage_offset < 0:
            raise PickleError(f"tensor storage_offset {storage_offset!r} is not a non-negative int")
        try:
            geometry = self._geometries.get((size, stride))
        except TypeError:  # unhashable (lists): validated below, not cached
            geometry = _geometry(size, stride)
        if geometry is None:
            geometry = self._geometries[(size, stride)] = _geometry(size, stride)
        t = TensorRecord(
            storage,
            storage_offset,
            geometry[0],
            geometry[1],
            storage.dtype if dtype is None else dtype,
            bool(requires_grad),
            geometry[2],
        )
        if metadata:
            t.add_extra(metadata=render(metadata))
        return t

    def rebuild_tensor(
        self, storage: Any, storage_offset: Any, size: Any, stride: Any
    ) -> TensorRecord:
        return self._dense(storage, storage_offset, size, stride, False, None, None)

    def rebuild_tensor_v2(
        self,
        storage: Any,
        storage_offset: Any,
        size: Any,
        stride: Any,
        requires_grad: Any = False,
        backward_hooks: Any = None,
        metadata: Any = None,
    ) -> TensorRecord:
        # _dense() inlined for the one call a state dict makes per tensor.
        if type(storage) is StorageRef and type(storage_offset) is int and storage_offset >= 0:
            try:
                geometry = self._geometries.get((size, stride))
            except TypeError:
                geometry = None
            if geometry is not None and not metadata:
                return TensorRecord(
                    storage,
                    storage_offset,
                    geometry[0],
                    geometry[1],
                    storage.dtype,
                    bool(requires_grad),
                    geometry[2],
                )
        return self._dense(storage, storage_offset, size, stride, requires_grad, None, metadata)

    def rebuild_tensor_v3(
        self,
        storage: Any,
        storage_offset: Any,
        size: Any,
        stride: Any,
        requires_grad: Any,
        backward_hooks: Any,
        dtype: Any,
        metadata: Any = None,
    ) -> TensorRecord:
        if not isinstance(dtype, TorchDType):
            raise PickleError(f"_rebuild_tensor_v3 dtype is {_describe(dtype)}, not a torch dtype")
        return self._dense(
            storage, storage_offset, size, stride, requires_grad, str(dtype), metadata
        )

    # -- parameters and subclasses ----------------------------------------------------------
    def rebuild_parameter(
        self, data: Any, requires_grad: Any = True, backward_hooks: Any = None, state: Any = None
    ) -> Any:
        if type(data) is not TensorRecord:
            raise PickleError(f"a Parameter wraps {_describe(data)}, not a tensor")
        t = data.copy()
        t.parameter = True
        t.requires_grad = bool(requires_grad)
        if state:
            t.add_extra(python_state=render(state))
        return t

    def parameter_class(self, data: Any = None, requires_grad: Any = True) -> Any:
        return self.rebuild_parameter(data, requires_grad)

    def rebuild_from_type_v2(self, func: Any, new_type: Any, args: Any, state: Any) -> Any:
        if not isinstance(args, tuple):
            raise PickleError("_rebuild_from_type_v2 args is not a tuple")
        # func is an allowlisted builder or a placeholder: calling either runs nothing foreign.
        ret = func(*args)
        if type(ret) is TensorRecord:
            ret = ret.copy()
            if new_type == self.parameter_class:
                ret.parameter = True
            elif is_placeholder_type(new_type):
                ret.add_extra(subclass=new_type.global_name)
            if state:
                ret.add_extra(python_state=render(state))
        return ret

    # -- other layouts ----------------------------------------------------------------------
    def rebuild_qtensor(
        self,
        storage: Any,
        storage_offset: Any,
        size: Any,
        stride: Any,
        quantizer_params: Any,
        requires_grad: Any,
        backward_hooks: Any,
    ) -> TensorRecord:
        t = self._dense(storage, storage_offset, size, stride, requires_grad, None, None)
        if not isinstance(quantizer_params, tuple) or not quantizer_params:
            raise PickleError("_rebuild_qtensor quantizer_params is not a tuple")
        scheme = quantizer_params[0]
        if not isinstance(scheme, QScheme):
            raise PickleError(f"_rebuild_qtensor qscheme is {_describe(scheme)}")
        if scheme in ("per_tensor_affine", "per_tensor_symmetric") and len(quantizer_params) == 3:
            t.add_extra(
                qscheme=str(scheme), scale=quantizer_params[1], zero_point=quantizer_params[2]
            )
        elif len(quantizer_params) == 4:
            _, scales, zero_points, axis = quantizer_params
            t.add_extra(qscheme=str(scheme), axis=axis, q_scales=scales, q_zero_points=zero_points)
        else:
            raise PickleError(f"_rebuild_qtensor: unexpected quantizer params for {scheme}")
        t.layout = "quantized"
        return t

    def rebuild_sparse_tensor(self, layout: Any, data: Any) -> TensorRecord:
        if not isinstance(layout, Layout) or not isinstance(data, tuple):
            raise PickleError(f"_rebuild_sparse_tensor with layout {_describe(layout)}")
        if layout == "sparse_coo" and len(data) in (3, 4):
            parts = {"indices": data[0], "values": data[1]}
            size = data[2]
        elif layout in ("sparse_csr", "sparse_bsr") and len(data) == 4:
            parts = {"crow_indices": data[0], "col_indices": data[1], "values": data[2]}
            size = data[3]
        elif layout in ("sparse_csc", "sparse_bsc") and len(data) == 4:
            parts = {"ccol_indices": data[0], "row_indices": data[1], "values": data[2]}
            size = data[3]
        else:
            raise PickleError(
                f"_rebuild_sparse_tensor: unsupported layout {layout} / {len(data)} parts"
            )
        for part, rec in parts.items():
            if type(rec) is not TensorRecord:
                raise PickleError(f"sparse tensor {part} is {_describe(rec)}, not a tensor")
        values = parts["values"]
        t = TensorRecord(
            values.storage, values.storage_offset, _ints(size, "size"), None, values.dtype, False
        )
        t.layout = str(layout)
        t.add_extra(layout=str(layout), **parts)
        return t

    def rebuild_nested_tensor(
        self, buffer: Any, sizes: Any, strides: Any, offsets: Any
    ) -> TensorRecord:
        if type(buffer) is not TensorRecord:
            raise PickleError(f"nested tensor buffer is {_describe(buffer)}, not a tensor")
        t = buffer.copy()
        t.layout = "nested"
        t.add_extra(layout="nested", nested_sizes=sizes)
        return t

    def rebuild_from_cpu_tensor(
        self, data: Any, dtype: Any, device: Any, requires_grad: Any
    ) -> TensorRecord:
        if type(data) is not TensorRecord or not isinstance(dtype, TorchDType):
            raise PickleError("_rebuild_device_tensor_from_cpu_tensor: not a tensor and a dtype")
        t = data.copy()
        t.requires_grad = bool(requires_grad)
        if dtype != t.dtype:  # converted on load: the stored bytes are the CPU dtype's
            t.add_extra(stored_dtype=t.dtype)
            t.storage, t.stride, t.dtype = None, None, str(dtype)
        t.add_extra(device=str(device))
        return t

    def rebuild_device_tensor_from_numpy(
        self, data: Any, dtype: Any, device: Any, requires_grad: Any
    ) -> TensorRecord:
        # data is a pickled numpy array: a placeholder whose BUILD state is
        # (version, shape, dtype, is_fortran, raw bytes).
        state = data.state if isinstance(data, Placeholder) else None
        if not (isinstance(state, tuple) and len(state) >= 2 and isinstance(dtype, TorchDType)):
            raise PickleError("_rebuild_device_tensor_from_numpy: cannot find the array's shape")
        t = TensorRecord(None, 0, _ints(state[1], "size"), None, str(dtype), bool(requires_grad))
        t.add_extra(device=str(device), stored_as="numpy")
        return t

    def rebuild_meta_tensor_no_storage(
        self, dtype: Any, size: Any, stride: Any, requires_grad: Any
    ) -> TensorRecord:
        if not isinstance(dtype, TorchDType):
            raise PickleError(f"meta tensor dtype is {_describe(dtype)}")
        t = TensorRecord(
            None, 0, _ints(size, "size"), _ints(stride, "stride"), str(dtype), bool(requires_grad)
        )
        t.add_extra(device="meta")
        return t

    def rebuild_wrapper_subclass(
        self,
        cls: Any,
        dtype: Any,
        size: Any,
        stride: Any,
        storage_offset: Any,
        layout: Any,
        device: Any,
        requires_grad: Any,
    ) -> TensorRecord:
        if not isinstance(dtype, TorchDType):
            raise PickleError(f"wrapper subclass dtype is {_describe(dtype)}")
        t = TensorRecord(
            None, 0, _ints(size, "size"), _ints(stride, "stride"), str(dtype), bool(requires_grad)
        )
        t.add_extra(subclass=getattr(cls, "global_name", str(cls)), device=str(device))
        return t

    # -- small torch types ------------------------------------------------------------------
    # (methods, not static functions: a bound method refuses setattr, so BUILD cannot reach them)
    def size(self, *args: Any) -> tuple[int, ...]:
        return _ints(args[0] if args else (), "torch.Size")

    def device(self, kind: Any = "cpu", index: Any = None) -> str:
        return f"{kind}:{index}" if index is not None else str(kind)

    def get_layout(self, name: Any) -> Layout:
        short = str(name).removeprefix("torch.")
        if short not in LAYOUTS:
            raise PickleError(f"unknown tensor layout {name!r}")
        return Layout(short)

    def allowed(self) -> dict[str, Any]:
        """``"module.qualname" -> object`` for this load: the whole allowlist."""
        u = "torch._utils."
        table = base_allowed()
        table.update(
            {
                u + "_rebuild_tensor": self.rebuild_tensor,
                u + "_rebuild_tensor_v2": self.rebuild_tensor_v2,
                u + "_rebuild_tensor_v3": self.rebuild_tensor_v3,
                u + "_rebuild_parameter": self.rebuild_parameter,
                u + "_rebuild_parameter_with_state": self.rebuild_parameter,
                u + "_rebuild_qtensor": self.rebuild_qtensor,
                u + "_rebuild_sparse_tensor": self.rebuild_sparse_tensor,
                u + "_rebuild_sparse_csr_tensor": self.rebuild_sparse_tensor,
                u + "_rebuild_nested_tensor": self.rebuild_nested_tensor,
                u + "_rebuild_device_tensor_from_cpu_tensor": self.rebuild_from_cpu_tensor,
                u + "_rebuild_device_tensor_from_numpy": self.rebuild_device_tensor_from_numpy,
                u + "_rebuild_xla_tensor": self.rebuild_device_tensor_from_numpy,
                u + "_rebuild_meta_tensor_no_storage": self.rebuild_meta_tensor_no_storage,
                u + "_rebuild_wrapper_subclass": self.rebuild_wrapper_subclass,
                "torch._tensor._rebuild_from_type_v2": self.rebuild_from_type_v2,
                "torch._tensor._rebuild_from_type": self.rebuild_from_type_v2,
                "torch.nn.parameter.Parameter": self.parameter_class,
                "torch.nn.Parameter": self.parameter_class,
                "torch.Size": self.size,
                "torch.device": self.device,
                "torch.serialization._get_layout": self.get_layout,
                "torch.Tensor": TorchClass("torch.Tensor"),
                "torch._tensor.Tensor": TorchClass("torch.Tensor"),
            }
        )
        table.update(_CONSTANTS)
        return table


_CONSTANTS: dict[str, Any] = {}
_CONSTANTS.update({f"torch.{n}": TorchDType(dt) for n, dt in TORCH_DTYPES.items()})
_CONSTANTS.update({n: StorageType(n) for n in STORAGE_TYPE_DTYPES})
_CONSTANTS.update({f"torch.{n}": QScheme(n) for n in QSCHEMES})
_CONSTANTS.update({f"torch.{n}": Layout(n) for n in LAYOUTS})


def _describe(obj: Any) -> str:
    if isinstance(obj, Placeholder):
        return f"a placeholder for {type(obj).global_name}"
    if is_placeholder_type(obj):
        return f"the foreign global {obj.global_name}"
    return f"a {type(obj).__name__}"


# ---------------------------------------------------------------------------------------------
# sniffing


def sniff(head: bytes, path: Path) -> str | None:
    """'zip', 'legacy', 'tar' (refused on open) or 'pickle' (a non-torch pickle, refused)."""
    if path.is_dir():
        return None
    if head.startswith(ZIP_LOCAL_MAGIC):
        return "zip" if _zip_has_data_pkl(head, path) else None
    if len(head) > 262 and head[257:262] == TAR_MAGIC and head[:100].rstrip(b"\0") in TAR_MEMBERS:
        return "tar"
    magic = _first_pickle_int(head)
    if magic == MAGIC_NUMBER:
        return "legacy"
    if len(head) > 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"  # a protocol 2-5 pickle, but not torch's: refused with a clear message
    return None


def _zip_has_data_pkl(head: bytes, path: Path) -> bool:
    if len(head) >= 30:
        (nlen,) = struct.unpack_from("<H", head, 26)
        if head[30 : 30 + nlen].endswith(b"data.pkl"):
            return True  # torch writes data.pkl first
    try:
        with open(path, "rb") as f, _mapped(f) as mm:
            members = _central_directory(mm, len(mm), str(path))
    except (FormatError, OSError, ValueError):
        return False
    return _find_data_pkl(members) is not None


def _first_pickle_int(head: bytes) -> int | None:
    """The value of the first pickle in ``head`` if it is a lone integer, else None."""
    value = None
    try:
        for n, (op, arg, _pos) in enumerate(pickletools.genops(head[:64])):
            if op.name in ("PROTO", "FRAME"):
                continue
            if op.name == "STOP":
                return value
            if n > 3 or not isinstance(arg, int) or value is not None:
                return None
            value = arg
    except Exception:  # noqa: BLE001 - not a pickle at all
        return None
    return None


# ---------------------------------------------------------------------------------------------
# opening


def open_checkpoint(path: Path, variant: str) -> Checkpoint:
    where = str(path)
    if variant in ("zip", "legacy"):
        with gc_paused():  # ~4 objects per tensor, none of them garbage until we are done
            return _open_zip(path) if variant == "zip" else _open_legacy(path)
    if variant == "tar":
        raise FormatError(
            "torch's pre-1.0 tar checkpoint format is not supported; load and re-save it with "
            "torch.save to get the zip format",
            where,
        )
    if variant == "pickle":
        raise FormatError(
            "a plain Python pickle, not a torch.save checkpoint (it is neither a zip with "
            "data.pkl nor starts with torch's magic number); not opened",
            where,
        )
    raise FormatError(f"unsupported torch variant {variant!r}", where)


class _mapped:
    """mmap of a whole file as a context manager (read-only)."""

    def __init__(self, f: Any) -> None:
        self.mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    def __enter__(self) -> mmap.mmap:
        return self.mm

    def __exit__(self, *exc: Any) -> None:
        self.mm.close()


# (header offset, compression method, compressed size, uncompressed size)
_Member = tuple[int, int, int, int]
_CD_ENTRY = struct.Struct("<4s4xHH8xIIHHH8xI")  # central directory file header, 46 bytes
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory, 22 bytes
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory, 56 bytes
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator, 20 bytes
_LOCAL = struct.Struct("<4s22xHH")  # local file header: magic, ..., name len, extra len


def _central_directory(mm: Any, size: int, where: str) -> dict[str, _Member]:
    """name -> (local header offset, method, compressed size, size) of every zip member."""
    tail_start = max(0, size - (_EOCD.size + 0xFFFF))
    pos = mm.rfind(ZIP_END_MAGIC, tail_start)
    if pos < 0 or pos + _EOCD.size > size:
        raise FormatError(
            f"no zip end-of-central-directory record: the file ({size} bytes) is truncated "
            "or not a zip",
            where,
        )
    _, _disk, _cd_disk, _n_here, count, cd_size, cd_offset, _clen = _EOCD.unpack_from(mm, pos)
    cd_end = pos
    loc = pos - _ZIP64_LOCATOR.size
    # torch (miniz) writes the zip64 records even for small files; use them when present.
    if loc >= 0 and mm[loc : loc + 4] == ZIP64_LOCATOR_MAGIC:
        _, _, z64, _ = _ZIP64_LOCATOR.unpack_from(mm, loc)
        if z64 + _ZIP64_EOCD.size > loc or mm[z64 : z64 + 4] != ZIP64_END_MAGIC:
            raise FormatError(
                "zip64 end-of-central-directory record missing", where, f"offset {z64}"
            )
        _, _, _, _, _, _, _, count, cd_size, cd_offset = _ZIP64_EOCD.unpack_from(mm, z64)
        cd_end = z64
    elif count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        raise FormatError("zip64 sizes without a zip64 locator", where, f"offset {pos}")
    # Bytes prepended to the archive shift every offset (zipfile's "concat").
    concat = cd_end - cd_size - cd_offset
    start = cd_offset + concat
    if concat < 0 or start < 0:
        raise FormatError(
            f"central directory ({cd_size} bytes at {cd_offset}) does not fit before its end "
            f"record at {cd_end}: truncated or corrupt zip",
            where,
        )
    if count > cd_size // _CD_ENTRY.size:
        raise FormatError(f"zip declares {count} members in a {cd_size}-byte directory", where)
    members: dict[str, _Member] = {}
    unpack = _CD_ENTRY.unpack_from
    cd = mm[start:cd_end]  # one copy; slicing bytes is cheaper than slicing the mmap
    end = len(cd)
    p = 0
    for _ in range(count):
        if p + 46 > end:
            raise FormatError("zip central directory is truncated", where, f"offset {start + p}")
        magic, flags, method, csize, usize, nlen, elen, clen, hoff = unpack(cd, p)
        if magic != ZIP_CENTRAL_MAGIC:
            raise FormatError("bad zip central directory entry", where, f"offset {start + p}")
        q = p + 46
        name = str(cd[q : q + nlen], "utf-8" if flags & 0x800 else "cp437", "replace")
        if csize == 0xFFFFFFFF or usize == 0xFFFFFFFF or hoff == 0xFFFFFFFF:
            usize, csize, hoff = _zip64_extra(
                cd[q + nlen : q + nlen + elen], usize, csize, hoff, where, name
            )
        members[name] = (hoff + concat, method, csize, usize)
        p = q + nlen + elen + clen
    return members


def _zip64_extra(
    extra: bytes, usize: int, csize: int, hoff: int, where: str, name: str
) -> tuple[int, int, int]:
    i = 0
    while i + 4 <= len(extra):
        tag, ln = struct.unpack_from("<HH", extra, i)
        if tag == 1:
            vals = list(struct.unpack_from(f"<{ln // 8}Q", extra, i + 4))
            if usize == 0xFFFFFFFF and vals:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if hoff == 0xFFFFFFFF and vals:
                hoff = vals.pop(0)
            return usize, csize, hoff
        i += 4 + ln
    raise FormatError(f"member {name!r} needs zip64 sizes but has no zip64 extra field", where)


def _find_data_pkl(members: dict[str, _Member]) -> str | None:
    """The ``<root>/data.pkl`` member (root of any name), preferring the first member's root."""
    found = [
        n
        for n in members
        if n.endswith("data.pkl")
        and (n == "data.pkl" or n.endswith("/data.pkl"))
        and n.count("/") <= 1
    ]
    if len(found) <= 1:
        return found[0] if found else None
    first_root = next(iter(members)).split("/", 1)[0]
    for n in found:
        if n.split("/", 1)[0] == first_root:
            return n
    return found[0]


def _open_zip(path: Path) -> Checkpoint:
    where = str(path)
    with open(path, "rb") as f, _mapped(f) as mm:
        size = len(mm)
        members = _central_directory(mm, size, where)
        pkl_name = _find_data_pkl(members)
        if pkl_name is None:
            shown = ", ".join(list(members)[:8]) + (
                f", ... ({len(members)} members)" if len(members) > 8 else ""
            )
            raise FormatError(
                f"zip archive has no <root>/data.pkl, so it is not a torch.save "
                f"checkpoint; it holds: {shown or 'nothing'}",
                where,
            )
        root = pkl_name[: -len("data.pkl")]  # "archive/" or ""
        data = _read_member(mm, size, members, pkl_name, where)

        storages: dict[str, StorageRef] = {}

        def resolve(pid: Any) -> StorageRef:
            if type(pid) is not tuple or len(pid) != 5 or pid[0] != "storage":
                raise PickleError(
                    f"unexpected persistent id {_short(pid)} (expected "
                    "('storage', type, key, location, numel))"
                )
            _, stype, key, location, numel = pid
            old = storages.get(key) if type(key) is str else None
            if old is not None and old.type_name == stype and old.numel == numel:
                return old  # the same storage again (tied weights, views)
            ref = _storage_ref(stype, key, location, numel)
            if old is not None:
                if old.dtype != ref.dtype:
                    raise PickleError(
                        f"storage {key!r} is referenced as both {old.dtype} and {ref.dtype}"
                    )
                return old
            record = f"{root}data/{key}"
            member = members.get(record)
            if member is None:
                raise FormatError(
                    f"storage {key!r} referenced by data.pkl has no record {record} in the zip",
                    where,
                    pkl_name,
                )
            ref.nbytes = member[3]
            need = numel * ITEMSIZE[ref.dtype]
            if ref.nbytes < need:
                raise FormatError(
                    f"storage record {record} holds {ref.nbytes} bytes, but data.pkl "
                    f"declares {numel} x {ref.dtype} = {need}",
                    where,
                    record,
                )
            storages[key] = ref
            return ref

        obj, globals_ = _load(data, resolve, where, pkl_name)
        _locate_records(mm, size, members, root, storages, where)
        meta: dict[str, Any] = {"zip_root": root.rstrip("/")}
        for key, member in TEXT_RECORDS:
            if root + member in members:
                meta[key] = (
                    _read_member(mm, size, members, root + member, where, MAX_TEXT_RECORD)
                    .decode("utf-8", "replace")
                    .strip()
                )
        # TorchScript archives (torch.jit.save) add code/ and constants.pkl beside data.pkl.
        meta["torchscript"] = any(n.startswith(root + "code/") for n in members)
    meta.setdefault("byteorder", "little")  # torch < 2.1 wrote no byteorder record: little-endian
    meta["pickle_protocol"] = data[1] if data[:1] == b"\x80" and len(data) > 1 else None
    meta["storages"] = len(storages)
    return _checkpoint(path, "torch-zip", obj, globals_, meta, pkl_name, len(data))


def _read_member(
    mm: Any,
    size: int,
    members: dict[str, _Member],
    name: str,
    where: str,
    limit: int = MAX_PICKLE_BYTES,
) -> bytes:
    hoff, method, csize, usize = members[name]
    if usize > limit:
        raise FormatError(f"{name} declares {usize} bytes (limit {limit})", where, name)
    start = _data_start(mm, size, hoff, where, name)
    if start + csize > size:
        raise FormatError(
            f"{name} ({csize} bytes at offset {start}) runs past the end of the "
            f"file ({size} bytes): truncated zip",
            where,
            name,
        )
    raw = mm[start : start + csize]
    if method == 0:
        return raw
    if method == 8:
        try:
            out = zlib.decompressobj(-15).decompress(raw, usize + 1)
        except zlib.error as e:
            raise FormatError(f"{name} is not valid deflate data ({e})", where, name) from None
        if len(out) != usize:
            raise FormatError(
                f"{name} inflates to {len(out)} bytes, the directory says {usize}", where, name
            )
        return out
    raise FormatError(
        f"{name} uses zip compression method {method}; torch writes stored records", where, name
    )


def _data_start(mm: Any, size: int, hoff: int, where: str, name: str) -> int:
    if hoff + _LOCAL.size > size:
        raise FormatError(
            f"local header of {name} at offset {hoff} is past the end of the file "
            f"({size} bytes): truncated zip",
            where,
            name,
        )
    magic, nlen, elen = _LOCAL.unpack_from(mm, hoff)
    if magic != ZIP_LOCAL_MAGIC:
        raise FormatError(f"no local file header for {name} at offset {hoff}", where, name)
    return hoff + 30 + nlen + elen


def _locate_records(
    mm: Any,
    size: int,
    members: dict[str, _Member],
    root: str,
    storages: dict[str, StorageRef],
    where: str,
) -> None:
    """Each storage's data offset from its 30-byte local header (the data itself is not read)."""
    unpack = _LOCAL.unpack_from
    for key, ref in storages.items():
        name = f"{root}data/{key}"
        hoff, method, csize, _usize = members[name]
        if hoff + _LOCAL.size > size:
            raise FormatError(
                f"local header of {name} at offset {hoff} is past the end of the "
                f"file ({size} bytes): truncated zip",
                where,
                name,
            )
        magic, nlen, elen = unpack(mm, hoff)
        start = hoff + 30 + nlen + elen
        if magic != ZIP_LOCAL_MAGIC or start + csize > size:
            _data_start(mm, size, hoff, where, name)  # raises the precise error
            raise FormatError(
                f"storage record {name} ({csize} bytes at offset {start}) runs "
                f"past the end of the file ({size} bytes): truncated zip",
                where,
                name,
            )
        if method == 0:
            ref.offset = start
        else:  # compressed by some re-zipper: no direct offset, sizes still known
            ref.compressed = True


def _storage_ref(stype: Any, key: Any, location: Any, numel: Any) -> StorageRef:
    if not isinstance(stype, StorageType):
        raise PickleError(f"storage type is {_describe(stype)}, not a torch storage class")
    if not isinstance(key, str) or not key or len(key) > 200:
        raise PickleError(f"storage key {_short(key)} is not a short string")
    if type(numel) is not int or numel < 0:
        raise PickleError(f"storage {key!r} numel {_short(numel)} is not a non-negative int")
    return StorageRef(key, STORAGE_TYPE_DTYPES[stype], numel, str(location), str(stype))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _load(data: Any, resolve: Any, where: str, member: str) -> tuple[Any, dict[str, GlobalRef]]:
    try:
        return unpickle(data, _Builder().allowed(), resolve)
    except PickleError as e:
        raise FormatError(str(e), where, member) from None


def _open_legacy(path: Path) -> Checkpoint:
    where = str(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(2)
        proto = head[1] if head[:1] == b"\x80" and len(head) == 2 else None
        f.seek(0)

        def small(what: str) -> Any:
            start = f.tell()
            try:
                value, _ = unpickle(f, {})
            except PickleError as e:
                raise FormatError(f"{what}: {e}", where, f"offset {start}") from None
            return value

        if small("magic number") != MAGIC_NUMBER:
            raise FormatError("first pickle is not torch's magic number", where, "offset 0")
        version = small("protocol version")
        if version != PROTOCOL_VERSION:
            raise FormatError(
                f"legacy protocol version {version!r} is not supported "
                f"(expected {PROTOCOL_VERSION})",
                where,
            )
        sys_info = small("sys_info")
        if not isinstance(sys_info, dict):
            raise FormatError("sys_info pickle is not a dict", where)

        storages: dict[str, StorageRef] = {}

        def resolve(pid: Any) -> Any:
            if not isinstance(pid, tuple) or not pid:
                raise PickleError(f"unexpected persistent id {_short(pid)}")
            if pid[0] == "module" and len(pid) == 4:
                return pid[1]  # (module, class, source file, source): the class, a placeholder
            if pid[0] != "storage" or len(pid) not in (5, 6):
                raise PickleError(f"unexpected persistent id {_short(pid)}")
            ref = _storage_ref(*pid[1:5])
            view = pid[5] if len(pid) == 6 else None
            root = storages.setdefault(ref.key, ref)
            if root.dtype != ref.dtype:
                raise PickleError(
                    f"storage {ref.key!r} is referenced as both {root.dtype} and {ref.dtype}"
                )
            if view is None:
                return root
            if not (
                isinstance(view, tuple)
                and len(view) == 3
                and type(view[1]) is int
                and type(view[2]) is int
                and view[1] >= 0
                and view[2] >= 0
            ):
                raise PickleError(f"storage view {_short(view)} is not (key, offset, size)")
            v = StorageRef(root.key, root.dtype, view[2], root.location, root.type_name)
            v.base, v.view_offset = root, view[1]
            return v

        main_at = f.tell()
        try:
            obj, globals_ = unpickle(f, _Builder().allowed(), resolve)
        except PickleError as e:
            raise FormatError(str(e), where, f"pickle at offset {main_at}") from None
        keys_at = f.tell()
        keys = small("storage key list")
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise FormatError(
                "the storage key list is not a list of strings", where, f"offset {f.tell()}"
            )
        pos = f.tell()
    _scan_legacy_storages(path, pos, size, keys, storages, where)
    meta: dict[str, Any] = {
        "legacy_protocol_version": version,
        "byteorder": "little" if sys_info.get("little_endian", True) else "big",
        "type_sizes": render(sys_info.get("type_sizes")),
        "pickle_protocol": proto,
        "storages": len(storages),
    }
    return _checkpoint(
        path, "torch-legacy", obj, globals_, meta, f"pickle at offset {main_at}", keys_at - main_at
    )


def _scan_legacy_storages(
    path: Path, pos: int, size: int, keys: list[str], storages: dict[str, StorageRef], where: str
) -> None:
    """Per key: 8-byte LE element count, then the bytes; record offsets, seek over the data."""
    listed = set(keys)
    missing = [k for k in storages if k not in listed]
    if missing:
        raise FormatError(
            f"storage {missing[0]!r} is used by the pickle but missing from the storage key list",
            where,
        )
    seen: set[str] = set()
    with open(path, "rb") as f, _mapped(f) as mm:
        for key in keys:
            ref = storages.get(key)
            if ref is None:
                raise FormatError(
                    f"storage key {key!r} is listed but no tensor uses it", where, f"offset {pos}"
                )
            if key in seen:
                raise FormatError(f"storage key {key!r} is listed twice", where, f"offset {pos}")
            seen.add(key)
            if pos + 8 > size:
                raise FormatError(
                    f"storage {key!r}: element count at offset {pos} is past the end "
                    f"of the file ({size} bytes): truncated",
                    where,
                    f"offset {pos}",
                )
            (count,) = struct.unpack_from("<q", mm, pos)
            nbytes = count * ITEMSIZE[ref.dtype]
            if count < 0 or pos + 8 + nbytes > size:
                raise FormatError(
                    f"storage {key!r} declares {count} x {ref.dtype} ({nbytes} bytes) "
                    f"at offset {pos + 8}, past the end of the file ({size} bytes)",
                    where,
                    f"offset {pos}",
                )
            ref.offset, ref.nbytes = pos + 8, nbytes
            pos += 8 + nbytes


# ---------------------------------------------------------------------------------------------
# turning the unpickled object into entries


class _Walk:
    """Depth-first collection of (stored name, record, exact role or None) from the object."""

    def __init__(self, budget: int, where: str) -> None:
        self.found: list[tuple[str, Any, Role | None]] = []
        self.active: set[int] = set()
        self.budget = budget
        self.where = where

    def walk(self, obj: Any, prefix: str, depth: int = 0) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise FormatError(
                "the pickle's shared containers expand to too many entries", self.where
            )
        t = type(obj)
        if t is TensorRecord or t is StorageRef:
            self.found.append(
                (prefix, obj, Role.PARAMETER if t is TensorRecord and obj.parameter else None)
            )
            return
        if depth > MAX_DEPTH:
            raise FormatError(
                f"containers nest deeper than {MAX_DEPTH} levels at {prefix!r}", self.where
            )
        if isinstance(obj, dict):
            items: Any = obj.items()
        elif t is list or t is tuple:
            items = enumerate(obj)
        elif isinstance(obj, Placeholder):
            self._placeholder(obj, prefix, depth)
            return
        else:
            return
        oid = id(obj)
        if oid in self.active:
            return  # a cycle: this container is already being walked above us
        self.active.add(oid)
        found = self.found
        dot = prefix + "." if prefix else ""
        for k, v in items:
            tv = type(v)
            if tv is TensorRecord:
                self.budget -= 1
                found.append(
                    (
                        dot + (k if type(k) is str else _key(k)),
                        v,
                        Role.PARAMETER if v.parameter else None,
                    )
                )
            elif tv in _LEAVES:
                continue
            else:
                self.walk(v, dot + (k if type(k) is str else _key(k)), depth + 1)
        self.active.discard(oid)

    def _placeholder(self, obj: Placeholder, prefix: str, depth: int) -> None:
        state = obj.state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
            slots = state[1] if isinstance(state[1], dict) else {}
            state = {**state[0], **slots}
        oid = id(obj)
        if oid in self.active:
            return
        self.active.add(oid)
        dot = prefix + "." if prefix else ""
        if isinstance(state, dict) and isinstance(state.get("_parameters"), dict):
            self._module(state, dot, depth)
        else:
            if isinstance(state, dict):
                for k, v in state.items():
                    self.walk(v, dot + _key(k), depth + 1)
            elif state is not None:
                self.walk(state, dot + "__state__", depth + 1)
            for i, a in enumerate(obj.args):
                self.walk(a, dot + str(i), depth + 1)
            for k, v in obj.kwargs.items():
                self.walk(v, dot + _key(k), depth + 1)
            for k, v in obj.items or ():
                self.walk(v, dot + _key(k), depth + 1)
            for i, v in enumerate(obj.listitems or ()):
                self.walk(v, dot + str(i), depth + 1)
        self.active.discard(oid)

    def _module(self, state: dict, dot: str, depth: int) -> None:
        """An nn.Module's __dict__: parameters, buffers, submodules, then tensor attributes."""
        non_persistent = state.get("_non_persistent_buffers_set")
        non_persistent = non_persistent if isinstance(non_persistent, (set, frozenset)) else set()
        for name, v in state["_parameters"].items():
            if type(v) is TensorRecord:
                self.found.append((dot + _key(name), v, Role.PARAMETER))
        buffers = state.get("_buffers")
        for name, v in buffers.items() if isinstance(buffers, dict) else ():
            if type(v) is TensorRecord:
                if name in non_persistent:
                    v = v.copy()
                    v.add_extra(persistent=False)
                self.found.append((dot + _key(name), v, Role.BUFFER))
        modules = state.get("_modules")
        for name, m in modules.items() if isinstance(modules, dict) else ():
            self.walk(m, dot + _key(name), depth + 1)
        for k, v in state.items():
            if (
                isinstance(k, str)
                and not k.startswith("_")
                and not isinstance(v, (str, int, float, bool))
            ):
                start = len(self.found)
                self.walk(v, dot + k, depth + 1)
                for i in range(start, len(self.found)):  # plain tensor attributes: not state
                    n, rec, _ = self.found[i]
                    self.found[i] = (n, rec, Role.OTHER)


_LEAVES = frozenset({str, int, float, bool, type(None), bytes, complex})
_RECORD_TYPES = frozenset({TensorRecord, StorageRef})


def _key(k: Any) -> str:
    if type(k) is str:
        return k
    if isinstance(k, Placeholder) or is_placeholder_type(k):
        return repr(k)
    if isinstance(k, int) and k.bit_length() > 256:  # str() refuses > 4300 digits
        return f"<int of {k.bit_length()} bits>"
    return str(k)


def _checkpoint(
    path: Path,
    fmt: str,
    obj: Any,
    globals_: dict[str, GlobalRef],
    meta: dict[str, Any],
    member: str,
    pickle_bytes: int,
) -> Checkpoint:
    where = str(path)
    budget = max(100_000, MAX_VISITS_PER_BYTE * pickle_bytes)
    tensors, hyper, container = _classify(obj, budget, where)
    meta["container"] = container
    meta["pickle_globals"] = [{"name": g.name, "allowed": g.allowed} for g in globals_.values()]
    findings = [
        Finding(
            g.severity or "warning",
            f"pickle global {g.name}"
            + (f" ({g.resolved})" if g.resolved != g.name else "")
            + " is not on the allowlist; read as an inert placeholder",
            member,
            g.name,
        )
        for g in globals_.values()
        if not g.allowed
    ]
    if meta.get("byteorder") == "big":
        findings.append(Finding("info", "big-endian tensor data (metadata read as usual)", member))
    return Checkpoint(
        paths=(where,),
        format=fmt,
        tensors=tensors,
        metadata=meta,
        hyperparameters=hyper,
        findings=findings,
    )


def _classify(obj: Any, budget: int, where: str) -> tuple[list[TensorEntry], dict[str, Any], str]:
    """Entries with canonical names and roles, the hyperparameters, and the container kind.

    A training dict (a ``MODEL_KEYS`` container or an ``OPTIMIZER_KEYS`` entry at the top) puts
    the model container's tensors under their names inside it, the optimizer's as optimizer
    state and every other tensor as ``other``; its tensor-free values are hyperparameters. Any
    other object is walked whole with names as stored.
    """
    hyper: dict[str, Any] = {}
    if (
        _is_state_dict(obj)
        and set(map(type, obj)) == {str}
        and set(map(type, obj.values())) <= _RECORD_TYPES
    ):
        # The common case, a flat state dict {name: tensor}: no walk needed. (A value that is
        # not a tensor record, e.g. a placeholder for an unknown rebuild global, takes the walk.)
        stored_names = list(obj)
        by_last, parameter = _BUFFERS_BY_LAST, Role.PARAMETER
        entries = []
        for stored, name, rec in zip(
            stored_names, _strip_wrappers(stored_names), obj.values(), strict=True
        ):
            if type(rec) is TensorRecord and rec.parameter:
                role = parameter
            elif name[name.rfind(".") + 1 :] in by_last:
                role = _auto_role(name, rec)
            else:
                role = parameter
            entries.append(_entry(stored, name, rec, role, where))
        return entries, hyper, "state_dict"
    # (stored, model name or None when not part of the model, record, role or None for auto)
    rows: list[tuple[str, str | None, Any, Role | None]] = []
    w = _Walk(budget, where)
    if type(obj) is TensorRecord or type(obj) is StorageRef:
        w.walk(obj, "tensor")
        container = "tensor"
    elif isinstance(obj, dict) and not _is_state_dict(obj):
        model_key = next((k for k in MODEL_KEYS if k in obj and _is_container(obj[k])), None)
        training = model_key is not None or any(k in obj for k in OPTIMIZER_KEYS)
        container = "training" if training else "dict"
        for k, v in obj.items():
            start = len(w.found)
            w.walk(v, _key(k))
            got = w.found[start:]
            del w.found[start:]
            if not got:
                if isinstance(k, str):
                    hyper[k] = render(v)
            elif k == model_key:
                cut = len(_key(k)) + 1
                rows.extend((s, s[cut:], r, role) for s, r, role in got)
            elif k in OPTIMIZER_KEYS:
                rows.extend((s, None, r, Role.OPTIMIZER) for s, r, _ in got)
            elif not training and (_is_state_dict(v) or isinstance(v, Placeholder)):
                # e.g. {"generator": state dict, "discriminator": state dict}: model-like parts
                rows.extend((s, s, r, role) for s, r, role in got)
            else:
                # loose tensors and mixed containers beside (or without) a model: not the model
                rows.extend((s, None, r, Role.OTHER) for s, r, _ in got)
    else:
        w.walk(obj, "")
        container = (
            "module"
            if isinstance(obj, Placeholder)
            else "state_dict"
            if isinstance(obj, dict)
            else type(obj).__name__
        )
    rows.extend((s, s, r, role) for s, r, role in w.found)
    names = iter(_strip_wrappers([n for _, n, _, _ in rows if n is not None]))
    entries = []
    add = entries.append
    by_last = _BUFFERS_BY_LAST
    parameter = Role.PARAMETER
    for stored, model_name, rec, role in rows:
        if model_name is None:
            add(_entry(stored, stored, rec, role or Role.OTHER, where))
            continue
        name = next(names)
        if role is None:
            role = _auto_role(name, rec) if name[name.rfind(".") + 1 :] in by_last else parameter
        add(_entry(stored, name, rec, role, where))
    return entries, hyper, container


def _is_state_dict(d: Any) -> bool:
    """``Module.state_dict()``: an OrderedDict carrying ``_metadata``, or a dict of tensors only."""
    if not isinstance(d, dict):
        return False
    if isinstance(getattr(d, "_metadata", None), dict):
        return True
    return bool(d) and set(map(type, d.values())) <= _RECORD_TYPES


def _is_container(v: Any) -> bool:
    return isinstance(v, (dict, list, tuple, Placeholder))


def _strip_wrappers(names: list[str]) -> list[str]:
    changed = True
    while changed and names:
        changed = False
        for prefix in WRAPPER_PREFIXES:
            if all(n.startswith(prefix) for n in names):
                names = [n[len(prefix) :] for n in names]
                changed = True
    return names


_BUFFERS_BY_LAST: dict[str, list[tuple[str, int]]] = {}
for _suffix, _ndim in BUFFER_NAMES:
    _BUFFERS_BY_LAST.setdefault(_suffix.rsplit(".", 1)[-1], []).append((_suffix, _ndim))


def _auto_role(name: str, rec: Any) -> Role:
    """Buffer for the well-known buffer names of ``BUFFER_NAMES``, parameter otherwise."""
    candidates = _BUFFERS_BY_LAST.get(name[name.rfind(".") + 1 :])
    if candidates and type(rec) is TensorRecord:
        for suffix, min_ndim in candidates:
            if (name == suffix or name.endswith("." + suffix)) and len(rec.shape) >= min_ndim:
                return Role.BUFFER
    return Role.PARAMETER


def _entry(stored: str, name: str, rec: Any, role: Role, where: str) -> TensorEntry:
    st = rec.storage if type(rec) is TensorRecord else None
    if st is not None and rec.extra is None and st.base is None and rec.layout == "strided":
        # The common case, inlined: a dense view of a whole storage record.
        bits = VALUE_BITS.get(rec.dtype)
        if bits is not None and st.nbytes is not None:
            first = rec.storage_offset * bits
            if (first + rec.span * bits + 7) // 8 > st.nbytes and rec.span:
                _check_view(stored, rec, where)  # raises with the full story
            return TensorEntry(
                stored,
                name,
                rec.shape,
                rec.dtype,
                role,
                (math.prod(rec.shape) * bits + 7) // 8,
                st.key,
                None if st.offset is None or first % 8 else st.offset + first // 8,
                None,
                None,
                {
                    "stride": rec.stride,
                    "storage_offset": rec.storage_offset,
                    "storage_numel": st.numel,
                    "requires_grad": rec.requires_grad,
                },
            )
    if type(rec) is StorageRef:
        size = ITEMSIZE[rec.dtype]
        return TensorEntry(
            stored_name=stored,
            name=name,
            shape=(rec.numel,),
            dtype=rec.dtype,
            role=role,
            nbytes=rec.numel * size,
            storage=rec.key,
            offset=None if rec.root.offset is None else rec.root.offset + rec.view_offset * size,
            extra={"kind": "storage", "storage_type": rec.type_name, "location": rec.location},
        )
    extra: dict[str, Any] = {}
    stored_numel = None
    if rec.layout != "strided" and rec.layout != "quantized" and rec.extra:
        parts = {k: v for k, v in rec.extra.items() if type(v) is TensorRecord}
        for part, prec in parts.items():
            _check_view(stored, prec, where, part)
        if "values" in parts:
            stored_numel = math.prod(parts["values"].shape)
        nbytes: int | None = sum(_view_nbytes(p) or 0 for p in parts.values()) if parts else None
    else:
        _check_view(stored, rec, where)
        nbytes = _view_nbytes(rec)
    st = rec.storage
    offset = None
    if st is not None:
        extra["stride"] = rec.stride
        extra["storage_offset"] = rec.storage_offset
        extra["storage_numel"] = st.numel
        offset = _byte_offset(rec)
    extra["requires_grad"] = rec.requires_grad
    if rec.extra:
        for k, v in rec.extra.items():
            extra[k] = _summary(v) if type(v) is TensorRecord else v
    return TensorEntry(
        stored_name=stored,
        name=name,
        shape=rec.shape,
        dtype=rec.dtype,
        role=role,
        nbytes=nbytes,
        storage=None if st is None else st.key,
        offset=offset,
        stored_numel=stored_numel,
        extra=extra,
    )


def _view_nbytes(rec: TensorRecord) -> int | None:
    bits = VALUE_BITS.get(rec.dtype)
    return None if bits is None else (math.prod(rec.shape) * bits + 7) // 8


def _byte_offset(rec: TensorRecord) -> int | None:
    """Absolute file offset of the first element, None if unknown or not on a byte boundary."""
    st = rec.storage
    bits = VALUE_BITS.get(rec.dtype)
    if st is None or bits is None or st.root.offset is None or (rec.storage_offset * bits) % 8:
        return None
    return st.root.offset + st.view_offset * ITEMSIZE[st.dtype] + rec.storage_offset * bits // 8


def _check_view(stored: str, rec: TensorRecord, where: str, part: str = "") -> None:
    """The view (offset, shape, stride) must lie inside the bytes the file holds for its storage."""
    st = rec.storage
    if st is None or rec.stride is None:
        return
    bits = VALUE_BITS.get(rec.dtype)
    root = st.root
    if bits is None or root.nbytes is None or 0 in rec.shape:
        return
    last = rec.storage_offset + sum((d - 1) * s for d, s in zip(rec.shape, rec.stride, strict=True))
    end = st.view_offset * ITEMSIZE[st.dtype] + ((last + 1) * bits + 7) // 8
    limit = (
        root.nbytes
        if st.base is None
        else min(root.nbytes, (st.view_offset + st.numel) * ITEMSIZE[st.dtype])
    )
    if end > limit:
        what = f"tensor {stored!r}" + (f" ({part})" if part else "")
        raise FormatError(
            f"{what}: view (offset {rec.storage_offset}, shape {list(rec.shape)}, stride "
            f"{list(rec.stride)}) of {rec.dtype} needs {end} bytes of storage {st.key!r}, which "
            f"holds {limit}",
            where,
        )


def _summary(rec: TensorRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shape": rec.shape,
        "dtype": rec.dtype,
        "stride": rec.stride,
        "storage": None if rec.storage is None else rec.storage.key,
        "storage_offset": rec.storage_offset,
    }
    offset = _byte_offset(rec)
    if offset is not None:
        out["offset"] = offset
    return out


ADAPTER = Adapter(
    name=NAME,
    description="PyTorch torch.save checkpoint (zip with data.pkl, or the legacy pickle stream)",
    extensions=(".pt", ".pth", ".bin", ".ckpt"),
    sniff=sniff,
    open=open_checkpoint,
)
