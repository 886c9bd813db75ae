"""Compare a :class:`Prediction` with a :class:`Checkpoint`: typed records, no printing.

Tensors are aligned by canonical name (never by position): each predicted tensor is found with
the same shape, found with another shape (``wrong_shape``), or ``missing``; each stored parameter
or buffer nobody predicted is ``unexpected`` (optimizer state and other roles are not part of a
model and are left out). Group counts come from both sides through the same grouping scheme, tied
tensors counted once; a group fails when its counts differ or any of its tensors is off.

:func:`resolve_hparams` gathers an architecture's hyperparameters from a checkpoint with their
provenance: ``--set`` beats the checkpoint's own config, which beats what the shapes determine
(``inferred``), which beats the architecture's ``default``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, Role
from inspector.formulas.core import Arch, Prediction, archs

SCHEMA = "inspector.check/1"
COMPARED_ROLES = (Role.PARAMETER, Role.BUFFER)
SOURCES = ("set", "checkpoint", "inferred", "default")


@dataclass(frozen=True)
class TensorIssue:
    """One tensor that is not as predicted."""

    name: str
    status: str  # "missing" | "unexpected" | "wrong_shape"
    group: str
    expected: tuple[int, ...] | None
    found: tuple[int, ...] | None


@dataclass(frozen=True)
class GroupResult:
    """Found vs predicted elements of one group (tied tensors once)."""

    name: str
    found: int
    predicted: int
    issues: int  # tensors of this group that are missing, unexpected or of the wrong shape

    @property
    def delta(self) -> int:
        return self.found - self.predicted

    @property
    def status(self) -> str:
        return "ok" if self.delta == 0 and self.issues == 0 else "mismatch"


@dataclass
class CheckResult:
    """The whole audit of one checkpoint against one architecture."""

    arch: str
    path: str
    format: str
    scheme: str
    hparams: dict[str, Any]
    provenance: dict[str, str]
    groups: list[GroupResult]
    issues: list[TensorIssue]
    found_total: int
    predicted_total: int
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.issues and all(g.status == "ok" for g in self.groups) \
            and self.found_total == self.predicted_total

    def inferred(self) -> list[str]:
        return [k for k, v in self.provenance.items() if v == "inferred"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report (schema ``inspector.check/1``)."""
        return {
            "schema": SCHEMA,
            "arch": self.arch,
            "path": self.path,
            "format": self.format,
            "scheme": self.scheme,
            "status": "ok" if self.ok else "mismatch",
            "hyperparameters": {
                k: {"value": v, "source": self.provenance.get(k, "default")}
                for k, v in self.hparams.items()
            },
            "inferred": self.inferred(),
            "groups": [
                {**asdict(g), "delta": g.delta, "status": g.status} for g in self.groups
            ],
            "tensors": [
                {**asdict(i), "expected": _list(i.expected), "found": _list(i.found)}
                for i in self.issues
            ],
            "totals": {
                "found": self.found_total,
                "predicted": self.predicted_total,
                "delta": self.found_total - self.predicted_total,
            },
            "notes": self.notes,
        }


def _list(shape: tuple[int, ...] | None) -> list[int] | None:
    return None if shape is None else list(shape)


def detect_arch(ckpt: Checkpoint) -> Arch:
    """The first registered architecture whose ``applies`` accepts the checkpoint."""
    for arch in archs():
        if arch.applies is not None and arch.applies(ckpt):
            return arch
    raise UsageError(
        "no architecture recognised for this checkpoint; pass --arch "
        "(`inspector archs` lists them)",
        ckpt.path,
    )


