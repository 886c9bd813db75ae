"""The audit report as one self-contained HTML file (``inspector report``).

:class:`AuditReport` is the record: per checkpoint its listing (``inspector.listing/1``), its
check (``inspector.check/1``, or why none was made) and optional value statistics; with two
checkpoints also their diff (``inspector.diff/1``). :func:`to_html` lays it out: a header with
the totals and verdicts, a bar chart of parameters per group and per-layer bars (inline SVG,
drawn here, no script needed), the check's groups and tensors with mismatches highlighted, the
diff (with its value comparison when values were read), the value statistics (findings by
severity, L2 norm per group and per layer, per-group NaN/Inf/zeros), and the tensor listing
(with each tensor's statistics when values were read), which a small inline script makes
sortable (click a column) and filterable (a regex box; also ``#filter=REGEX&sort=COLUMN`` in
the URL, ``-COLUMN`` descending).

Nothing is loaded from the network: no external scripts, styles, fonts or images, and a
Content-Security-Policy that forbids them, so the file can be attached to a model card or a
pull request and viewed offline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any

from inspector.grouping import numbered_layer

SCHEMA = "inspector.report/1"


@dataclass
class CheckpointSection:
    """One checkpoint of the report. ``stats`` is its value statistics
    (:func:`inspector.value_stats.report`, ``inspector.stats/1``) when values were read;
    ``check_error`` says why there is no check."""

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
td.num{text-align:right;white-space:nowrap}td.name{overflow-wrap:break-word}
tr.mismatch td,tr.op-removed td{background:#fde8e8}tr.not_modelled td,tr.op-reshaped td,
tr.op-retyped td,tr.op-changed td{background:#fff6dc}tr.op-added td{background:#e6f6ea}
.verdict{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:600;color:#fff}
.verdict.verified,.verdict.same{background:#1f883d}.verdict.mismatch,.verdict.unsafe,
.verdict.different{background:#cf222e}.verdict.incomplete{background:#bf8700}
.verdict.none{background:#6e7781}.verdict.errors{background:#cf222e}
.verdict.warnings{background:#bf8700}.verdict.clean{background:#1f883d}
.filter{margin:6px 0;display:flex;gap:12px;align-items:center}
.filter input{font:inherit;padding:3px 6px;width:320px}
svg text{font:12px system-ui,sans-serif;fill:#1d2430}svg .bar{fill:#3b7dd8}
svg .bar.embedding{fill:#8250df}svg .layerbar{fill:#2da44e}svg .value{fill:#57606a}
.muted{color:#57606a}nav a{margin:0 4px}
tr.error td{background:#fde8e8}tr.warning td{background:#fff6dc}
ul.findings{list-style:none;padding:0;margin:6px 0}ul.findings li{margin:3px 0}
.sev{display:inline-block;min-width:58px;text-align:center;padding:0 6px;border-radius:10px;
font-weight:600;font-size:12px;color:#fff;margin-right:6px}.sev.error{background:#cf222e}
.sev.warning{background:#bf8700}svg .normbar{fill:#0969da}svg .normbar.bad{fill:#cf222e}
td.bad{color:#cf222e;font-weight:600}
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
      var ok = !rx || rx.test(r.getAttribute('data-name'))
               || rx.test(r.getAttribute('data-group') || '');
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
    from inspector.reports.render import human_bytes

    return human_bytes(n)


def _verdict_badge(word: str, text: str | None = None) -> str:
    return f'<span class="verdict {escape(word)}">{escape(text or word)}</span>'


def bar_chart(items: list[tuple[str, float, str]], chart_id: str, bar_class: str = "bar",
              total: float | None = None, width: int = 760,
              value_text: Callable[[float], str] | None = None) -> str:
    """A horizontal bar chart as inline SVG: ``items`` are (label, value, extra class), shares
    of ``total`` (default: their sum), or each value as ``value_text`` writes it; each bar is a
    ``rect`` with ``data-label`` and ``data-value``."""
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
        text = (value_text(value) if value_text else
                f"{_n(value)} ({100 * value / total:.1f}%)")
        out.append(
            f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">'
            f'<title>{escape(label)}</title>{escape(short)}</text>'
            f'<rect class="{bar_class} {escape(extra)}" x="{label_w}" y="{y + 3}" '
            f'width="{w:.1f}" height="{row_h - 6}" data-label="{escape(label)}" '
            f'data-value="{value!r}"><title>{escape(label)}: {escape(text)}</title></rect>'
            f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + 15}">{escape(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def _table(headers: list[str], rows: list[str], table_id: str = "", cls: str = "") -> str:
    ident = f' id="{escape(table_id)}"' if table_id else ""
    klass = f' class="{cls}"' if cls else ""
    head = "".join(h if h.startswith("<th") else f"<th>{escape(h)}</th>" for h in headers)
    return f"<table{ident}{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}" \
           "</tbody></table>"


STAT_COLS = (("min", "min"), ("max", "max"), ("mean", "mean"), ("std", "std"), ("l2", "L2"))


def _listing_table(listing: dict[str, Any], idx: int, stats: dict[str, Any] | None = None
                   ) -> str:
    """The sortable, filterable tensor listing; with ``stats`` (``inspector.stats/1``) each
    tensor's statistics too, rows with an error finding or a warning highlighted."""
    cols = [("name", "name"), ("shape", "shape"), ("dtype", "dtype"), ("numel", "numel"),
            ("role", "role"), ("group", "group")]
    by_stored: dict[str, dict[str, Any]] = {}
    severity: dict[str, str] = {}
    if stats is not None:
        cols += [*STAT_COLS, ("nonfinite", "NaN/Inf"), ("zeros", "zeros")]
        by_stored = {t["stored_name"]: t for t in stats["tensors"]}
        for f in stats["findings"]:
            if severity.get(f["subject"]) != "error":
                severity[f["subject"]] = f["severity"]
    heads = [f'<th data-key="{k}">{escape(label)}</th>' for k, label in cols]
    rows = []
    for i, t in enumerate(listing["tensors"]):
        stored = t["stored_name"]
        name = _name_html(t["name"]) + ("" if stored == t["name"] else
                                        f'<br><span class="muted">{_name_html(stored)}</span>')
        tied = " (tied)" if t.get("tied_to") and t["tied_to"] != stored else ""
        st = by_stored.get(t.get("tied_to") or stored) or by_stored.get(stored)
        sev = severity.get(st["name"], "") if st else ""
        dtype = escape(t["dtype"])
        if st and st["of"] != "values":
            dtype += f'<br><span class="muted">stats of {escape(st["of"])}</span>'
        rows.append(
            f'<tr class="tensor-row {sev}" data-name="{escape(t["name"])} {escape(stored)}" '
            f'data-group="{escape(t.get("group", ""))}">'
            f'<td class="name" data-sort="{i:08d}">{name}</td>'
            f'<td class="shape" data-sort="{escape(json.dumps(t["shape"]))}">'
            f'{escape(_shape(t["shape"]))}</td>'
            f'<td>{dtype}</td>'
            f'<td class="num" data-sort="{t["numel"]}">{_n(t["numel"])}{tied}</td>'
            f'<td>{escape(t["role"])}</td><td>{escape(t.get("group", ""))}</td>'
            + (_stat_cells(st) if stats is not None else "") + "</tr>")
    tid = f"listing-{idx}"
    n = len(listing["tensors"])
    return (f'<div class="filter"><label>filter (regex) <input id="{tid}-filter" '
            f'type="search" placeholder="name or group, e.g. encoder|attention"></label>'
            f'<span>showing <b id="{tid}-shown">{n} of {n}</b> tensors; click a column to '
            f'sort</span></div>' + _table(heads, rows, tid, "listing"))


