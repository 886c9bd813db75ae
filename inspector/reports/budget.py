"""The budget report (schema ``inspector.budget/1``): the solutions of :mod:`inspector.budget`
as table, markdown, JSON or CSV."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from inspector.reports import strict_json
from inspector.reports.render import csv_writer, sanitize
from inspector.reports.text import PLAIN, Style, table

SCHEMA = "inspector.budget/1"
FORMATS = ("table", "markdown", "json", "csv")


def build(target: int, compare: bool, results: Sequence[Any]) -> dict[str, Any]:
    """The report of one solve (or several with ``compare``): ``results`` are
    :class:`inspector.budget_solver.Result` records."""
    return {"schema": SCHEMA, "target": target, "compare": compare,
            "results": [r.as_dict() for r in results]}


def render(report: dict[str, Any], fmt: str, style: Style = PLAIN) -> str:
    if fmt == "json":
        return strict_json.dumps(report, indent=1) + "\n"
    if fmt == "csv":
        return _csv(report)
    if fmt not in ("table", "markdown"):
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    md = fmt == "markdown"
    n = style.count
    lines: list[str] = []
    results = report["results"]
    if report["compare"]:
        rows = []
        for r in results:
            best = r["candidates"][0]
            solved = ", ".join(f"{k}={v}" for k, v in best["values"].items())
            rows.append([r["arch"], solved, n(best["total"]), _dev(best["deviation"])])
        lines.append(f"target {n(report['target'])} parameters"
                     + (" (at most)" if results[0]["under"] else ""))
        lines.append(table(["arch", "solved", "parameters", "deviation"], rows, style,
                           markdown=md, elide_cols=("solved",),
                           align=("left", "left", "right", "right")))
    for r in results:
        lines.append("")
        lines += _detail(r, md, style, show_candidates=not report["compare"])
    text = "\n".join(lines).lstrip("\n")
    return "\n".join(sanitize(line) for line in text.split("\n")) + "\n"


def _dev(d: float) -> str:
    if d == 0:
        return "exact"
    return f"{d:+.2f}%" if abs(d) >= 0.01 else f"{d:+.1g}%"


def _detail(r: dict[str, Any], md: bool, style: Style, show_candidates: bool) -> list[str]:
    n = style.count
    out = [f"{r['arch']}: {', '.join(r['solve'])} for {n(r['target'])} parameters"
           + (" (at most)" if r["under"] else "")]
    given = {k: r["hparams"][k] for k in r["given"]}
    out.append("  with " + (", ".join(f"{k}={v}" for k, v in given.items()) or "defaults")
               + " (all values in --format json)")
    for name, expr in r["ties"].items():
        out.append(f"  tie: {name} = {expr}")
    spans = ", ".join(f"{k} {lo}..{hi}" + (f" step {s}" if s != 1 else "")
                      for k, (lo, hi, s) in r["ranges"].items())
    out.append(f"  search: {spans}; {r['method']}; {n(r['evaluations'])} predictions")
    for reason, k in r["constraints"].items():
        out.append(f"  constraint applied: {reason} ({style.count(k)} values skipped)")
    for note in r["notes"]:
        out.append(f"  note: {note}")
    if show_candidates:
        names = list(r["candidates"][0]["values"])
        rows = [[*(str(c["values"][k]) for k in names), n(c["total"]), _dev(c["deviation"])]
                for c in r["candidates"]]
        out += ["", table([*names, "parameters", "deviation"], rows, style, markdown=md,
                          align=["right"] * (len(names) + 2))]
    total = sum(r["breakdown"].values())
    rows = [[g, n(k), f"{100 * k / total:.1f}%"] for g, k in r["breakdown"].items()]
    rows.append(["total", n(total), ""])
    best = ", ".join(f"{k}={v}" for k, v in r["candidates"][0]["values"].items())
    out += ["", f"breakdown of {best} ({r['grouping']})",
            table(["group", "parameters", "share"], rows, style, markdown=md,
                  elide_cols=("group",), align=("left", "right", "right"))]
    return out


def _csv(report: dict[str, Any]) -> str:
    """One row per candidate: architecture, rank, the solved values (``k=v;...``), its
    parameter count and deviation from the target in percent."""
    out = io.StringIO()
    w = csv_writer(out)
    w.writerow(["arch", "rank", "values", "parameters", "deviation_percent", "target"])
    for r in report["results"]:
        for i, c in enumerate(r["candidates"], 1):
            values = ";".join(f"{k}={v}" for k, v in c["values"].items())
            w.writerow([r["arch"], i, values, c["total"], c["deviation"], report["target"]])
    return out.getvalue()
