"""Quantized Hugging Face checkpoints: what each quantizer stores for one ``nn.Linear``, as data.

``config.json``'s ``quantization_config`` names the quantizer (``quant_method``) and its options;
:func:`scheme` turns it into a :class:`Scheme`, which says which linear layers are quantized
(``modules_to_not_convert`` / ``llm_int8_skip_modules`` / ``ignore``, transformers'
``should_convert_module`` matching) and, for one layer of ``in_features`` I and ``out_features``
O, every tensor the quantizer's serialization writes (:class:`Stored`: suffix, shape, dtype). The
layouts follow each writer's own code:

* bitsandbytes 0.50 ``Linear4bit._save_to_state_dict`` (``Params4bit`` + ``QuantState.as_dict(
  packed=True)``): ``weight`` ((O*I + 1) // (2 * storage bytes), 1) in
  ``bnb_4bit_quant_storage``,
  ``weight.absmax`` (ceil(O*I/blocksize),) float32 (uint8 with double quantization, then
  ``weight.nested_absmax`` (ceil(blocks/256),) and ``weight.nested_quant_map`` (256,)),
  ``weight.quant_map`` (16,), ``weight.quant_state.bitsandbytes__nf4|fp4``: the JSON of the
  non-tensor fields (``pack_dict_to_tensor``) as uint8; ``Linear8bitLt``: ``weight`` int8 (O, I),
  ``SCB`` float32 (O,), ``weight_format`` uint8 scalar.
* GPTQ (gptqmodel / AutoGPTQ ``QuantLinear``, formats ``gptq`` and ``gptq_v2``, which differ only
  in the zero-point values): ``qweight`` int32 (I*bits/32, O), ``qzeros`` int32 (groups,
  O*bits/32), ``scales`` float16 (groups, O), ``g_idx`` int32 (I,), groups = ceil(I/group_size)
  (one group for ``group_size`` -1). ``desc_act`` and ``sym`` change values, not shapes.
* AWQ (AutoAWQ ``WQLinear_GEMM``, gptqmodel's AWQ kernels): ``qweight`` int32 (I, O*bits/32),
  ``qzeros`` int32 (I/G, O*bits/32), ``scales`` (I/G, O) in the model's half dtype;
  ``WQLinear_GEMV``: ``qweight`` (O, I*bits/32), ``qzeros`` (O, w), ``scales`` (O, w*32/bits)
  with w = ``calculate_zeros_width`` (from the source only: no CPU writer makes one here).
* compressed-tensors (llm-compressor): per ``config_groups`` entry, ``format`` ``pack-quantized``
  (``weight_packed`` int32 (O, ceil(I*bits/32)), ``weight_shape`` int64 (2,), ``weight_scale``,
  ``weight_zero_point`` packed along O when asymmetric), ``float-quantized`` / ``int-quantized`` /
  ``naive-quantized`` (``weight`` float8_e4m3fn / int8 (O, I), ``weight_scale``,
  ``weight_zero_point`` when asymmetric), ``nvfp4-pack-quantized`` (``weight_packed`` uint8
  (O, I/2), ``weight_scale`` float8_e4m3fn (O, I/16), ``weight_global_scale`` (1,)); scales by
  strategy: tensor (1,), channel (O, 1), group (O, ceil(I/group_size)), block (ceil(O/b0),
  ceil(I/b1)); ``input_scale`` / ``input_global_scale`` (1,) for static input activations.

A method or an option not listed here is never guessed: :class:`Scheme` carries ``unknown`` (the
name of what is not modelled) and the layers it would touch, so ``check`` says ``incomplete``.
:func:`model_parameters` counts the original model's parameters from the stored tensors alone
(each packed weight unpacked to O*I, quantization state left out): ``show``'s and
``Checkpoint.totals()``'s ``model_parameters``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .dtypes import BITS
from .quant_config import hf_config  # importable from here as before

# what a malformed quantization_config raises while its layouts are worked out
OPTION_ERRORS = (ArithmeticError, KeyError, TypeError, ValueError, IndexError, re.error)
# torch dtype names as config.json spells them (torch_dtype / dtype / bnb_4bit_quant_storage)
_DTYPE_NAMES = {"float": "float32", "half": "float16", "float32": "float32",
                "float16": "float16", "bfloat16": "bfloat16", "uint8": "uint8", "int8": "int8",
                "int16": "int16", "int32": "int32", "float64": "float64"}


def _dtype(name: Any) -> str | None:
    """A dtype as config.json spells it (``torch.int8``, ``bfloat16``, ``half``), canonical."""
    if name is None:
        return None
    text = str(name).removeprefix("torch.")
    return _DTYPE_NAMES.get(text, text if text in BITS else None)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Stored:
    """One tensor a quantized linear layer writes: ``<module>.<suffix>`` of ``shape`` and
    ``dtype`` (None: not said). ``length`` is the (lowest, highest) length of a 1-D tensor whose
    exact length depends on values (a JSON text holding a float)."""

    suffix: str
    shape: tuple[int, ...]
    dtype: str | None
    length: tuple[int, int] | None = None


@dataclass
class Scheme:
    """A parsed ``quantization_config``: ``label`` names it (``bitsandbytes nf4``, ``gptq 4-bit
    group 32``...); ``layout(module, I, O)`` lists what one quantized linear layer stores, or None
    for a layer the quantizer leaves as it is; ``unknown`` names what is not modelled (a method,
    an option): then no layout is given and every linear layer is left to ``check`` as not
    modelled. ``main`` (the packed weight's suffix; ``a|b``: either) and ``markers`` (suffixes
    only a quantized module stores) identify quantized modules among stored tensors, and
    ``unpack(module, shape, dtype)`` gives O*I from the packed weight's stored shape (exact when
    in_features fills whole packed words)."""

    method: str
    label: str
    layout: Callable[[str, int, int], list[Stored] | None] = lambda m, i, o: None
    unknown: str | None = None
    main: str = "weight"
    markers: tuple[str, ...] = ()
    unpack: Callable[[str, tuple[int, ...], str | None], int] = lambda m, s, d: _prod(s)
    notes: list[str] = field(default_factory=list)
    blocks: tuple[str, ...] = ("linear", "conv1d")  # formula blocks the quantizer replaces


def _prod(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# --- which modules -----------------------------------------------------------------------------


def converted(module: str, patterns: Iterable[str] | None) -> bool:
    """transformers' ``should_convert_module``: False when a pattern matches ``module`` from the
    start up to a module boundary (as a regex) or as a suffix."""
    if patterns is None:
        return True
    boundary = r"(?:(?<=\.)|(?=\.|$))"
    for key in patterns:
        try:
            if re.match(rf"(?:{key}){boundary}", module):
                return False
        except re.error:
            pass
        if module.endswith(key):
            return False
    return True


def _ct_ignored(module: str, ignore: Iterable[str]) -> bool:
    """compressed-tensors' ``ignore``: a module name, or ``re:`` + a regex (``re.match``)."""
    for item in ignore:
        if item.startswith("re:"):
            try:
                if re.match(item[3:], module):
                    return True
            except re.error:
                continue
        elif module == item or module.endswith("." + item):
            return True
    return False


