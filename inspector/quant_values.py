"""The float values a quantized Hugging Face layer stands for, computed in NumPy as each
quantizer's own dequantization defines them, at any element positions (lineage asks for a few
sampled ones; a memory-mapped packed weight is read only where those elements lie).

One :class:`Layer` per quantized module: ``values(flat)`` gives, for flat indices into the
layer's weight as ``nn.Linear`` holds it (out_features O, in_features I, row-major), the
dequantized values and each element's *noise*: half a quantization step as the stored state
defines it (the largest error round-to-nearest leaves), so a source weight that was quantized
this way lies within it. The formulas follow the producers' sources:

* bitsandbytes 0.50 ``dequantize_4bit`` (default backend): byte ``k // 2``, high nibble first,
  ``quant_map[nibble] * absmax[k // blocksize]`` in float32 then the state's dtype; double
  quantization restores ``absmax`` as ``nested_quant_map[a] * nested_absmax[j // 256] +
  nested_offset``. ``int8_vectorwise_dequant``: ``int8 * (SCB[row] / 127)``.
* GPTQ (gptqmodel, AutoGPTQ): ``qweight`` (I*bits/32, O) and ``qzeros`` (groups, O*bits/32) are
  little-endian bit streams (3 bits spans words); ``scales[g_idx[i], o] * (q - zero)`` in
  float16, where a ``checkpoint_format`` ``gptq`` (v1) checkpoint stores ``zero - 1``.
* AWQ GEMM (AutoAWQ, gptqmodel): ``qweight`` (I, O/8), ``qzeros`` (I/G, O/8), eight 4-bit values
  a word in the order 0, 2, 4, 6, 1, 3, 5, 7; ``(q - zero) * scales`` in the scales' dtype.
* compressed-tensors 0.19 ``pack-quantized`` (``pack_to_int32``: a dense bit stream per row,
  stored plus ``2**(bits-1)``; asymmetric zero points packed along the output dimension),
  ``int-quantized`` / ``naive-quantized`` (int8), ``float-quantized`` (float8_e4m3fn),
  ``nvfp4-pack-quantized`` (two E2M1 values a byte, low nibble first; scale ``weight_scale /
  weight_global_scale``): ``(q - zero_point) * scale`` in the scale's dtype, the scale per
  tensor, channel, group (``weight_g_idx`` when written) or block.

What is not modelled (AWQ GEMV, which no CPU writer makes to check against; an option the
scheme does not know) is not guessed: :func:`layers` names it with the module, set aside.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from inspector.adapters.model import Checkpoint

Values = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
# transformers models whose projections are Conv1D: their weight is stored (in, out)
CONV1D_MODEL_TYPES = ("gpt2", "openai-gpt", "imagegpt", "decision_transformer", "clvp")
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # packed slot -> column within a word
AWQ_SLOT = tuple(AWQ_ORDER.index(c) for c in range(8))  # column within a word -> slot


class NotModelled(Exception):
    """A layer whose dequantization is not modelled here (the reason in ``args[0]``)."""


@dataclass
class Layer:
    """One quantized module: its weight's (O, I), a label of how it is stored, and
    ``values(flat) -> (values, noise)`` as float64 arrays."""

    module: str
    shape: tuple[int, int]
    kind: str
    values: Values
    out: str = "float32"  # the dtype the producer's dequantization returns
    # GPTQ spreads each column's rounding error over the columns it has not yet quantized: its
    # elements are not each within half a step of the source, their root mean square is
    spread: bool = False
    # why these values are no rounding of the source's weight at all (None: they are)
    rescaled: str | None = None


# --------------------------------------------------------------------------- rounding helpers
def to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest, ties to even), as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """float32 results as the producer's tensor of ``dtype`` holds them."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "bfloat16":
        return to_bfloat16(x)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    return x


def half_gaps(code: np.ndarray) -> np.ndarray:
    """Per code point: half the larger gap to its neighbours in the sorted table (the most a
    value rounded to it can have moved); the table's ends count only their inner gap."""
    code = np.asarray(code, dtype=np.float64)
    order = np.argsort(code, kind="stable")
    s = code[order]
    gaps = np.diff(s)
    lo = np.concatenate([[0.0], gaps])
    hi = np.concatenate([gaps, [0.0]])
    out = np.empty_like(code)
    out[order] = np.maximum(lo, hi) / 2
    return out


def fp8_half_spacing(v: np.ndarray) -> np.ndarray:
    """Half the spacing of float8_e4m3fn at ``v`` (3 mantissa bits; subnormals below 2**-6)."""
    a = np.abs(np.asarray(v, dtype=np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.maximum(a, 2.0 ** -6)))
    return 2.0 ** (e - 4)


