"""``inspector check PATH``: set a checkpoint next to what its hyperparameters predict.

Example::

    $ inspector check fixtures/sockeye/sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp
    $ inspector check model_dir --set rnn_num_hidden=32 --format json

Hyperparameters come from the checkpoint's own config (Sockeye ``args.yaml``, ...), ``--set``
overrides them, and what neither gives is inferred from the shapes where they determine it
(reported as ``inferred``). Exit 0 when everything matches, 1 on any mismatch, 2 on error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from inspector.pickle_policy import add_allow_unsafe, dangerous, load_checked

NAME = "check"
HELP = "compare a checkpoint's tensors and group counts with the formula prediction"
FORMATS = ("table", "markdown", "json")


def add_set_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", metavar="K=V", action="append", default=[], dest="set",
                   help="set a hyperparameter (repeatable), e.g. --set rnn_num_hidden=512")


def parse_sets(items: list[str]) -> dict[str, str]:
    from inspector.adapters.errors import UsageError

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="checkpoint file, shard index or model directory")
    p.add_argument("--arch", help="architecture (default: recognised from the checkpoint)")
    add_set_argument(p)
    p.add_argument("--scheme", help="grouping scheme name or YAML file (default: the arch's)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument("--input-format", metavar="NAME", help="skip detection and read as this format")
    add_allow_unsafe(p)


def run(args: argparse.Namespace) -> int:
    from inspector.formulas import get
    from inspector.formulas.check import check

    ckpt = load_checked(args.path, args.input_format, args.allow_unsafe)
    arch = get(args.arch) if args.arch else None
    result = check(ckpt, arch, parse_sets(args.set), args.scheme)
    report = result.to_dict()
    unsafe = dangerous(ckpt)
    if unsafe:  # listed under --allow-unsafe: never verified
        report["status"] = "unsafe"
        report["notes"].append("not verified: the pickle references " + "; ".join(unsafe))
    sys.stdout.write(render(report, args.format))
    return 0 if result.ok and not unsafe else 1


def _shape(shape: list[int] | None) -> str:
    from inspector.reports.render import shape_text

    return "-" if shape is None else shape_text(shape)


def _status(g: dict) -> str:
    n = g["issues"]
    return g["status"] if not n else f"{g['status']} ({n} tensor{'s' if n != 1 else ''})"


def _signed(n: int) -> str:
    return f"{n:+,}" if n else "0"


def render(report: dict[str, Any], fmt: str) -> str:
    """A check report (``CheckResult.to_dict()``) as table, markdown or JSON text."""
    import json

    from tabulate import tabulate

    from inspector.reports.render import sanitize

    if fmt == "json":
        return json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    md = fmt == "markdown"
    tf = "github" if md else "simple"
    esc = (lambda s: sanitize(s).replace("|", "\\|")) if md else sanitize
    out = [f"{'## ' if md else ''}{esc(report['path'])}  [{report['arch']}, "
           f"scheme {esc(report['scheme'])}]", ""]
    hp = report["hyperparameters"]
    shown = [(k, v) for k, v in hp.items() if v["source"] != "default"]
    if shown:
        out.append("hyperparameters:" if not md else "### Hyperparameters\n")
        rows = [[esc(k), esc(str(v["value"])), v["source"]] for k, v in shown]
        out += [tabulate(rows, ["name", "value", "from"], tf, disable_numparse=True), ""]
    if report["inferred"]:
        out += [f"inferred from shapes: {', '.join(report['inferred'])}", ""]
    rows = [[esc(g["name"]), f"{g['found']:,}", f"{g['predicted']:,}", _signed(g["delta"]),
             _status(g)]
            for g in report["groups"]]
    out.append(tabulate(rows, ["group", "found", "predicted", "delta", "status"], tf,
                        disable_numparse=True, colalign=("left", "right", "right", "right",
                                                         "left")))
    if report["tensors"]:
        out += ["", "### Tensors" if md else "tensors:"]
        rows = [[t["status"], esc(t["name"]), esc(t["group"]), _shape(t["expected"]),
                 _shape(t["found"])] for t in report["tensors"]]
        out.append(tabulate(rows, ["status", "name", "group", "expected", "found"], tf,
                            disable_numparse=True))
    tot = report["totals"]
    out += ["", f"total: found {tot['found']:,}, predicted {tot['predicted']:,}, delta "
                f"{_signed(tot['delta'])}: {report['status'].upper()}"]
    out += [f"note: {esc(n)}" for n in report["notes"]]
    return "\n".join(out) + "\n"
