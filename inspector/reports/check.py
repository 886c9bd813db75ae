"""Render a check report (``CheckResult.to_dict()``, schema ``inspector.check/1``) as a table,
markdown, JSON or CSV. The verdict and its words are decided in :mod:`inspector.formulas.check`;
here they are only laid out."""

from __future__ import annotations

import io
import json
from typing import Any

from inspector.reports import strict_json
from inspector.reports.render import csv_writer, sanitize
from inspector.reports.text import PLAIN, Style, shape_text, table

FORMATS = ("table", "markdown", "json", "csv")


def render(report: dict[str, Any], fmt: str, style: Style = PLAIN) -> str:
    if fmt == "json":
        return strict_json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return _csv(report)
    if fmt in ("table", "markdown"):
        return _text(report, fmt == "markdown", style)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def verdict_text(report: dict[str, Any]) -> str:
    """``VERIFIED``, ``MISMATCH``, ``INCOMPLETE`` or ``INCOMPLETE (structure consistent)``."""
    v = report.get("verdict", "verified" if report["status"] == "ok" else report["status"])
    if v == "incomplete" and report.get("audit") == "structure":
        return "INCOMPLETE (structure consistent)"
    return v.upper()


def _shape(shape: list[int] | None) -> str:
    return "-" if shape is None else shape_text(shape)


def _status(g: dict[str, Any], assumed: bool = False) -> str:
    """A group's status; ``assumed``: a disagreement with assumed defaults, not a mismatch."""
    n = g["issues"] or g.get("not_modelled", 0)
    status = "differs" if assumed and g["status"] == "mismatch" else g["status"]
    return status if not n else f"{status} ({n} tensor{'s' if n != 1 else ''})"


def _shown(h: dict[str, Any]) -> bool:
    """By default, the hyperparameters the formula read (all not defaulted when that is not
    known), and every value given with --set; ``--verbose`` shows all."""
    if h["source"] == "set":
        return True
    used = h.get("used")
    return h["source"] != "default" if used is None else used


def _text(report: dict[str, Any], md: bool, style: Style) -> str:
    esc = sanitize
    n = style.count
    arch = report["arch"] or "structural audit: no architecture applies"
    out = [style.wrap(f"{'## ' if md else ''}{esc(report['path'])}  [{arch}, "
                      f"scheme {esc(report['scheme'])}]"), ""]
    hp = report["hyperparameters"]
    shown = [(k, v) for k, v in hp.items() if style.verbose or _shown(v)]
    if shown:
        out.append("hyperparameters:" if not md else "### Hyperparameters\n")
        rows = [[esc(k), esc(str(v["value"])), v["source"]] for k, v in shown]
        out += [table(["name", "value", "from"], rows, style, markdown=md,
                      clip_cols=("value",), elide_cols=("name",)), ""]
    if report["inferred"]:
        out += [style.wrap(f"inferred from shapes: {', '.join(report['inferred'])}"), ""]
    rows = [[esc(g["name"]), n(g["found"]), n(g["predicted"]), style.delta(g["delta"])
             if not md else style.signed(g["delta"]), _status(g, bool(report.get("assumed")))]
            for g in report["groups"]]
    if rows:
        out.append(table(["group", "found", "predicted", "delta", "status"], rows, style,
                         align=("left", "right", "right", "right", "left"), markdown=md,
                         elide_cols=("group",), paint_cols=("status",)))
    if report["tensors"]:
        head = "tensors (against assumed defaults)" if report.get("assumed") else "tensors"
        out += ["", f"### {head.capitalize()}" if md else f"{head}:"]
        rows = [[t["status"], esc(t["name"]), esc(t["group"]), _shape(t["expected"]),
                 _shape(t["found"])] for t in report["tensors"]]
        out.append(table(["status", "name", "group", "expected", "found"], rows, style,
                         markdown=md, drop=("group",), elide_cols=("name",),
                         paint_cols=("status",)))
    out += _parts(report, md, style)
    tot = report["totals"]
    verdict = style.paint(verdict_text(report), None)
    if report.get("audit") == "structure":
        c = report.get("checked", {})
        out += ["", f"structural audit: {n(c.get('tensors', 0))} tensors, {n(tot['found'])} "
                    f"parameters; checked {c.get('block_families', 0)} repeated-block families, "
                    f"{c.get('optimizer_slots', 0)} optimizer slots, {c.get('tie_pairs', 0)} "
                    f"tied pairs: {verdict}"]
    else:
        nm = tot.get("not_modelled", 0)
        extra = f" (not modelled {n(nm)})" if nm else ""
        out += ["", f"total: found {n(tot['found'])}{extra}, predicted {n(tot['predicted'])}, "
                    f"delta {style.signed(tot['delta'])}: {verdict}"]
    out = out[:-1] + [style.wrap(out[-1])] if not md else out
    out += [style.wrap(f"note: {esc(x)}") for x in report["notes"]]
    lines = [x for i, x in enumerate(out) if x or i == 0 or out[i - 1]]  # no double blanks
    return "\n".join(lines) + "\n"


def _parts(report: dict[str, Any], md: bool, style: Style) -> list[str]:
    """The parts not modelled and the structural findings, as lines."""
    out: list[str] = []
    if report.get("parts"):
        out += ["", "### Not modelled" if md else "not modelled:"]
        rows = [[sanitize(p["name"]), style.count(p["tensors"]), style.count(p["elements"]),
                 sanitize(p["reason"])] for p in report["parts"]]
        out.append(table(["part", "tensors", "elements", "reason"], rows, style, markdown=md,
                         clip_cols=("reason",), elide_cols=("part",)))
    if report.get("findings"):
        out += ["", "### Structure" if md else "structure:"]
        rows = [[f["kind"], sanitize(f["message"])] for f in report["findings"]]
        out.append(table(["finding", "detail"], rows, style, markdown=md,
                         clip_cols=("detail",)))
    return out


CSV_COLUMNS = ("kind", "name", "group", "status", "op", "expected", "found", "found_count",
               "predicted_count", "delta", "detail")


def _csv(report: dict[str, Any]) -> str:
    """One row per group, per tensor issue, per part not modelled, per structural finding and
    the total, told apart by ``kind``; shapes as JSON lists, counts as plain integers."""
    out = io.StringIO()
    w = csv_writer(out, CSV_COLUMNS)
    w.writeheader()
    for g in report["groups"]:
        w.writerow({"kind": "group", "name": g["name"], "status": g["status"],
                    "found_count": g["found"], "predicted_count": g["predicted"],
                    "delta": g["delta"]})
    for t in report["tensors"]:
        w.writerow({"kind": "tensor", "name": t["name"], "group": t["group"],
                    "status": t["status"], "op": t.get("op", ""),
                    "expected": _json_shape(t["expected"]), "found": _json_shape(t["found"]),
                    "detail": t.get("part", "")})
    for p in report.get("parts", ()):
        w.writerow({"kind": "part", "name": p["name"], "status": "not_modelled",
                    "found_count": p["elements"], "detail": p["reason"]})
    for f in report.get("findings", ()):
        w.writerow({"kind": "finding", "name": f["kind"], "status": "mismatch",
                    "detail": f["message"]})
    tot = report["totals"]
    w.writerow({"kind": "total", "name": report["path"], "status": report.get("verdict", ""),
                "found_count": tot["found"], "predicted_count": tot["predicted"],
                "delta": tot["delta"], "detail": report["arch"] or "structure"})
    return out.getvalue()


def _json_shape(shape: list[int] | None) -> str:
    return "" if shape is None else json.dumps(shape)