def _names(value: Any) -> list[str] | None:
    """A list of module names or patterns as config.json gives it (a lone string is one)."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _in_block(module: str) -> bool:
    """A module inside the repeated decoder/encoder blocks (``...layers.3.mlp.up_proj``): the
    modules GPTQ and AWQ quantizers walk (they quantize layer by layer)."""
    return re.search(r"\.\d+\.", module + ".") is not None


# --- bitsandbytes ------------------------------------------------------------------------------

BNB_NESTED_BLOCKSIZE = 256  # quantize_4bit: quantize_blockwise(absmax, blocksize=256)


def _json_len(d: Mapping[str, Any]) -> int:
    return len(json.dumps(d).encode("utf-8"))


def _bnb(q: Mapping[str, Any], model_dtype: str | None) -> Scheme:
    skip = _names(q.get("llm_int8_skip_modules"))
    if q.get("load_in_8bit") or q.get("_load_in_8bit"):
        if q.get("llm_int8_has_fp16_weight"):
            return Scheme("bitsandbytes", "bitsandbytes int8 (has_fp16_weight)",
                          unknown="bitsandbytes llm_int8_has_fp16_weight=true")

        def int8(module: str, i: int, o: int) -> list[Stored] | None:
            if not converted(module, skip):
                return None
            return [Stored("weight", (o, i), "int8"), Stored("SCB", (o,), "float32"),
                    Stored("weight_format", (), "uint8")]

        return Scheme("bitsandbytes", "bitsandbytes int8 (LLM.int8)", int8, markers=("SCB",),
                      notes=_skip_note(skip))
    if not (q.get("load_in_4bit") or q.get("_load_in_4bit")):
        return Scheme("bitsandbytes", "bitsandbytes", unknown="bitsandbytes without load_in_4bit "
                      "or load_in_8bit")
    qtype = q.get("bnb_4bit_quant_type", "fp4")
    storage = _DTYPE_NAMES.get(str(q.get("bnb_4bit_quant_storage", "uint8")))
    if qtype not in ("nf4", "fp4") or storage is None:
        return Scheme("bitsandbytes", f"bitsandbytes {qtype}", unknown=f"bitsandbytes "
                      f"bnb_4bit_quant_type={qtype!r}, bnb_4bit_quant_storage="
                      f"{q.get('bnb_4bit_quant_storage')!r}")
    nested = bool(q.get("bnb_4bit_use_double_quant"))
    blocksize = 64  # Params4bit's default; BitsAndBytesConfig has no option for it
    per = BITS[storage] // 4  # 4-bit values per storage element
    dtypes = [model_dtype] if model_dtype else ["float32", "float16", "bfloat16"]

    def four(module: str, i: int, o: int) -> list[Stored] | None:
        if not converted(module, skip):
            return None
        n = o * i
        blocks = _ceil(n, blocksize)
        # bitsandbytes/_ops.py quantize_4bit: ((n + 1) // (quant_storage.itemsize * 2), 1)
        out = [Stored("weight", ((n + 1) // per, 1), storage)]
        state = {"quant_type": qtype, "blocksize": blocksize, "dtype": "", "shape": [o, i]}
        if nested:
            out += [Stored("weight.absmax", (blocks,), "uint8"),
                    Stored("weight.nested_absmax", (_ceil(blocks, BNB_NESTED_BLOCKSIZE),),
                           "float32"),
                    Stored("weight.nested_quant_map", (256,), "float32")]
            state.update({"nested_blocksize": BNB_NESTED_BLOCKSIZE, "nested_dtype": "float32",
                          "nested_offset": 0.0})
        else:
            out.append(Stored("weight.absmax", (blocks,), "float32"))
        out.append(Stored("weight.quant_map", (16,), "float32"))
        # the JSON's length: the dtype name, and nested_offset (a float: "0.0" .. 24 chars)
        lens = [_json_len({**state, "dtype": d}) for d in dtypes]
        lo, hi = min(lens), max(lens) + (len("-1.2345678901234567e-123") - 3 if nested else 0)
        out.append(Stored(f"weight.quant_state.bitsandbytes__{qtype}", (lo,), "uint8",
                          length=(lo, hi) if hi != lo else None))
        return out

    return Scheme("bitsandbytes", f"bitsandbytes {qtype}" + (" double-quant" if nested else ""),
                  four, markers=("weight.absmax",), unpack=lambda m, s, d: _prod(s) * per,
                  notes=_skip_note(skip))


def _skip_note(skip: Any) -> list[str]:
    return [] if skip is None else [f"llm_int8_skip_modules: {', '.join(map(str, skip))}"]


# --- GPTQ / AWQ --------------------------------------------------------------------------------

GPTQ_FORMATS = ("gptq", "gptq_v2")
GPTQ_BITS = (2, 3, 4, 8)


def _gptq(q: Mapping[str, Any]) -> Scheme:
    bits, group = q.get("bits"), q.get("group_size", 128)
    fmt = q.get("checkpoint_format", q.get("format", "gptq"))
    label = f"gptq {bits}-bit group {group} ({fmt})"
    if bits not in GPTQ_BITS or not isinstance(group, int) or (group < 1 and group != -1):
        return Scheme("gptq", label, unknown=f"gptq bits={bits!r} group_size={group!r}")
    if fmt not in GPTQ_FORMATS:
        return Scheme("gptq", label, unknown=f"gptq checkpoint_format={fmt!r}")
    if q.get("pack_dtype", "int32") != "int32":
        return Scheme("gptq", label, unknown=f"gptq pack_dtype={q.get('pack_dtype')!r}")
    if q.get("dynamic"):
        return Scheme("gptq", label, unknown="gptq dynamic (per-module bits / group sizes)")
    skip = _names(q.get("modules_to_not_convert"))
    lm_head = bool(q.get("lm_head"))
    # optimum's GPTQConfig: the blocks walked, and which of their modules were quantized
    blocks = q.get("block_name_to_quantize")
    blocks = [blocks] if isinstance(blocks, str) else blocks or None
    inside = q.get("modules_in_block_to_quantize")
    inside = {str(n) for grp in inside for n in grp} if inside else None

    def layer(module: str, i: int, o: int) -> list[Stored] | None:
        if not (_in_block(module) or lm_head and module.endswith("lm_head")) \
                or not converted(module, skip):
            return None
        if blocks and not module.endswith("lm_head") \
                and not any(module.startswith(f"{b}.") for b in blocks):
            return None
        if inside is not None and not module.endswith("lm_head") \
                and not any(module.endswith(f".{n}") for n in inside):
            return None
        groups = 1 if group == -1 else _ceil(i, group)
        return [Stored("qweight", (i // 32 * bits, o), "int32"),
                Stored("qzeros", (groups, o // 32 * bits), "int32"),
                Stored("scales", (groups, o), "float16"), Stored("g_idx", (i,), "int32")]

    return Scheme("gptq", label, layer, main="qweight", markers=("qzeros",),
                  unpack=lambda m, s, d: s[0] * 32 // bits * s[1], blocks=("linear",))


def _awq(q: Mapping[str, Any], model_dtype: str | None) -> Scheme:
    bits, group = q.get("bits", q.get("w_bit")), q.get("group_size", q.get("q_group_size", 128))
    version = str(q.get("version", "gemm")).lower()
    label = f"awq {bits}-bit group {group} ({version})"
    if bits != 4 or not isinstance(group, int) or group < 1:
        return Scheme("awq", label, unknown=f"awq bits={bits!r} group_size={group!r}")
    if version not in ("gemm", "gemv"):
        return Scheme("awq", label, unknown=f"awq version={version!r}")
    skip = _names(q.get("modules_to_not_convert"))
    pack = 32 // bits
    # scales and bias in the model's half dtype (gptqmodel's AWQ kernels: float16 or bfloat16,
    # else float16; AutoAWQ's WQLinear: float16, its models being float16)
    half = model_dtype if model_dtype in ("float16", "bfloat16") else "float16"

    def gemv_width(i: int) -> int:  # awq.modules.linear.gemv.calculate_zeros_width
        mult = 1 if group >= 128 else {64: 2, 32: 4}.get(group)
        if mult is None:
            raise ValueError(f"awq gemv group_size {group}")
        base = _ceil(i // group, pack)
        return _ceil(base, mult) * mult

    def layer(module: str, i: int, o: int) -> list[Stored] | None:
        if not _in_block(module) or not converted(module, skip):
            return None
        if version == "gemm":
            return [Stored("qweight", (i, o // pack), "int32"),
                    Stored("qzeros", (i // group, o // pack), "int32"),
                    Stored("scales", (i // group, o), half)]
        w = gemv_width(i)
        return [Stored("qweight", (o, i // pack), "int32"),
                Stored("qzeros", (o, w), "int32"), Stored("scales", (o, w * pack), half)]

    return Scheme("awq", label, layer, main="qweight", markers=("qzeros",),
                  unpack=lambda m, s, d: _prod(s) * pack,
                  blocks=("linear",))


# --- compressed-tensors ------------------------------------------------------------------------

CT_FORMATS = ("pack-quantized", "float-quantized", "int-quantized", "naive-quantized",
              "nvfp4-pack-quantized")
CT_STRATEGIES = ("tensor", "channel", "group", "block", "tensor_group")


def _ct_scale_shape(w: Mapping[str, Any], i: int, o: int) -> tuple[int, ...]:
    s = w.get("strategy") or "tensor"
    if s == "tensor":
        return (1,)
    if s == "channel":
        return (o, 1)
    if s in ("group", "tensor_group"):
        return (o, _ceil(i, int(w["group_size"])))
    b0, b1 = w["block_structure"]
    return (_ceil(o, int(b0)), _ceil(i, int(b1)))


def _ct_group(name: str, g: Mapping[str, Any], fmt: str,
              model_dtype: str | None) -> tuple[Callable[[int, int], list[Stored]] | None, str]:
    """The layout of one config group's linear layers, or (None, what is unknown)."""
    w = g.get("weights")
    if not isinstance(w, Mapping):
        return None, f"compressed-tensors group {name}: no weights quantization"
    bits, kind, strategy = w.get("num_bits"), w.get("type", "int"), w.get("strategy") or "tensor"
    if strategy not in CT_STRATEGIES or kind not in ("int", "float"):
        return None, f"compressed-tensors strategy={strategy!r} type={kind!r}"
    if fmt not in CT_FORMATS:
        return None, f"compressed-tensors format={fmt!r}"
    if w.get("dynamic") not in (False, None):
        return None, f"compressed-tensors dynamic weights ({w.get('dynamic')!r})"
    sym = w.get("symmetric", True)
    a = g.get("input_activations")
    static_input = isinstance(a, Mapping) and a.get("dynamic") is False
    scale_dtype = _dtype(w.get("scale_dtype")) or model_dtype
    zp_dtype = _dtype(w.get("zp_dtype"))
    actorder = w.get("actorder")
    if actorder not in (None, "static", "weight", "group"):
        return None, f"compressed-tensors actorder={actorder!r}"

    def scales(i: int, o: int) -> list[Stored]:
        shape = _ct_scale_shape(w, i, o)
        out = [Stored("weight_scale", shape, scale_dtype)]
        if not sym:  # symmetric zero points are all zeros and not written
            out.append(Stored("weight_zero_point", shape, zp_dtype or model_dtype))
        return out

    if fmt == "nvfp4-pack-quantized":
        if bits != 4 or kind != "float" or strategy != "tensor_group":
            return None, f"compressed-tensors nvfp4 with num_bits={bits} strategy={strategy}"

        def nvfp4(i: int, o: int) -> list[Stored]:
            gs = int(w["group_size"])
            out = [Stored("weight_packed", (o, _ceil(i, 2)), "uint8"),
                   Stored("weight_scale", (o, _ceil(i, gs)), scale_dtype or "float8_e4m3fn"),
                   Stored("weight_global_scale", (1,), "float32")]
            if isinstance(a, Mapping):  # NVFP4 activations: a global scale from calibration
                out.append(Stored("input_global_scale", (1,), "float32"))
            return out

        return nvfp4, ""
    if fmt == "pack-quantized":
        if kind != "int" or bits not in (2, 4, 8):
            return None, f"compressed-tensors pack-quantized num_bits={bits} type={kind}"
        per = 32 // bits

        def packed(i: int, o: int) -> list[Stored]:
            out = [Stored("weight_packed", (o, _ceil(i, per)), "int32"),
                   Stored("weight_shape", (2,), "int64")]
            sc = scales(i, o)
            out.append(sc[0])
            if not sym:  # zero points packed along the output dimension
                shape = sc[0].shape
                out.append(Stored("weight_zero_point", (_ceil(shape[0], per), *shape[1:]),
                                  "int32"))
            if actorder == "group":
                out.append(Stored("weight_g_idx", (i,), "int32"))
            out += _ct_input(static_input, a, model_dtype)
            return out

        return packed, ""
    dtype = {("float", 8): "float8_e4m3fn", ("int", 8): "int8"}.get((kind, bits))
    if dtype is None:
        return None, f"compressed-tensors {fmt} num_bits={bits} type={kind}"

    def plain(i: int, o: int) -> list[Stored]:
        return [Stored("weight", (o, i), dtype), *scales(i, o),
                *_ct_input(static_input, a, model_dtype)]

    return plain, ""


