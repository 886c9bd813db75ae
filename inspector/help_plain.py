"""The verbs' docstrings as plain help text: reStructuredText markup out, prose wrapped to the
terminal, ``Example::`` blocks kept line for line.

:func:`to_blocks` does the conversion (at generation time, into ``inspector/help_text.py``, or
when that is stale); :func:`render` lays the blocks out at a width. A block is either
``("pre", lines)`` (a literal block, printed as written) or ``("text", items)``: one paragraph or
list, each item ``(indent, hang, text)`` printed from column ``indent``, its further lines from
column ``hang`` (a definition such as ``  verified    0  every stored...`` or a ``- `` list item
hangs under its text).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    Item = tuple[int, int, str]
    Block = tuple[str, Any]  # ("pre", list[str]) or ("text", list[Item])

_ROLE = re.compile(r":[A-Za-z][\w.+-]*:`(~?)([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``")
_DEFAULT_ROLE = re.compile(r"(?<![\w`])`([^`\s][^`]*)`(?![\w`])")
_GAP = re.compile(r"^(\s*\S+(?: \S+)*?)(\s{2,})\S")  # a term, then two or more spaces
_BULLET = re.compile(r"^(\s*)([-*+] )\S")


def inline(text: str) -> str:
    """``text`` without inline markup: ``literal``, :role:`target` and `default role`."""
    text = _ROLE.sub(lambda m: m.group(2).rpartition(".")[2] if m.group(1) else m.group(2), text)
    text = _LITERAL.sub(r"\1", text)
    return _DEFAULT_ROLE.sub(r"\1", text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _paragraphs(lines: list[str]) -> list[list[str]]:
    """``lines`` split at blank lines."""
    out: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            out[-1].append(line.rstrip())
        elif out[-1]:
            out.append([])
    return [p for p in out if p]


def _items(block: list[str]) -> list[Item]:
    """A prose block as paragraphs: one for plain prose, one per item of a definition list
    (``term  text``) or a bullet list, a heading line ending in ``:`` on its own."""
    items: list[list[str]] = []
    for line in block:
        if items:
            first = items[-1][0]
            deeper = _indent(line) > _indent(first)
            heading = len(items[-1]) == 1 and first.endswith(":")
            starts = _BULLET.match(line) or (_GAP.match(line) and not deeper)
            if (deeper and not heading) or (not deeper and not starts
                                            and _indent(line) == _indent(first)
                                            and not _BULLET.match(first)
                                            and not _GAP.match(first)):
                items[-1].append(line)
                continue
        items.append([line])
    out: list[Item] = []
    for item in items:
        first = item[0]
        indent = _indent(first)
        hang = indent
        if len(item) > 1 and _indent(item[1]) > indent:
            hang = min(_indent(line) for line in item[1:])
        elif (m := _BULLET.match(first)) is not None:
            hang = len(m.group(1)) + len(m.group(2))
        elif (m := _GAP.match(first)) is not None and len(item) == 1:
            hang = len(m.group(1)) + len(m.group(2))
        text = " ".join([first.strip(), *(line.strip() for line in item[1:])])
        out.append((indent, hang, inline(text)))
    return out


def to_blocks(doc: str, docstring: bool = True) -> list[Block]:
    """A docstring (reStructuredText) as plain blocks: ``Example::`` becomes ``Example:`` and
    the indented block after it is kept as written (de-indented to four spaces). A docstring's
    common indentation goes (as :func:`inspect.cleandoc` does); other text keeps its own."""
    lines = doc.expandtabs(8).strip("\n").splitlines()
    if docstring and lines:
        common = min((_indent(line) for line in lines[1:] if line.strip()), default=0)
        lines = [lines[0].strip()] + [line[common:] for line in lines[1:]]
    out: list[Block] = []
    i = 0
    while i < len(lines):
        while i < len(lines) and not lines[i].strip():
            i += 1
        start = i
        while i < len(lines) and lines[i].strip():
            i += 1
        block = lines[start:i]
        if not block:
            break
        literal = block[-1].rstrip().endswith("::")
        if literal:
            last = block[-1].rstrip()[:-2].rstrip()
            # "Example::" -> "Example:"; "text ::" -> "text"; a lone "::" goes
            block[-1] = last + ":" if last and not block[-1].rstrip()[:-2].endswith(" ") else last
            block = [line for line in block if line.strip()]
        if block:
            out.append(("text", _items(block)))
        if literal:
            base = _indent(lines[start]) if start < len(lines) else 0
            pre: list[str] = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
                pre.append(lines[i].rstrip())
                i += 1
            while pre and not pre[-1]:
                pre.pop()
            while pre and not pre[0]:
                pre.pop(0)
            shift = min((_indent(line) for line in pre if line), default=0) - 4
            out.append(("pre", [line[shift:] if shift > 0 else line for line in pre]))
    return out


def render(blocks: list[Block], width: int) -> str:
    """``blocks`` laid out at ``width`` columns (literal blocks as written), a blank line
    between blocks."""
    import textwrap

    parts: list[str] = []
    for block in blocks:
        if block[0] == "pre":
            parts.append("\n".join(block[1]))
            continue
        lines = []
        for indent, hang, text in block[1]:
            wrapper = textwrap.TextWrapper(
                width=max(width, hang + 20), initial_indent=" " * indent,
                subsequent_indent=" " * hang, break_on_hyphens=False)
            lines.append(wrapper.fill(text))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