def _stat_cells(t: dict[str, Any] | None) -> str:
    """A tensor's statistics cells: the five numbers (full precision in ``data-sort``), its
    NaN/Inf count and its zeros; empty with the reason when its values were not read."""
    n = len(STAT_COLS) + 2
    if t is None:
        return '<td class="muted"></td>' * n
    s = t["stats"]
    if s is None:
        why = escape(t.get("note") or "")
        return (f'<td class="muted" title="{why}">not read</td>'
                + '<td class="muted"></td>' * (n - 1))
    cells = [f'<td class="num stat" data-stat="{k}"{_sort_attr(s[k])}>{escape(_fmt(s[k]))}</td>'
             for k, _ in STAT_COLS]
    bad = s["nan"] + s["posinf"] + s["neginf"]
    what = ", ".join(f"{s[k]:,} {label}" for k, label in
                     (("nan", "NaN"), ("posinf", "+Inf"), ("neginf", "-Inf")) if s[k])
    cells.append(f'<td class="num{" bad" if bad else ""}" data-stat="nonfinite" '
                 f'data-sort="{bad}">{escape(what or "0")}</td>')
    cells.append(f'<td class="num" data-stat="zeros" data-sort="{s["zeros"]}">'
                 f'{_n(s["zeros"])}</td>')
    return "".join(cells)


