"""The text lines of ``inspector scan``: one per file, and the summary."""

from __future__ import annotations

from typing import Any

from inspector.adapters.security.scan import FileResult

from .render import sanitize


def line(r: FileResult) -> str:
    """``verdict  path  [kind]  what``: one line per file."""
    shown = [i for i in r.items if i.level == r.verdict] or r.items
    text = "; ".join(sanitize(i.text) for i in shown[:5])
    if len(shown) > 5:
        text += f"; ... {len(shown) - 5} more"
    if not text:
        n = len(r.globals)
        text = f"{n} global{'s' * (n != 1)}, all on the allowlist" if n else "no code found"
    return f"{r.verdict:<9}  {sanitize(r.path)}  [{r.kind}]  {text}"


def summary_line(s: dict[str, Any]) -> str:
    out = (
        f"scanned {s['files']} file{'s' * (s['files'] != 1)}: {s['safe']} safe, "
        f"{s['foreign']} foreign, {s['dangerous']} dangerous, {s['error']} error"
    )
    if s["not_followed"]:
        out += f"; {s['not_followed']} link(s) not followed"
    return out
