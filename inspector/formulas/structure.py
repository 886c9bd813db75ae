"""The structural audit: what a checkpoint's own tensors say about each other, no formula needed.

``check`` runs it alone when no architecture applies (verdict ``incomplete`` when the structure
is consistent, ``mismatch`` otherwise) and runs its training-state part after every formula
check. Each rule flags only what cannot be valid, so a consistent file is never called wrong:

- **repeated blocks**: tensors that differ only in one block index (``layers.7.mlp.weight``) form
  a family; with at least :data:`MIN_BLOCKS` blocks, one interior block whose shape (or floating
  dtype) differs from all the others, which agree, is a mismatch. The first and last blocks may
  differ (a stack's first layer reads the input width, the last may project out), so they are
  never flagged; neither are families whose blocks vary more than that (per-layer widths);
- **optimizer state**: each moment (``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``, Keras
  ``m``/``v``/``momentum``/``velocity`` ...) has its parameter's shape. Keras names the parameter;
  torch numbers it (``state.N``) in the optimizer's parameter order: moments of one ``N`` must
  agree, and every ``N``'s shape must be a parameter's (in model order when the counts agree and
  the orders coincide, else as a multiset). Factored or flattened state (Adafactor, ZeRO) has no
  parameter shapes at all and is left unchecked, with a note;
- **ties**: embedding / output-layer pairs the checkpoint's config declares tied
  (``tie_word_embeddings``, ``tie_weights``, ``weight_tying``) or stores in one storage have one
  shape;
- **dtypes**: the floating dtype mix of the parameters is reported; within a family of repeated
  blocks one odd interior dtype is a mismatch (the repeated-blocks rule).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from inspector.adapters.model import Checkpoint, Role, TensorEntry

MIN_BLOCKS = 4
# A block index: a number that is a whole dotted/underscored name component.
_INDEX = re.compile(r"(?:(?<=[._])|^)(\d+)(?=[._])")
TORCH_SLOT = re.compile(r"^(?P<opt>.*?)state\.(?P<n>\d+)\.(?P<key>\w+)$")
# torch.optim state entries with the parameter's shape (Adafactor's row/col are factored).
TORCH_MOMENTS = frozenset({"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer",
                           "square_avg", "acc_delta", "sum", "grad_avg", "exp_inf", "prev",
                           "step_size", "ax"})
# Keras 2.11+/3 optimizer variables with the parameter's shape.
KERAS_MOMENTS = ("m", "v", "vhat", "u", "momentum", "momentums", "velocity", "velocities",
                 "velocity_hat", "velocity_hats", "accumulator", "accumulators",
                 "average_gradient", "average_square_gradient", "accumulated_grad",
                 "accumulated_delta_var", "linear")
TIE_FLAGS = ("tie_word_embeddings", "tie_weights", "weight_tying", "tie_embeddings")
EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight",
              "word_to_embedding.weight", "shared.weight", "encoder.weight",
              "target_embed_weight", "embedding.weight", "tok_embeddings.weight")
OUTPUTS = ("lm_head.weight", "decoder.weight", "target_output_weight", "output.weight")


def audit(ckpt: Checkpoint, scheme_name: str | None = None):
    """The structural audit of a checkpoint no architecture applies to, as a
    :class:`~inspector.formulas.check.CheckResult` (``audit="structure"``)."""
    from inspector import compare as engine
    from inspector.formulas.check_result import CheckResult

    scheme = engine.choose_scheme(scheme_name, [t.name for t in ckpt.tensors], ckpt.format)
    model = [t for t in ckpt.tensors if t.role in (Role.PARAMETER, Role.BUFFER)]
    blocks, families = repeated_blocks(model)
    state, notes, slots = optimizer_state(ckpt)
    ties, tie_pairs = tied_pairs(ckpt)
    unique = [t for t in ckpt.unique(model) if t.role is Role.PARAMETER]
    mix = Counter(t.dtype for t in unique if _floating(t.dtype))
    if len(mix) > 1:
        notes.append("parameters in several floating dtypes: "
                     + ", ".join(f"{d} x{n}" for d, n in mix.most_common()))
    return CheckResult(
        arch=None, path=ckpt.path, format=ckpt.format, scheme=scheme.name, hparams={},
        provenance={}, groups=[], issues=[], found_total=sum(t.numel for t in unique),
        predicted_total=0, notes=notes, findings=blocks + state + ties, audit="structure",
        checked={"tensors": len(ckpt.tensors), "block_families": families,
                 "optimizer_slots": slots, "tie_pairs": tie_pairs},
    )


def training_state(ckpt: Checkpoint) -> tuple[list, list[str], dict[str, int]]:
    """(findings, notes, what was looked at) that a formula check adds: optimizer state and
    ties (the model's own tensors are checked by the formula)."""
    state, notes, slots = optimizer_state(ckpt)
    ties, pairs = tied_pairs(ckpt)
    return state + ties, notes, {"optimizer_slots": slots, "tie_pairs": pairs}


def _floating(dtype: str) -> bool:
    d = dtype.lower()
    return "float" in d or d in ("bf16", "f16", "f32", "f64", "half", "double")


def _finding(kind: str, name: str, message: str, expected: Any = None, found: Any = None):
    from inspector.formulas.check_result import Finding

    return Finding(kind, name, message, None if expected is None else tuple(expected),
                   None if found is None else tuple(found))


def repeated_blocks(entries: Sequence[TensorEntry]) -> tuple[list, int]:
    """(findings, families looked at): one odd interior block per family, by shape or dtype."""
    families: dict[str, dict[str, TensorEntry]] = {}
    for t in entries:
        for m in _INDEX.finditer(t.name):
            pattern = t.name[: m.start()] + "#" + t.name[m.end():]
            families.setdefault(pattern, {})[m.group(1)] = t
    out, flagged, looked = [], set(), 0
    for pattern, members in families.items():
        if len(members) < MIN_BLOCKS:
            continue
        looked += 1
        order = sorted(members, key=int)
        for what, value in (("shape", lambda t: t.shape),
                            ("dtype", lambda t: t.dtype if _floating(t.dtype) else None)):
            values = Counter(value(members[i]) for i in order)
            if len(values) != 2:
                continue
            (common, n), (odd, _) = values.most_common()
            if n != len(order) - 1:
                continue
            i = next(i for i in order if value(members[i]) == odd)
            t = members[i]
            if i in (order[0], order[-1]) or t.name in flagged:
                continue
            flagged.add(t.name)
            others = [j for j in order if j != i]
            out.append(_finding(
                "repeated_block", t.name,
                f"block {i} of {pattern} has {what} {_text(odd)}; blocks "
                f"{_ranges(others)} have {_text(common)}",
                common if what == "shape" else None, odd if what == "shape" else None))
    return out, looked


def _text(v: Any) -> str:
    return "(" + ", ".join(map(str, v)) + ")" if isinstance(v, tuple) else str(v)


def _ranges(ids: Iterable[str]) -> str:
    """``0-6, 8-11`` from sorted block numbers."""
    nums = [int(i) for i in ids]
    out, start = [], None
    for k, n in enumerate(nums):
        if start is None:
            start = n
        if k + 1 == len(nums) or nums[k + 1] != n + 1:
            out.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(out)


def optimizer_state(ckpt: Checkpoint) -> tuple[list, list[str], int]:
    """(findings, notes, optimizer slots looked at)."""
    params = [t for t in ckpt.unique() if t.role is Role.PARAMETER]
    opt = [t for t in ckpt.tensors if t.role is Role.OPTIMIZER]
    if not params or not opt:
        return [], [], 0
    findings, notes, looked = _keras_state(opt, params)
    # tensors stored beside the model in a container not known as a model part: optimizer state
    # may belong to them (a module saved apart), so a moment of their shape is never flagged
    apart = [t for t in ckpt.tensors if t.role is Role.OTHER]
    f2, n2, l2 = _torch_state(opt, params, apart)
    return findings + f2, notes + n2, looked + l2


def _keras_state(opt: Sequence[TensorEntry], params: Sequence[TensorEntry]):
    by_name = {p.name: p for p in params}
    flat = {p.name.replace("/", "_"): p for p in params}
    findings, looked = [], 0
    for t in opt:
        name = t.name.removesuffix(":0")
        head, _, rest = name.partition("/")
        if "adafactor" in head.lower():
            continue
        p = None
        slot, _, pname = rest.partition("/")  # Keras 2.11+: Adam/m/<parameter>
        if slot in KERAS_MOMENTS and pname in by_name:
            p = by_name[pname]
        else:  # Keras 3: adam/<parameter with / as _>_<moment>
            for moment in KERAS_MOMENTS:
                if rest.endswith("_" + moment) and rest[: -len(moment) - 1] in flat:
                    p = flat[rest[: -len(moment) - 1]]
                    break
        if p is None:  # tf.keras 1.15 / 2.1: [training/]Adam/<parameter>/m
            for tail in (rest, rest.partition("/")[2]):
                pname, _, moment = tail.rpartition("/")
                if moment in KERAS_MOMENTS and pname in by_name:
                    p = by_name[pname]
                    break
        if p is None:
            continue
        looked += 1
        if t.shape != p.shape:
            findings.append(_moment_finding(t, p))
    return findings, [], looked


def _torch_state(opt: Sequence[TensorEntry], params: Sequence[TensorEntry],
                 apart: Sequence[TensorEntry] = ()):
    slots: dict[tuple[str, str], dict[str, TensorEntry]] = {}
    for t in opt:
        m = TORCH_SLOT.match(t.name)
        if m and m["key"] in TORCH_MOMENTS:
            slots.setdefault((m["opt"], m["n"]), {})[m["key"]] = t
    if not slots:
        return [], [], 0
    param_shapes = Counter(p.shape for p in params)
    if not any(t.shape in param_shapes for moments in slots.values() for t in moments.values()):
        return [], ["optimizer state not checked: no moment has a parameter's shape "
                    "(factored or flattened state)"], len(slots)
    keys = list(slots)
    single = len({o for o, _ in keys}) == 1
    if single and all(n.isdigit() and len(n) < 12 for _, n in keys):
        keys.sort(key=lambda k: int(k[1]))  # torch numbers parameters in optimizer order
    # In parameter order when the counts agree and every slot but at most one has a moment of
    # its in-order parameter's shape (several param groups reorder them: then as a multiset).
    if single and len(keys) == len(params) and len(keys) >= 3:
        misses = sum(all(t.shape != p.shape for t in slots[k].values())
                     for k, p in zip(keys, params, strict=True))
        if misses <= 1:
            return [_moment_finding(t, p) for k, p in zip(keys, params, strict=True)
                    for t in slots[k].values() if t.shape != p.shape], [], len(slots)
    findings, notes, left = [], [], Counter(param_shapes)
    outside = Counter(t.shape for t in apart)
    for k in keys:
        moments = slots[k]
        shapes = Counter(t.shape for t in moments.values())
        if len(shapes) > 1:
            findings.append(_finding(
                "optimizer_state", f"{k[0]}state.{k[1]}",
                f"the moments of optimizer state {k[0]}state.{k[1]} disagree: "
                + ", ".join(f"{n} {_text(t.shape)}" for n, t in moments.items())))
            continue
        shape = next(iter(shapes))
        if left[shape] > 0:
            left[shape] -= 1
            continue
        if outside[shape] > 0:
            outside[shape] -= 1
            notes.append(f"optimizer state {k[0]}state.{k[1]} {_text(shape)} has the shape of "
                         "a tensor stored outside the model, not of a model parameter: not "
                         "checked")
            continue
        findings.append(_finding(
            "optimizer_state", f"{k[0]}state.{k[1]}",
            f"optimizer state {k[0]}state.{k[1]} has shape {_text(shape)}, which no remaining "
            "parameter has", None, shape))
    return findings, notes, len(slots)


def _moment_finding(t: TensorEntry, p: TensorEntry):
    return _finding("optimizer_state", t.name,
                    f"{t.name} has shape {_text(t.shape)}; its parameter {p.name} has "
                    f"{_text(p.shape)}", p.shape, t.shape)


def _flags(tree: Any, depth: int = 0) -> bool:
    """True when a config anywhere in ``tree`` sets one of :data:`TIE_FLAGS` true."""
    if depth > 6:
        return False
    if isinstance(tree, Mapping):
        for k, v in tree.items():
            if str(k).split(".")[-1] in TIE_FLAGS and v is True:
                return True
            if _flags(v, depth + 1):
                return True
    return False


def tied_pairs(ckpt: Checkpoint) -> tuple[list, int]:
    """(findings, pairs looked at): embedding/output pairs that are tied have one shape."""
    params = [t for t in ckpt.tensors if t.role is Role.PARAMETER]
    declared = _flags(ckpt.hyperparameters)
    emb = [t for t in params if t.name.endswith(EMBEDDINGS)]
    outs = [t for t in params if t.name.endswith(OUTPUTS)]
    findings, looked = [], 0
    for o in outs:
        for e in emb:
            same_storage = o.storage is not None and (o.file, o.storage) == (e.file, e.storage)
            if not (declared or same_storage) or len(emb) != 1 or len(outs) != 1:
                continue
            looked += 1
            if o.shape != e.shape:
                why = "share one storage" if same_storage else "are tied by the config"
                findings.append(_finding(
                    "tie", o.name,
                    f"{o.name} {_text(o.shape)} and {e.name} {_text(e.shape)} {why} but "
                    "differ in shape", e.shape, o.shape))
    return findings, looked
