"""The audit report as one self-contained HTML file (``inspector report``).

:class:`AuditReport` is the record: per checkpoint its listing (``inspector.listing/1``), its
check (``inspector.check/1``, or why none was made) and optional value statistics; with two
checkpoints also their diff (``inspector.diff/1``). :func:`to_html` lays it out: a header with
the totals and verdicts, a bar chart of parameters per group and per-layer bars (inline SVG,
drawn here, no script needed), the check's groups and tensors with mismatches highlighted, the
diff, the statistics, and the tensor listing, which a small inline script makes sortable
(click a column) and filterable (a regex box; also ``#filter=REGEX&sort=COLUMN`` in the URL).

Nothing is loaded from the network: no external scripts, styles, fonts or images, and a
Content-Security-Policy that forbids them, so the file can be attached to a model card or a
pull request and viewed offline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html import escape
from typing import Any

SCHEMA = "inspector.report/1"


@dataclass
class CheckpointSection:
    """One checkpoint of the report. ``stats`` is a JSON-ready value-statistics record
    (``{"columns": [...], "tensors": [{...}, ...]}`` and optional ``summary``), when values
    were read; ``check_error`` says why there is no check."""

    listing: dict[str, Any]
    check: dict[str, Any] | None = None
    check_error: str | None = None
    stats: dict[str, Any] | None = None


@dataclass
class AuditReport:
    """Everything one HTML report shows (see the module docstring)."""

    sections: list[CheckpointSection]
    diff: dict[str, Any] | None = None
    version: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "version": self.version,
                "checkpoints": [{"listing": s.listing, "check": s.check,
                                 "check_error": s.check_error, "stats": s.stats}
                                for s in self.sections],
                "diff": self.diff, "notes": self.notes}


# ---------------------------------------------------------------------------------------------
# layout

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2430;
background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d8dce3}
h3{font-size:15px;margin:18px 0 6px}
.card{background:#fff;border:1px solid #d8dce3;border-radius:6px;padding:12px 16px;margin:10px 0}
.totals{display:flex;flex-wrap:wrap;gap:8px 28px}.totals div b{display:block;font-size:18px}
code,.mono,td.num,td.shape{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid #eceef2;text-align:left;vertical-align:top}
th{background:#eef1f5;position:sticky;top:0}th.sortable{cursor:pointer;user-select:none}
th.sorted-asc::after{content:' \\25B2'}th.sorted-desc::after{content:' \\25BC'}
td.num{text-align:right;white-space:nowrap}td.name{word-break:break-all}
tr.mismatch td,tr.op-removed td{background:#fde8e8}tr.not_modelled td,tr.op-reshaped td,
tr.op-retyped td,tr.op-changed td{background:#fff6dc}tr.op-added td{background:#e6f6ea}
.verdict{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:600;color:#fff}
.verdict.verified,.verdict.same{background:#1f883d}.verdict.mismatch,.verdict.unsafe,
.verdict.different{background:#cf222e}.verdict.incomplete{background:#bf8700}
.verdict.none{background:#6e7781}
.filter{margin:6px 0;display:flex;gap:12px;align-items:center}
.filter input{font:inherit;padding:3px 6px;width:320px}
svg text{font:12px system-ui,sans-serif;fill:#1d2430}svg .bar{fill:#3b7dd8}
svg .bar.embedding{fill:#8250df}svg .layerbar{fill:#2da44e}svg .value{fill:#57606a}
.muted{color:#57606a}
"""

