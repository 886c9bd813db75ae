"""Sockeye's shape-changing options that the Sockeye architectures do not model yet, as data.

``check`` reads a model's ``args.yaml``; each option set there that changes tensors the formula
does not predict becomes a :class:`~inspector.formulas.core.Part`: the check is ``incomplete``,
the option is named with the reason, and the tensors it adds or reshapes (``pattern``) are
``not modelled`` instead of mismatches; everything else is still checked. When an option gets
modelled (verified on a real trained fixture), its row goes.

Also here: the names the Sockeye architectures model (so a bare params file with unknown tensors
reads as incomplete, not as a mismatch) and the aliases of their hyperparameters (the keys of
Sockeye's own ``config`` file).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inspector.formulas.core import Part

# Sockeye's ``config`` file names the vocabularies differently from its command line.
ALIASES = {"vocab_source_size": "source_vocab_size", "vocab_target_size": "target_vocab_size"}

# Sockeye 1 (MXNet symbol names); ``_EMBED_IN`` are the tensors a wider or narrower source
# embedding reshapes (the embedding itself and the first encoder layer's input projection).
_S1_EMBED_IN = (r"^source_(target_)?embed_weight$|^encoder_birnn_(forward|reverse)_l0_i2h_weight$"
                r"|^encoder_transformer_0_|^source_pos_embed_weight$")
_S23_EMBED_IN = r"^embedding_source\.|^source_embed|^encoder\.layers\.0\."
# Concatenated factors widen the whole encoder (its model size) and what reads its output.
_S1_ENCODER = r"factor|^source_|^encoder_|_att_enc_[kv]2h_weight$|_att_(e2h|s2h|s2t)_weight$"
_S23_ENCODER = r"factor|^embedding_source\.|^source_|^encoder\.|\.enc_attention\.ff_kv\.weight$"


def _concat(value: Any, args: dict) -> bool:
    """Source factors of which at least one is concatenated (Sockeye 2/3 per factor)."""
    combine = args.get("source_factors_combine")
    combine = combine if isinstance(combine, (list, tuple)) else [combine]
    return bool(value) and "concat" in map(str, combine)


def _not_concat(value: Any, args: dict) -> bool:
    return bool(value) and not _concat(value, args)


@dataclass(frozen=True)
class Option:
    """One ``args.yaml`` key whose value (when ``active``) the formula does not model."""

    key: str
    flag: str  # the command-line option, as a user knows it
    reason: str
    pattern: str  # the tensors it adds or reshapes
    majors: tuple[str, ...]  # Sockeye major versions the row is about
    archs: tuple[str, ...]
    active: Callable[[Any, dict], bool] = lambda value, args: bool(value)


OPTIONS: tuple[Option, ...] = (
    Option("source_factors", "--source-factors",
           "source factor embeddings (and the wider encoder input they make) are not modelled",
           r"factor|" + _S1_EMBED_IN, ("1",), ("sockeye-rnn",)),
    Option("source_factors", "--source-factors (sum)",
           "summed source factor embeddings are not modelled",
           r"factor|" + _S1_EMBED_IN, ("1",), ("sockeye-transformer",), _not_concat),
    Option("source_factors", "--source-factors (concat)",
           "concatenated source factor embeddings (and the wider encoder they make) are not "
           "modelled", _S1_ENCODER, ("1",), ("sockeye-transformer",), _concat),
    Option("source_factors", "--source-factors (sum/average)",
           "summed or averaged source factor embeddings are not modelled",
           r"factor|" + _S23_EMBED_IN, ("2", "3"), ("sockeye-transformer",), _not_concat),
    Option("source_factors", "--source-factors (concat)",
           "concatenated source factor embeddings (and the wider encoder they make) are not "
           "modelled", _S23_ENCODER, ("2", "3"), ("sockeye-transformer",), _concat),
    Option("target_factors", "--target-factors",
           "target factor embeddings and outputs are not modelled",
           r"factor|^embedding_target\.|^output_layer|^decoder\.layers\.0\.", ("2", "3"),
           ("sockeye-transformer",)),
    Option("decoder_only", "--decoder-only", "a model without an encoder is not modelled",
           r"^encoder_|enc2decinit|^decoder_rnn_att_|^cov_", ("1",), ("sockeye-rnn",)),
    Option("attention_based_copying", "--attention-based-copying",
           "attention-based copying (its output layer and copy gate) is not modelled",
           r"^target_output_|copy", ("1",), ("sockeye-rnn", "sockeye-transformer")),
    Option("length_task", "--length-task", "the length-prediction layers are not modelled",
           r"^length_ratio", ("1", "2", "3"), ("sockeye-rnn", "sockeye-transformer")),
    Option("weight_normalization", "--weight-normalization",
           "the weight-normalised output layer (its scale) is not modelled",
           r"wn_scale$|^target_output_weight$", ("1",), ("sockeye-rnn", "sockeye-transformer")),
    Option("encoder", "--encoder rnn-with-conv-embed",
           "the character-level convolutional embedding is not modelled",
           r"^encoder_char_|" + _S1_EMBED_IN, ("1",), ("sockeye-rnn",),
           lambda v, _: v == "rnn-with-conv-embed"),
    Option("encoder", "--encoder transformer-with-conv-embed",
           "the character-level convolutional embedding is not modelled",
           r"^encoder_char_|" + _S1_EMBED_IN, ("1",), ("sockeye-transformer",),
           lambda v, _: v == "transformer-with-conv-embed"),
    Option("decoder", "--decoder rnn", "an RNN decoder after a transformer encoder is not "
           "modelled", r"^decoder_|^target_|^cov_", ("1",), ("sockeye-transformer",),
           lambda v, _: v == "rnn"),
    Option("decoder", "--decoder ssru_transformer",
           "the SSRU decoder self-attention replacement is not modelled",
           r"^decoder\.layers\.\d+\.(pre_)?autoregr_layer\.", ("2", "3"),
           ("sockeye-transformer",), lambda v, _: v == "ssru_transformer"),
    Option("transformer_feed_forward_use_glu", "--transformer-feed-forward-use-glu",
           "gated (GLU) feed-forward layers are not modelled", r"\.ff\.", ("2", "3"),
           ("sockeye-transformer",)),
    Option("lhuc", "--lhuc", "LHUC scaling vectors are not modelled for this architecture",
           r"lhuc", ("1", "2", "3"), ("sockeye-transformer",)),
    Option("neural_vocab_selection", "--neural-vocab-selection",
           "the neural vocabulary selection layer is not modelled", r"^nvs\.", ("3",),
           ("sockeye-transformer",)),
)


def unmodelled(arch: str, ckpt: Any) -> list[Part]:
    """The parts of a Sockeye model directory that ``arch`` does not model, from its
    ``args.yaml`` (none for a bare params file)."""
    from inspector.formulas.sockeye_rnn import sockeye_args, sockeye_major

    args = sockeye_args(ckpt)
    major = sockeye_major(ckpt)
    out = []
    for o in OPTIONS:
        value = args.get(o.key)
        if arch in o.archs and major in o.majors and value not in (None, [], "", False) \
                and o.active(value, args):
            flag = o.flag if " " in o.flag or isinstance(value, (bool, list, tuple)) \
                else f"{o.flag} {value}"
            out.append(Part(flag, o.reason, o.pattern))
    return out


# The tensor names each Sockeye architecture models; a stored tensor outside them is reported
# as an unrecognised (not modelled) tensor, never as unexpected.
MODELLED: dict[str, tuple[str, ...]] = {
    "sockeye-rnn": (
        r"^(source|target|source_target)_embed_weight$", r"^target_output_(weight|bias)$",
        r"^encoder_(birnn|rnn)_", r"^decoder_rnn_", r"^cov_",
    ),
    "sockeye-transformer": (
        r"^(source|target|source_target)_(pos_)?embed_weight$",
        r"^target_output_(weight|bias)$", r"^(en|de)coder_transformer_",
        r"^embedding_(source|target)\.(embedding\.weight|embed_weight)$",
        r"^output_layer\.(weight|bias)$",
        r"^(en|de)coder\.(pos_embedding\.weight|final_process\.layer_norm\.)",
        r"^(en|de)coder\.layers\.\d+\.(pre_)?(self_attention|autoregr_layer|enc_attention|ff)"
        r"\.(ff_(in|out|q|kv)\.weight|ff[12]\.(weight|bias)|layer_norm\.(gamma|beta|weight|bias))$",
    ),
    "sockeye-cnn": (
        r"^(source|target|source_target)_(pos_)?embed_weight$", r"^target_output_",
        r"^(en|de)coder_cnn_",
    ),
}