def resolve_hparams(
    arch: Arch, ckpt: Checkpoint | None, overrides: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(values, provenance, notes): every hyperparameter of ``arch`` with where it came from."""
    known = {h.name for h in arch.hparams}
    layers: dict[str, dict[str, Any]] = {"set": dict(overrides)}
    notes: list[str] = []
    if ckpt is not None:
        for source, fn in (("checkpoint", arch.from_checkpoint), ("inferred", arch.infer)):
            got = fn(ckpt) if fn is not None else {}
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


def _scheme(name: str | None, ckpt: Checkpoint):
    from inspector.grouping import choose_scheme, get_scheme

    if name:
        return get_scheme(name)
    return choose_scheme([t.name for t in ckpt.tensors], ckpt.format)


def compare(pred: Prediction, ckpt: Checkpoint, scheme_name: str | None = None,
            provenance: Mapping[str, str] | None = None) -> CheckResult:
    """Align ``pred`` with the checkpoint's parameters and buffers; group both the same way."""
    from inspector.grouping import group_counts

    scheme = _scheme(scheme_name, ckpt)
    stored = [t for t in ckpt.tensors if t.role in COMPARED_ROLES]
    found = {t.name: t.shape for t in stored}
    expected = pred.shapes()
    # One stored name of a tie group is enough: save_pretrained and safetensors' save_model
    # write a tied pair once.
    alias_of = {t.name: t.tied_to for t in pred.tensors if t.tied_to}
    ties: dict[str, set[str]] = {}
    for alias, target in alias_of.items():
        ties.setdefault(target, {target}).add(alias)
        ties[alias] = ties[target]
    issues: list[TensorIssue] = []
    for name, shape in expected.items():
        if name not in found and any(n in found for n in ties.get(name, ())):
            continue
        if name not in found:
            issues.append(TensorIssue(name, "missing", scheme.assign(name).group, shape, None))
        elif found[name] != shape:
            issues.append(TensorIssue(name, "wrong_shape", scheme.assign(name).group, shape,
                                      found[name]))
    for name, shape in found.items():
        if name not in expected:
            issues.append(TensorIssue(name, "unexpected", scheme.assign(name).group, None, shape))

    # A format without roles (safetensors) stores every tensor as a parameter: one the
    # architecture predicts as a buffer (BART's final_logits_bias) is counted as a buffer.
    buffers = {t.name for t in pred.tensors if t.role == "buffer"}
    unique = [t for t in ckpt.unique(stored)
              if t.role is Role.PARAMETER and t.name not in buffers]
    # a stored alias whose target is absent counts where the target is predicted
    found_groups = group_counts(scheme, [
        (alias_of[t.name] if alias_of.get(t.name, t.name) not in found else t.name, t.numel)
        for t in unique
    ])
    counted = [t for t in pred.tensors if t.tied_to is None and t.role == "parameter"]
    pred_groups = group_counts(scheme, [(t.name, t.numel) for t in counted])
    per_group: dict[str, int] = {}
    for i in issues:
        per_group[i.group] = per_group.get(i.group, 0) + 1
    names = list(pred_groups) + [g for g in found_groups if g not in pred_groups]
    names += [g for g in per_group if g not in names]
    groups = [GroupResult(g, found_groups.get(g, 0), pred_groups.get(g, 0), per_group.get(g, 0))
              for g in names]
    return CheckResult(
        arch=pred.arch,
        path=ckpt.path,
        format=ckpt.format,
        scheme=scheme.name,
        hparams=dict(pred.hparams),
        provenance=dict(provenance or {}),
        groups=groups,
        issues=issues,
        found_total=sum(t.numel for t in unique),
        predicted_total=pred.total(),
        notes=list(pred.notes),
    )


def check(ckpt: Checkpoint, arch: Arch | None = None, overrides: Mapping[str, Any] | None = None,
          scheme_name: str | None = None) -> CheckResult:
    """The audit ``inspector check`` prints: architecture (detected unless given),
    hyperparameters with provenance, prediction, comparison."""
    arch = arch or detect_arch(ckpt)
    values, provenance, notes = resolve_hparams(arch, ckpt, overrides or {})
    result = compare(arch.predict(values), ckpt, scheme_name or arch.scheme, provenance)
    result.notes = notes + result.notes
    return result