# sortable, filterable listing: every table.listing; state also from the URL hash
SCRIPT = r"""
(function(){
  function cellValue(td){
    var v = td.getAttribute('data-sort');
    if (v !== null) { var n = parseFloat(v); return isNaN(n) ? v : n; }
    return td.textContent;
  }
  function sortBy(table, col, dir){
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function(a, b){
      var x = cellValue(a.cells[col]), y = cellValue(b.cells[col]);
      var c = (typeof x === 'number' && typeof y === 'number') ? x - y
              : String(x).localeCompare(String(y));
      return dir === 'desc' ? -c : c;
    });
    rows.forEach(function(r){ body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, i){
      th.classList.remove('sorted-asc', 'sorted-desc');
      if (i === col) th.classList.add('sorted-' + dir);
    });
  }
  function applyFilter(table, text){
    var rx = null;
    try { rx = text ? new RegExp(text) : null; } catch (e) { rx = null; }
    var shown = 0, total = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function(r){
      total++;
      var ok = !rx || rx.test(r.getAttribute('data-name'));
      r.hidden = !ok; if (ok) shown++;
    });
    var out = document.getElementById(table.id + '-shown');
    if (out) out.textContent = shown + ' of ' + total;
    table.setAttribute('data-shown', shown);
  }
  var hash = {};
  location.hash.replace(/^#/, '').split('&').forEach(function(kv){
    var i = kv.indexOf('='); if (i > 0) hash[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1));
  });
  Array.prototype.forEach.call(document.querySelectorAll('table.listing'), function(table){
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function(th, i){
      th.classList.add('sortable');
      th.addEventListener('click', function(){
        var dir = th.classList.contains('sorted-asc') ? 'desc' : 'asc';
        sortBy(table, i, dir);
      });
      if (hash.sort && th.getAttribute('data-key') === hash.sort.replace(/^-/, ''))
        sortBy(table, i, hash.sort.charAt(0) === '-' ? 'desc' : 'asc');
    });
    var box = document.getElementById(table.id + '-filter');
    if (box) {
      box.addEventListener('input', function(){ applyFilter(table, box.value); });
      if (hash.filter) box.value = hash.filter;
    }
    applyFilter(table, box ? box.value : '');
  });
  document.body.setAttribute('data-ready', '1');
})();
"""


def _n(x: int) -> str:
    return f"{x:,}"


def _signed(x: int) -> str:
    return f"{x:+,}" if x else "0"


def _shape(shape: list[int] | None) -> str:
    from inspector.reports.text import shape_text

    return "-" if shape is None else shape_text(shape)


def _bytes(n: int) -> str:
    from inspector.reports.render import _human_bytes

    return _human_bytes(n)


def _verdict_badge(word: str, text: str | None = None) -> str:
    return f'<span class="verdict {escape(word)}">{escape(text or word)}</span>'


def bar_chart(items: list[tuple[str, int, str]], chart_id: str, bar_class: str = "bar",
              total: int | None = None, width: int = 760) -> str:
    """A horizontal bar chart as inline SVG: ``items`` are (label, value, extra class), shares
    of ``total`` (default: their sum); each bar is a ``rect`` with ``data-label`` and
    ``data-value``."""
    if not items:
        return '<p class="muted">nothing to chart</p>'
    label_w = min(340, 12 + 7 * max(len(label) for label, _, _ in items))
    value_w = 150
    bar_w = max(120, width - label_w - value_w)
    row_h, top = 22, 4
    height = top * 2 + row_h * len(items)
    peak = max(v for _, v, _ in items) or 1
    total = total or sum(v for _, v, _ in items) or 1
    out = [f'<svg id="{escape(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">']
    for i, (label, value, extra) in enumerate(items):
        y = top + i * row_h
        w = 0 if value <= 0 else max(1.0, bar_w * value / peak)
        short = label if len(label) <= 48 else label[:22] + "…" + label[-25:]
        out.append(
            f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">'
            f'<title>{escape(label)}</title>{escape(short)}</text>'
            f'<rect class="{bar_class} {escape(extra)}" x="{label_w}" y="{y + 3}" '
            f'width="{w:.1f}" height="{row_h - 6}" data-label="{escape(label)}" '
            f'data-value="{value}"><title>{escape(label)}: {_n(value)}</title></rect>'
            f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + 15}">{_n(value)} '
            f'({100 * value / total:.1f}%)</text>')
    out.append("</svg>")
    return "".join(out)


def _table(headers: list[str], rows: list[str], table_id: str = "", cls: str = "") -> str:
    ident = f' id="{escape(table_id)}"' if table_id else ""
    klass = f' class="{cls}"' if cls else ""
    head = "".join(h if h.startswith("<th") else f"<th>{escape(h)}</th>" for h in headers)
    return f"<table{ident}{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}" \
           "</tbody></table>"


def _listing_table(listing: dict[str, Any], idx: int) -> str:
    cols = [("name", "name"), ("shape", "shape"), ("dtype", "dtype"), ("numel", "numel"),
            ("role", "role"), ("group", "group")]
    heads = [f'<th data-key="{k}">{escape(label)}</th>' for k, label in cols]
    rows = []
    for i, t in enumerate(listing["tensors"]):
        stored = t["stored_name"]
        name = escape(t["name"]) + ("" if stored == t["name"] else
                                    f'<br><span class="muted">{escape(stored)}</span>')
        tied = " (tied)" if t.get("tied_to") and t["tied_to"] != stored else ""
        rows.append(
            f'<tr class="tensor-row" data-name="{escape(t["name"])} {escape(stored)}">'
            f'<td class="name" data-sort="{i:08d}">{name}</td>'
            f'<td class="shape" data-sort="{escape(json.dumps(t["shape"]))}">'
            f'{escape(_shape(t["shape"]))}</td>'
            f'<td>{escape(t["dtype"])}</td>'
            f'<td class="num" data-sort="{t["numel"]}">{_n(t["numel"])}{tied}</td>'
            f'<td>{escape(t["role"])}</td><td>{escape(t.get("group", ""))}</td></tr>')
    tid = f"listing-{idx}"
    n = len(listing["tensors"])
    return (f'<div class="filter"><label>filter (regex) <input id="{tid}-filter" '
            f'type="search" placeholder="e.g. encoder|decoder"></label>'
            f'<span>showing <b id="{tid}-shown">{n} of {n}</b> tensors; click a column to '
            f'sort</span></div>' + _table(heads, rows, tid, "listing"))


