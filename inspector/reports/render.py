"""Renderers: a listing report (see :mod:`inspector.reports.listing`) to table, markdown,
JSON or CSV text.

``render(report, fmt, view="tensors") -> str``; ``view`` is ``tensors`` (one row per tensor),
``groups`` (one row per group of the report's scheme) or ``layers`` (groups with per-layer
subtotals, identical repeated layers collapsed as ``layers.#``); JSON always carries everything.
Names from files are sanitised for terminals and markdown: control
characters (escape sequences) are shown as ``\\xNN`` and never reach the screen raw.
"""

from __future__ import annotations

import io
import json
import operator

from inspector.adapters.errors import sanitize
from inspector.reports.strict_json import finite
from inspector.reports.text import PLAIN, Style, shape_text, table

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

__all__ = ["FORMATS", "VIEWS", "csv_writer", "render", "sanitize", "shape_text"]

FORMATS = ("table", "markdown", "json", "csv")
VIEWS = ("tensors", "groups", "layers")


def render(report: dict[str, Any], fmt: str, view: str = "tensors",
           style: Style = PLAIN) -> str:
    """The listing as ``fmt`` text; ``style`` (table and markdown) sets the width, colour,
    number format and how many hyperparameters show."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")
    if fmt == "json":
        return _json(report)
    if fmt == "csv":
        return _csv(report) if view == "tensors" else _csv_groups(report, view == "layers")
    if fmt == "table":
        return _text(report, markdown=False, view=view, style=style)
    if fmt == "markdown":
        return _text(report, markdown=True, view=view, style=style)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _tied_marker(row: dict[str, Any], first_of: dict[str, str]) -> str:
    others = row.get("shared_with")
    if not others:
        return ""
    first = first_of[row["tied_to"]]
    if first == row["stored_name"]:
        more = row.get("shared_with_omitted")
        return "tied: " + ", ".join(sanitize(o) for o in others) + (
            f" and {more:,} more" if more else ""
        )
    return f"= {sanitize(first)} (not counted)"


def _first_names(report: dict[str, Any]) -> dict[str, str]:
    """tie group (``tied_to``) -> the first stored name of the group in listing order."""
    out: dict[str, str] = {}
    for row in report["tensors"]:
        if row.get("tied_to") is not None:
            out.setdefault(row["tied_to"], row["stored_name"])
    return out


def _rows(report: dict[str, Any], style: Style) -> tuple[list[str], list[list[str]]]:
    direct = _entry_rows(report, style)
    if direct is not None:
        return direct
    first_of = _first_names(report)
    tied = bool(first_of)
    show_stored = any(r["name"] != r["stored_name"] for r in report["tensors"])
    show_file = any(r.get("file") for r in report["tensors"])
    grouped = "groups" in report
    headers = _row_headers(grouped, show_stored, show_file, tied)
    rows = []
    for r in report["tensors"]:
        numel = style.count(r["numel"])
        if "stored_numel" in r:
            numel += f" ({style.count(r['stored_numel'])} stored)"
        row = [sanitize(r["name"]), shape_text(r["shape"]), r["dtype"], numel, r["role"]]
        if grouped:
            row.append(sanitize(r["group"]))
        if show_stored:
            row.insert(1, sanitize(r["stored_name"]))
        if show_file:
            row.append(sanitize(r.get("file") or ""))
        if tied:
            row.append(_tied_marker(r, first_of))
        rows.append(row)
    return headers, rows


def _row_headers(grouped: bool, show_stored: bool, show_file: bool, tied: bool) -> list[str]:
    """The tensor table's columns, in the order the cells of :func:`_rows` are made."""
    headers = ["name", "shape", "dtype", "numel", "role"]
    if grouped:
        headers.append("group")
    if show_stored:
        headers.insert(1, "stored as")
    if show_file:
        headers.append("file")
    if tied:
        headers.append("tied")
    return headers


