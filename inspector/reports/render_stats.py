"""Render a stats report (:func:`inspector.value_stats.report`) or a run report
(:func:`inspector.value_stats.run_report`) as a table, markdown, JSON or CSV.

``render(report, fmt, view="tensors", style)``: ``view`` ``tensors`` lists every tensor then
the groups, ``groups`` the groups only; a run report always shows one row per group with the
norm and relative change at each checkpoint. CSV is long-form (one row per tensor or group, and
per checkpoint for runs) so it plots directly.

Text follows the global :class:`~inspector.reports.text.Style`: counts with thousands
separators unless ``--raw-numbers``, shapes never; tables fit the terminal (or ``COLUMNS``) by
dropping low-value columns, then eliding names in the middle; a run's checkpoints that do not
fit side by side continue in a further table; finding severities in colour on a terminal only.
"""

from __future__ import annotations

import io
import json
from typing import Any

from inspector.reports import strict_json
from inspector.reports.render import csv_writer, sanitize
from inspector.reports.text import PLAIN, Style, shape_text, table

FORMATS = ("table", "markdown", "json", "csv")
VIEWS = ("tensors", "groups")
STAT_COLUMNS = ("min", "max", "mean", "std", "l2")
COUNT_COLUMNS = ("nan", "posinf", "neginf", "zeros", "subnormal", "f16_overflow")


def render(report: dict[str, Any], fmt: str, view: str = "tensors",
           style: Style = PLAIN) -> str:
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
    run = report["schema"].startswith("inspector.stats-run")
    if fmt == "json":
        return strict_json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return _run_csv(report) if run else _csv(report, view)
    if fmt in ("table", "markdown"):
        md = fmt == "markdown"
        return _run_text(report, md, style) if run else _text(report, md, view, style)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _num(x: Any, style: Style = PLAIN) -> str:
    if x is None:
        return ""
    if isinstance(x, str):  # inf / nan as JSON strings
        return x
    if isinstance(x, int):
        return style.count(x)
    return format(x, ".4g")


COUNT_LABELS = {"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf", "zeros": "zero",
                "subnormal": "subnormal", "f16_overflow": "f16 overflow"}


def counts_text(s: dict[str, Any], style: Style = PLAIN) -> str:
    """Only the non-zero counts, e.g. ``1 NaN, 3 zero``."""
    return ", ".join(f"{style.count(s[k])} {v}" for k, v in COUNT_LABELS.items() if s.get(k))


def _findings(findings: list[dict[str, Any]], md: bool, style: Style) -> str:
    if not findings:
        return ""
    out = ["\n### Findings\n" if md else "\nfindings:"]
    for f in findings:
        where = f" [{sanitize(f['checkpoint'])}]" if f.get("checkpoint") else ""
        sev = f["severity"]
        if md:
            out.append(f"- {sev}: {sanitize(f['message'])}{where}")
            continue
        line = style.wrap(f"  {sev}: {sanitize(f['message'])}{where}", "    ")
        out.append(line.replace(sev, style.paint(sev, "bad" if sev == "error" else "warn"), 1))
    return "\n".join(out) + "\n"


# columns a narrow terminal drops first, in this order (a column with one value on every row,
# such as "of" for a float checkpoint, goes before any other)
TENSOR_DROP = ("of", "dtype", "mean", "std", "shape", "min", "max")
GROUP_DROP = ("elements", "tensors", "mean", "std", "min", "max")


def _text(report: dict[str, Any], md: bool, view: str, style: Style = PLAIN) -> str:
    out = io.StringIO()
    title = f"{sanitize(report['path'])}  [{report['format']}]"
    out.write(f"## {title}\n\n" if md else f"{style.wrap(title)}\n\n")
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
                         *(_num(s[k], style) for k in STAT_COLUMNS), of,
                         counts_text(s, style)])
        align = ["left"] * 3 + ["right"] * 5 + ["left"] * 2
        out.write(table(headers, rows, style, align=align, markdown=md, drop=TENSOR_DROP,
                        elide_cols=("tensor",), clip_cols=("of",)) + "\n")
        out.write("\n")
    headers = ["group", "tensors", "elements", *STAT_COLUMNS, "counts"]
    rows = [[sanitize(g["group"]), _num(g["tensors"], style), _num(g["stats"]["count"], style),
             *(_num(g["stats"][k], style) for k in STAT_COLUMNS), counts_text(g["stats"], style)]
            for g in report["groups"]]
    align = ["left"] + ["right"] * 7 + ["left"]
    out.write(table(headers, rows, style, align=align, markdown=md, drop=GROUP_DROP,
                    elide_cols=("group",)) + "\n")
    s = report["summary"]
    line = (f"{style.count(s['tensors'])} tensors, {style.count(s['elements'])} values by scheme "
            f"{sanitize(report['scheme'])}; {_plural(s['errors'], 'error', style)}, "
            f"{_plural(s['warnings'], 'warning', style)}")
    if s["values_not_read"]:
        line += f"; INCOMPLETE: the values of {s['values_not_read']} tensors were not read"
    out.write("\n" + (line if md else style.wrap(line)) + "\n")
    out.write(_findings(report["findings"], md, style))
    return out.getvalue()