def _layer_items(listing: dict[str, Any]) -> list[tuple[str, int, str]]:
    items = []
    for g in listing.get("groups", ()):
        for r in g.get("layers", ()):
            label = " ".join(str(x) for x in (g["name"], r.get("block"), "layer", r["layer"],
                                              r.get("direction")) if x)
            items.append((label, r["parameters"], ""))
    return items


def _check_html(check: dict[str, Any]) -> str:
    from inspector.reports.check import verdict_text

    verdict = check.get("verdict", check["status"])
    arch = check["arch"] or "structural audit (no architecture applies)"
    tot = check["totals"]
    out = [f'<p>{_verdict_badge(verdict, verdict_text(check))} architecture '
           f'<code>{escape(arch)}</code>, scheme <code>{escape(check["scheme"])}</code>; '
           f'found {_n(tot["found"])}, predicted {_n(tot["predicted"])}, delta '
           f'{_signed(tot["delta"])}</p>']
    if check["groups"]:
        rows = [f'<tr class="{escape(g["status"])}"><td>{escape(g["name"])}</td>'
                f'<td class="num">{_n(g["found"])}</td><td class="num">{_n(g["predicted"])}</td>'
                f'<td class="num">{_signed(g["delta"])}</td><td>{escape(g["status"])}</td></tr>'
                for g in check["groups"]]
        out.append(_table(["group", "found", "predicted", "delta", "status"], rows,
                          cls="check-groups"))
    if check["tensors"]:
        rows = [f'<tr class="{_row_class(t["status"])}"><td>{escape(t["status"])}</td>'
                f'<td class="name">{escape(t["name"])}</td>'
                f'<td>{escape(t["group"])}</td><td class="shape">{escape(_shape(t["expected"]))}'
                f'</td><td class="shape">{escape(_shape(t["found"]))}</td></tr>'
                for t in check["tensors"]]
        out.append("<h3>Tensors that differ from the prediction</h3>")
        out.append(_table(["status", "name", "group", "expected", "found"], rows,
                          cls="check-tensors"))
    for p in check.get("parts", ()):
        out.append(f'<p class="muted">not modelled: <b>{escape(p["name"])}</b> '
                   f'({_n(p["elements"])} elements): {escape(p["reason"])}</p>')
    for f in check.get("findings", ()):
        out.append(f'<p class="mismatch">structure: {escape(f["message"])}</p>')
    for note in check.get("notes", ()):
        out.append(f'<p class="muted">note: {escape(note)}</p>')
    return "".join(out)


def _row_class(status: str) -> str:
    """``mismatch`` for a tensor that contradicts the prediction, else its status."""
    return "mismatch" if status in ("wrong_shape", "missing", "unexpected") else escape(status)


def _diff_html(d: dict[str, Any]) -> str:
    from inspector.reports.render_diff import summary_line

    word = "different" if d["different"] else "same"
    out = [f'<p>{_verdict_badge(word)} {escape(summary_line(d))}</p>']
    rows = []
    for t in d["tensors"]:
        op = t["op"] if d["values"] or t["op"] != "unchanged" else "same shape"
        v = t["values"] or {}
        max_abs = "" if "max_abs" not in v else f"{v['max_abs']:.3g}"
        rows.append(
            f'<tr class="op-{escape(t["op"])}"><td>{escape(op)}</td>'
            f'<td class="name">{escape(t["name"])}</td>'
            f'<td class="shape">{escape(_shape(t["a"]["shape"]) if t["a"] else "")}</td>'
            f'<td class="shape">{escape(_shape(t["b"]["shape"]) if t["b"] else "")}</td>'
            f'<td class="num">{max_abs}</td><td>{escape(t.get("note") or "")}</td></tr>')
    if rows:
        out.append(_table(["op", "tensor", "A", "B", "max |a-b|", "note"], rows,
                          cls="diff-tensors"))
    if d["groups"]:
        rows = [f'<tr><td>{escape(g["group"])}</td><td class="num">{_n(g["a"])}</td>'
                f'<td class="num">{_n(g["b"])}</td><td class="num">{_signed(g["delta"])}</td>'
                f'<td>{escape(", ".join(f"{n} {op}" for op, n in g["tensors"].items()))}</td></tr>'
                for g in d["groups"]]
        out.append(f"<h3>Groups (scheme {escape(str(d['scheme']))})</h3>")
        out.append(_table(["group", "A", "B", "delta", "tensors"], rows, cls="diff-groups"))
    return "".join(out)