def _entry_rows(report: dict[str, Any], style: Style
                ) -> tuple[list[str], list[list[str]]] | None:
    """:func:`_rows` made from the entries of a report whose ``tensors`` are a
    :class:`~inspector.reports.listing.TensorRows` of plain entries and no ties, with each
    shape, count and group text made once: the same cells without a dict per tensor. None
    otherwise."""
    rows = report["tensors"]
    plain = getattr(rows, "plain", None)
    if plain is None or rows.ties or not plain():
        return None
    entries, placed = rows.entries, rows.placed
    show_stored = any(t.name != t.stored_name for t in entries)
    show_file = any(t.file for t in entries)
    grouped = "groups" in report
    headers = _row_headers(grouped, show_stored, show_file, tied=False)
    shapes: dict[tuple[int, ...], str] = {}
    counts: dict[int, str] = {}
    groups: dict[str, str] = {}
    roles = {role: role.value for role in {t.role for t in entries}}
    names = [t.name for t in entries]
    if "".join(names).isprintable():  # sanitize would return each as it is
        shown = names
    else:
        shown = list(map(sanitize, names))
    out = []
    for t, a, name in zip(entries, placed, shown, strict=True):
        shape = shapes.get(t.shape)
        if shape is None:
            shape = shapes[t.shape] = shape_text(t.shape)
        numel = counts.get(t.numel)
        if numel is None:
            numel = counts[t.numel] = style.count(t.numel)
        row = [name, shape, t.dtype, numel, roles[t.role]]
        if grouped:
            g = a.group
            text = groups.get(g)
            if text is None:
                text = groups[g] = sanitize(g)
            row.append(text)
        if show_stored:
            row.insert(1, sanitize(t.stored_name))
        if show_file:
            row.append(sanitize(t.file or ""))
        out.append(row)
    return headers, out


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _summary(report: dict[str, Any], style: Style = PLAIN) -> list[tuple[str, str]]:
    t = report["totals"]
    n = style.count
    tensors = n(t["tensors"])
    if t["tied_aliases"]:
        aliases = "alias" if t["tied_aliases"] == 1 else "aliases"
        tensors += f" ({n(t['tied_aliases'])} tied {aliases}, counted once)"
    if "filter" in report:
        f = report["filter"]
        tensors += f" matching /{sanitize(f['match'])}/ of {n(f['of'])}"
    lines = [
        ("tensors", tensors),
        *_parameters(report, style),
        ("buffers", n(t["buffers"])),
        ("optimizer state", n(t["optimizer"])),
    ]
    if t["other"]:
        lines.append(("other", n(t["other"])))
    if "embedding_parameters" in t:
        lines.append(("  embedding", n(t["embedding_parameters"])))
        lines.append(("  non-embedding", n(t["non_embedding_parameters"])))
    lines.append(("all elements", n(t["all"])))
    if "stored_elements" in t:
        lines.append(("stored elements", f"{n(t['stored_elements'])} (sparse arrays)"))
    by_dtype = ", ".join(
        f"{dtype} {human_bytes(n)}" for dtype, n in report["bytes_by_dtype"].items()
    )
    unknown = t.get("bytes_unknown_tensors")
    lines.append(("bytes", f"{human_bytes(t['bytes'])}" + (f" ({by_dtype})" if by_dtype else "")
                  + (f" + {n(unknown)} tensor(s) of unknown size" if unknown else "")))
    if "scheme" in report:
        sc = report["scheme"]
        params = "".join(f", {k}={v}" for k, v in sc["parameters"].items())
        how = "auto" if sc["auto"] else sanitize(sc["source"])
        lines.append(("groups", f"{len(report['groups'])} by scheme {sanitize(sc['name'])} "
                      f"({how}{params})"))
    return lines


def _parameters(report: dict[str, Any], style: Style) -> list[tuple[str, str]]:
    """The parameters line; a quantized checkpoint shows the model's count (packed weights
    unpacked) beside the elements it stores."""
    t, n = report["totals"], style.count
    if "quantization" not in report:
        return [("parameters", n(t["parameters"]))]
    method = sanitize(str(report["quantization"]))
    if "model_parameters" not in t:
        return [("parameters", f"{n(t['parameters'])} stored elements ({method})")]
    return [("parameters", f"{n(t['model_parameters'])} (the model's, {method} unpacked)"),
            ("  stored", f"{n(t['parameters'])} parameter elements as stored (packed)")]


def _share(x: float) -> str:
    return f"{100 * x:.1f}%"