def _stream(arr: np.ndarray, axis: int, fixed: np.ndarray, index: np.ndarray,
            bits: int) -> np.ndarray:
    """Values ``index`` of little-endian streams of ``bits``-bit values packed into the 32-bit
    words of a 2-D array along ``axis``, in the stream at ``fixed`` of the other axis (one per
    element). Each 32 values fill ``bits`` words; a value may span two words (3 bits)."""
    a = np.asarray(arr)
    a = a.view(np.uint32) if a.dtype.itemsize == 4 else a
    index = np.asarray(index, dtype=np.int64)
    pos = (index // 32) * bits * 32 + (index % 32) * bits  # the value's first bit
    word, shift = pos // 32, (pos % 32).astype(np.uint64)

    def at(w: np.ndarray, f: np.ndarray) -> np.ndarray:
        return (a[w, f] if axis == 0 else a[f, w]).astype(np.uint64)

    got = at(word, fixed) >> shift
    spill = shift + np.uint64(bits) > np.uint64(32)
    if spill.any():
        nxt = np.minimum(word + 1, a.shape[axis] - 1)
        got[spill] |= at(nxt[spill], fixed[spill]) << (np.uint64(32) - shift[spill])
    return (got & np.uint64((1 << bits) - 1)).astype(np.int64)


# --------------------------------------------------------------------------- reading tensors
class _Reader:
    def __init__(self, ckpt: Checkpoint) -> None:
        self.ckpt = ckpt
        self.names = {t.name for t in ckpt.tensors}

    def has(self, name: str) -> bool:
        return name in self.names

    def dtype(self, name: str) -> str:
        return str(self.ckpt[name].dtype)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.ckpt[name].shape)

    def numbers(self, name: str) -> np.ndarray:
        """Values as numbers (bfloat16 / float8 widened to float32), memory-mapped where the
        file allows."""
        from inspector.arrays import get_tensor

        if name not in self.names:
            raise NotModelled(f"{name} missing")
        return np.asarray(get_tensor(self.ckpt, name))

    def raw(self, name: str) -> np.ndarray:
        """The stored bytes of ``name`` as uint8 (a packed weight kept in another dtype)."""
        from inspector.values import iter_values

        entry = self.ckpt[name]
        if entry.dtype in ("uint8", "int8"):
            return self.numbers(name).reshape(-1).view(np.uint8)
        chunks = [np.ascontiguousarray(c).reshape(-1).view(np.uint8)
                  for c in iter_values(self.ckpt, entry, stored=True)]
        return np.concatenate(chunks) if chunks else np.empty(0, np.uint8)


