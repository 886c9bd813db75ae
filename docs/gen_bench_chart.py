"""The benchmark chart of the documentation, drawn from the benchmark's own output.

Reads ``bench/out/results.json`` when a benchmark run left one, else the committed snapshot
``docs/bench_results.json``; either holds rows ``{name, ours_s, floor_s, producer_s, ratio,
target, met}`` (a list, or under ``"rows"``). Writes ``docs/assets/bench_ratio.svg``: one bar per
row, the cost of the tool divided by the floor, with the row's target marked.

Run as a script (``python docs/gen_bench_chart.py``) or as an mkdocs hook (``hooks:`` in
mkdocs.yml), which redraws the chart before every build and rewrites the file only when it
changed, so ``mkdocs serve`` does not rebuild in a loop.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCES = (ROOT / "bench" / "out" / "results.json", HERE / "bench_results.json")
OUT = HERE / "assets" / "bench_ratio.svg"

ROW_H, LABEL_W, BAR_W, PAD = 22, 330, 380, 12
MET, MISSED, NO_TARGET, TARGET = "#2e7d32", "#c62828", "#757575", "#212121"


def load_rows() -> tuple[list[dict[str, Any]], Path]:
    for path in SOURCES:
        if path.is_file():
            doc = json.loads(path.read_text(encoding="utf-8"))
            rows = doc["rows"] if isinstance(doc, dict) else doc
            return [r for r in rows if r.get("ratio") is not None], path
    raise FileNotFoundError("no benchmark results: " + ", ".join(str(p) for p in SOURCES))


def svg(rows: list[dict[str, Any]], source: str) -> str:
    top = ROW_H * 2
    scale = max([float(r["ratio"]) for r in rows] + [float(r.get("target") or 0) for r in rows])
    scale = max(1.0, scale) * 1.1
    width = LABEL_W + BAR_W + 90
    height = top + ROW_H * len(rows) + ROW_H * 2

    def x(v: float) -> float:
        return LABEL_W + BAR_W * v / scale

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" role="img">',
        f"<title>Cost of each task divided by its floor ({escape(source)})</title>",
        f'<text x="{PAD}" y="{ROW_H}" font-weight="bold">time ÷ floor (lower is better; '
        f"| the target; green met, red missed, grey no target)</text>",
    ]
    for tick in range(int(scale) + 1):
        tx = x(tick)
        out.append(f'<line x1="{tx:.1f}" y1="{top - 4}" x2="{tx:.1f}" '
                   f'y2="{top + ROW_H * len(rows)}" stroke="#ddd"/>')
        out.append(f'<text x="{tx:.1f}" y="{top + ROW_H * len(rows) + 14}" '
                   f'text-anchor="middle">{tick}×</text>')
    for i, r in enumerate(rows):
        y = top + i * ROW_H
        ratio = float(r["ratio"])
        met = r.get("met")
        colour = NO_TARGET if met is None else MET if met else MISSED
        out.append(f'<text x="{LABEL_W - 6}" y="{y + 15}" text-anchor="end">'
                   f'{escape(str(r["name"]))}</text>')
        out.append(f'<rect x="{LABEL_W}" y="{y + 4}" width="{x(ratio) - LABEL_W:.1f}" '
                   f'height="{ROW_H - 8}" fill="{colour}"/>')
        out.append(f'<text x="{x(ratio) + 4:.1f}" y="{y + 15}">{ratio:.2f}×</text>')
        if r.get("target"):
            tx = x(float(r["target"]))
            out.append(f'<line x1="{tx:.1f}" y1="{y + 1}" x2="{tx:.1f}" y2="{y + ROW_H - 1}" '
                       f'stroke="{TARGET}" stroke-width="2"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write() -> Path:
    rows, source = load_rows()
    text = svg(rows, source.relative_to(ROOT).as_posix())
    OUT.parent.mkdir(exist_ok=True)
    if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
        OUT.write_text(text, encoding="utf-8")
    return OUT


def on_pre_build(config: Any) -> None:  # mkdocs hook
    write()


if __name__ == "__main__":
    print(write())