def _sort_attr(v: Any) -> str:
    """``data-sort`` with the number at full precision (none for inf/NaN, written as text)."""
    return f' data-sort="{v!r}"' if isinstance(v, (int, float)) and math.isfinite(v) else ""


_BREAK_AFTER = str.maketrans({c: c + "<wbr>" for c in "./_:"})


def _name_html(name: str) -> str:
    """A tensor name as HTML text that wraps between its components (after ``.``, ``/``, ``_``
    and ``:``), never inside one unless a component alone is wider than its column."""
    return escape(name).translate(_BREAK_AFTER)


def _layer_items(listing: dict[str, Any]) -> list[tuple[str, int, str]]:
    """Parameters per layer: the scheme's layer captures, else (as the statistics' per-layer
    norms do) each parameter's first numbered name component within its group."""
    items = []
    for g in listing.get("groups", ()):
        for r in g.get("layers", ()):
            label = " ".join(str(x) for x in (g["name"], r.get("block"), "layer", r["layer"],
                                              r.get("direction")) if x)
            items.append((label, r["parameters"], ""))
    if items:
        return items
    sums: dict[tuple[str, str, str], int] = {}
    for t in listing.get("tensors", ()):
        numbered = numbered_layer(t["name"]) if t.get("role") == "parameter" else None
        if numbered is not None:
            key = (t.get("group") or "", numbered[0].rstrip("."), numbered[1])
            sums[key] = sums.get(key, 0) + t["numel"]
    return [(" ".join(x for x in (group, block if block != group else "", "layer", layer) if x),
             n, "") for (group, block, layer), n in sums.items()]


