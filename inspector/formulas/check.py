"""Compare a :class:`Prediction` with a :class:`Checkpoint`: typed records, no printing.

Tensors are aligned by name through the shared engine (:mod:`inspector.compare`, also behind
``diff``), never by position: each predicted tensor is found with the same shape, found with
another shape (``wrong_shape``), or ``missing``; each stored parameter or buffer nobody predicted
is ``unexpected`` (optimizer state and other roles are not part of a model and are left out).
Group counts come from both sides through the same grouping scheme, tied tensors counted once.

Three verdicts, never conflated (:attr:`CheckResult.verdict`):

- ``verified``: every stored tensor was predicted with its exact shape, every predicted tensor
  was found (and the structural checks of training state found nothing);
- ``mismatch``: a wrong shape, or a missing / unexpected tensor of a part the architecture
  models, or a structural inconsistency;
- ``incomplete``: parts were not modelled (an option the architecture does not know, an unknown
  layer, tensors whose names it does not model; :class:`~inspector.formulas.core.Part`). Their
  tensors are ``not_modelled``, everything else is still checked. A checkpoint no architecture
  applies to gets the structural audit alone, ``incomplete (structure consistent)`` at best.

:func:`resolve_hparams` gathers an architecture's hyperparameters from a checkpoint with their
provenance: ``--set`` beats the checkpoint's own config, which beats what the shapes determine
(``inferred``), which beats the architecture's ``default``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, Role
from inspector.formulas.check_result import (  # the records, importable from here
    INCOMPLETE,
    MISMATCH,
    NOT_MODELLED,
    SCHEMA,
    STATUS,
    UNRECOGNISED,
    VERIFIED,
    CheckResult,
    Finding,
    GroupResult,
    PartResult,
    TensorIssue,
)
from inspector.formulas.core import Arch, Part, Prediction, archs, counted, reading, tied_to

COMPARED_ROLES = (Role.PARAMETER, Role.BUFFER)
SOURCES = ("set", "checkpoint", "inferred", "default")
__all__ = ["COMPARED_ROLES", "INCOMPLETE", "MISMATCH", "NOT_MODELLED", "SCHEMA", "SOURCES",
           "STATUS", "UNRECOGNISED", "VERIFIED", "CheckResult", "Finding", "GroupResult",
           "PartResult", "TensorIssue", "check", "compare", "detect_arch", "find_arch",
           "resolve_hparams", "shard_part"]


def find_arch(ckpt: Checkpoint) -> Arch | None:
    """The first registered architecture whose ``applies`` accepts the checkpoint, else None."""
    for arch in archs():
        if arch.applies is not None and arch.applies(ckpt):
            return arch
    return None


def detect_arch(ckpt: Checkpoint) -> Arch:
    """:func:`find_arch`, raising UsageError when no architecture applies."""
    arch = find_arch(ckpt)
    if arch is None:
        raise UsageError(
            "no architecture recognised for this checkpoint; pass --arch "
            "(`inspector archs` lists them)",
            ckpt.path,
        )
    return arch


def resolve_hparams(
    arch: Arch, ckpt: Checkpoint | None, overrides: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(values, provenance, notes): every hyperparameter of ``arch`` with where it came from.
    Names may be the architecture's aliases (its producer's config keys, command-line names)."""
    known = {h.name for h in arch.hparams}
    overrides = arch.canonical(overrides)
    layers: dict[str, dict[str, Any]] = {"set": dict(overrides)}
    notes: list[str] = []
    if ckpt is not None:
        for source, fn in (("checkpoint", arch.from_checkpoint), ("inferred", arch.infer)):
            got = arch.canonical(fn(ckpt)) if fn is not None else {}
            ignored = sorted(set(got) - known)
            if ignored:
                notes.append(f"{source} values ignored (not hyperparameters of {arch.name}): "
                             + ", ".join(ignored))
            layers[source] = {k: v for k, v in got.items() if k in known and v is not None}
    values: dict[str, Any] = {}
    provenance: dict[str, str] = {}
    for h in arch.hparams:
        for source in SOURCES[:-1]:
            if h.name in layers.get(source, {}):
                values[h.name] = layers[source][h.name]
                provenance[h.name] = source
                break
        else:
            provenance[h.name] = "default"
    unknown = sorted(set(overrides) - known)
    if unknown:
        arch.resolve(overrides)  # raises the UsageError naming them
    return arch.resolve(values), provenance, notes


SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.[A-Za-z]+$")


def shard_part(path: str) -> Part | None:
    """A file that is one shard of a set (``model-00002-of-00003.safetensors``) lacks what the
    other shards store: its missing tensors are not mismatches."""
    m = SHARD.search(path)
    if not m or m[2] == "00001" and m[1] == "00001":
        return None
    return Part(f"shard {int(m[1])} of {int(m[2])}",
                "the other shards store the rest; check the index file or the directory",
                ".", ops=("removed",))


def _part_of(name: str, op: str, parts: Sequence[Part],
             modelled: Sequence[str] = ()) -> Part | None:
    """The part that covers ``name``: a declared one, else (when the architecture lists the
    names it models and this is none of them) the unrecognised tensors."""
    for p in parts:
        if p.covers(name, op):
            return p
    if modelled and not any(re.search(rx, name) for rx in modelled):
        return Part(UNRECOGNISED, "stored tensors whose names this architecture does not model")
    return None


def compare(pred: Prediction, ckpt: Checkpoint, scheme_name: str | None = None,
            provenance: Mapping[str, str] | None = None, parts: Sequence[Part] = (),
            modelled: Sequence[str] = ()) -> CheckResult:
    """Align ``pred`` with the checkpoint's parameters and buffers through the shared engine
    (:mod:`inspector.compare`); group both the same way. Tensors a part covers (``parts``,
    ``pred.parts``, names outside ``modelled``) are ``not_modelled``, not mismatches."""
    from inspector import compare as engine

    parts = [*parts, *pred.parts]
    scheme = engine.choose_scheme(scheme_name, [t.name for t in ckpt.tensors], ckpt.format)
    stored = [t for t in ckpt.tensors if t.role in COMPARED_ROLES]
    # One stored name of a tie group is enough: save_pretrained and safetensors' save_model
    # write a tied pair once.
    alias_of = {t.name: tied_to(t) for t in pred.tensors if tied_to(t)}
    issues = _issues(pred, stored, scheme, alias_of, parts, modelled)
    # A format without roles (safetensors) stores every tensor as a parameter: one the
    # architecture predicts as a buffer (BART's final_logits_bias) is counted as a buffer.
    buffers = {t.name for t in pred.tensors if t.role == "buffer"}
    unique = [t for t in ckpt.unique(stored)
              if t.role is Role.PARAMETER and t.name not in buffers]
    return CheckResult(
        arch=pred.arch,
        path=ckpt.path,
        format=ckpt.format,
        scheme=scheme.name,
        hparams=dict(pred.hparams),
        provenance=dict(provenance or {}),
        groups=_groups(pred, scheme, unique, {t.name for t in stored}, alias_of, issues),
        issues=issues,
        found_total=sum(t.numel for t in unique),
        predicted_total=pred.total(),
        notes=list(pred.notes),
        parts=_part_results(parts, issues, stored, ckpt),
    )


