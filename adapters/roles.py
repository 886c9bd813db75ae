"""A stored tensor's role when the file does not record it (a bare state dict, safetensors).

The producer's code decides what is a parameter: ``nn.Module.register_buffer`` makes a buffer,
``nn.Parameter`` a parameter, and only parameters enter a model's parameter count
(``sum(p.numel() for p in model.parameters())``, transformers' ``num_parameters()``,
OpenNMT-py's and fairseq's logged model size). A state dict keeps the tensors and drops that
distinction, so it is recovered here from two kinds of facts, kept as data:

- :data:`BUFFER_NAMES`: the names the producers register as persistent buffers (so they are
  in every ``state_dict()`` they write), each with the code that registers it;
- integer and boolean dtypes: ``nn.Parameter`` defaults to ``requires_grad=True``, which torch
  refuses for a non-floating tensor ("Only Tensors of floating point and complex dtype can
  require gradients"), so an integer tensor in a state dict is an index, a counter or a mask
  buffer (``position_ids``, ``num_batches_tracked``, GPT-NeoX's boolean causal mask, GPTQ's
  ``qweight`` / ``qzeros`` / ``g_idx``). The one exception is a packed quantized weight that a
  library wraps in a parameter subclass with ``requires_grad=False`` (bitsandbytes
  ``Int8Params`` / ``Params4bit``), stored under a parameter's own name:
  :data:`INTEGER_PARAMETER_NAMES`.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import itemgetter, or_

from .model import Role

# (dotted name suffix, minimum ndim, who registers it as a persistent buffer). Only names no
# layer uses for a parameter; GPT-2's causal mask "attn.bias" is 4-D, a real attn bias is not.
BUFFER_NAMES: tuple[tuple[str, int, str], ...] = (
    ("running_mean", 0, "torch.nn BatchNorm / InstanceNorm (track_running_stats)"),
    ("running_var", 0, "torch.nn BatchNorm / InstanceNorm (track_running_stats)"),
    ("num_batches_tracked", 0, "torch.nn BatchNorm"),
    ("position_ids", 0, "transformers BERT-family embeddings (persistent before 4.31)"),
    ("token_type_ids", 0, "transformers BERT-family embeddings"),
    ("inv_freq", 0, "transformers rotary embeddings (persistent before 4.31)"),
    ("relative_position_index", 0, "transformers / timm Swin, BEiT relative positions"),
    ("masked_bias", 0, "transformers GPT-2 / GPT-Neo / GPT-NeoX attention (before 4.31)"),
    ("attn.bias", 4, "transformers GPT-2 causal mask"),
    ("final_logits_bias", 0, "transformers BART, mBART, Marian, Pegasus, ... heads"),
    ("embed_positions.weights", 0,
     "transformers M2M100 / NLLB sinusoidal positions (persistent before 4.31)"),
    ("pe.pe", 0, "OpenNMT-py and JoeyNMT PositionalEncoding (sinusoidal table)"),
    ("version", 0, "fairseq TransformerEncoder / TransformerDecoder (format version)"),
    ("_float_tensor", 0, "fairseq SinusoidalPositionalEmbedding (device / dtype marker)"),
)

# Integer-typed tensors that are parameters: packed quantized weights held by a parameter
# subclass (bitsandbytes Int8Params, Params4bit) under the layer's own parameter name.
INTEGER_PARAMETER_NAMES = frozenset({"weight"})

_BY_LAST: dict[str, list[tuple[str, int]]] = {}
for _suffix, _ndim, _ in BUFFER_NAMES:
    _BY_LAST.setdefault(_suffix.rsplit(".", 1)[-1], []).append((_suffix, _ndim))


def is_integer(dtype: str) -> bool:
    """Integer and boolean dtypes (``int64``, ``uint8``, ``int4``, ``bool``): never trainable."""
    return dtype == "bool" or dtype.startswith(("int", "uint"))


def stored_role(name: str, ndim: int, dtype: str) -> Role:
    """The role of a model tensor whose file does not say: buffer for the producers' registered
    buffer names and for integer / boolean tensors, parameter otherwise. One dict lookup and one
    string test for most names."""
    last = name[name.rfind(".") + 1:]
    candidates = _BY_LAST.get(last)
    if candidates:
        for suffix, min_ndim in candidates:
            if (name == suffix or name.endswith("." + suffix)) and ndim >= min_ndim:
                return Role.BUFFER
    if is_integer(dtype) and last not in INTEGER_PARAMETER_NAMES:
        return Role.BUFFER
    return Role.PARAMETER


def stored_roles(names: list[str], ndims: list[int], dtypes: list[str]) -> list[Role]:
    """:func:`stored_role` of each (name, ndim, dtype), in bulk: the per-name test runs only on
    the names whose last component is a buffer name's and on integer / boolean tensors; the
    rest (most of a model) are parameters without a call each."""
    lasts = list(map(itemgetter(2), map(str.rpartition, names, repeat("."))))
    known = _BY_LAST.keys() & set(lasts)
    integer = {d for d in set(dtypes) if is_integer(d)}
    roles = [Role.PARAMETER] * len(names)
    if known or integer:
        for i in compress(range(len(names)), map(or_, map(known.__contains__, lasts),
                                                  map(integer.__contains__, dtypes))):
            roles[i] = stored_role(names[i], ndims[i], dtypes[i])
    return roles
