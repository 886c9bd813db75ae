"""Quantized Hugging Face checkpoints in ``check``: an architecture's prediction of the
unquantized model rewritten into what the quantizer stores.

``config.json``'s ``quantization_config`` is parsed by :mod:`inspector.adapters.quantized` (the
quantizers' layouts as data). Every predicted linear layer the quantizer converts has its
``weight`` replaced by the tensors the quantizer writes, with shapes and dtypes; its bias and
every layer it leaves alone are predicted as before. :func:`review` then checks what a shape
comparison cannot: each quantized tensor's dtype, and the length range of a JSON-holding state
tensor (bitsandbytes' packed ``quant_state``, whose length depends on a stored float).

A quantization method or option that is not modelled is named: the linear layers it touches are
a :class:`~inspector.formulas.core.Part` (``not modelled``), so ``check`` answers ``incomplete``,
never ``mismatch``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inspector.adapters import quantized
from inspector.adapters.model import Checkpoint, Role, TensorEntry
from inspector.adapters.roles import stored_role
from inspector.formulas.core import Part, Prediction, block_of, expected, tied_to

TYPE_CHECKING = False
if TYPE_CHECKING:
    from inspector.formulas.check_result import CheckResult

QUANTIZED_BLOCK = "quantized"


@dataclass
class Plan:
    """The prediction as stored by the quantizer, and what :func:`review` checks after the
    comparison (dtypes, length ranges)."""

    prediction: Prediction
    label: str
    parts: list[Part] = field(default_factory=list)
    dtypes: dict[str, str] = field(default_factory=dict)
    lengths: dict[str, tuple[int, int]] = field(default_factory=dict)
    layers: int = 0


def _weights(pred: Prediction, blocks: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """(module, in_features, out_features) of every predicted linear weight (Conv1D's weight
    is (in, out), nn.Linear's (out, in))."""
    out = []
    for t in pred.tensors:
        if t.name.endswith(".weight") and len(t.shape) == 2 and block_of(t) in blocks:
            o, i = t.shape if block_of(t) != "conv1d" else t.shape[::-1]
            out.append((t.name[: -len(".weight")], i, o))
    return out


def _default_skips(pred: Prediction) -> set[str]:
    """transformers' ``get_keys_to_not_convert``: tied weights (both sides), the module of the
    last parameter and the output embeddings (``lm_head``)."""
    skips = {n.rsplit(".", 1)[0] for t in pred.tensors if (n := tied_to(t))}
    skips |= {t.name.rsplit(".", 1)[0] for t in pred.tensors if tied_to(t)}
    params = [t for t in pred.tensors if t.role == "parameter"]
    if params:
        skips.add(params[-1].name.rsplit(".", 1)[0])
    skips |= {t.name.rsplit(".", 1)[0] for t in pred.tensors if t.name.startswith("lm_head.")}
    return skips


def plan(pred: Prediction, ckpt: Checkpoint) -> Plan | None:
    """``pred`` as the checkpoint's quantizer stores it; None when its config.json has no
    ``quantization_config``."""
    from inspector.formulas.hf import sidecar_config

    cfg = sidecar_config(ckpt)
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return None
    sch = quantized.scheme(q, cfg)
    layers = _weights(pred, sch.blocks)
    try:  # a hostile or malformed option fails here, never later
        layouts = {m: sch.layout(m, i, o) for m, i, o in layers} if sch.unknown is None else {}
    except quantized.OPTION_ERRORS as e:
        sch.unknown = f"{sch.method} options not understood ({e})"
    if sch.unknown is not None:
        modules = "|".join(re.escape(m) for m, _, _ in layers)
        layers_part = Part(f"quantization ({sch.unknown})",
                           f"{sch.unknown} is not modelled: the linear layers' stored tensors "
                           "are not checked", rf"^(?:{modules})\." if modules else None)
        # such a quantizer may convert other modules too (embeddings, norms): what differs
        # elsewhere is not modelled either; tensors stored as predicted are still checked
        rest = Part(f"other tensors ({sch.unknown})", "a quantizer that is not modelled may "
                    "convert other modules too", ".")
        return Plan(pred, sch.label, [layers_part, rest])
    skips = _default_skips(pred) if sch.method == "bitsandbytes" and \
        q.get("llm_int8_skip_modules") is None else set()
    replaced: dict[str, list[TensorEntry]] = {}
    result = Plan(pred, sch.label)
    for module, _, _ in layers:
        if module in skips:
            continue
        stored = layouts[module]
        if stored is None:
            continue
        entries = []
        for s in stored:
            name = f"{module}.{s.suffix}"
            role = stored_role(name, len(s.shape), s.dtype) if s.dtype else Role.PARAMETER
            entries.append(expected(name, s.shape, str(role.value), QUANTIZED_BLOCK))
            if s.dtype:
                result.dtypes[name] = s.dtype
            if s.length:
                result.lengths[name] = s.length
        replaced[f"{module}.weight"] = entries
        result.layers += 1
    tensors: list[TensorEntry] = []
    for t in pred.tensors:
        tensors += replaced.get(t.name, [t])
    notes = [*pred.notes, f"quantized by {sch.label}: {result.layers} linear layers "
             f"predicted as the quantizer stores them (the unquantized model: "
             f"{pred.total():,} parameters; the totals above count stored elements)", *sch.notes]
    result.prediction = Prediction(pred.arch, pred.hparams, tensors, notes, list(pred.parts))
    return result


def review(result: CheckResult, ckpt: Checkpoint, p: Plan) -> None:
    """After the comparison: a JSON state tensor whose length lies in its range is as predicted;
    a quantized tensor of another dtype than the quantizer writes is a ``dtype`` finding."""
    from inspector.formulas.check_result import Finding

    stored = {t.name: t for t in ckpt.tensors}
    kept = []
    for i in result.issues:
        rng = p.lengths.get(i.name)
        if rng and i.status == "wrong_shape" and i.found and len(i.found) == 1 \
                and rng[0] <= i.found[0] <= rng[1]:
            continue
        kept.append(i)
    dropped = len(result.issues) - len(kept)
    if dropped:
        result.issues = kept
        result.groups = [g if g.issues == 0 else type(g)(
            g.name, g.found, g.predicted, sum(1 for i in kept if i.group == g.name and i.mismatch),
            g.not_modelled) for g in result.groups]
    for name, dtype in p.dtypes.items():
        t = stored.get(name)
        if t is not None and t.dtype != dtype:
            result.findings.append(Finding(
                "dtype", name, f"{name} is {t.dtype}; {p.label} stores {dtype}"))
