"""Stand-ins for torch's rebuild functions and storage types: the restricted unpickler calls
these instead of torch, and they build :class:`TensorRecord` descriptions, never tensors."""

from __future__ import annotations

from typing import Any

from ..dtypes import BITS
from ..errors import FormatError
from ..security.restricted_pickle import (
    GlobalRef,
    PickleError,
    Placeholder,
    base_allowed,
    is_placeholder_type,
    render,
    unpickle,
)
from .constants import LAYOUTS, QSCHEMES, STORAGE_DTYPES, TORCH_DTYPES


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


class Builder:
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



def storage_ref(stype: Any, key: Any, location: Any, numel: Any) -> StorageRef:
    if not isinstance(stype, StorageType):
        raise PickleError(f"storage type is {_describe(stype)}, not a torch storage class")
    if not isinstance(key, str) or not key or len(key) > 200:
        raise PickleError(f"storage key {short_repr(key)} is not a short string")
    if type(numel) is not int or numel < 0:
        raise PickleError(f"storage {key!r} numel {short_repr(numel)} is not a non-negative int")
    return StorageRef(key, STORAGE_TYPE_DTYPES[stype], numel, str(location), str(stype))


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def load_pickle(
    data: Any, resolve: Any, where: str, member: str
) -> tuple[Any, dict[str, GlobalRef]]:
    """Unpickle ``data`` with the torch stand-ins; a malformed pickle is a FormatError."""
    try:
        return unpickle(data, Builder().allowed(), resolve)
    except PickleError as e:
        raise FormatError(str(e), where, member) from None
