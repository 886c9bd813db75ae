"""Canonical dtype names and their element sizes, shared by every adapter.

Names follow PyTorch's spelling without the ``torch.`` prefix (float32, bfloat16,
float8_e4m3fn, ...), which is also what NumPy and ml_dtypes use for the common types.
Sizes are in bits because some formats pack elements below a byte (safetensors F4, F6_*).
Block-quantized types (ggml's Q4_0, Q4_K, IQ2_XXS, MXFP4, ...) have no size per element: a block
of ``block_size`` elements takes ``type_size`` bytes (:data:`BLOCKS`), under ggml's own type names.
"""

from __future__ import annotations

BITS: dict[str, int] = {
    "bool": 8,
    "uint8": 8,
    "int8": 8,
    "uint16": 16,
    "int16": 16,
    "uint32": 32,
    "int32": 32,
    "uint64": 64,
    "int64": 64,
    "float16": 16,
    "bfloat16": 16,
    "float32": 32,
    "float64": 64,
    "complex32": 32,
    "complex64": 64,
    "complex128": 128,
    "float8_e4m3fn": 8,
    "float8_e4m3fnuz": 8,
    "float8_e5m2": 8,
    "float8_e5m2fnuz": 8,
    "float8_e8m0fnu": 8,
    "float6_e2m3fn": 6,
    "float6_e3m2fn": 6,
    "float4_e2m1fn": 4,
    # torch packs two float4 values into one byte element.
    "float4_e2m1fn_x2": 8,
    # quantized integer types (torch): the element is stored as the underlying integer.
    "qint8": 8,
    "quint8": 8,
    "qint32": 32,
    # torch counts quint4x2 / quint2x4 elements as the packed 4-bit / 2-bit values (shape [4]
    # occupies 2 bytes), unlike float4_e2m1fn_x2 whose elements are the packed bytes.
    "quint4x2": 4,
    "quint2x4": 2,
    "bits1x8": 8,
    "bits2x4": 8,
    "bits4x2": 8,
    "bits8": 8,
    "bits16": 16,
    "int1": 1,
    "int2": 2,
    "int3": 3,
    "int4": 4,
    "int5": 5,
    "int6": 6,
    "int7": 7,
    "uint1": 1,
    "uint2": 2,
    "uint3": 3,
    "uint4": 4,
    "uint5": 5,
    "uint6": 6,
    "uint7": 7,
}


# ggml's block-quantized types, by ggml's type name (``ggml_type_name``): (elements per block,
# bytes per block). Source: gguf-py 0.19.0 ``gguf/constants.py`` GGML_QUANT_SIZES (QK_K = 256),
# the same table as ggml's ``type_traits`` blck_size / type_size.
BLOCKS: dict[str, tuple[int, int]] = {
    "q4_0": (32, 2 + 16),
    "q4_1": (32, 2 + 2 + 16),
    "q5_0": (32, 2 + 4 + 16),
    "q5_1": (32, 2 + 2 + 4 + 16),
    "q8_0": (32, 2 + 32),
    "q8_1": (32, 4 + 4 + 32),
    "q2_K": (256, 2 + 2 + 256 // 16 + 256 // 4),
    "q3_K": (256, 2 + 256 // 4 + 256 // 8 + 12),
    "q4_K": (256, 2 + 2 + 256 // 2 + 12),
    "q5_K": (256, 2 + 2 + 256 // 2 + 256 // 8 + 12),
    "q6_K": (256, 2 + 256 // 2 + 256 // 4 + 256 // 16),
    "q8_K": (256, 4 + 256 + 256 // 8),
    "iq2_xxs": (256, 2 + 256 // 4),
    "iq2_xs": (256, 2 + 256 // 4 + 256 // 32),
    "iq3_xxs": (256, 2 + 256 // 4 + 256 // 8),
    "iq1_s": (256, 2 + 256 // 8 + 256 // 16),
    "iq4_nl": (32, 2 + 16),
    "iq3_s": (256, 2 + 256 // 4 + 256 // 8 + 256 // 32 + 4),
    "iq2_s": (256, 2 + 256 // 4 + 256 // 16),
    "iq4_xs": (256, 2 + 2 + 256 // 2 + 256 // 64),
    "iq1_m": (256, 256 // 8 + 256 // 16 + 256 // 32),
    "tq1_0": (256, 2 + 4 * 13),
    "tq2_0": (256, 2 + 64),
    "mxfp4": (32, 1 + 16),
    "nvfp4": (64, 4 + 32),
    "q1_0": (128, 2 + 16),
}


def nbytes(dtype: str, numel: int) -> int | None:
    """Bytes that ``numel`` elements of ``dtype`` occupy (rounded up; whole blocks for a
    block-quantized type), None if unknown."""
    bits = BITS.get(dtype)
    if bits is None:
        block = BLOCKS.get(dtype)
        if block is None:
            return None
        return -(-numel // block[0]) * block[1]
    return (numel * bits + 7) // 8


# NumPy kind character + item size (a dtype's .kind/.itemsize, an .npy descr's letter and
# size) -> canonical dtype.
NUMPY_KINDS: dict[tuple[str, int], str] = {
    ("f", 2): "float16",
    ("f", 4): "float32",
    ("f", 8): "float64",
    ("c", 8): "complex64",
    ("c", 16): "complex128",
    ("i", 1): "int8",
    ("i", 2): "int16",
    ("i", 4): "int32",
    ("i", 8): "int64",
    ("u", 1): "uint8",
    ("u", 2): "uint16",
    ("u", 4): "uint32",
    ("u", 8): "uint64",
    ("b", 1): "bool",
}