def _issues(pred: Prediction, stored: Sequence[Any], scheme: Any, alias_of: Mapping[str, str],
            parts: Sequence[Part], modelled: Sequence[str]) -> list[TensorIssue]:
    """Every aligned difference as a :class:`TensorIssue`: a mismatch, or ``not_modelled``
    when a part covers it; a predicted tensor tied to one that is stored is not missing."""
    from inspector import compare as engine

    found = {t.name for t in stored}
    ties: dict[str, set[str]] = {}
    for alias, target in alias_of.items():
        ties.setdefault(target, {target}).add(alias)
        ties[alias] = ties[target]
    issues: list[TensorIssue] = []
    for op in engine.align(pred.tensors, stored):
        if op.op in (engine.UNCHANGED, engine.RETYPED):
            continue
        name = op.name
        if op.op == engine.REMOVED and any(n in found for n in ties.get(name, ())):
            continue
        part = _part_of(name, op.op, parts, modelled if op.op == engine.ADDED else ())
        expected = None if op.a is None else tuple(op.a.shape)
        got = None if op.b is None else tuple(op.b.shape)
        group = scheme.assign(name).group
        if part is None:
            issues.append(TensorIssue(name, engine.CHECK_WORDS[op.op], group, expected, got,
                                      op.op))
        else:
            issues.append(TensorIssue(name, NOT_MODELLED, group, expected, got, op.op,
                                      part.name))
    return issues


def _groups(pred: Prediction, scheme: Any, unique: Sequence[Any], found: set[str],
            alias_of: Mapping[str, str], issues: Sequence[TensorIssue]) -> list[GroupResult]:
    """Per group: the stored and predicted counts (ties once) and its issues; the prediction's
    groups first, then the checkpoint's, then those only issues name."""
    from inspector.grouping import group_counts

    # a stored alias whose target is absent counts where the target is predicted
    found_groups = group_counts(scheme, [
        (alias_of[t.name] if alias_of.get(t.name, t.name) not in found else t.name, t.numel)
        for t in unique
    ])
    pred_groups = group_counts(scheme, [(t.name, t.numel) for t in counted(pred.tensors)])
    per_group: Counter[str] = Counter(i.group for i in issues if i.mismatch)
    not_modelled: Counter[str] = Counter(i.group for i in issues if not i.mismatch)
    group_names = list(pred_groups) + [g for g in found_groups if g not in pred_groups]
    group_names += [g for g in (*per_group, *not_modelled) if g not in group_names]
    return [GroupResult(g, found_groups.get(g, 0), pred_groups.get(g, 0), per_group[g],
                        not_modelled[g])
            for g in dict.fromkeys(group_names)]


def _part_results(parts: Sequence[Part], issues: Sequence[TensorIssue],
                  stored: Sequence[Any], ckpt: Checkpoint) -> list[PartResult]:
    """Each part with its not-modelled tensors (stored or predicted) and the stored elements
    they hold (tied tensors once); declared parts are listed even when they cover nothing."""
    unique = {t.name for t in ckpt.unique(stored)}
    numel = {t.name: t.numel for t in stored if t.name in unique}
    tensors: Counter[str] = Counter()
    elements: Counter[str] = Counter()
    reasons = {p.name: p.reason for p in parts}
    for i in issues:
        if i.part is None:
            continue
        if i.part == UNRECOGNISED:
            reasons.setdefault(UNRECOGNISED, "stored tensors whose names this architecture "
                                             "does not model")
        tensors[i.part] += 1
        elements[i.part] += numel.get(i.name, 0) if i.found is not None else 0
    return [PartResult(n, r, tensors[n], elements[n]) for n, r in reasons.items()]


def _refuse_guesses(ckpt: Checkpoint, used: Iterable[str], provenance: Mapping[str, str]) -> None:
    """A checkpoint whose adapter says its model config is missing (``metadata
    ["config_missing"]``: a DeepSpeed directory without ``config.json``) is not predicted from
    defaults: a default the prediction reads is a guess, and a guess is no mismatch."""
    missing = ckpt.metadata.get("config_missing")
    guessed = sorted(h for h in used if provenance.get(h) == "default") if missing else []
    if guessed:
        raise UsageError(f"{', '.join(guessed)} not recorded: {missing} is missing")