def _plural(n: int, word: str, style: Style = PLAIN) -> str:
    return f"{style.count(n)} {word}" + ("" if n == 1 else "s")


def _run_text(report: dict[str, Any], md: bool, style: Style = PLAIN) -> str:
    out = io.StringIO()
    out.write("## training run\n\n" if md else "training run\n\n")
    for i, p in enumerate(report["checkpoints"]):
        line = f"{'- ' if md else '  '}[{i}] {sanitize(p)}"
        out.write((line if md else style.wrap(line, "      ")) + "\n")
    out.write("\n")
    groups = list(dict.fromkeys(g["group"] for s in report["steps"] for g in s["groups"]))
    cells = []  # per group, one cell per checkpoint
    for name in groups:
        row = []
        for step in report["steps"]:
            g = next((x for x in step["groups"] if x["group"] == name), None)
            if g is None:
                row.append("")
                continue
            cell = _num(g["l2"], style)
            if g["relative_change"] is not None:
                cell += f" ({_num(g['relative_change'], style)})"
            row.append(cell)
        cells.append(row)
    names = [sanitize(n) for n in groups]
    for cols in _run_blocks(names, cells, len(report["steps"]), md, style):
        headers = ["group"] + [f"[{i}] L2 (change)" for i in cols]
        rows = [[n, *(r[i] for i in cols)] for n, r in zip(names, cells, strict=True)]
        align = ["left"] + ["right"] * len(cols)
        out.write(table(headers, rows, style, align=align, markdown=md,
                        elide_cols=("group",)) + "\n")
        if cols[-1] != len(report["steps"]) - 1:
            out.write("\n")
    note = ("change = ||W[k] - W[k-1]|| / ||W[k-1]|| over the group's tensors; "
            f"scheme {sanitize(report['scheme'] or '')}")
    out.write("\n" + (note if md else style.wrap(note)) + "\n")
    if not report["complete"]:
        out.write("INCOMPLETE: some tensors' values were not read (--format json says which)\n")
    out.write(_findings(report["findings"], md, style))
    return out.getvalue()


def _run_blocks(names: list[str], cells: list[list[str]], steps: int, md: bool,
                style: Style) -> list[list[int]]:
    """The checkpoints' columns split into consecutive blocks that fit ``style.width`` beside
    the group names (one block when piped, in markdown, or when all fit)."""
    if md or not style.width or steps == 0:
        return [list(range(steps))] if steps else []
    from inspector.reports.text import GAP, MIN_NAME

    widths = [max([len(f"[{i}] L2 (change)") + 2, *(len(r[i]) for r in cells)])
              for i in range(steps)]
    name_w = max([len("group") + 2, *map(len, names)])
    if name_w + GAP + max(widths) > style.width:  # names will be elided
        name_w = min(name_w, MIN_NAME)
    blocks: list[list[int]] = [[]]
    used = name_w
    for i, w in enumerate(widths):
        if blocks[-1] and used + GAP + w > style.width:
            blocks.append([])
            used = name_w
        blocks[-1].append(i)
        used += GAP + w
    return blocks


def _csv(report: dict[str, Any], view: str) -> str:
    out = io.StringIO()
    w = csv_writer(out)
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
    w = csv_writer(out)
    w.writerow(["step", "checkpoint", "group", "tensors", "l2", "delta_l2", "relative_change"])
    for i, step in enumerate(report["steps"]):
        for g in step["groups"]:
            w.writerow([i, step["path"], g["group"], g["tensors"], _cell(g["l2"]),
                        _cell(g["delta_l2"]), _cell(g["relative_change"])])
    return out.getvalue()
