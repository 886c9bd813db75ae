"""Build the audit report of ``inspector report`` (:class:`inspector.reports.html.AuditReport`)
from one or two checkpoints: each one's listing and check, their diff when there are two and,
when values are read (``values``), each one's value statistics (:mod:`inspector.value_stats`)
and the diff's value comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inspector.adapters.errors import InspectorError
from inspector.adapters.model import Checkpoint
from inspector.reports.html import AuditReport, CheckpointSection


def section(ckpt: Checkpoint, arch: str | None = None, sets: Mapping[str, str] | None = None,
            scheme: str | None = None, values: bool = False,
            progress: Any = None) -> CheckpointSection:
    """A checkpoint's listing and check, and with ``values`` its value statistics
    (``inspector.stats/1``); a check that cannot be made (an unknown ``--arch``,
    hyperparameters the architecture refuses) is said in ``check_error``, the listing stays.
    ``progress``: an object with ``advance(nbytes)`` for the value pass."""
    from inspector.adapters.security.policy import dangerous
    from inspector.formulas import get
    from inspector.formulas.check import check
    from inspector.reports.listing import listing

    lst = listing(ckpt, scheme=scheme or "auto")
    value_stats = None
    if values:
        from inspector import value_stats as stats

        value_stats = stats.report(stats.file_stats(ckpt, scheme=scheme, progress=progress))
    try:
        result = check(ckpt, get(arch) if arch else None, dict(sets or {}), scheme).to_dict()
    except InspectorError as e:
        return CheckpointSection(lst, check_error=str(e), stats=value_stats)
    unsafe = dangerous(ckpt)
    if unsafe:  # listed under --allow-unsafe: never verified
        result["status"] = result["verdict"] = "unsafe"
        result["notes"].append("not verified: the pickle references " + "; ".join(unsafe))
    return CheckpointSection(lst, result, stats=value_stats)


def build(ckpts: Sequence[Checkpoint], arch: str | None = None,
          sets: Mapping[str, str] | None = None, scheme: str | None = None,
          values: bool = False, progress: Any = None) -> AuditReport:
    """The report of one checkpoint, or of two with their diff; ``values``: each checkpoint's
    value statistics and the diff of contents too (``progress`` counts the bytes read)."""
    from inspector import __version__

    sections = [section(c, arch, sets, scheme, values, progress) for c in ckpts]
    diff_report = None
    if len(ckpts) == 2:
        from inspector.diffing import diff, report

        diff_report = report(diff(ckpts[0], ckpts[1], values=values, scheme=scheme,
                                  progress=progress if values else None))
    return AuditReport(sections, diff_report, __version__)
