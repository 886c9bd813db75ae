"""Render a diff report (:func:`inspector.diff.report`) as a table, markdown or JSON.

Rows are the collapsed records (a pattern with ``#`` for the numbers and ``×N``); with values,
a collapsed row shows the largest max-abs and relative-L2 and the smallest cosine of its members.
"""

from __future__ import annotations

import io
import json
from typing import Any

from inspector.reports.render import sanitize, shape_text

FORMATS = ("table", "markdown", "json")


def render(report: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if fmt in ("table", "markdown"):
        return _text(report, markdown=fmt == "markdown")
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _num(x: float | None, fmt: str = ".3g") -> str:
    if x is None:
        return ""
    return "inf" if x == float("inf") else format(x, fmt)


def _side_text(t: dict[str, Any] | None) -> str:
    return "" if t is None else f"{shape_text(t['shape'])} {t['dtype']}"


def _rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    by_name = {t["name"]: t for t in report["tensors"]}
    collapsed = {m: c for c in report["collapsed"] for m in c["members"]}
    values = report["values"]
    headers = ["op", "tensor", "A", "B"]
    if values:
        headers += ["max |a-b|", "rel L2", "cosine"]
    rows = []
    done: set[str] = set()
    for t in report["tensors"]:
        if t["name"] in done:
            continue
        c = collapsed.get(t["name"])
        members = [by_name[m] for m in c["members"]] if c else [t]
        done.update(m["name"] for m in members)
        label = f"{c['pattern']} ×{c['count']}" if c else t["name"]
        row = [t["op"], sanitize(label), _side_text(t["a"]), _side_text(t["b"])]
        if values:
            stats = [m["values"] for m in members if m["values"]]
            notes = {m["note"] for m in members if m.get("note")}
            if stats:
                cos = [s["cosine"] for s in stats if s["cosine"] is not None]
                row += [
                    _num(max(s["max_abs"] for s in stats)),
                    _num(max(s["rel_l2"] for s in stats)),
                    _num(min(cos), ".7f") if cos else "",
                ]
            else:
                row += ["; ".join(sorted(notes)) if notes else "", "", ""]
        rows.append(row)
    return headers, rows


def summary_line(report: dict[str, Any]) -> str:
    s = report["summary"]
    aligned = s["unchanged"] + s["changed"] + s["reshaped"] + s["retyped"]
    parts = [f"{aligned:,} aligned"]
    if report["values"]:
        parts.append(f"{s['changed']:,} changed, {s['unchanged']:,} unchanged")
    parts.append(
        f"{s['added']:,} added, {s['removed']:,} removed, {s['reshaped']:,} reshaped, "
        f"{s['retyped']:,} retyped"
    )
    verdict = "structure differs" if report["structural_difference"] else "same structure"
    if report["values"]:
        n = report["values_changed"]
        skipped = report.get("values_not_compared") or 0
        if n:
            verdict += f", values of {n:,} tensors changed"
        elif not skipped:
            verdict += ", values equal"
        if skipped:
            verdict += f", values of {skipped:,} tensors not compared (see their notes)"
    return "; ".join(parts) + f" -> {verdict}"


def _text(report: dict[str, Any], markdown: bool) -> str:
    from tabulate import tabulate

    fmt = "github" if markdown else "simple"
    out = io.StringIO()
    for side in ("a", "b"):
        s = report[side]
        line = (f"{side.upper()}: {sanitize(s['path'])}  [{s['format']}]  {s['tensors']:,} "
                f"tensors, {s['elements']:,} elements")
        out.write(f"- {line}\n" if markdown else f"{line}\n")
    if report["values"]:
        tol = report["tolerance"]
        out.write(f"values compared: changed means |a-b| > {tol['atol']:g} + {tol['rtol']:g}*|b|\n")
    headers, rows = _rows(report)
    if rows:
        if markdown:
            rows = [[c.replace("|", "\\|") for c in r] for r in rows]
            headers = [h.replace("|", "\\|") for h in headers]
        out.write("\n")
        out.write(tabulate(rows, headers, fmt, disable_numparse=True))
        out.write("\n")
    hidden = report["summary"]["unchanged"] - sum(
        1 for t in report["tensors"] if t["op"] == "unchanged"
    )
    if hidden:
        out.write(f"\n({hidden:,} unchanged tensors not shown; --all lists them)\n")
    if report["groups"]:
        out.write(f"\n{'### ' if markdown else ''}groups (scheme {report['scheme']}):\n\n")
        grows = [
            [sanitize(g["group"]), f"{g['a']:,}", f"{g['b']:,}", f"{g['delta']:+,}",
             ", ".join(f"{n} {op}" for op, n in g["tensors"].items())]
            for g in report["groups"]
        ]
        out.write(tabulate(grows, ["group", "A", "B", "delta", "tensors"], fmt,
                           disable_numparse=True, colalign=("left", "right", "right", "right",
                                                            "left")))
        out.write("\n")
    out.write(f"\n{summary_line(report)}\n")
    return out.getvalue()
