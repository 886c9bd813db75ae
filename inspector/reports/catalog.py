"""What the tool knows, as reports: the formats (``inspector formats``), architectures
(``inspector archs``) and grouping schemes (``inspector schemes``), each a list of JSON-ready
records (:func:`formats`, :func:`archs`, :func:`schemes`) and one renderer per output format
(:func:`render`)."""

from __future__ import annotations

import io
from typing import Any

from inspector.reports import strict_json
from inspector.reports.render import csv_writer, sanitize
from inspector.reports.text import PLAIN, Style, table

FORMATS = ("table", "markdown", "json", "csv")


def formats() -> dict[str, Any]:
    from inspector.adapters.registry import formats as adapters

    return {"schema": "inspector.formats/1", "columns": ["format", "usual names", "what"],
            "rows": [{"format": a.name, "usual names": ", ".join(a.extensions),
                      "what": a.description} for a in adapters()],
            "note": "Detection is by content (magic bytes), not by the file name."}


def archs(name: str | None = None) -> dict[str, Any]:
    """One row per hyperparameter of each architecture (or of ``name``)."""
    from inspector.formulas import archs as all_archs
    from inspector.formulas import get

    rows = []
    described = {}
    for a in [get(name)] if name else all_archs():
        described[a.name] = {"description": a.description, "scheme": a.scheme,
                             "symbols": {s.name: list(s.targets) for s in a.symbols}}
        for h in a.hparams:
            rows.append({"arch": a.name, "hyperparameter": h.name,
                         "default": "-" if h.default is None else str(h.default),
                         "choices": "|".join(map(str, h.choices)) if h.choices else "",
                         "help": h.help})
    return {"schema": "inspector.archs/1",
            "columns": ["arch", "hyperparameter", "default", "choices", "help"],
            "archs": described, "rows": rows}


def schemes() -> dict[str, Any]:
    import re

    from inspector import grouping

    rows = []
    for n in grouping.builtin_names():
        s = grouping.get_scheme(n)
        rows.append({"scheme": n, "what": re.split(r"[.:;] ", s.description)[0].rstrip("."),
                     "groups": len(s.groups)})
    return {"schema": "inspector.schemes/1", "columns": ["scheme", "groups", "what"],
            "rows": rows,
            "note": "auto (the default) picks the best-scoring scheme for a checkpoint's names, "
                    f"falling back to {grouping.FALLBACK}."}


# per catalog: the columns that give way first, and the long ones to elide
_FIT = {"inspector.formats/1": (("usual names",), ("what",), ("usual names",)),
        "inspector.archs/1": (("choices", "default"), ("help", "choices"), ("hyperparameter",)),
        "inspector.schemes/1": (("groups",), ("what",), ())}


def render(report: dict[str, Any], fmt: str, style: Style = PLAIN) -> str:
    cols = report["columns"]
    if fmt == "json":
        return strict_json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        w = csv_writer(out)
        w.writerow([c.replace(" ", "_") for c in cols])
        for r in report["rows"]:
            w.writerow([r[c] for c in cols])
        return out.getvalue()
    if fmt not in ("table", "markdown"):
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    drop, prose, names = _FIT.get(report["schema"], ((), (), ()))
    rows = [[sanitize(str(r[c])) for c in cols] for r in report["rows"]]
    text = table(cols, rows, style, markdown=fmt == "markdown", drop=drop, clip_cols=prose,
                 elide_cols=names)
    note = report.get("note")
    return text + "\n" + (f"\n{style.wrap(note)}\n" if note else "")
