"""What every text renderer shares: how numbers print, how a table fits the terminal, colour.

A :class:`Style` says how text output looks; :func:`terminal_style` builds it from the command
line and the environment. The default ``Style()`` is the piped output: full names, no colour,
thousands separators.

- Counts keep thousands separators (``42,767``) unless ``raw_numbers``; shapes never have them
  (``(42767, 512)``: a separator would read as another dimension).
- :func:`table` fits a table to ``width`` when one is set (stdout is a terminal, or ``COLUMNS``
  is set): low-value columns drop first, in the order the caller lists them, then long names
  are elided in the middle (``model.layers.0.…q_proj.weight``).
- Colour (status words, findings, deltas) only on a terminal, never with ``NO_COLOR`` set.
"""

from __future__ import annotations

import os
import sys

from inspector.adapters.model import Record

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TextIO

ELLIPSIS = "…"
MIN_NAME = 16  # an elided name keeps at least this many characters
LAST_RESORT = 8  # ... and any text column this many when nothing else is left
GAP = 2  # tabulate's "simple" format puts two spaces between columns

_SGR = {"good": "32", "bad": "31", "warn": "33", "dim": "2", "bold": "1"}
# words a renderer may colour, by meaning; anything else stays plain
_WORDS = {
    "ok": "good", "verified": "good", "safe": "good", "unchanged": "good", "same": "good",
    "VERIFIED": "good", "added": "good",
    "mismatch": "bad", "MISMATCH": "bad", "missing": "bad", "unexpected": "bad",
    "wrong_shape": "bad", "danger": "bad", "dangerous": "bad", "removed": "bad", "error": "bad",
    "unsafe": "bad", "UNSAFE": "bad",
    "incomplete": "warn", "INCOMPLETE": "warn", "not_modelled": "warn", "warn": "warn",
    "foreign": "warn", "reshaped": "warn", "retyped": "warn", "changed": "warn",
}


class Style(Record):
    """How text output looks. ``width``: fit tables to this many columns (None: never elide);
    ``color``: ANSI colour for status words, findings and deltas; ``raw_numbers``: counts
    without thousands separators; ``verbose``: every hyperparameter, not only the
    shape-determining ones. Read-only by contract (a plain record: no ``dataclasses`` on the
    listing path)."""

    __slots__ = ("width", "color", "raw_numbers", "verbose")

    def __init__(self, width: int | None = None, color: bool = False, raw_numbers: bool = False,
                 verbose: bool = False) -> None:
        self.width = width
        self.color = color
        self.raw_numbers = raw_numbers
        self.verbose = verbose

    def count(self, n: int) -> str:
        """A count: ``42,767`` (``42767`` with ``raw_numbers``)."""
        return str(n) if self.raw_numbers else f"{n:,}"

    def signed(self, n: int) -> str:
        """A delta: ``+1,024``, ``-16``, ``0``."""
        if not n:
            return "0"
        return f"{n:+d}" if self.raw_numbers else f"{n:+,}"

    def paint(self, text: str, kind: str | None = None) -> str:
        """``text`` in the colour of ``kind`` (good/bad/warn/dim/bold; default: by the word)."""
        if not self.color:
            return text
        kind = kind or _WORDS.get(text.split(" ", 1)[0].rstrip(":,;"))
        return f"\033[{_SGR[kind]}m{text}\033[0m" if kind else text

    def wrap(self, line: str, indent: str = "  ") -> str:
        """A free-text line wrapped to ``width`` (continuation lines indented); unchanged
        when no width is set (piped)."""
        if not self.width or len(line) <= self.width:
            return line
        import textwrap

        return textwrap.fill(line, self.width, subsequent_indent=indent,
                             break_long_words=True, break_on_hyphens=False)

    def delta(self, n: int) -> str:
        """A signed delta, red when negative and green when positive (on a terminal)."""
        text = self.signed(n)
        return self.paint(text, "bad" if n < 0 else "good") if n else text


PLAIN = Style()


def shape_text(shape: Sequence[int]) -> str:
    """Shape as Python/torch print it: ``(42767, 512)``, ``(512,)``, ``()``; never with
    thousands separators."""
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(d) for d in shape) + ")"


