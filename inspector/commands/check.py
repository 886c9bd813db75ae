"""``inspector check PATH``: set a checkpoint next to what its hyperparameters predict.

Example::

    $ inspector check fixtures/sockeye/sockeye1_rnn_lstm_l1-1_e8-8_h16_mlp
    $ inspector check model_dir --set rnn_num_hidden=32 --format json

Hyperparameters come from the checkpoint's own config (Sockeye ``args.yaml``, ...), ``--set``
overrides them, and what neither gives is inferred from the shapes where they determine it
(reported as ``inferred``). Three verdicts (:mod:`inspector.formulas.check`) and their exit codes:
0 verified, 1 mismatch, 3 incomplete (``--strict``: 1), 2 error.
"""

from __future__ import annotations

import argparse
import sys

from inspector.pickle_policy import add_allow_unsafe, dangerous, load_checked

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

NAME = "check"
HELP = "compare a checkpoint's tensors and group counts with the formula prediction"
FORMATS = ("table", "markdown", "json")
EXIT = {"verified": 0, "mismatch": 1, "incomplete": 3}
EPILOG = """verdicts and exit codes:
  verified    0  every stored tensor was predicted with its exact shape, every predicted
                 tensor was found
  mismatch    1  a wrong shape, a missing or unexpected tensor of a part the architecture
                 models, or an inconsistent structure (a repeated block, optimizer state or
                 tied pair whose shape disagrees)
  incomplete  3  parts are not modelled (unknown option or layer, unrecognised tensors; each
                 named with the reason, its tensors listed as not_modelled; everything else is
                 still checked), or no architecture applies and only the structure was audited
                 ("incomplete (structure consistent)"); with --strict: exit 1
  error       2  unreadable file, bad arguments"""


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
    p.add_argument("--strict", action="store_true",
                   help="an incomplete check fails too (exit 1 instead of 3)")
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter


def run(args: argparse.Namespace) -> int:
    from inspector.formulas import get
    from inspector.formulas.check import check

    ckpt = load_checked(args.path, args.input_format, args.allow_unsafe)
    arch = get(args.arch) if args.arch else None
    result = check(ckpt, arch, parse_sets(args.set), args.scheme)
    report = result.to_dict()
    unsafe = dangerous(ckpt)
    if unsafe:  # listed under --allow-unsafe: never verified
        report["status"] = report["verdict"] = "unsafe"
        report["notes"].append("not verified: the pickle references " + "; ".join(unsafe))
    sys.stdout.write(render(report, args.format))
    if unsafe:
        return 1
    code = EXIT[result.verdict]
    return 1 if code == 3 and args.strict else code


def _shape(shape: list[int] | None) -> str:
    from inspector.reports.render import shape_text

    return "-" if shape is None else shape_text(shape)


def _status(g: dict) -> str:
    n = g["issues"] or g.get("not_modelled", 0)
    return g["status"] if not n else f"{g['status']} ({n} tensor{'s' if n != 1 else ''})"


def verdict_text(report: dict[str, Any]) -> str:
    """``VERIFIED``, ``MISMATCH``, ``INCOMPLETE`` or ``INCOMPLETE (structure consistent)``."""
    v = report.get("verdict", "verified" if report["status"] == "ok" else report["status"])
    if v == "incomplete" and report.get("audit") == "structure":
        return "INCOMPLETE (structure consistent)"
    return v.upper()


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
    arch = report["arch"] or "structural audit: no architecture applies"
    out = [f"{'## ' if md else ''}{esc(report['path'])}  [{arch}, "
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
    if rows:
        out.append(tabulate(rows, ["group", "found", "predicted", "delta", "status"], tf,
                            disable_numparse=True, colalign=("left", "right", "right", "right",
                                                             "left")))
    if report["tensors"]:
        out += ["", "### Tensors" if md else "tensors:"]
        rows = [[t["status"], esc(t["name"]), esc(t["group"]), _shape(t["expected"]),
                 _shape(t["found"])] for t in report["tensors"]]
        out.append(tabulate(rows, ["status", "name", "group", "expected", "found"], tf,
                            disable_numparse=True))
    out += _parts(report, esc, tf, md)
    tot = report["totals"]
    if report.get("audit") == "structure":
        c = report.get("checked", {})
        out += ["", f"structural audit: {c.get('tensors', 0):,} tensors, {tot['found']:,} "
                    f"parameters; checked {c.get('block_families', 0)} repeated-block families, "
                    f"{c.get('optimizer_slots', 0)} optimizer slots, {c.get('tie_pairs', 0)} "
                    f"tied pairs: {verdict_text(report)}"]
    else:
        nm = tot.get("not_modelled", 0)
        extra = f" (not modelled {nm:,})" if nm else ""
        out += ["", f"total: found {tot['found']:,}{extra}, predicted {tot['predicted']:,}, "
                    f"delta {_signed(tot['delta'])}: {verdict_text(report)}"]
    out += [f"note: {esc(n)}" for n in report["notes"]]
    lines = [x for i, x in enumerate(out) if x or i == 0 or out[i - 1]]  # no double blanks
    return "\n".join(lines) + "\n"


def _parts(report: dict[str, Any], esc: Any, tf: str, md: bool) -> list[str]:
    """The parts not modelled and the structural findings, as lines."""
    from tabulate import tabulate

    out: list[str] = []
    if report.get("parts"):
        out += ["", "### Not modelled" if md else "not modelled:"]
        rows = [[esc(p["name"]), f"{p['tensors']:,}", f"{p['elements']:,}", esc(p["reason"])]
                for p in report["parts"]]
        out.append(tabulate(rows, ["part", "tensors", "elements", "reason"], tf,
                            disable_numparse=True))
    if report.get("findings"):
        out += ["", "### Structure" if md else "structure:"]
        rows = [[f["kind"], esc(f["message"])] for f in report["findings"]]
        out.append(tabulate(rows, ["finding", "detail"], tf, disable_numparse=True))
    return out
