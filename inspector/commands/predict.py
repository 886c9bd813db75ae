"""``inspector predict --arch A --set k=v ...``: the seed documents' hand calculation as a
command: expected tensors, per-group counts and total, with no file at all.

Example::

    $ inspector predict --arch sockeye-rnn --set num_layers=2:2 --set num_embed=512:512 \\
        --set rnn_num_hidden=512 --set rnn_attention_type=dot
    $ inspector predict --arch sockeye-rnn --set rnn_attention_type=dot --formula

``--formula`` prints the closed form: the total as an exact polynomial in the architecture's
symbols (``--symbol b=source_vocab_size,target_vocab_size@1`` adds or replaces one), the other
hyperparameters fixed at their values.
"""

from __future__ import annotations

import argparse
import sys

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

NAME = "predict"
HELP = "expected tensors, group counts and total from hyperparameters alone (no file)"
FORMATS = ("table", "markdown", "json")
SCHEMA = "inspector.predict/1"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from inspector.commands.check import add_set_argument

    p.add_argument("--arch", required=True, help="architecture (`inspector archs` lists them)")
    add_set_argument(p)
    p.add_argument("--formula", action="store_true",
                   help="also print the closed form (total and each group) in the symbols")
    p.add_argument("--symbol", action="append", default=[], metavar="NAME=HP[,HP][@DEG]",
                   help="a closed-form variable setting these hyperparameters (HP may be name:i "
                        "for part i of an a:b pair)")
    p.add_argument("--scheme", help="grouping scheme name or YAML file (default: the arch's)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")


def report(args: argparse.Namespace) -> dict[str, Any]:
    from inspector.commands.check import parse_sets
    from inspector.formulas import get
    from inspector.formulas.core import block_of, counted, tied_to
    from inspector.grouping import choose_scheme, get_scheme, group_counts

    arch = get(args.arch)
    pred = arch.predict(arch.resolve(parse_sets(args.set)))
    names = [t.name for t in pred.tensors]
    name = args.scheme or arch.scheme
    scheme = get_scheme(name) if name else choose_scheme(names)
    groups = group_counts(scheme, [(t.name, t.numel) for t in counted(pred.tensors)])
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "arch": arch.name,
        "scheme": scheme.name,
        "hyperparameters": pred.hparams,
        "tensors": [
            {"name": t.name, "shape": list(t.shape), "numel": t.numel, "role": t.role,
             "block": block_of(t), "group": scheme.assign(t.name).group,
             **({"tied_to": tied_to(t)} if tied_to(t) else {})}
            for t in pred.tensors
        ],
        "groups": [{"name": g, "parameters": n} for g, n in groups.items()],
        "total": pred.total(),
        "notes": pred.notes,
    }
    if args.formula:
        out["formula"] = formula(arch, pred.hparams, args.symbol, scheme, list(groups))
    return out


def formula(arch, hparams, symbol_specs, scheme, group_names) -> dict[str, Any]:
    from inspector.formulas.closed_form import closed_form, merge_symbols, parse_symbol
    from inspector.formulas.core import counted

    syms = merge_symbols(arch, [parse_symbol(s) for s in symbol_specs])
    fixed = {k: v for k, v in hparams.items()}
    total = closed_form(arch, fixed, syms)

    def group_count(g):
        def count(pred):
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


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(render(report(args), args.format))
    return 0


def render(rep: dict[str, Any], fmt: str) -> str:
    import json

    from tabulate import tabulate

    from inspector.reports.render import shape_text

    if fmt == "json":
        return json.dumps(rep, indent=1, ensure_ascii=False) + "\n"
    md = fmt == "markdown"
    tf = "github" if md else "simple"
    out = [f"{'## ' if md else ''}{rep['arch']} (scheme {rep['scheme']})", ""]
    rows = [[t["name"], shape_text(t["shape"]), f"{t['numel']:,}", t["group"],
             f"= {t['tied_to']} (not counted)" if "tied_to" in t else ""]
            for t in rep["tensors"]]
    headers = ["name", "shape", "numel", "group", "tied"]
    if not any(r[-1] for r in rows):
        rows, headers = [r[:-1] for r in rows], headers[:-1]
    out += [tabulate(rows, headers, tf, disable_numparse=True,
                     colalign=("left", "left", "right", "left", "left")[:len(headers)]), ""]
    rows = [[g["name"], f"{g['parameters']:,}"] for g in rep["groups"]]
    out += [tabulate(rows, ["group", "parameters"], tf, disable_numparse=True,
                     colalign=("left", "right")), "", f"total: {rep['total']:,}"]
    if "formula" in rep:
        f = rep["formula"]
        out += ["", "closed form (" + ", ".join(
            f"{s['name']} = {'/'.join(s['sets'])} >= {s['valid_from']}" for s in f["symbols"])
            + "):", f"  total = {f['total']}"]
        out += [f"  {g} = {text}" for g, text in f["groups"].items()]
    out += [f"note: {n}" for n in rep["notes"]]
    return "\n".join(out) + "\n"
