"""Render a diff report (:func:`inspector.diffing.report`) as a table, markdown, JSON or CSV.

Rows are the collapsed records (a pattern with ``#`` for the numbers and ``×N``; members of one
row always share op, shapes, dtypes and value results). Without values, tensors whose name,
shape and dtype agree are "values not compared", never "unchanged". CSV has one row per tensor.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

from inspector.reports import strict_json
from inspector.reports.render import csv_writer, sanitize
from inspector.reports.text import PLAIN, Style, shape_text, table

FORMATS = ("table", "markdown", "json", "csv")
NOT_COMPARED = "same shape"  # the op word for ``unchanged`` when values were not read


def render(report: dict[str, Any], fmt: str, style: Style = PLAIN) -> str:
    if fmt == "json":
        return strict_json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return _csv(report)
    if fmt in ("table", "markdown"):
        return _text(report, fmt == "markdown", style)
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
    # one "A = B" column when no row shown differs in shape or dtype (a values-only diff)
    same = all(t["a"] and t["b"] and _side_text(t["a"]) == _side_text(t["b"])
               for t in report["tensors"])
    headers = ["op", "tensor", "A = B"] if same else ["op", "tensor", "A", "B"]
    layout = "layout" in report  # two layouts of one model: B's own name beside A's
    if layout:
        headers.insert(2, "B tensor")
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
        row = [_op(t["op"], values), sanitize(label), _side_text(t["a"])]
        if layout:
            row.insert(2, sanitize(_b_name(members)))
        if not same:
            row.append(_side_text(t["b"]))
        if values:
            v = t["values"]  # every member of a row has the same result
            if v:
                row += [_num(v["max_abs"]), _num(v["rel_l2"]),
                        _num(v["cosine"], ".7f") if v["cosine"] is not None else ""]
            else:
                row += [sanitize(t.get("note") or ""), "", ""]
        rows.append(row)
    return headers, rows


def _b_name(members: list[dict[str, Any]]) -> str:
    """B's name of a row (a collapsed row: its numbers that vary as ``#``)."""
    names = [m["b"]["name"] for m in members if m["b"]]
    if not names:
        return ""
    if len(set(names)) == 1:
        return names[0]
    parts = [re.split(r"(\d+)", n) for n in names]
    if len({len(p) for p in parts}) != 1:
        return names[0] + " ..."
    return "".join(col[0] if len(set(col)) == 1 else "#" for col in zip(*parts, strict=True))


def _layout_lines(report: dict[str, Any], style: Style) -> list[str]:
    lay = report["layout"]
    params = ", ".join(f"{k}={v}" for k, v in lay["params"].items())
    names = "; ".join(lay.get("names") or ())
    left = "; ".join(f"{side.upper()}'s " + ", ".join(f"{n} {role}" for role, n in c.items())
                     for side, c in sorted((lay.get("left_out") or {}).items()))
    return [f"paired by layout map {lay['map']} ({lay['a']} <-> {lay['b']})"
            + (f"; {params}" if params else "") + (f"; {names}" if names else "")
            + (f"\nleft out (roles the conversion does not carry): {left}" if left else "")]


def _op(op: str, values: bool) -> str:
    return NOT_COMPARED if op == "unchanged" and not values else op


def summary_line(report: dict[str, Any], style: Style = PLAIN) -> str:
    s = report["summary"]
    n = style.count
    aligned = s["unchanged"] + s["changed"] + s["reshaped"] + s["retyped"]
    parts = [f"{n(aligned)} aligned"]
    if report["values"]:
        parts.append(f"{n(s['changed'])} changed, {n(s['unchanged'])} unchanged")
    else:
        same = "shape (types as converted)" if "layout" in report else "shape and dtype"
        parts.append(f"{n(s['unchanged'])} of the same {same} (values not compared)")
    parts.append(
        f"{n(s['added'])} added, {n(s['removed'])} removed, {n(s['reshaped'])} reshaped, "
        f"{n(s['retyped'])} retyped"
    )
    verdict = "structure differs" if report["structural_difference"] else "same structure"
    if report["values"]:
        changed = report["values_changed"]
        skipped = report.get("values_not_compared") or 0
        if changed:
            verdict += f", values of {n(changed)} tensors changed"
        elif not skipped:
            verdict += ", values equal"
        if skipped:
            verdict += f", values of {n(skipped)} tensors not compared (see their notes)"
    else:
        verdict += ", values not compared (--values compares them)"
    return "; ".join(parts) + f" -> {verdict}"


