"""The text lines of ``inspector scan``: one per file, and the summary."""

from __future__ import annotations

from typing import Any

from inspector.adapters.security.scan import FileResult

from .render import sanitize
from .text import clip, elide

MIN_PATH = 24  # a path keeps at least this many characters (its middle elided)


def line(r: FileResult, width: int | None = None) -> str:
    """``verdict  path  [kind]  what``: one line per file, fitted to ``width`` columns (the
    path keeps most of the room, its middle elided; the text's end clipped)."""
    shown = [i for i in r.items if i.level == r.verdict] or r.items
    text = "; ".join(sanitize(i.text) for i in shown[:5])
    if len(shown) > 5:
        text += f"; ... {len(shown) - 5} more"
    if not text:
        n = len(r.globals)
        text = f"{n} global{'s' * (n != 1)}, all vetted" if n else "no code found"
    path = sanitize(r.path)
    lead = f"{r.verdict:<9}  "
    kind = f"  [{r.kind}]  "
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