def check(ckpt: Checkpoint, arch: Arch | None = None, overrides: Mapping[str, Any] | None = None,
          scheme_name: str | None = None) -> CheckResult:
    """The audit ``inspector check`` prints: architecture (detected unless given),
    hyperparameters with provenance, prediction, comparison, and the structural checks
    (optimizer state, ties, dtypes). With no architecture given and none recognised, the
    structural audit alone (:mod:`inspector.formulas.structure`)."""
    from inspector.formulas import hf_quant, structure

    given = arch is not None
    arch = arch or find_arch(ckpt)
    if arch is None:
        if overrides:
            raise UsageError("--set needs an architecture: none recognised for this "
                             "checkpoint; pass --arch (`inspector archs` lists them)", ckpt.path)
        return structure.audit(ckpt, scheme_name)
    try:
        values, provenance, notes = resolve_hparams(arch, ckpt, overrides or {})
        pred, used = reading(arch.predict, values)
        _refuse_guesses(ckpt, used, provenance)
    except UsageError as e:
        if given or overrides:
            raise
        # Recognised, but the file alone does not say enough (a Keras weights file without
        # its model config): the structure is still audited, and the note says what is missing.
        audit = structure.audit(ckpt, scheme_name)
        audit.notes.insert(0, f"looks like {arch.name}, but cannot predict it from this file "
                              f"alone: {e.message}")
        return audit
    parts = arch.unmodelled(ckpt) if arch.unmodelled is not None else []
    shard = shard_part(ckpt.path) if len(ckpt.paths) == 1 else None  # a set opened whole: no
    parts += [shard] if shard else []
    quant = hf_quant.plan(pred, ckpt)  # config.json's quantization_config: what is stored
    if quant is not None:
        pred, parts = quant.prediction, parts + quant.parts
    result = compare(pred, ckpt, scheme_name or arch.scheme, provenance, parts, arch.modelled)
    result.findings, state_notes, result.checked = structure.training_state(ckpt)
    result.notes = notes + result.notes + state_notes
    if quant is not None:
        hf_quant.review(result, ckpt, quant)
    result.used = frozenset(used)
    if not any(source == "checkpoint" for source in provenance.values()):
        result.assumed = _blamed_defaults(arch, values, provenance, used, pred, result)
        if result.assumed:
            result.notes.insert(0, (
                "the checkpoint stores no configuration, and the tensors that disagree depend "
                f"on the defaults {arch.name} assumes for " + ", ".join(result.assumed)
                + ": not a mismatch (give them with --set, or keep the configuration beside "
                "the weights)"))
    return result


def _blamed_defaults(arch: Arch, values: Mapping[str, Any], provenance: Mapping[str, str],
                     used: set[str], pred: Prediction, result: CheckResult) -> tuple[str, ...]:
    """With no configuration stored, the defaults the prediction read are guesses, not the
    model's values. When every tensor that disagrees depends on one of them (its shape or its
    presence changes when that default changes), the disagreement says nothing about the file:
    those defaults. Else (some disagreement holds whatever the defaults) nothing."""
    guessed = [k for k in sorted(used) if provenance.get(k) == "default"
               and values.get(k) is not None]  # a None default is derived from the others
    wrong = {i.name for i in result.issues if i.mismatch}
    if not guessed or result.findings or not wrong and not any(
            g.status == "mismatch" for g in result.groups):
        return ()
    base = pred.shapes()
    depends: set[str] = set()
    blamed: list[str] = []
    for k in guessed:
        changed: set[str] | None = set()
        for other in _nearby(values[k]):
            try:
                shapes = arch.predict(arch.resolve({**values, k: other})).shapes()
            except (UsageError, KeyError, ValueError, TypeError, ZeroDivisionError):
                changed = None  # the default cannot change alone: anything may depend on it
                break
            changed |= {n for n in base.keys() | shapes.keys() if base.get(n) != shapes.get(n)}
        if changed is None or changed & wrong:
            blamed.append(k)
            depends |= wrong if changed is None else changed
    return tuple(blamed) if wrong <= depends else ()


def _nearby(value: Any) -> list[Any]:
    """Other values a hyperparameter could have, to see what depends on it."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value * 2, value + 1]
    if isinstance(value, float):
        return [value * 2]
    return []