def _group_rows(report: dict[str, Any], per_layer: bool,
                style: Style = PLAIN) -> tuple[list[str], list[list[str]]]:
    """Rows of the groups view; with ``per_layer`` each group is followed by its layers."""
    headers = ["group", "tensors", "parameters", "share", "bytes"]
    if any(g["elements"] != g["parameters"] for g in report["groups"]):
        headers.insert(3, "elements")
    rows = []
    for g in report["groups"]:
        rows.append(_group_row(headers, sanitize(g["name"]), g, _share(g["share"]), style))
        if per_layer:
            for r in g.get("repeats", ()):
                # tabulate strips leading blanks; a marker keeps layer rows visibly nested
                label = "- " + _layer_label(r)
                rows.append(_group_row(headers, label, r, "", style))
    return headers, rows


def _layer_label(r: dict[str, Any]) -> str:
    label = " ".join(sanitize(x) for x in (r["block"], r["label"]) if x)
    if r["direction"]:
        label += f" ({sanitize(r['direction'])})"
    if r["count"] > 1:
        label += f" x{r['count']} ({', '.join(sanitize(x) for x in r['layers'])})"
    return label


def _group_row(headers: list[str], label: str, rec: dict[str, Any], share: str,
               style: Style) -> list[str]:
    n = style.count
    cells = {"group": label, "tensors": n(rec["tensors"]),
             "parameters": n(rec["parameters"]), "elements": n(rec["elements"]),
             "share": share, "bytes": human_bytes(rec["bytes"])}
    return [cells[h] for h in headers]


# columns of the tensor table that give way first when it is wider than the terminal
DROP_ORDER = ("stored as", "tied", "file", "group", "role", "dtype")


def _text(report: dict[str, Any], markdown: bool, view: str = "tensors",
          style: Style = PLAIN) -> str:
    from inspector.reports.hyperparameters import lines as hyper_lines

    out = io.StringIO()
    title = f"{sanitize(report['path'])}  [{report['format']}]"
    out.write(f"## {title}\n" if markdown else f"{style.wrap(title)}\n")
    hp = hyper_lines(report.get("hyperparameters") or {}, style.verbose)
    if hp:
        out.write("\n### Hyperparameters\n\n" if markdown else "\nhyperparameters:\n")
        if markdown:
            out.write(table(["key", "value"], [[sanitize(k), sanitize(v)] for k, v in hp],
                            markdown=True))
            out.write("\n")
        else:
            for k, v in hp:
                line = f"  {sanitize(k)}: {sanitize(v)}"
                out.write((_clip(line, style.width) if style.width else line) + "\n")
    if view == "tensors":
        headers, rows = _rows(report, style)
        align = ["left"] * len(headers)
        align[headers.index("numel")] = "right"
        drop, names = DROP_ORDER, ("name", "stored as", "tied")
    else:
        headers, rows = _group_rows(report, per_layer=view == "layers", style=style)
        align = ["left"] + ["right"] * (len(headers) - 1)
        drop, names = ("bytes", "elements", "tensors"), ("group",)
    out.write("\n")
    out.write(table(headers, rows, style, align=align, markdown=markdown, drop=drop,
                    elide_cols=names))
    out.write("\n\n")
    summary = _summary(report, style)
    if markdown:
        out.write(table(["total", "count"], summary, markdown=True))
        out.write("\n")
    else:
        width = max(len(k) for k, _ in summary)
        for k, v in summary:
            line = f"{k:<{width}}  {v}"
            out.write((_clip(line, style.width) if style.width else line) + "\n")
    findings = report.get("findings") or []
    if findings:
        out.write("\n### Findings\n\n" if markdown else "\nfindings:\n")
        for f in findings:
            where = f" ({sanitize(f['where'])})" if f.get("where") else ""
            bullet = "- " if markdown else "  "
            sev = style.paint(f"[{f['severity']}]", _SEVERITY.get(f["severity"]))
            line = f"{bullet}[{f['severity']}] {sanitize(f['message'])}{where}"
            if not markdown:
                line = style.wrap(line, "    ")
            out.write(line.replace(f"[{f['severity']}]", sev, 1) + "\n")
    return out.getvalue()


_SEVERITY = {"danger": "bad", "warn": "warn", "warning": "warn", "info": "dim"}


def _clip(line: str, width: int) -> str:
    """A free-text line cut to ``width`` (its end elided: the start says what it is)."""
    return line if len(line) <= width else line[:width - 1] + "…"