def _check_html(check: dict[str, Any]) -> str:
    from inspector.reports.check import verdict_text

    verdict = check.get("verdict", check["status"])
    arch = check["arch"] or "structural audit (no architecture applies)"
    tot = check["totals"]
    if check.get("audit") == "structure":  # no formula: nothing was predicted
        counts = (f'found {_n(tot["found"])} parameters; no prediction (the structure is '
                  'checked: repeated blocks, optimizer state, ties)')
    else:
        counts = (f'found {_n(tot["found"])}, predicted {_n(tot["predicted"])}, delta '
                  f'{_signed(tot["delta"])}')
    out = [f'<p>{_verdict_badge(verdict, verdict_text(check))} architecture '
           f'<code>{escape(arch)}</code>, scheme <code>{escape(check["scheme"])}</code>; '
           f'{counts}</p>']
    if check["groups"]:
        rows = [f'<tr class="{escape(g["status"])}"><td>{escape(g["name"])}</td>'
                f'<td class="num">{_n(g["found"])}</td><td class="num">{_n(g["predicted"])}</td>'
                f'<td class="num">{_signed(g["delta"])}</td><td>{escape(g["status"])}</td></tr>'
                for g in check["groups"]]
        out.append(_table(["group", "found", "predicted", "delta", "status"], rows,
                          cls="check-groups"))
    if check["tensors"]:
        rows = [f'<tr class="{_row_class(t["status"])}"><td>{escape(t["status"])}</td>'
                f'<td class="name">{_name_html(t["name"])}</td>'
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
    out += [f'<p class="{escape(f["severity"])}">[{escape(f["severity"])}] '
            f'{escape(f["message"])}</p>' for f in d.get("findings") or ()]
    rows = []
    for t in d["tensors"]:
        op = t["op"] if d["values"] or t["op"] != "unchanged" else "same shape"
        v = t["values"] or {}
        nums = "".join(
            f'<td class="num" data-value="{k}"{_sort_attr(v.get(k))}>'
            f'{"" if v.get(k) is None else format(v[k], fmt)}</td>'
            for k, fmt in (("max_abs", ".3g"), ("rel_l2", ".3g"), ("cosine", ".7f")))
        rows.append(
            f'<tr class="op-{escape(t["op"])}"><td>{escape(op)}</td>'
            f'<td class="name">{_name_html(t["name"])}</td>'
            f'<td class="shape">{escape(_shape(t["a"]["shape"]) if t["a"] else "")}</td>'
            f'<td class="shape">{escape(_shape(t["b"]["shape"]) if t["b"] else "")}</td>'
            + (nums if d["values"] else "") + f'<td>{escape(t.get("note") or "")}</td></tr>')
    if rows:
        heads = ["op", "tensor", "A", "B"]
        heads += ["max |a-b|", "rel L2", "cosine"] if d["values"] else []
        out.append(_table([*heads, "note"], rows, cls="diff-tensors"))
    if d["groups"]:
        rows = [f'<tr><td>{escape(g["group"])}</td><td class="num">{_n(g["a"])}</td>'
                f'<td class="num">{_n(g["b"])}</td><td class="num">{_signed(g["delta"])}</td>'
                f'<td>{escape(", ".join(f"{n} {op}" for op, n in g["tensors"].items()))}</td></tr>'
                for g in d["groups"]]
        out.append(f"<h3>Groups (scheme {escape(str(d['scheme']))})</h3>")
        out.append(_table(["group", "A", "B", "delta", "tensors"], rows, cls="diff-groups"))
    return "".join(out)


def _stats_html(stats: dict[str, Any], idx: int) -> str:
    """The value statistics of one checkpoint: the summary, findings by severity, L2 norm per
    group and per layer (inline SVG), and per group the numbers with NaN/Inf/zeros."""
    sm = stats["summary"]
    nonfinite = sm["nan"] + sm["posinf"] + sm["neginf"]
    word = "error" if sm["errors"] else ("warning" if sm["warnings"] else "none")
    head = (f'{_n(sm["tensors"])} tensors, {_n(sm["elements"])} values read by scheme '
            f'<code>{escape(stats["scheme"])}</code>; {_plural(sm["errors"], "error")}, '
            f'{_plural(sm["warnings"], "warning")}; {_n(sm["nan"])} NaN, {_n(sm["posinf"])} '
            f'+Inf, {_n(sm["neginf"])} -Inf')
    badge = {"error": ("errors", "errors"), "warning": ("warnings", "warnings")}.get(
        word, ("clean", "clean"))
    out = [f'<div class="card" id="stats-{idx}" data-errors="{sm["errors"]}" '
           f'data-warnings="{sm["warnings"]}" data-nonfinite="{nonfinite}">'
           f"<p>{_verdict_badge(*badge)} {head}</p>"]
    if sm["values_not_read"]:
        out.append(f'<p class="warning">INCOMPLETE: the values of {_n(sm["values_not_read"])} '
                   "tensors were not read (see the listing's notes)</p>")
    if stats["findings"]:
        items = "".join(
            f'<li class="finding {escape(f["severity"])}" data-subject="{escape(f["subject"])}"'
            f' data-code="{escape(f["code"])}"><span class="sev {escape(f["severity"])}">'
            f'{escape(f["severity"])}</span>{escape(f["message"])}</li>'
            for f in sorted(stats["findings"], key=lambda f: f["severity"] != "error"))
        out.append(f'<ul class="findings">{items}</ul>')
    else:
        out.append('<p class="muted">no findings: no NaN or Inf, no parameter all zeros or '
                   "constant, no layer norm far from the others of its kind</p>")
    norm_bars = [(g["group"], _float(g["stats"]["l2"]),
                  "bad" if _bad(g["stats"]) else "") for g in stats["groups"]]
    out.append("<h3>L2 norm per group</h3>")
    out.append(bar_chart(norm_bars, f"norms-chart-{idx}", "normbar", value_text=_g4))
    layers = [(_layer_label(r), _float(r["l2"]), "") for r in stats.get("layers", ())]
    if layers:
        out.append("<h3>L2 norm per layer</h3>")
        out.append(bar_chart(layers, f"layer-norms-chart-{idx}", "normbar", value_text=_g4))
    keys = [("tensors", "tensors"), ("count", "elements"), *STAT_COLS, ("nan", "NaN"),
            ("posinf", "+Inf"), ("neginf", "-Inf"), ("zeros", "zeros"),
            ("subnormal", "subnormal"), ("f16_overflow", "f16 overflow")]
    rows = []
    for g in stats["groups"]:
        st = {**g["stats"], "tensors": g["tensors"]}
        cells = "".join(
            f'<td class="num{" bad" if k in ("nan", "posinf", "neginf") and st[k] else ""}" '
            f'data-stat="{k}"{_sort_attr(st[k])}>{escape(_fmt(st[k]))}</td>' for k, _ in keys)
        rows.append(f'<tr class="{"error" if _bad(g["stats"]) else ""}" '
                    f'data-group="{escape(g["group"])}"><td>{escape(g["group"])}</td>'
                    f"{cells}</tr>")
    out.append("<h3>Per group</h3>")
    out.append(_table(["group", *(label for _, label in keys)], rows, cls="stats-groups"))
    out.append('<p class="muted">min, max, mean, std and L2 are over the finite values; norms '
               "of groups are combined from sums of squares, never averaged. Each tensor's "
               "statistics are columns of the listing below.</p></div>")
    return "".join(out)


def _layer_label(r: dict[str, Any]) -> str:
    """``decoder layer 1 forward``; the block only when it says more than the group."""
    block = (r.get("block") or "").rstrip(".")
    parts = (r["group"], block if block and block != r["group"] else None, "layer", r["layer"],
             r.get("direction"))
    return " ".join(str(x) for x in parts if x)


def _bad(s: dict[str, Any]) -> bool:
    return bool(s["nan"] or s["posinf"] or s["neginf"])


def _float(v: Any) -> float:
    """A number of the stats record (inf and NaN come as strings): 0 when not finite."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return 0.0
    return x if math.isfinite(x) else 0.0


def _g4(x: float) -> str:
    return f"{x:.4g}"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


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
        ("tensors", _n(t["tensors"])),
        *((("parameters", _n(t["model_parameters"])),
           ("stored parameter elements", _n(t["parameters"])))
          if "model_parameters" in t else (("parameters", _n(t["parameters"])),)),
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
               '<p class="muted">no layers: no parameter name has a numbered component</p>')
    out.append(f'<h2 id="check-{idx}">Check: tensors and groups against the prediction</h2>')
    if s.check:
        out.append(f'<div class="card">{_check_html(s.check)}</div>')
    else:
        out.append(f'<p class="muted">not checked: {escape(s.check_error or "")}</p>')
    if s.stats:
        out += ["<h2>Value statistics</h2>", _stats_html(s.stats, idx)]
    for f in lst.get("findings", ()):
        out.append(f'<p class="{escape(f["severity"])}">[{escape(f["severity"])}] '
                   f'{escape(f["message"])}</p>')
    out += [f'<h2 id="tensors-{idx}">Tensors</h2>', _listing_table(lst, idx, s.stats),
            "</section>"]
    return "".join(out)


def _nav(report: AuditReport) -> str:
    """Links to every section: the diff, then each checkpoint's check, statistics, tensors."""
    links = ['<a href="#diff">diff</a>'] if report.diff is not None else []
    for i, s in enumerate(report.sections):
        name = escape(s.listing["path"].rstrip("/").rsplit("/", 1)[-1] or s.listing["path"])
        parts = [f'<a href="#checkpoint-{i}"><code>{name}</code></a>',
                 f'<a href="#check-{i}">check</a>']
        if s.stats:
            parts.append(f'<a href="#stats-{i}">statistics</a>')
        parts.append(f'<a href="#tensors-{i}">tensors</a>')
        links.append(" ".join(parts))
    return f'<nav class="card">{" &middot; ".join(links)}</nav>'


def script_json(data: Any) -> str:
    """``data`` as JSON that cannot leave (or change) its ``<script>`` element: ``<``, ``>`` and
    ``&`` as ``\\u`` escapes, so no ``</script``, ``<!--`` or ``<script`` (which would switch
    the HTML tokenizer's script states) and no entity appears; non-ASCII (U+2028...) escaped."""
    from inspector.reports.strict_json import dumps

    text = dumps(data, ensure_ascii=True)  # JSON.parse takes no NaN: null, named in nonfinite
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def to_html(report: AuditReport) -> str:
    """The report as one HTML document (UTF-8 text), needing nothing from the network."""
    paths = " vs ".join(s.listing["path"] for s in report.sections)
    body = [_section(s, i) for i, s in enumerate(report.sections)]
    if report.diff is not None:  # two paths: what differs comes first
        body.insert(0, f'<section id="diff"><h1>Diff</h1><div class="card">'
                       f'{_diff_html(report.diff)}</div></section>')
    body.insert(0, _nav(report))
    notes = "".join(f'<p class="muted">{escape(n)}</p>' for n in report.notes)
    data = script_json(report.to_dict())
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