def _ct_input(static: bool, a: Any, model_dtype: str | None) -> list[Stored]:
    """Static input activations: one calibrated ``input_scale`` per layer (tensor strategy)."""
    if not static:
        return []
    if (a.get("strategy") or "tensor") != "tensor":
        raise ValueError(f"static input activations of strategy {a.get('strategy')!r}")
    out = [Stored("input_scale", (1,), _dtype(a.get("scale_dtype")) or model_dtype)]
    if not a.get("symmetric", True):
        out.append(Stored("input_zero_point", (1,), _dtype(a.get("zp_dtype")) or "int8"))
    return out


def _ct(q: Mapping[str, Any], model_dtype: str | None) -> Scheme:
    fmt = q.get("format", "dense")
    groups = q.get("config_groups") or {}
    if not isinstance(groups, Mapping):
        raise TypeError(f"config_groups is a {type(groups).__name__}")
    ignore = q.get("ignore") or ()
    ignore = [ignore] if isinstance(ignore, str) else [str(x) for x in ignore]
    for option in ("sparsity_config", "transform_config", "kv_cache_scheme"):
        if q.get(option):  # extra tensors (sparsity bitmasks, rotations, k/v scales)
            return Scheme("compressed-tensors", f"compressed-tensors {fmt}",
                          unknown=f"compressed-tensors {option}")
    layouts: list[tuple[list[str], Callable[[int, int], list[Stored]], int]] = []
    labels = []
    for name, g in groups.items():
        if not isinstance(g, Mapping):
            continue
        gfmt = g.get("format") or fmt
        fn, why = _ct_group(name, g, gfmt, model_dtype)
        if fn is None:
            return Scheme("compressed-tensors", f"compressed-tensors {gfmt}", unknown=why)
        targets = [str(t) for t in g.get("targets") or ()]
        if any(t != "Linear" and not t.startswith("re:") for t in targets):
            return Scheme("compressed-tensors", f"compressed-tensors {gfmt}",
                          unknown=f"compressed-tensors targets {targets}")
        w = g["weights"]
        layouts.append((targets, fn, int(w.get("num_bits") or 8)))
        labels.append(f"{gfmt} {w.get('type', 'int')}{w.get('num_bits')} "
                      f"{w.get('strategy') or 'tensor'}")
    if not layouts:
        return Scheme("compressed-tensors", f"compressed-tensors {fmt}",
                      unknown="compressed-tensors without config_groups")

    def group(module: str) -> int | None:
        if _ct_ignored(module, ignore):
            return None
        for k, (targets, _, _) in enumerate(layouts):  # the first group whose targets match
            if any(t == "Linear" or re.match(t[3:], module) for t in targets):
                return k
        return None

    def layer(module: str, i: int, o: int) -> list[Stored] | None:
        k = group(module)
        return None if k is None else layouts[k][1](i, o)

    def unpack(module: str, shape: tuple[int, ...], dtype: str | None) -> int:
        k = group(module)
        bits = layouts[k][2] if k is not None else 8
        # int32 words of 32/bits values (pack-quantized), uint8 pairs (NVFP4), else one each
        per = 32 // bits if dtype == "int32" else 8 // bits if dtype == "uint8" else 1
        return _prod(shape) * per

    return Scheme("compressed-tensors", "compressed-tensors " + "; ".join(labels), layer,
                  main="weight_packed|weight", markers=("weight_scale",), unpack=unpack,
                  blocks=("linear",))