def _row_encoder(compact: json.JSONEncoder) -> Any:
    """One C encoder for every row (``JSONEncoder.encode`` builds a new one per call); the
    same bytes as ``compact.encode``."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return compact.encode
    enc = make(
        None, compact.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True
    )
    return lambda row: "".join(enc(row, 0))


def _json(report: dict[str, Any]) -> str:
    """Indented JSON with one tensor per line (the chunks of :func:`json_chunks`, joined)."""
    return "".join(json_chunks(report))


ROWS_PER_CHUNK = 4096


def json_chunks(report: dict[str, Any]) -> Iterator[str]:
    """The JSON text of a report in pieces, for writing as it is made: a 50,000-tensor report
    is 19 MB of text, which would otherwise be held two or three times over.

    ``json.dumps(indent=...)`` runs the pure-Python encoder, 10x slower than the C one on
    50,000 tensors; each tensor is encoded compactly by the C encoder instead.
    """
    compact = json.JSONEncoder(ensure_ascii=False)
    encode_row = _row_encoder(compact)
    yield "{\n"
    for i, (key, value) in enumerate(report.items()):
        head = ("  " if i == 0 else ",\n  ") + compact.encode(key) + ": "
        if key == "tensors" and value:
            yield head + "[\n"
            direct = getattr(value, "json_text", None)  # listing.TensorRows
            for start in range(0, len(value), ROWS_PER_CHUNK):
                stop = start + ROWS_PER_CHUNK
                rows = (direct(start, min(stop, len(value)), encode_row) if direct is not None
                        else _rows_text(value[start:stop], encode_row))
                yield rows if start == 0 else ",\n" + rows
            yield "\n  ]"
        else:
            if hasattr(value, "json_text"):  # no rows in a listing.TensorRows
                value = list(value)
            yield head + _finite_indented(value, "\n  ")
    yield "\n}\n"


def _finite_indented(value: Any, newline: str) -> str:
    """:func:`_indented` of :func:`~inspector.reports.strict_json.finite` of ``value``; the
    common case (no NaN or infinity anywhere: ``value`` itself) is told by :func:`_indented`,
    which refuses a non-finite number, without a walk of its own (the per-layer groups of a
    50,000-tensor report are 180,000 objects)."""
    try:
        return _indented(value, newline, strict=True)
    except (ValueError, TypeError, RecursionError):
        return _indented(finite(value), newline)


def _rows_text(rows: list[dict[str, Any]], encode_row: Any) -> str:
    """The tensor rows, one per line: ``"    " + encode_row(row)`` joined by ``",\\n"``.

    The whole list goes through the C encoder at once and its row boundaries ``}, {`` become
    line breaks. A row holds no nested object, so each boundary is one ``}, {``; when the text
    holds exactly ``len(rows) - 1`` of them, none sits inside a string (a name may contain any
    text) and the result is the row-by-row one. Otherwise the rows are encoded one by one."""
    whole = encode_row(rows)
    if whole.count("}, {") == len(rows) - 1:
        return "    " + whole[1:-1].replace("}, {", "},\n    {")
    return ",\n".join("    " + encode_row(t) for t in rows)


_SCALARS = {True: "true", False: "false", None: "null"}


def _indented(value: Any, newline: str, strict: bool = False) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)`` (with ``strict``, also
    ``allow_nan=False``: ValueError on NaN or infinity) with each line break followed by
    ``newline``'s indentation, byte for byte, without the pure-Python encoder that ``indent``
    selects (a 50,000-tensor report's per-layer groups took it half a second): containers are
    walked here, strings and numbers go to the C encoder's own functions. Anything else (a
    subclass, a non-string key) is handed to ``json.dumps`` as it is."""
    kind = type(value)
    if kind is str:
        return json.encoder.encode_basestring(value)  # type: ignore[attr-defined]
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        return json.dumps(value, allow_nan=not strict)
    if kind is bool or value is None:
        return _SCALARS[value]
    inner = newline + "  "
    if kind is dict:
        if not value:
            return "{}"
        if all(type(k) is str for k in value):
            enc = json.encoder.encode_basestring  # type: ignore[attr-defined]
            items = [
                enc(k) + ": " + (enc(v) if type(v) is str else int.__repr__(v) if type(v) is int
                                 else _indented(v, inner, strict))
                for k, v in value.items()
            ]
            return "{" + inner + ("," + inner).join(items) + newline + "}"
    elif kind is list or kind is tuple:
        if not value:
            return "[]"
        kinds = set(map(type, value))
        if kinds == {str}:  # e.g. the layer numbers of a repeat: 10,000 strings
            items = list(map(json.encoder.encode_basestring, value))  # type: ignore[attr-defined]
        elif kinds == {int}:
            items = list(map(int.__repr__, value))
        else:
            items = _flat_records(value, inner) if len(value) > 1 else None
        if items is None:
            items = [_indented(v, inner, strict) for v in value]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=not strict).replace(
        "\n", newline)


