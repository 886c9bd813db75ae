"""Canonical dtype names and what each takes in storage: the one table (:data:`DTYPES`) every
adapter and every value reader uses.

Names follow PyTorch's spelling without the ``torch.`` prefix (float32, bfloat16,
float8_e4m3fn, ...), which is also what NumPy and ml_dtypes use for the common types.
Sizes are in bits because some formats pack elements below a byte (safetensors F4, F6_*).
Block-quantized types (ggml's Q4_0, Q4_K, IQ2_XXS, MXFP4, ...) have no size per element: a block
of ``block_size`` elements takes ``type_size`` bytes, under ggml's own type names.
For value reads, a dtype names the NumPy type of its stored element (``numpy``; little-endian,
swapped when the file says big-endian): bfloat16 is read as its 16 bits (widened to float32 by a
shift), float8 as its byte (decoded by a table), complex32 as two float16 halves, torch's
quantized types as their stored integers (scale and zero point not applied).

:data:`BITS`, :data:`BLOCKS` and :data:`NUMPY_STORAGE` are views of the table.
"""

from __future__ import annotations


class DType:
    """One dtype: ``bits`` per element, or ``block`` = (elements per block, bytes per block)
    for a block-quantized one; ``numpy``: the NumPy type string its values are read as (None:
    not read)."""

    __slots__ = ("name", "bits", "block", "numpy")

    def __init__(self, name: str, bits: int | None = None, block: tuple[int, int] | None = None,
                 numpy: str | None = None) -> None:
        self.name = name
        self.bits = bits
        self.block = block
        self.numpy = numpy

    def __repr__(self) -> str:
        return f"DType({self.name!r}, bits={self.bits}, block={self.block}, numpy={self.numpy!r})"


# name, bits per element, NumPy storage type for value reads
_ELEMENTS: tuple[tuple[str, int, str | None], ...] = (
    ("bool", 8, "?"),
    ("uint8", 8, "u1"),
    ("int8", 8, "i1"),
    ("uint16", 16, "<u2"),
    ("int16", 16, "<i2"),
    ("uint32", 32, "<u4"),
    ("int32", 32, "<i4"),
    ("uint64", 64, "<u8"),
    ("int64", 64, "<i8"),
    ("float16", 16, "<f2"),
    ("bfloat16", 16, "<u2"),
    ("float32", 32, "<f4"),
    ("float64", 64, "<f8"),
    ("complex32", 32, "<u4"),
    ("complex64", 64, "<c8"),
    ("complex128", 128, "<c16"),
    ("float8_e4m3fn", 8, "u1"),
    ("float8_e4m3fnuz", 8, "u1"),
    ("float8_e5m2", 8, "u1"),
    ("float8_e5m2fnuz", 8, "u1"),
    ("float8_e8m0fnu", 8, "u1"),
    ("float6_e2m3fn", 6, None),
    ("float6_e3m2fn", 6, None),
    ("float4_e2m1fn", 4, None),
    # torch packs two float4 values into one byte element.
    ("float4_e2m1fn_x2", 8, None),
    # quantized integer types (torch): the element is stored as the underlying integer.
    ("qint8", 8, "i1"),
    ("quint8", 8, "u1"),
    ("qint32", 32, "<i4"),
    # torch counts quint4x2 / quint2x4 elements as the packed 4-bit / 2-bit values (shape [4]
    # occupies 2 bytes), unlike float4_e2m1fn_x2 whose elements are the packed bytes.
    ("quint4x2", 4, None),
    ("quint2x4", 2, None),
    ("bits1x8", 8, None),
    ("bits2x4", 8, None),
    ("bits4x2", 8, None),
    ("bits8", 8, None),
    ("bits16", 16, None),
    ("int1", 1, None),
    ("int2", 2, None),
    ("int3", 3, None),
    ("int4", 4, None),
    ("int5", 5, None),
    ("int6", 6, None),
    ("int7", 7, None),
    ("uint1", 1, None),
    ("uint2", 2, None),
    ("uint3", 3, None),
    ("uint4", 4, None),
    ("uint5", 5, None),
    ("uint6", 6, None),
    ("uint7", 7, None),

)
# ggml's block-quantized types, by ggml's type name (``ggml_type_name``): name, elements per
# block, bytes per block. Source: gguf-py 0.19.0 ``gguf/constants.py`` GGML_QUANT_SIZES
# (QK_K = 256), the same table as ggml's ``type_traits`` blck_size / type_size.
_BLOCKS: tuple[tuple[str, int, int], ...] = (
    ("q4_0", 32, 2 + 16),
    ("q4_1", 32, 2 + 2 + 16),
    ("q5_0", 32, 2 + 4 + 16),
    ("q5_1", 32, 2 + 2 + 4 + 16),
    ("q8_0", 32, 2 + 32),
    ("q8_1", 32, 4 + 4 + 32),
    ("q2_K", 256, 2 + 2 + 256 // 16 + 256 // 4),
    ("q3_K", 256, 2 + 256 // 4 + 256 // 8 + 12),
    ("q4_K", 256, 2 + 2 + 256 // 2 + 12),
    ("q5_K", 256, 2 + 2 + 256 // 2 + 256 // 8 + 12),
    ("q6_K", 256, 2 + 256 // 2 + 256 // 4 + 256 // 16),
    ("q8_K", 256, 4 + 256 + 256 // 8),
    ("iq2_xxs", 256, 2 + 256 // 4),
    ("iq2_xs", 256, 2 + 256 // 4 + 256 // 32),
    ("iq3_xxs", 256, 2 + 256 // 4 + 256 // 8),
    ("iq1_s", 256, 2 + 256 // 8 + 256 // 16),
    ("iq4_nl", 32, 2 + 16),
    ("iq3_s", 256, 2 + 256 // 4 + 256 // 8 + 256 // 32 + 4),
    ("iq2_s", 256, 2 + 256 // 4 + 256 // 16),
    ("iq4_xs", 256, 2 + 2 + 256 // 2 + 256 // 64),
    ("iq1_m", 256, 256 // 8 + 256 // 16 + 256 // 32),
    ("tq1_0", 256, 2 + 4 * 13),
    ("tq2_0", 256, 2 + 64),
    ("mxfp4", 32, 1 + 16),
    ("nvfp4", 64, 4 + 32),
    ("q1_0", 128, 2 + 16),
)

DTYPES: dict[str, DType] = {
    **{n: DType(n, bits=b, numpy=np) for n, b, np in _ELEMENTS},
    **{n: DType(n, block=(k, size)) for n, k, size in _BLOCKS},
}
BITS: dict[str, int] = {n: t.bits for n, t in DTYPES.items() if t.bits is not None}
BLOCKS: dict[str, tuple[int, int]] = {n: t.block for n, t in DTYPES.items() if t.block}
NUMPY_STORAGE: dict[str, str] = {n: t.numpy for n, t in DTYPES.items() if t.numpy}


def nbytes(dtype: str, numel: int) -> int | None:
    """Bytes that ``numel`` elements of ``dtype`` occupy (rounded up; whole blocks for a
    block-quantized type), None if unknown."""
    t = DTYPES.get(dtype)
    if t is None:
        return None
    if t.block is not None:
        return -(-numel // t.block[0]) * t.block[1]
    assert t.bits is not None
    return (numel * t.bits + 7) // 8


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

