"""``inspector scan``'s output from its report (``inspector.scan/1``): the text lines (one per
file, then notes and the summary), JSON, CSV and SARIF (:mod:`inspector.reports.sarif`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inspector.adapters.security.scan import FileResult

from .render import sanitize
from .text import PLAIN, Style, clip, elide

MIN_PATH = 24  # a path keeps at least this many characters (its middle elided)


def line(r: FileResult | Mapping[str, Any], width: int | None = None) -> str:
    """``verdict  path  [kind]  what``: one line per file (a result or its ``to_dict()``),
    fitted to ``width`` columns (the path keeps most of the room, its middle elided; the text's
    end clipped)."""
    d = r.to_dict() if isinstance(r, FileResult) else r
    items = d["findings"]
    shown = [i for i in items if i["level"] == d["verdict"]] or items
    text = "; ".join(sanitize(i["text"]) for i in shown[:5])
    if len(shown) > 5:
        text += f"; ... {len(shown) - 5} more"
    if not text:
        n = len(d["globals"])
        trusted = sum(1 for g in d["globals"] if str(g.get("why", "")).startswith("trusted"))
        text = (f"{n} global{'s' * (n != 1)}: {n - trusted} vetted, {trusted} trusted by the "
                "user" if trusted else f"{n} global{'s' * (n != 1)}, all vetted"
                ) if n else "no code found"
    path = sanitize(d["path"])
    lead = f"{d['verdict']:<9}  "
    kind = f"  [{d['kind']}]  "
    if width:
        avail = width - len(lead) - len(kind)
        if len(path) + len(text) > avail:  # the path keeps most of the room, its middle elided
            keep = max(avail - len(text), int(avail * 0.6), min(MIN_PATH, len(path)))
            path = elide(path, max(min(len(path), keep, avail - 2), 5))
            text = clip(text, max(avail - len(path), 0))
    return f"{lead}{path}{kind}{text}"


def fit(text: str, width: int | None) -> str:
    """A free line (a note naming a path, the summary) in at most ``width`` columns, its middle
    elided."""
    return elide(text, width) if width and len(text) > width else text


def summary_line(s: dict[str, Any]) -> str:
    out = (
        f"scanned {s['files']} file{'s' * (s['files'] != 1)}: {s['safe']} safe, "
        f"{s['foreign']} foreign, {s['dangerous']} dangerous, {s['error']} error"
    )
    if s["not_followed"]:
        out += f"; {s['not_followed']} not followed (see the notes)"
    return out


FORMATS = ("text", "json", "csv", "sarif")


def render(report: Mapping[str, Any], fmt: str, style: Style = PLAIN) -> str:
    """The whole output of ``scan --format fmt`` for ``report``."""
    if fmt in ("json", "sarif"):
        from . import strict_json

        if fmt == "sarif":
            from .sarif import sarif_log

            report = sarif_log(report)
        return strict_json.dumps(report, indent=1) + "\n"
    if fmt == "csv":
        return _csv(report)
    if fmt in ("text", "table"):
        return "".join(text_line(f, style) for f in report["files"]) + tail(report, style)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def text_line(file: Mapping[str, Any], style: Style = PLAIN) -> str:
    """One file's line, its verdict painted as the style says, with its newline."""
    verdict, _, rest = line(file, style.width).partition(" ")
    return style.paint(verdict) + " " + rest + "\n"


def tail(report: Mapping[str, Any], style: Style = PLAIN) -> str:
    """The lines after the files': a note per link not followed, then the summary."""
    out = [fit(f"note: {sanitize(note)}", style.width) for note in report["not_followed"]]
    out.append(fit(summary_line(report["summary"]), style.width))
    return "".join(x + "\n" for x in out)


def _csv(report: Mapping[str, Any]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["path", "verdict", "kind", "what"])
    for d in report["files"]:
        w.writerow([d["path"], d["verdict"], d["kind"] or "",
                    "; ".join(f["text"] for f in d["findings"])])
    return buf.getvalue()
