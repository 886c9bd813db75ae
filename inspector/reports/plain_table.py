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
    if set(map(len, rows)) != {len(headers)}:
        return None
    columns = [list(map(str.strip, col)) for col in zip(*rows, strict=True)]
    heads = list(headers)
    for col in (*columns, heads):
        text = "".join(col)
        if not (text.isascii() and text.isprintable()):
            return None
    if any(a not in ("left", "right") for a in colalign):
        return None
    widths = [max(len(h) + MIN_PADDING, max(map(len, col))) for h, col in zip(heads, columns,
                                                                                 strict=True)]
    # One %-template per line (no padded copy of every cell), applied at C speed: "%-12s  %7s"
    spec = ["%" + ("-" if a == "left" else "") + str(w) + "s"
            for a, w in zip(colalign, widths, strict=True)]
    head = [s % h for s, h in zip(spec, heads, strict=True)]
    body = zip(*columns, strict=True)
    if fmt == "simple":
        lines = ["  ".join(head).rstrip(), "  ".join("-" * w for w in widths)]
        lines.extend(map(str.rstrip, map("  ".join(spec).__mod__, body)))
        return "\n".join(lines)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines.extend(map(("| " + " | ".join(spec) + " |").__mod__, body))
    return "\n".join(lines)
