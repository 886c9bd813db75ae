"""The constants and tables of torch's formats: magic numbers, container keys, storage and
dtype names (each from ``torch/serialization.py`` / ``torch/storage.py`` as cited)."""

from __future__ import annotations

from ..dtypes import BITS

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
    "last_optimizer_state",  # fairseq (checkpoint_utils.save_checkpoint)
)
# Training-dict keys holding a part of the model stored apart from the model container, named
# as the model names it: OpenNMT-py's output layer (``model_saver``: ``"generator":
# model.generator.state_dict()``, beside ``"model"`` without it).
MODEL_PART_KEYS = ("generator",)
# The well-known buffer names of a bare state dict are data in ..roles (BUFFER_NAMES), shared
# with the formats that store no roles (safetensors).
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