# --- entry points ------------------------------------------------------------------------------

METHODS: dict[str, Callable[[Mapping[str, Any], str | None], Scheme]] = {
    "bitsandbytes": _bnb,
    "gptq": lambda q, d: _gptq(q),
    "awq": lambda q, d: _awq(q, d),
    "compressed-tensors": _ct,
}


def model_dtype(config: Mapping[str, Any]) -> str | None:
    d = config.get("dtype", config.get("torch_dtype"))
    return _DTYPE_NAMES.get(str(d)) if d is not None else None


def scheme(q: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> Scheme:
    """The :class:`Scheme` of a ``quantization_config`` (``config``: the whole config.json, for
    the model's dtype)."""
    method = str(q.get("quant_method", "")).lower()
    fn = METHODS.get(method)
    if fn is None:
        return Scheme(method or "?", f"quant_method {method!r}",
                      unknown=f"quant_method {method!r}" if method else "quantization_config "
                      "without quant_method")
    try:
        return fn(q, model_dtype(config or {}))
    except OPTION_ERRORS as e:
        return Scheme(method, method, unknown=f"{method} options not understood ({e})")


def model_parameters(entries: Iterable[Any], q: Mapping[str, Any],
                     config: Mapping[str, Any] | None = None,
                     names: set[str] | None = None) -> int | None:
    """The original model's parameter count from stored tensors (unique, with roles): each
    quantized module's packed weight unpacked to its O*I values, its quantization state left
    out, every other parameter as stored. None when the method is not modelled. ``names``: every
    stored name (a filtered listing counts its entries, its modules known from all names)."""
    sch = scheme(q, config)
    if sch.unknown is not None:
        return None
    entries = list(entries)
    names = names if names is not None else {t.name for t in entries}
    by_name = {t.name: t for t in entries}
    main_of = {module: by_name[main] for module, main in packed_weights(names, sch).items()
               if main in by_name}  # quantized module -> its packed weight
    total = 0
    for t in entries:
        module = _module_of(t.name, main_of)
        if module is None:
            total += t.numel if t.role == "parameter" else 0  # Role.PARAMETER (a str enum)
        elif t is main_of[module]:
            total += sch.unpack(module, tuple(t.shape), t.dtype)
        elif t.name == module + ".bias":
            total += t.numel
    return total


def packed_weights(names: Iterable[str], sch: Scheme) -> dict[str, str]:
    """Quantized module -> the name of its packed weight, among stored ``names``: a module is
    quantized when it stores the scheme's main weight and one of its markers."""
    names = set(names)
    mains = sch.main.split("|")
    out: dict[str, str] = {}
    for name in sorted(names):
        for m in mains:
            module = name[: -len(m) - 1]
            if name.endswith("." + m) and module not in out \
                    and any(f"{module}.{k}" in names for k in sch.markers):
                out[module] = name
    return out


def _module_of(name: str, modules: Mapping[str, Any]) -> str | None:
    """The quantized module ``name`` belongs to, if any."""
    parts = name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        m = ".".join(parts[:k])
        if m in modules:
            return m
    return None


def summary(ckpt: Any, unique: Iterable[Any]) -> dict[str, Any]:
    """The totals a quantized HF checkpoint adds (``{}`` for any other): ``quantization`` (the
    method as read, "(not modelled: ...)" when it is not) and ``model_parameters``, the original
    model's parameter count (packed weights unpacked, quantization state left out)."""
    config = hf_config(ckpt)
    q = config.get("quantization_config") if config else None
    if not isinstance(q, dict):
        return {}
    sch = scheme(q, config)
    if sch.unknown is None:
        try:
            return {"quantization": sch.label,
                    "model_parameters": model_parameters(unique, q, config,
                                                         {t.name for t in ckpt.tensors})}
        except OPTION_ERRORS as e:
            sch.unknown = f"{sch.method} options not understood ({e})"
    return {"quantization": f"{sch.label} (not modelled: {sch.unknown})"}
