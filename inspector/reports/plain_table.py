"""tabulate's ``simple`` and ``github`` tables for plain text cells, without tabulate's per-cell
work (number parsing, invisible-code stripping, wide-character widths): a 50,000-row listing
spent most of its table time there. Same bytes as ``tabulate(rows, headers, fmt,
disable_numparse=True, colalign=align)`` (a property test compares them); anything this does
not model (non-ASCII or control characters, an empty table, another format) returns None and
the caller uses tabulate.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Sequence

MIN_PADDING = 2  # tabulate pads every header by two


def plain_table(rows: Sequence[Sequence[str]], headers: Sequence[str], fmt: str,
                colalign: Sequence[str]) -> str | None:
    """The table as tabulate writes it, or None when only tabulate can say."""
    if fmt not in ("simple", "github") or not rows or len(colalign) != len(headers):
        return None
    if any(len(r) != len(headers) for r in rows):
        return None
    columns = [[c.strip() for c in col] for col in zip(*rows, strict=True)]
    heads = list(headers)
    for col in (*columns, heads):
        text = "".join(col)
        if not (text.isascii() and text.isprintable()):
            return None
    if any(a not in ("left", "right") for a in colalign):
        return None
    widths = [max(len(h) + MIN_PADDING, max(map(len, col))) for h, col in zip(heads, columns,
                                                                                 strict=True)]
    # One format per line (no padded copy of every cell): "{:<12}  {:>7}"
    spec = ["{:" + ("<" if a == "left" else ">") + str(w) + "}"
            for a, w in zip(colalign, widths, strict=True)]
    head = [s.format(h) for s, h in zip(spec, heads, strict=True)]
    body = zip(*columns, strict=True)
    if fmt == "simple":
        line = "  ".join(spec).format
        lines = ["  ".join(head).rstrip(), "  ".join("-" * w for w in widths)]
        lines.extend(line(*r).rstrip() for r in body)
        return "\n".join(lines)
    line = ("| " + " | ".join(spec) + " |").format
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines.extend(line(*r) for r in body)
    return "\n".join(lines)
