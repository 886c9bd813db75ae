"""The lineage forest as one self-contained HTML page (``inspector report --lineage``): each
tree as nested lists (a node names its checkpoint and format, each edge its kind, confidence and
evidence), the unresolved adapters and unreadable paths below, and the JSON document embedded."""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any

from inspector.reports.html import CSP, CSS, script_json
from inspector.reports.lineage import common_root, short, summary

TREE_CSS = """
ul.tree{list-style:none;padding-left:1.2em;border-left:1px solid #ccc;margin:.2em 0}
ul.tree.top{border-left:none;padding-left:0}
.kind{display:inline-block;padding:0 .4em;border-radius:3px;background:#eef;font-size:.85em}
.kind.re-save{background:#eee}.kind.fine-tune,.kind.continued-training{background:#e6f4ea}
.kind.lora-merge,.kind.adapter-of{background:#fdf0d5}.kind.conversion{background:#e8f0fe}
.kind.resize,.kind.prune{background:#fce8e6}.node{font-family:monospace;word-break:normal}
"""


def to_html(forest: Any, counts: dict[str, int], version: str) -> str:
    paths = list(forest.nodes)
    root = common_root(paths)
    children: dict[str, list[Any]] = defaultdict(list)
    for e in forest.edges:
        children[e.parent].append(e)

    def node(path: str) -> str:
        return (f'<span class="node">{escape(short(path, root))}</span> '
                f'<span class="muted">({escape(str(forest.nodes[path].get("format")))})</span>')

    def subtree(path: str, depth: int) -> str:
        kids = sorted(children.get(path, []), key=lambda e: e.child)
        if not kids or depth > 64:
            return ""
        items = "".join(
            f'<li><span class="kind {escape(e.kind)}">{escape(e.kind)}</span> {node(e.child)} '
            f'<span class="muted">{escape(e.confidence)}: {escape(summary(e))}</span>'
            f"{subtree(e.child, depth + 1)}</li>" for e in kids)
        return f'<ul class="tree">{items}</ul>'

    trees = "".join(f"<li>{node(r)}{subtree(r, 0)}</li>" for r in sorted(forest.roots()))
    extra = "".join(f"<li>{escape(short(u['path'], root))}: {escape(u['why'])}</li>"
                    for u in forest.unresolved)
    errors = "".join(f"<li>{escape(e['error'])}</li>" for e in forest.errors)
    doc = forest.to_dict()
    doc["counts"] = counts
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>inspector lineage: {escape(root or ', '.join(paths[:3]))}</title>"
        f"<style>{CSS}{TREE_CSS}</style></head><body><main>"
        f'<section id="lineage"><h1>Lineage</h1><p class="muted">{len(paths)} checkpoints, '
        f"{len(forest.edges)} edges, {len(forest.roots())} trees"
        f"{' under ' + escape(root) if root else ''}</p>"
        f'<div class="card"><ul class="tree top">{trees}</ul></div>'
        + (f"<h2>Unresolved</h2><ul>{extra}</ul>" if extra else "")
        + (f"<h2>Not read</h2><ul>{errors}</ul>" if errors else "")
        + f'</section><p class="muted">written by inspector {escape(version)}; '
        "self-contained, no network needed</p></main>"
        f'<script type="application/json" id="report-data">{script_json(doc)}</script>'
        "</body></html>\n")
