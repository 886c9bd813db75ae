"""The typed records of ``check`` (:class:`CheckResult` and its parts) and the verdict names:
what :mod:`.check` and the structural audit (:mod:`.structure`) return, and what the reports
render.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "inspector.check/1"


VERIFIED, MISMATCH, INCOMPLETE = "verified", "mismatch", "incomplete"
UNSAFE = "unsafe"  # the report's verdict for a dangerous pickle read with --allow-unsafe
NOT_MODELLED = "not_modelled"
# The JSON ``status`` of each verdict (``ok`` kept from before verdicts had names).
STATUS = {VERIFIED: "ok", MISMATCH: "mismatch", INCOMPLETE: "incomplete"}
UNRECOGNISED = "unrecognised tensors"


@dataclass(frozen=True)
class TensorIssue:
    """One tensor that is not as predicted, or that the architecture does not model.

    ``status`` is ``missing``, ``unexpected``, ``wrong_shape`` (mismatches) or ``not_modelled``
    (``part`` names the part); ``op`` is the comparison engine's word
    (:mod:`inspector.compare`: removed, added, reshaped)."""

    name: str
    status: str
    group: str
    expected: tuple[int, ...] | None
    found: tuple[int, ...] | None
    op: str = ""
    part: str | None = None

    @property
    def mismatch(self) -> bool:
        return self.status != NOT_MODELLED


@dataclass(frozen=True)
class PartResult:
    """A part the architecture does not model, with the stored tensors it covers."""

    name: str
    reason: str
    tensors: int
    elements: int


@dataclass(frozen=True)
class Finding:
    """A structural inconsistency (see :mod:`inspector.formulas.structure`): always a
    mismatch."""

    kind: str  # "repeated_block" | "optimizer_state" | "tie" | "dtype"
    name: str
    message: str
    expected: tuple[int, ...] | None = None
    found: tuple[int, ...] | None = None


@dataclass(frozen=True)
class GroupResult:
    """Found vs predicted elements of one group (tied tensors once)."""

    name: str
    found: int
    predicted: int
    issues: int  # tensors of this group that are missing, unexpected or of the wrong shape
    not_modelled: int = 0  # tensors of this group that the architecture does not model

    @property
    def delta(self) -> int:
        return self.found - self.predicted

    @property
    def status(self) -> str:
        if self.issues:
            return "mismatch"
        if self.not_modelled:
            return INCOMPLETE
        return "ok" if self.delta == 0 else "mismatch"


@dataclass
class CheckResult:
    """The whole audit of one checkpoint: against one architecture (``audit="formula"``) or,
    when none applies, of its structure alone (``audit="structure"``, ``arch`` None)."""

    arch: str | None
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
    parts: list[PartResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    audit: str = "formula"
    checked: dict[str, int] = field(default_factory=dict)  # structure: what was looked at
    used: frozenset[str] | None = None  # hyperparameters the prediction read (None: unknown)
    # with no configuration stored: the architecture's defaults the prediction read (guesses,
    # not the model's values), so a disagreement with them is not a mismatch
    assumed: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """``mismatch`` when anything contradicts the prediction or the structure;
        ``incomplete`` when parts were not modelled (or no architecture applied);
        ``verified`` when every stored tensor was predicted with its shape and every predicted
        tensor found."""
        if self.findings:
            return MISMATCH
        if any(i.mismatch for i in self.issues) \
                or any(g.status == "mismatch" for g in self.groups):
            return INCOMPLETE if self.assumed else MISMATCH
        if self.audit != "formula" or self.parts \
                or any(not i.mismatch for i in self.issues):
            return INCOMPLETE
        if self.found_total == self.predicted_total:
            return VERIFIED
        return INCOMPLETE if self.assumed else MISMATCH

    @property
    def ok(self) -> bool:
        """True only when verified."""
        return self.verdict == VERIFIED

    @property
    def not_modelled_elements(self) -> int:
        return sum(p.elements for p in self.parts)

    def inferred(self) -> list[str]:
        return [k for k, v in self.provenance.items() if v == "inferred"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report (schema ``inspector.check/1``)."""
        verdict = self.verdict
        return {
            "schema": SCHEMA,
            "arch": self.arch,
            "path": self.path,
            "format": self.format,
            "scheme": self.scheme,
            "status": STATUS[verdict],
            "verdict": verdict,
            "audit": self.audit,
            "hyperparameters": {
                k: {"value": v, "source": self.provenance.get(k, "default"),
                    "used": None if self.used is None else k in self.used}
                for k, v in self.hparams.items()
            },
            "inferred": self.inferred(),
            "groups": [
                {**asdict(g), "delta": g.delta, "status": g.status} for g in self.groups
            ],
            "tensors": [_issue(i) for i in self.issues],
            "parts": [asdict(p) for p in self.parts],
            "findings": [
                {**asdict(f), "expected": _list(f.expected), "found": _list(f.found)}
                for f in self.findings
            ],
            "checked": self.checked,
            "totals": {
                "found": self.found_total,
                "predicted": self.predicted_total,
                "delta": self.found_total - self.predicted_total,
                "not_modelled": self.not_modelled_elements,
            },
            "assumed": list(self.assumed),
            "notes": self.notes,
        }


def _issue(i: TensorIssue) -> dict[str, Any]:
    out = {"name": i.name, "status": i.status, "group": i.group, "expected": _list(i.expected),
           "found": _list(i.found), "op": i.op}
    if i.part is not None:
        out["part"] = i.part
    return out


def _list(shape: tuple[int, ...] | None) -> list[int] | None:
    return None if shape is None else list(shape)


def report_of(result: CheckResult, unsafe: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON-ready report of ``result`` (``inspector.check/1``). ``unsafe``: the dangerous
    globals of a pickle read under ``--allow-unsafe`` (:func:`~inspector.adapters.security.policy.
    dangerous`); such a checkpoint is never verified: verdict and status ``unsafe``, with a note
    naming them."""
    report = result.to_dict()
    if unsafe:
        report["status"] = report["verdict"] = UNSAFE
        report["notes"].append("not verified: the pickle references " + "; ".join(unsafe))
    return report
