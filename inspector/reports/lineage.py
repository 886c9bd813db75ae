"""The lineage forest as a terminal tree (``inspector lineage``)."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from inspector.reports.render import sanitize


def common_root(paths: list[str]) -> str:
    if len(paths) < 2:
        return os.path.dirname(paths[0]) if paths else ""
    try:
        return os.path.commonpath(paths)
    except ValueError:
        return ""


def short(path: str, root: str) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    return path


def summary(edge: Any) -> str:
    """One phrase of an edge's evidence."""
    ev = edge.evidence
    k = edge.kind
    if k == "re-save":
        return "; ".join(ev.get("changes", []))
    if k == "conversion":
        return f"map {ev['map']}, {ev['tensors']} tensors, rel. error <= {ev['rel_l2']:.2g}"
    if k == "continued-training":
        return f"steps {ev['steps'][0]} -> {ev['steps'][1]}, drift {ev['mean_drift']:.3g}"
    if k == "lora-merge":
        return f"rank {ev['rank']} on {', '.join(ev['target_modules'])}"
    if k == "adapter-of":
        how = "a merged copy reproduces it" if ev.get("merged_copy") else "shapes fit"
        return f"r={ev.get('r')}, {ev.get('targets')} targets, {how}; declaration " \
               f"{ev.get('declaration')}"
    if k == "prune":
        return "removed " + ", ".join(ev.get("removed", [])[:3])
    if k == "resize":
        if ev.get("reshaped"):
            (name, (a, b)), *_ = ev["reshaped"].items()
            return f"{name} {a} -> {b}"
        return "added " + ", ".join(ev.get("added", [])[:3])
    changed = ev.get("changed_tensors", [])
    what = "all tensors" if not ev.get("partial") else ", ".join(changed[:3]) + (
        f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return f"changed {what}"


def render_table(forest: Any, counts: dict[str, int], width: int | None = None) -> str:
    """The forest as an indented tree; each line cut to ``width`` (a terminal's) when given."""
    paths = list(forest.nodes)
    root_dir = common_root(paths)
    children = defaultdict(list)
    for e in forest.edges:
        children[e.parent].append(e)
    lines = [f"lineage: {len(paths)} checkpoints, {len(forest.edges)} edges, "
             f"{len(forest.roots())} trees ({counts.get('fingerprinted', 0)} fingerprinted, "
             f"{counts.get('cached', 0)} from the cache)"]
    if root_dir:
        lines.append(f"under {root_dir}")
    seen: set[str] = set()

    def walk(node: str, prefix: str) -> None:
        kids = sorted(children.get(node, []), key=lambda e: e.child)
        for n, e in enumerate(kids):
            last = n == len(kids) - 1
            lines.append(f"{prefix}{'└─ ' if last else '├─ '}{short(e.child, root_dir)}  "
                         f"[{e.kind}, {e.confidence}] {summary(e)}")
            if e.child not in seen:
                seen.add(e.child)
                walk(e.child, prefix + ("   " if last else "│  "))

    for r in sorted(forest.roots()):
        fmt = forest.nodes[r].get("format")
        lines.append(f"{short(r, root_dir)}  ({fmt})")
        seen.add(r)
        walk(r, "")
    for u in forest.unresolved:
        other = f" and {short(u['other'], root_dir)}" if u.get("other") else ""
        lines.append(f"unresolved: {short(u['path'], root_dir)}{other}: {u['kind']} {u['why']}")
    return "\n".join(_clip(sanitize(x), width) for x in lines) + "\n"


def _clip(line: str, width: int | None) -> str:
    return line if not width or len(line) <= width else line[:width - 1] + "…"
