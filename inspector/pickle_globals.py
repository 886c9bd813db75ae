"""The globals a checkpoint's pickle references, as a report (``inspector show --globals``).

Like the model hubs' "pickle imports" list: every ``module.name`` the pickle's GLOBAL /
STACK_GLOBAL / INST opcodes name, whether the restricted unpickler knows it (torch's rebuild
functions, storages, OrderedDict ...) and, if not, how dangerous it is. Nothing is imported or
called to find out: the adapter read each global as an inert placeholder.
"""

from __future__ import annotations

from typing import Any

from inspector.adapters.model import Checkpoint

SCHEMA = "inspector.globals/1"


def globals_report(ckpt: Checkpoint) -> dict[str, Any]:
    """``{"schema", "path", "format", "pickle", "globals": [{"name", "allowed", "severity",
    "where", "use", "verdict", "why"}]}``; ``pickle`` is False for formats that hold no pickle.
    ``verdict`` is safe/foreign/dangerous (:mod:`inspector.adapters.security.verdicts`)."""
    listed = ckpt.metadata.get("pickle_globals")
    found = {f.subject: f for f in ckpt.findings if f.subject}
    rows = []
    for g in listed or ():
        finding = found.get(g["name"])
        severity = "allowed" if g["allowed"] else finding.severity if finding else "warning"
        rows.append(
            {
                "name": g["name"],
                "allowed": g["allowed"],
                "severity": severity,
                "where": finding.where if finding else None,
                # how a loader would use it (called/constructed/named), the verdict and why
                "use": g.get("use"),
                "verdict": g.get("verdict"),
                "why": g.get("why"),
            }
        )
    return {
        "schema": SCHEMA,
        "path": ckpt.path,
        "format": ckpt.format,
        "pickle": listed is not None,
        "globals": rows,
    }
