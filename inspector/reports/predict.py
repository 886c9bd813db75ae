"""The prediction report (schema ``inspector.predict/1``): what an architecture predicts from
hyperparameters alone, built by :func:`build` and laid out by :func:`render` as table,
markdown, JSON or CSV."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from inspector.reports import strict_json
from inspector.reports.render import csv_writer
from inspector.reports.text import PLAIN, Style, shape_text, table

SCHEMA = "inspector.predict/1"
FORMATS = ("table", "markdown", "json", "csv")


def build(arch_name: str, sets: Mapping[str, str], scheme: str | None = None,
          formula: bool = False, symbols: Sequence[str] = ()) -> dict[str, Any]:
    """The expected tensors, group counts and total of ``arch_name`` with hyperparameters
    ``sets`` (the rest defaults); ``formula`` adds the closed form in ``symbols``."""
    from inspector.formulas import get
    from inspector.formulas.core import block_of, counted, tied_to
    from inspector.grouping import choose_scheme, get_scheme, group_counts

    arch = get(arch_name)
    pred = arch.predict(arch.resolve(dict(sets)))
    names = [t.name for t in pred.tensors]
    name = scheme or arch.scheme
    chosen = get_scheme(name) if name else choose_scheme(names)
    groups = group_counts(chosen, [(t.name, t.numel) for t in counted(pred.tensors)])
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "arch": arch.name,
        "scheme": chosen.name,
        "hyperparameters": pred.hparams,
        "tensors": [
            {"name": t.name, "shape": list(t.shape), "numel": t.numel, "role": t.role,
             "block": block_of(t), "group": chosen.assign(t.name).group,
             **({"tied_to": tied_to(t)} if tied_to(t) else {})}
            for t in pred.tensors
        ],
        "groups": [{"name": g, "parameters": n} for g, n in groups.items()],
        "total": pred.total(),
        "notes": pred.notes,
    }
    if formula:
        out["formula"] = _formula(arch, pred.hparams, symbols, chosen, list(groups))
    return out


def _formula(arch: Any, hparams: Mapping[str, Any], symbol_specs: Sequence[str], scheme: Any,
             group_names: list[str]) -> dict[str, Any]:
    from inspector.formulas.closed_form import closed_form, merge_symbols, parse_symbol
    from inspector.formulas.core import counted

    syms = merge_symbols(arch, [parse_symbol(s) for s in symbol_specs])
    fixed = dict(hparams)
    total = closed_form(arch, fixed, syms)

    def group_count(g: str) -> Any:
        def count(pred: Any) -> int:
            return sum(t.numel for t in counted(pred.tensors)
                       if scheme.assign(t.name).group == g)
        return count

    return {
        "symbols": [{"name": s.name, "sets": list(s.targets), "valid_from":
                     total.valid_from[s.name], "help": s.help} for s in total.symbols],
        "total": total.text(),
        "groups": {g: closed_form(arch, fixed, syms, group_count(g)).text()
                   for g in group_names},
    }


def render(rep: dict[str, Any], fmt: str, style: Style = PLAIN) -> str:
    if fmt == "json":
        return strict_json.dumps(rep, indent=1, ensure_ascii=False) + "\n"
    if fmt == "csv":
        return _csv(rep)
    if fmt not in ("table", "markdown"):
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    md = fmt == "markdown"
    n = style.count
    out = [f"{'## ' if md else ''}{rep['arch']} (scheme {rep['scheme']})", ""]
    rows = [[t["name"], shape_text(t["shape"]), n(t["numel"]), t["group"],
             f"= {t['tied_to']} (not counted)" if "tied_to" in t else ""]
            for t in rep["tensors"]]
    headers = ["name", "shape", "numel", "group", "tied"]
    if not any(r[-1] for r in rows):
        rows, headers = [r[:-1] for r in rows], headers[:-1]
    out += [table(headers, rows, style, markdown=md,
                  align=("left", "left", "right", "left", "left")[:len(headers)],
                  drop=("tied", "group"), elide_cols=("name", "tied")), ""]
    rows = [[g["name"], n(g["parameters"])] for g in rep["groups"]]
    out += [table(["group", "parameters"], rows, style, markdown=md, align=("left", "right"),
                  elide_cols=("group",)), "", f"total: {n(rep['total'])}"]
    if "formula" in rep:
        f = rep["formula"]
        out += ["", "closed form (" + ", ".join(
            f"{s['name']} = {'/'.join(s['sets'])} >= {s['valid_from']}" for s in f["symbols"])
            + "):", f"  total = {f['total']}"]
        out += [f"  {g} = {text}" for g, text in f["groups"].items()]
    out += [f"note: {x}" for x in rep["notes"]]
    return "\n".join(out) + "\n"


def _csv(rep: dict[str, Any]) -> str:
    """One row per expected tensor (shape as a JSON list), then one per group and the total,
    told apart by ``kind``."""
    out = io.StringIO()
    w = csv_writer(out)
    w.writerow(["kind", "name", "shape", "numel", "role", "group", "tied_to"])
    for t in rep["tensors"]:
        w.writerow(["tensor", t["name"], json.dumps(t["shape"]), t["numel"], t["role"],
                    t["group"], t.get("tied_to", "")])
    for g in rep["groups"]:
        w.writerow(["group", g["name"], "", g["parameters"], "parameter", g["name"], ""])
    w.writerow(["total", rep["arch"], "", rep["total"], "parameter", "", ""])
    return out.getvalue()
