"""Render a stats report (:func:`inspector.stats.report`) or a run report
(:func:`inspector.stats.run_report`) as a table, markdown, JSON or CSV.

``render(report, fmt, view="tensors")``: ``view`` ``tensors`` lists every tensor then the
groups, ``groups`` the groups only; a run report always shows one row per group with the norm
and relative change at each checkpoint. CSV is long-form (one row per tensor or group, and per
checkpoint for runs) so it plots directly.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from inspector.reports.render import sanitize, shape_text

FORMATS = ("table", "markdown", "json", "csv")
VIEWS = ("tensors", "groups")
STAT_COLUMNS = ("min", "max", "mean", "std", "l2")
COUNT_COLUMNS = ("nan", "posinf", "neginf", "zeros", "subnormal", "f16_overflow")


def render(report: dict[str, Any], fmt: str, view: str = "tensors") -> str:
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
    run = report["schema"].startswith("inspector.stats-run")
    if fmt == "json":
        return json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return _run_csv(report) if run else _csv(report, view)
    if fmt in ("table", "markdown"):
        md = fmt == "markdown"
        return _run_text(report, md) if run else _text(report, md, view)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _num(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, str):  # inf / nan as JSON strings
        return x
    if isinstance(x, int):
        return f"{x:,}"
    return format(x, ".4g")


def _counts(s: dict[str, Any]) -> str:
    """Only the non-zero counts, e.g. ``1 NaN, 3 zeros``."""
    labels = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf", "zeros": "zero",
              "subnormal": "subnormal", "f16_overflow": "f16 overflow"}
    return ", ".join(f"{s[k]:,} {v}" for k, v in labels.items() if s.get(k))


def _table(headers: list[str], rows: list[list[str]], md: bool, right: set[int]) -> str:
    from tabulate import tabulate

    if md:
        rows = [[c.replace("|", "\\|") for c in r] for r in rows]
    align = ["right" if i in right else "left" for i in range(len(headers))]
    return tabulate(rows, headers, "github" if md else "simple", disable_numparse=True,
                    colalign=align) + "\n"


def _findings(findings: list[dict[str, Any]], md: bool) -> str:
    if not findings:
        return ""
    out = ["\n### Findings\n" if md else "\nfindings:"]
    for f in findings:
        where = f" [{sanitize(f['checkpoint'])}]" if f.get("checkpoint") else ""
        out.append(f"{'- ' if md else '  '}{f['severity']}: {sanitize(f['message'])}{where}")
    return "\n".join(out) + "\n"


def _text(report: dict[str, Any], md: bool, view: str) -> str:
    out = io.StringIO()
    title = f"{sanitize(report['path'])}  [{report['format']}]"
    out.write(f"## {title}\n\n" if md else f"{title}\n\n")
    right = set(range(3, 9))
    if view == "tensors":
        headers = ["tensor", "shape", "dtype", *STAT_COLUMNS, "of", "counts"]
        rows = []
        for t in report["tensors"]:
            s = t["stats"]
            if s is None:
                rows.append([sanitize(t["name"]), shape_text(t["shape"]), t["dtype"],
                             *[""] * 5, "", f"not read: {t.get('note', '')}"])
                continue
            of = "" if t["of"] == "values" else t["of"]
            rows.append([sanitize(t["name"]), shape_text(t["shape"]), t["dtype"],
                         *(_num(s[k]) for k in STAT_COLUMNS), of, _counts(s)])
        out.write(_table(headers, rows, md, right))
        out.write("\n")
    headers = ["group", "tensors", "elements", *STAT_COLUMNS, "counts"]
    rows = [[sanitize(g["group"]), _num(g["tensors"]), _num(g["stats"]["count"]),
             *(_num(g["stats"][k]) for k in STAT_COLUMNS), _counts(g["stats"])]
            for g in report["groups"]]
    out.write(_table(headers, rows, md, set(range(1, 8))))
    s = report["summary"]
    line = (f"\n{s['tensors']:,} tensors, {s['elements']:,} values by scheme "
            f"{sanitize(report['scheme'])}; {_plural(s['errors'], 'error')}, "
            f"{_plural(s['warnings'], 'warning')}")
    if s["values_not_read"]:
        line += f"; INCOMPLETE: the values of {s['values_not_read']} tensors were not read"
    out.write(line + "\n")
    out.write(_findings(report["findings"], md))
    return out.getvalue()


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _run_text(report: dict[str, Any], md: bool) -> str:
    out = io.StringIO()
    out.write("## training run\n\n" if md else "training run\n\n")
    for i, p in enumerate(report["checkpoints"]):
        out.write(f"{'- ' if md else '  '}[{i}] {sanitize(p)}\n")
    out.write("\n")
    groups = list(dict.fromkeys(g["group"] for s in report["steps"] for g in s["groups"]))
    headers = ["group"] + [f"[{i}] L2 (change)" for i in range(len(report["steps"]))]
    rows = []
    for name in groups:
        row = [sanitize(name)]
        for step in report["steps"]:
            g = next((x for x in step["groups"] if x["group"] == name), None)
            if g is None:
                row.append("")
                continue
            cell = _num(g["l2"])
            if g["relative_change"] is not None:
                cell += f" ({_num(g['relative_change'])})"
            row.append(cell)
        rows.append(row)
    out.write(_table(headers, rows, md, set(range(1, len(headers)))))
    out.write("\nchange = ||W[k] - W[k-1]|| / ||W[k-1]|| over the group's tensors; "
              f"scheme {sanitize(report['scheme'] or '')}\n")
    if not report["complete"]:
        out.write("INCOMPLETE: some tensors' values were not read (--format json says which)\n")
    out.write(_findings(report["findings"], md))
    return out.getvalue()


def _csv(report: dict[str, Any], view: str) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    keys = ["count", *STAT_COLUMNS, *COUNT_COLUMNS]
    w.writerow(["level", "name", "group", "shape", "dtype", "of", *keys, "note"])
    if view == "tensors":
        for t in report["tensors"]:
            s = t["stats"] or {}
            w.writerow(["tensor", t["name"], t["group"], json.dumps(t["shape"]), t["dtype"],
                        t["of"], *(_cell(s.get(k)) for k in keys), t.get("note", "")])
    for g in report["groups"]:
        w.writerow(["group", g["group"], g["group"], "", "", "",
                    *(_cell(g["stats"][k]) for k in keys), ""])
    return out.getvalue()


def _cell(x: Any) -> Any:
    return "" if x is None else x


def _run_csv(report: dict[str, Any]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["step", "checkpoint", "group", "tensors", "l2", "delta_l2", "relative_change"])
    for i, step in enumerate(report["steps"]):
        for g in step["groups"]:
            w.writerow([i, step["path"], g["group"], g["tensors"], _cell(g["l2"]),
                        _cell(g["delta_l2"]), _cell(g["relative_change"])])
    return out.getvalue()
