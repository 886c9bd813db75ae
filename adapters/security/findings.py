"""A pickle's globals as checkpoint metadata and findings, the same for every adapter."""

from __future__ import annotations

from typing import Any

from ..model import Finding
from .restricted_pickle import GlobalRef


def pickle_findings(
    globals_: dict[str, GlobalRef], where: str
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """(``metadata["pickle_globals"]`` rows, one finding per global that is not safe).

    A row is ``{"name", "allowed", "verdict", "use", "why"}``; a finding's message starts with
    ``pickle global NAME`` and says how a loader would use it and why that is the verdict.
    """
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for g in globals_.values():
        v = g.verdict
        rows.append(
            {
                "name": g.name,
                "allowed": g.allowed,
                "verdict": v.level if v else None,
                "use": v.use if v else None,
                "why": v.why if v else None,
            }
        )
        if g.allowed:
            continue
        also = f" ({g.resolved})" if g.resolved != g.name else ""
        if v is None:
            text = "is not vetted; read as an inert placeholder"
        else:
            text = f"would be {v.use} by a loader: {v.why}; read as an inert placeholder"
        findings.append(
            Finding(g.severity or "warning", f"pickle global {g.name}{also} {text}", where, g.name)
        )
    return rows, findings