def terminal_width(stream: TextIO | None = None) -> int | None:
    """Columns to fit: ``COLUMNS`` when set to a number, else the terminal's width when
    ``stream`` (stdout) is a terminal, else None (piped: full names)."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        pass
    return None


def use_color(choice: str = "auto", stream: TextIO | None = None) -> bool:
    """``always``/``never``, or ``auto``: only on a terminal, never with ``NO_COLOR`` set
    (https://no-color.org) or ``TERM=dumb``."""
    if choice != "auto":
        return choice == "always"
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (ValueError, AttributeError):
        return False


def terminal_style(raw_numbers: bool = False, verbose: bool = False, color: str = "auto",
                   stream: TextIO | None = None) -> Style:
    """The style for text written to ``stream`` (default stdout)."""
    return Style(terminal_width(stream), use_color(color, stream), raw_numbers, verbose)


def elide(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, the middle replaced by ``…``."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its end replaced by ``…`` (for prose, whose
    start says what it is)."""
    return text if len(text) <= width else text[:max(width - 1, 0)] + ELLIPSIS


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], style: Style = PLAIN, *,
          align: Sequence[str] | None = None, markdown: bool = False,
          drop: Sequence[str] = (), elide_cols: Sequence[str] = (),
          clip_cols: Sequence[str] = (), paint_cols: Sequence[str] = ()) -> str:
    """A table of text cells (tabulate ``simple``, or ``github`` for markdown).

    With ``style.width`` (and not markdown) it fits that width: the columns named in ``drop``
    go first while the table is too wide (those with one value on every row before the others,
    each kind in the given order); then the prose columns in
    ``clip_cols`` are cut at the end and the name columns in ``elide_cols`` shortened in the
    middle, in that order, down to :data:`MIN_NAME`; then any text column, widest first, down
    to :data:`LAST_RESORT`. Cells of
    ``paint_cols`` are coloured by their first word (status words) when ``style.color``.
    """
    from inspector.reports.plain_table import plain_table

    headers = list(headers)
    if (style.width and not markdown) or (style.color and paint_cols):
        rows = [list(r) for r in rows]  # fitted or painted in place: the caller's stay as given
    align = list(align) if align else ["left"] * len(headers)
    if markdown:
        rows = [[c.replace("|", "\\|") for c in r] for r in rows]
    elif style.width:
        headers, rows, align = _fit(headers, rows, align, style.width, drop, elide_cols,
                                    clip_cols)
    if style.color and not markdown:
        for name in paint_cols:
            if name in headers:
                i = headers.index(name)
                for r in rows:
                    r[i] = style.paint(r[i])
    fmt = "github" if markdown else "simple"
    fast = plain_table(rows, headers, fmt, align)  # tabulate's bytes, without its per-cell work
    if fast is not None:
        return fast
    from tabulate import tabulate

    return tabulate(rows, headers, fmt, disable_numparse=True, colalign=align)


def _widths(headers: list[str], rows: list[list[str]]) -> list[int]:
    """Column widths as tabulate lays them out (a header gets two spaces of padding)."""
    return [max([len(h) + 2, *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]


def _total(ws: list[int]) -> int:
    return sum(ws) + GAP * (len(ws) - 1)


def _fit(headers: list[str], rows: list[list[str]], align: list[str], width: int,
         drop: Sequence[str], elide_cols: Sequence[str], clip_cols: Sequence[str] = ()
         ) -> tuple[list[str], list[list[str]], list[str]]:
    """The table cut down to ``width``: columns dropped (:func:`_kept_columns`), then the named
    columns shortened, then any text column (:func:`_shorten`)."""
    kept = _kept_columns(headers, rows, width, drop)
    headers = [headers[i] for i in kept]
    align = [align[i] for i in kept]
    rows = [[r[i] for i in kept] for r in rows]
    widths = _widths(headers, rows)
    over = _total(widths) - width
    clipped = [(headers.index(n), clip, MIN_NAME) for n in clip_cols if n in headers]
    rows, over = _shorten(headers, rows, widths, over, clipped)
    rows, over = _shorten_evenly(headers, rows, widths, over,
                                 [headers.index(n) for n in elide_cols if n in headers])
    # still too wide: any text column, names included, down to a few characters, then down
    # to its header's width (numbers are never cut)
    for floor in (LAST_RESORT, 1):
        widest = sorted(range(len(headers)), key=lambda i: -widths[i])
        rows, over = _shorten(headers, rows, widths, over,
                              [(i, elide, floor) for i in widest if align[i] == "left"])
    return headers, rows, align


def _kept_columns(headers: list[str], rows: list[list[str]], width: int,
                  drop: Sequence[str]) -> list[int]:
    """The indices of the columns kept: ``drop`` columns go until the table fits, the columns
    that say the same on every row (they tell least) first; then a dropped column comes back if
    there is room for it after all."""
    every = _widths(headers, rows)
    index = {h: i for i, h in enumerate(headers)}
    present = [n for n in drop if n in index]
    constant = [n for n in present if len({r[index[n]] for r in rows}) <= 1]
    order = [*constant, *(n for n in present if n not in constant)]
    kept = list(range(len(headers)))
    dropped: list[int] = []
    for name in order:
        if _total([every[i] for i in kept]) <= width or len(kept) == 1:
            break
        kept.remove(index[name])
        dropped.append(index[name])
    for i in reversed(dropped):
        if _total([every[j] for j in kept] + [every[i]]) <= width:
            kept = sorted([*kept, i])
    return kept


def _shorten_evenly(headers: list[str], rows: list[list[str]], widths: list[int], over: int,
                    names: Sequence[int]) -> tuple[list[list[str]], int]:
    """Elide the name columns ``names`` widest first, down to :data:`MIN_NAME`, so two name
    columns (a diff's tensor and B tensor) end up alike rather than one cut to its floor while
    the other stays whole; ``widths`` is updated. (rows, what is still over)"""
    targets = {i: widths[i] for i in names}
    floors = {i: max(MIN_NAME, len(headers[i]) + 2) for i in names}
    while over > 0 and targets:
        i = max(names, key=lambda j: (targets[j] > floors[j], targets[j]))
        if targets[i] <= floors[i]:
            break
        targets[i] -= 1
        over -= 1
    for i, target in targets.items():
        if target < widths[i]:
            rows = [[*r[:i], elide(r[i], target), *r[i + 1:]] for r in rows]
            widths[i] = target
    return rows, over


def _shorten(headers: list[str], rows: list[list[str]], widths: list[int], over: int,
             columns: Sequence[tuple[int, Callable[[str, int], str], int]]
             ) -> tuple[list[list[str]], int]:
    """Shorten each ``(column, cut, floor)`` in turn (never below ``floor`` or its header) until
    the table is ``over`` characters narrower; ``widths`` is updated. (rows, what is still over)"""
    for i, cut, floor in columns:
        if over <= 0:
            break
        target = max(floor, len(headers[i]) + 2, widths[i] - over)
        if target < widths[i]:
            rows = [[*r[:i], cut(r[i], target), *r[i + 1:]] for r in rows]
            over -= widths[i] - target
            widths[i] = target
    return rows, over
