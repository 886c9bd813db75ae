"""Render the globals report of ``inspector show --globals``
(:func:`inspector.pickle_globals.globals_report`, schema ``inspector.globals/1``) as a table,
markdown, JSON or CSV."""

from __future__ import annotations

import io
from typing import Any

from inspector.reports import strict_json
from inspector.reports.render import csv_writer, sanitize
from inspector.reports.text import PLAIN, Style, table

VERDICTS = {
    "allowed": "safe",
    "warning": "foreign: read as an inert placeholder",
    "danger": "dangerous: read as an inert placeholder, never called",
}


def render(report: dict[str, Any], fmt: str, style: Style = PLAIN) -> str:
    rows = report["globals"]
    if fmt == "json":
        return strict_json.dumps(report, indent=1) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        w = csv_writer(out)
        w.writerow(["name", "allowed", "severity", "where"])
        for r in rows:
            w.writerow([r["name"], r["allowed"], r["severity"], r["where"] or ""])
        return out.getvalue()
    head = f"{style.wrap(sanitize(report['path']) + '  [' + report['format'] + ']')}\n\n"
    if not report["pickle"]:
        return head + "no pickle in this format: it cannot reference Python globals\n"
    cells = [[sanitize(r["name"]), r["use"] or "",
              VERDICTS.get(r["severity"], r["severity"]) + (f" ({r['why']})" if r["why"] else "")]
             for r in rows]
    body = (table(["global", "use", "verdict"], cells, style, markdown=fmt == "markdown",
                  clip_cols=("verdict",), elide_cols=("global",), paint_cols=("verdict",))
            if cells else "(no globals)")
    danger = sum(r["severity"] == "danger" for r in rows)
    return head + body + f"\n\n{len(rows)} globals, {danger} dangerous (none was run)\n"