def _stats_html(stats: dict[str, Any]) -> str:
    cols = list(stats.get("columns") or (stats["tensors"][0].keys() if stats.get("tensors")
                                         else []))
    rows = ["<tr>" + "".join(f'<td class="{"num" if isinstance(r.get(c), (int, float)) else ""}">'
                             f'{escape(_fmt(r.get(c)))}</td>' for c in cols) + "</tr>"
            for r in stats.get("tensors", ())]
    summary = "".join(f"<p>{escape(str(k))}: {escape(_fmt(v))}</p>"
                      for k, v in (stats.get("summary") or {}).items())
    return summary + _table(cols, rows, cls="stats")


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return _n(v)
    return str(v)


def _section(s: CheckpointSection, idx: int) -> str:
    lst = s.listing
    t = lst["totals"]
    verdict = (s.check.get("verdict", s.check["status"]) if s.check else None)
    badge = _verdict_badge(verdict) if verdict else _verdict_badge("none", "not checked")
    totals = "".join(f"<div>{label}<b>{value}</b></div>" for label, value in (
        ("tensors", _n(t["tensors"])), ("parameters", _n(t["parameters"])),
        ("buffers", _n(t["buffers"])), ("optimizer state", _n(t["optimizer"])),
        ("bytes", _bytes(t["bytes"])), ("check", badge)))
    scheme = lst.get("scheme", {}).get("name", "")
    groups = [(g["name"], g["parameters"], "embedding" if g.get("embedding") else "")
              for g in lst.get("groups", ())]
    layers = _layer_items(lst)
    out = [f'<section class="checkpoint" id="checkpoint-{idx}">',
           f'<h1><code>{escape(lst["path"])}</code> <span class="muted">[{escape(lst["format"])}]'
           f'</span></h1>', f'<div class="card totals">{totals}</div>',
           f"<h2>Parameters per group <span class=\"muted\">(scheme {escape(scheme)})</span></h2>",
           bar_chart(groups, f"groups-chart-{idx}")]
    out.append("<h2>Parameters per layer</h2>")
    out.append(bar_chart(layers, f"layers-chart-{idx}", "layerbar", t["parameters"]) if layers else
               '<p class="muted">the scheme captures no layers in these names</p>')
    out.append("<h2>Check: tensors and groups against the prediction</h2>")
    if s.check:
        out.append(f'<div class="card">{_check_html(s.check)}</div>')
    else:
        out.append(f'<p class="muted">not checked: {escape(s.check_error or "")}</p>')
    if s.stats:
        out += ["<h2>Value statistics</h2>", _stats_html(s.stats)]
    for f in lst.get("findings", ()):
        out.append(f'<p class="{escape(f["severity"])}">[{escape(f["severity"])}] '
                   f'{escape(f["message"])}</p>')
    out += ["<h2>Tensors</h2>", _listing_table(lst, idx), "</section>"]
    return "".join(out)


def to_html(report: AuditReport) -> str:
    """The report as one HTML document (UTF-8 text), needing nothing from the network."""
    paths = " vs ".join(s.listing["path"] for s in report.sections)
    body = [_section(s, i) for i, s in enumerate(report.sections)]
    if report.diff is not None:
        body.insert(1 if len(report.sections) > 1 else len(body),
                    f'<section id="diff"><h1>Diff</h1><div class="card">'
                    f'{_diff_html(report.diff)}</div></section>')
    notes = "".join(f'<p class="muted">{escape(n)}</p>' for n in report.notes)
    data = json.dumps(report.to_dict(), ensure_ascii=True).replace("</", "<\\/")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>inspector report: {escape(paths)}</title><style>{CSS}</style></head>"
        f"<body><main>{''.join(body)}{notes}"
        f'<p class="muted">written by inspector {escape(report.version)}; '
        "self-contained, no network needed</p></main>"
        f'<script type="application/json" id="report-data">{data}</script>'
        f"<script>{SCRIPT}</script></body></html>\n")