_NONE = type(None)


def _flat_records(records: list[Any] | tuple[Any, ...], newline: str) -> list[str] | None:
    """:func:`_indented` of each of ``records`` when they are dicts with the same string keys
    in the same order and every column holds only ``int`` or only ``str`` (or ``str`` and
    None): each column's texts made in one pass, the records filled into one template (the
    20,000 per-layer records of a 50,000-tensor report). None when that does not hold."""
    if set(map(type, records)) != {dict}:
        return None
    shapes = set(map(tuple, records))
    if len(shapes) != 1:
        return None
    (keys,) = shapes
    if not keys or not all(type(k) is str for k in keys):
        return None
    enc = json.encoder.encode_basestring  # type: ignore[attr-defined]
    columns = []
    for k in keys:
        column = list(map(operator.itemgetter(k), records))
        kinds = set(map(type, column))
        if kinds == {int}:
            columns.append(map(int.__repr__, column))
        elif kinds == {str}:
            columns.append(map(enc, column))
        elif kinds == {str, _NONE} or kinds == {_NONE}:
            columns.append(["null" if v is None else enc(v) for v in column])
        else:
            return None
    inner = newline + "  "
    template = "{" + inner + ("," + inner).join(
        enc(k).replace("%", "%%") + ": %s" for k in keys) + newline + "}"
    return list(map(template.__mod__, zip(*columns, strict=True)))


class _SafeCSV:
    """A :func:`csv.writer` whose text cells are :func:`sanitize`-d as the table's are: a name
    read from a file cannot start a new row or carry a terminal escape (a dict row, as
    :class:`csv.DictWriter` takes, when ``fields`` is given)."""

    def __init__(self, out: io.StringIO, fields: Sequence[str] | None = None) -> None:
        import csv

        self._w = csv.writer(out, lineterminator="\n")
        self._fields = fields

    def writeheader(self) -> None:
        self.writerow(list(self._fields or ()))

    def writerow(self, row: Any) -> None:
        if self._fields is not None and isinstance(row, dict):
            row = [row.get(k, "") for k in self._fields]
        self._w.writerow([sanitize(c) if isinstance(c, str) else c for c in row])

    def writerows(self, rows: Any) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(out: io.StringIO, fields: Sequence[str] | None = None) -> _SafeCSV:
    """The CSV writer of every ``--format csv``: control characters escaped (see
    :class:`_SafeCSV`); ``fields`` makes it take dict rows."""
    return _SafeCSV(out, fields)


def _csv(report: dict[str, Any]) -> str:
    out = io.StringIO()
    w = csv_writer(out)
    w.writerow(
        ["name", "stored_name", "shape", "dtype", "role", "numel", "nbytes", "file", "shared_with",
         "group", "layer"]
    )
    for r in report["tensors"]:
        w.writerow(
            [
                r["name"],
                r["stored_name"],
                json.dumps(r["shape"]),
                r["dtype"],
                r["role"],
                r["numel"],
                "" if r["nbytes"] is None else r["nbytes"],
                r.get("file") or "",
                ";".join(r.get("shared_with", ())),
                r.get("group", ""),
                r.get("layer", ""),
            ]
        )
    return out.getvalue()


def _csv_groups(report: dict[str, Any], per_layer: bool) -> str:
    """One CSV row per group (and with ``per_layer`` per block/layer/direction, uncollapsed)."""
    out = io.StringIO()
    w = csv_writer(out)
    keys = ["tensors", "parameters", "elements", "bytes"]
    w.writerow(["group", "block", "layer", "direction", *keys, "share"])
    for g in report["groups"]:
        w.writerow([g["name"], "", "", "", *(g[k] for k in keys), g["share"]])
        if per_layer:
            for r in g.get("layers", ()):
                w.writerow([g["name"], r["block"] or "", r["layer"], r["direction"] or "",
                            *(r[k] for k in keys), ""])
    return out.getvalue()
