"""The output of a verb over many checkpoints (``show A B ...``, ``show --format jsonl``): each
checkpoint's rendered report, or its error, written in order as it comes, above the progress
bar: text and markdown under a header naming the checkpoint, ``json`` as one array, ``jsonl``
one report per line; an error is a line on stderr (in JSON, an ``{"path", "error"}`` item)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from inspector.adapters.errors import InspectorError
from inspector.reports.render import sanitize


def write_fleet(results: Iterable[tuple[Any, Any]], fmt: str, bar: Any,
                out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Write each ``(target, (text, exit code) or exception)`` in order; the worst exit code
    (2 for a failed checkpoint). ``bar``: the progress bar (paused while writing)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    worst = 0
    first = True
    for target, got in results:
        with bar.paused():
            code = write_item(target, got, fmt, first, out, err)
        worst = max(worst, code)
        # an error line on stderr leaves stdout's first report still to come
        first = first and isinstance(got, Exception) and fmt not in ("json", "jsonl")
        bar.advance(1)
    if fmt == "json":
        out.write("[]\n" if first else "\n]\n")
    return worst


def write_item(target: Any, got: Any, fmt: str, first: bool, out: TextIO, err: TextIO) -> int:
    """One checkpoint's report or error line; its exit code."""
    label = target.label  # an argument as given: a URL with its credentials
    if "://" in label:  # (redaction is imported only where a URL or an error needs it)
        from inspector.adapters.redaction import redact

        label = redact(label)
    if isinstance(got, Exception):
        from inspector.adapters.redaction import redact_text

        message = redact_text(str(got) if isinstance(got, InspectorError) else (
            f"{label}: {type(got).__name__}: {got}"
        ))
        if fmt in ("jsonl", "json"):
            line = json.dumps({"path": label, "error": message}, ensure_ascii=False)
            out.write(("[\n" if first else ",\n") if fmt == "json" else "")
            out.write(line + ("\n" if fmt == "jsonl" else ""))
            out.flush()
        else:
            err.write(f"inspector: {sanitize(message)}\n")
        return 2
    text, code = got
    if fmt == "jsonl":
        out.write(json.dumps(json.loads(text), ensure_ascii=False) + "\n")
    elif fmt == "json":  # one JSON array of the reports
        out.write(("[\n" if first else ",\n") + text.rstrip("\n"))
    else:
        head = f"## {label}" if fmt == "markdown" else f"==> {label} <=="
        out.write(("" if first else "\n") + sanitize(head) + "\n" + text)
    out.flush()
    return code