def _text(report: dict[str, Any], markdown: bool, style: Style = PLAIN) -> str:
    n = style.count
    out = io.StringIO()
    for side in ("a", "b"):
        s = report[side]
        line = (f"{side.upper()}: {sanitize(s['path'])}  [{s['format']}]  {n(s['tensors'])} "
                f"tensors, {n(s['elements'])} elements")
        out.write(f"- {line}\n" if markdown else f"{style.wrap(line)}\n")
    if "filter" in report:
        f = report["filter"]
        what = " and ".join(x for x in (
            f"names matching /{sanitize(f['match'])}/" if f["match"] else "",
            f"role {' or '.join(f['roles'])}" if f["roles"] else "") if x)
        out.write(f"only {what}: {n(f['kept'])} of {n(f['of'])} aligned records\n")
    if "layout" in report:
        for line in _layout_lines(report, style):
            out.write(f"{style.wrap(line)}\n")
    if report["values"]:
        tol = report["tolerance"]
        out.write(f"values compared: changed means |a-b| > {tol['atol']:g} + {tol['rtol']:g}*|b|\n")
    else:
        out.write("values not compared: names, shapes and dtypes only (--values reads them)\n")
    headers, rows = _rows(report)
    if rows:
        out.write("\n")
        out.write(table(headers, rows, style, markdown=markdown, drop=("cosine", "rel L2"),
                        elide_cols=("tensor", "B tensor"), paint_cols=("op",)))
        out.write("\n")
    hidden = report["summary"]["unchanged"] - sum(
        1 for t in report["tensors"] if t["op"] == "unchanged"
    )
    if hidden:
        same = "shape (types as converted)" if "layout" in report else "shape and dtype"
        what = ("unchanged tensors" if report["values"] else
                f"tensors of the same {same} (values not compared)")
        out.write("\n" + style.wrap(f"({n(hidden)} {what} not shown; --all lists them)") + "\n")
    if report["groups"]:
        out.write(f"\n{'### ' if markdown else ''}groups (scheme {report['scheme']}):\n\n")
        values = report["values"]
        grows = [
            [sanitize(g["group"]), n(g["a"]), n(g["b"]),
             style.signed(g["delta"]) if markdown else style.delta(g["delta"]),
             ", ".join(f"{k} {_op(op, values)}" for op, k in g["tensors"].items())]
            for g in report["groups"]
        ]
        out.write(table(["group", "A", "B", "delta", "tensors"], grows, style,
                        markdown=markdown, align=("left", "right", "right", "right", "left"),
                        elide_cols=("tensors", "group")))
        out.write("\n")
    summary = (report.get("layout") or {}).get("summary")
    if summary:
        out.write(f"\n{'### ' if markdown else ''}conversion error by group and the converted "
                  "side's stored type (relative L2 over the group):\n\n")
        srows = [[sanitize(g["group"]), sanitize(g["dtype"]), n(g["tensors"]),
                  _num(g["max_abs"]), _num(g["rel_l2"])] for g in summary]
        out.write(table(["group", "stored as", "tensors", "max |a-b|", "rel L2"], srows, style,
                        markdown=markdown, align=("left", "left", "right", "right", "right"),
                        elide_cols=("group",)))
        out.write("\n")
    findings = report.get("findings") or ()
    if findings:
        out.write("\n")
        for f in findings:
            out.write(style.wrap(f"{style.paint(f['severity'])}: "
                                 f"{sanitize(f['message'])}") + "\n")
    out.write(f"\n{style.wrap(summary_line(report, style))}\n")
    return out.getvalue()


CSV_COLUMNS = ("op", "name", "a_name", "a_shape", "a_dtype", "b_name", "b_shape", "b_dtype",
               "aligned_by", "values_compared", "max_abs", "rel_l2", "cosine", "note")


def _csv(report: dict[str, Any]) -> str:
    """One row per tensor record (never collapsed); shapes as JSON lists; the value columns
    empty when values were not compared (``values_compared`` says which)."""
    out = io.StringIO()
    w = csv_writer(out)
    w.writerow(CSV_COLUMNS)
    for t in report["tensors"]:
        a, b, v = t["a"], t["b"], t["values"]
        w.writerow([
            t["op"], t["name"],
            a["stored_name"] if a else "", json.dumps(a["shape"]) if a else "",
            a["dtype"] if a else "",
            b["stored_name"] if b else "", json.dumps(b["shape"]) if b else "",
            b["dtype"] if b else "",
            t["aligned_by"] or "", "yes" if v else "no",
            "" if not v else repr(v["max_abs"]), "" if not v else repr(v["rel_l2"]),
            "" if not v or v["cosine"] is None else repr(v["cosine"]), t.get("note") or "",
        ])
    return out.getvalue()
