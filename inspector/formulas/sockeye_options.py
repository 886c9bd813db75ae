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

from inspector.adapters.model import Checkpoint
from inspector.formulas.core import Part
from inspector.formulas.sockeye_common import sockeye_args, sockeye_major

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


# Every shape-changing option of Sockeye 1.18, 2.3 and 3.1 with a real trained fixture is now
# modelled (docs/formulas.md); a new one that is not gets a row here until it is.
OPTIONS: tuple[Option, ...] = ()


def unmodelled(arch: str, ckpt: Checkpoint) -> list[Part]:
    """The parts of a Sockeye model directory that ``arch`` does not model, from its
    ``args.yaml`` (none for a bare params file)."""
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