def _split(flat: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    flat = np.asarray(flat, dtype=np.int64)
    return flat // i, flat % i


# --------------------------------------------------------------------------- bitsandbytes
def _bnb4(r: _Reader, module: str) -> Layer:
    w = f"{module}.weight"
    state_name = next((n for n in (f"{w}.quant_state.bitsandbytes__nf4",
                                   f"{w}.quant_state.bitsandbytes__fp4") if r.has(n)), None)
    if state_name is None:
        raise NotModelled("no bitsandbytes quant_state")
    state = json.loads(r.raw(state_name).tobytes().decode("utf-8"))
    o, i = (int(x) for x in state["shape"])
    blocksize = int(state["blocksize"])
    code = r.numbers(f"{w}.quant_map").astype(np.float32)
    code_noise = half_gaps(code)
    absmax = r.numbers(f"{w}.absmax")
    nested = r.has(f"{w}.nested_absmax")
    if nested:
        ncode = r.numbers(f"{w}.nested_quant_map").astype(np.float32)
        nabs = r.numbers(f"{w}.nested_absmax").astype(np.float32)
        nblock = int(state.get("nested_blocksize", 256))
        offset = np.float32(state.get("nested_offset", 0.0))
        ncode_noise = half_gaps(ncode)
    data = r.raw(w)
    dtype = str(state.get("dtype", "float32")).removeprefix("torch.")

    def values(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        flat = np.asarray(flat, dtype=np.int64)
        byte = data[flat // 2].astype(np.int64)
        nib = np.where(flat % 2 == 0, byte >> 4, byte & 0xF)
        block = flat // blocksize
        if nested:
            a8 = absmax[block].astype(np.int64)
            amax = ncode[a8] * nabs[block // nblock] + offset
            amax_noise = ncode_noise[a8] * np.abs(nabs[block // nblock]).astype(np.float64)
        else:
            amax = absmax[block].astype(np.float32)
            amax_noise = 0.0
        v = round_to(code[nib] * amax.astype(np.float32), dtype).astype(np.float64)
        # the block was scaled by its true maximum, which double quantization stores rounded
        noise = code_noise[nib] * (np.abs(amax) + amax_noise) + np.abs(code[nib]) * amax_noise
        return v, noise

    return Layer(module, (o, i), f"bitsandbytes {state.get('quant_type')}", values, dtype)


def _bnb8(r: _Reader, module: str) -> Layer:
    q = r.numbers(f"{module}.weight")
    scb = r.numbers(f"{module}.SCB").astype(np.float32)
    o, i = q.shape

    def values(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        row, col = _split(flat, i)
        # bitsandbytes' default int8_vectorwise_dequant: A * (stats * (1/127)) in float32
        s = scb[row]
        v = (q[row, col].astype(np.float32) * s) * np.float32(7.874015718698502e-3)
        return v.astype(np.float64), np.abs(s).astype(np.float64) / 254

    return Layer(module, (int(o), int(i)), "bitsandbytes int8", values)


# --------------------------------------------------------------------------- GPTQ / AWQ
def _gptq(r: _Reader, module: str, q: dict[str, Any]) -> Layer:
    bits = int(q["bits"])
    fmt = q.get("checkpoint_format", q.get("format", "gptq"))
    qweight, qzeros = r.numbers(f"{module}.qweight"), r.numbers(f"{module}.qzeros")
    scales, g_idx = r.numbers(f"{module}.scales"), r.numbers(f"{module}.g_idx")
    i, o = int(g_idx.shape[0]), int(scales.shape[1])
    sdtype = r.dtype(f"{module}.scales")
    v1 = fmt == "gptq"

    def values(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        row, col = _split(flat, i)  # row: output o, col: input i
        qv = _stream(qweight, 0, row, col, bits)
        g = g_idx[col].astype(np.int64)
        z = _stream(qzeros, 1, g, row, bits)
        if v1:  # gptq v1 stores zero - 1 (gptqmodel converts v1 to v2 by adding 1)
            z = z + 1
        s = scales[g, row].astype(np.float32)
        v = round_to(s * (qv - z).astype(np.float32), sdtype).astype(np.float64)
        return v, np.abs(s).astype(np.float64) / 2

    return Layer(module, (o, i), f"gptq {bits}-bit ({fmt})", values, sdtype, spread=True)


def _awq(r: _Reader, module: str, q: dict[str, Any]) -> Layer:
    version = str(q.get("version", "gemm")).lower()
    bits = int(q.get("bits", q.get("w_bit", 4)))
    group = int(q.get("group_size", q.get("q_group_size", 128)))
    if version != "gemm" or bits != 4:
        raise NotModelled(f"awq {version} {bits}-bit (no CPU writer to check its unpacking "
                          "against)")
    qweight, qzeros = r.numbers(f"{module}.qweight"), r.numbers(f"{module}.qzeros")
    scales = r.numbers(f"{module}.scales")
    sdtype = r.dtype(f"{module}.scales")
    i, o = int(qweight.shape[0]), int(scales.shape[1])
    slot = np.array(AWQ_SLOT, dtype=np.uint64)
    qw, qz = qweight.view(np.uint32), qzeros.view(np.uint32)

    def values(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        row, col = _split(flat, i)  # row: output o, col: input i
        shift = slot[row % 8] * np.uint64(4)
        qv = (qw[col, row // 8].astype(np.uint64) >> shift) & np.uint64(0xF)
        z = (qz[col // group, row // 8].astype(np.uint64) >> shift) & np.uint64(0xF)
        s = scales[col // group, row].astype(np.float32)
        v = round_to((qv.astype(np.float32) - z.astype(np.float32)) * s, sdtype)
        return v.astype(np.float64), np.abs(s).astype(np.float64) / 2

    return Layer(module, (o, i), f"awq {bits}-bit gemm", values, sdtype,
                 rescaled="AWQ scales each input channel and folds the inverse into the layer "
                 "before, so its dequantized weights are the source's rescaled")


# --------------------------------------------------------------------------- compressed-tensors
def _ct_weights(q: dict[str, Any], module: str) -> tuple[dict[str, Any], str]:
    """The weights' quantization arguments and format of the first config group whose targets
    match ``module`` (compressed-tensors' own order)."""
    import re

    for g in (q.get("config_groups") or {}).values():
        if not isinstance(g, dict):
            continue
        targets = [str(t) for t in g.get("targets") or ()]
        if any(t == "Linear" or t.startswith("re:") and re.match(t[3:], module)
               for t in targets):
            return g.get("weights") or {}, str(g.get("format") or q.get("format"))
    raise NotModelled("no compressed-tensors config group targets it")


def _ct(r: _Reader, module: str, q: dict[str, Any]) -> Layer:
    w, fmt = _ct_weights(q, module)
    bits, strategy = int(w.get("num_bits") or 8), w.get("strategy") or "tensor"
    scale = r.numbers(f"{module}.weight_scale")
    sdtype = r.dtype(f"{module}.weight_scale")
    zp = None
    if fmt == "pack-quantized":
        packed = r.numbers(f"{module}.weight_packed")
        o, i = (int(x) for x in r.numbers(f"{module}.weight_shape"))
        offset = 1 << (bits - 1)
        if r.has(f"{module}.weight_zero_point") and not w.get("symmetric", True):
            zpacked = r.numbers(f"{module}.weight_zero_point")

            def zero(row: np.ndarray, g: np.ndarray) -> np.ndarray:
                if strategy in ("channel", "group", "tensor_group"):  # packed along O
                    return _stream(zpacked, 0, g, row, bits) - offset
                return zpacked.reshape(-1)[0].astype(np.int64) * np.ones_like(row)

            zp = zero

        def quants(row: np.ndarray, col: np.ndarray) -> np.ndarray:
            return _stream(packed, 1, row, col, bits) - offset
        kind = f"compressed-tensors pack-quantized int{bits} {strategy}"
    elif fmt in ("int-quantized", "naive-quantized", "float-quantized"):
        weight = r.numbers(f"{module}.weight")
        o, i = (int(x) for x in weight.shape)
        if r.has(f"{module}.weight_zero_point"):
            zarr = r.numbers(f"{module}.weight_zero_point")

            def zp(row: np.ndarray, g: np.ndarray) -> np.ndarray:
                return _pick(zarr, strategy, w, row, g).astype(np.float32)

        def quants(row: np.ndarray, col: np.ndarray) -> np.ndarray:
            return weight[row, col]
        kind = f"compressed-tensors {fmt} {w.get('type', 'int')}{bits} {strategy}"
    elif fmt == "nvfp4-pack-quantized":
        packed = r.numbers(f"{module}.weight_packed")
        gscale = np.float32(r.numbers(f"{module}.weight_global_scale").reshape(-1)[0])
        o, i = int(packed.shape[0]), int(packed.shape[1]) * 2
        gs = int(w["group_size"])
        fp4_noise = half_gaps(np.concatenate([E2M1, -E2M1]))[:8]

        def values(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            row, col = _split(flat, i)
            byte = packed[row, col // 2].astype(np.int64)
            nib = np.where(col % 2 == 0, byte & 0xF, byte >> 4)
            mag = E2M1[nib & 7]
            qv = np.where(nib & 8, -mag, mag).astype(np.float32)
            s = (scale[row, col // gs].astype(np.float32) / gscale).astype(np.float32)
            # unpack_fp4_from_uint8's default dtype, bfloat16, is the result's
            v = to_bfloat16(qv * s).astype(np.float64)
            return v, fp4_noise[nib & 7] * np.abs(s).astype(np.float64)

        return Layer(module, (o, i), "compressed-tensors nvfp4", values, "bfloat16")
    else:
        raise NotModelled(f"compressed-tensors format {fmt!r}")
    g_idx = r.numbers(f"{module}.weight_g_idx") if r.has(f"{module}.weight_g_idx") else None
    is_float = w.get("type") == "float"

    def values(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        row, col = _split(flat, i)
        g = g_idx[col].astype(np.int64) if g_idx is not None else _group(strategy, w, col)
        s = _pick(scale, strategy, w, row, g, col).astype(np.float32)
        x = quants(row, col).astype(np.float32)
        shifted = 0.0
        if zp is not None:
            z = np.asarray(zp(row, g), dtype=np.float32)
            x = x - z
            # x / scale + zero_point is rounded in the scale's dtype before the step's rounding
            shifted = _ROUNDOFF.get(sdtype, 2.0 ** -8) * np.abs(z).astype(np.float64)
        v = round_to(x * s, sdtype).astype(np.float64)
        if is_float:
            step = fp8_half_spacing(quants(row, col))
        else:  # a value at the grid's end may have been clamped there: a whole step
            qv = quants(row, col)
            step = np.where((qv == -(1 << (bits - 1))) | (qv == (1 << (bits - 1)) - 1), 1.0, 0.5)
        return v, (step + shifted) * np.abs(s).astype(np.float64)

    return Layer(module, (o, i), kind, values, sdtype)


def _group(strategy: str, w: dict[str, Any], col: np.ndarray) -> np.ndarray:
    if strategy in ("group", "tensor_group"):
        return col // int(w["group_size"])
    return np.zeros_like(col)


def _pick(arr: np.ndarray, strategy: str, w: dict[str, Any], row: np.ndarray, g: np.ndarray,
          col: np.ndarray | None = None) -> np.ndarray:
    """The scale (or zero point) of each element by the strategy."""
    if strategy == "tensor":
        return np.broadcast_to(arr.reshape(-1)[0], row.shape)
    if strategy == "channel":
        return arr.reshape(arr.shape[0], -1)[row, 0]
    if strategy in ("group", "tensor_group"):
        return arr[row, g]
    if strategy == "block" and col is not None:
        b0, b1 = (int(x) for x in w["block_structure"])
        return arr[row // b0, col // b1]
    raise NotModelled(f"compressed-tensors strategy {strategy!r}")


# --------------------------------------------------------------------------- entry point
def layers(ckpt: Checkpoint) -> tuple[dict[str, Layer], dict[str, str]]:
    """The quantized modules of a quantized HF checkpoint whose values are modelled here
    (module -> :class:`Layer`) and those set aside (module -> why); both empty for any other
    checkpoint."""
    from inspector.adapters.quant_config import hf_config
    from inspector.adapters.quantized import OPTION_ERRORS, packed_weights, scheme
    from inspector.values import ValuesUnavailable

    config = hf_config(ckpt)
    q = config.get("quantization_config") if config else None
    if not isinstance(q, dict):
        return {}, {}
    sch = scheme(q, config)
    if sch.unknown is not None:
        return {}, {}
    r = _Reader(ckpt)
    try:
        modules = sorted(packed_weights(r.names, sch))
    except OPTION_ERRORS:
        return {}, {}
    out: dict[str, Layer] = {}
    aside: dict[str, str] = {}
    for module in modules:
        try:
            out[module] = _with_rounding(_layer(r, module, sch.method, q),
                                         _working_dtype(sch.method, r, module, config))
        except NotModelled as e:
            aside[module] = str(e)
        except (*OPTION_ERRORS, OSError, ValuesUnavailable) as e:
            aside[module] = f"its state could not be read ({e})"
    return out, aside


# unit roundoff of the dtypes a quantizer rounds through
_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11,
             "bfloat16": 2.0 ** -8}


def _working_dtype(method: str, r: _Reader, module: str, config: Any) -> str:
    """The dtype the quantizer held the source in before rounding it (bitsandbytes' Int8Params
    quantizes a float16 copy; the others, the model's dtype as config.json gives it)."""
    from inspector.adapters.quantized import model_dtype

    if method == "bitsandbytes" and r.has(f"{module}.SCB"):
        return "float16"
    return model_dtype(config or {}) or "float32"


def _with_rounding(layer: Layer, work: str) -> Layer:
    """``layer`` whose noise also holds the roundings the producer does beside the
    quantization step: the source's cast into ``work`` and its division by the scale there (a
    unit roundoff of ``work`` each), and the result's into the output dtype (one of that)."""
    rel = 2 * _ROUNDOFF.get(work, 2.0 ** -8) + _ROUNDOFF.get(layer.out, 2.0 ** -8)
    inner = layer.values

    def values(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v, noise = inner(flat)
        # relative to the source's magnitude, which is within the step of the value's
        return v, noise + rel * (np.abs(v) + noise)

    layer.values = values
    return layer


def _layer(r: _Reader, module: str, method: str, q: dict[str, Any]) -> Layer:
    if method == "bitsandbytes":
        return _bnb8(r, module) if r.has(f"{module}.SCB") else _bnb4(r, module)
    if method == "gptq":
        return _gptq(r, module, q)
    if method == "awq":
        return _awq(r, module, q)
    if method == "compressed-tensors":
        return _ct(r, module, q)
    raise NotModelled(f"quant_method {method!r}")


def conv1d(ckpt: Checkpoint) -> bool:
    """Whether the model's projections are transformers' Conv1D (weight stored (in, out))."""
    from inspector.adapters.quant_config import hf_config

    config = hf_config(ckpt) or {}
    return str(config.get("model_type")) in CONV1D_MODEL_TYPES
