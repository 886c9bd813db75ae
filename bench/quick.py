"""``bench/run.py --quick``: the headline table in one command, every row ratio first.

Rows (``bench/rows.py`` schema), in order:

* startup: ``show --format json`` of a 4 GiB safetensors file (header only) and of a
  50,000-tensor one, the ``show`` table of the latter, each against the floor ``struct +
  json.loads + json.dumps`` of the header (``ways.py floor-safetensors-json``); a 4 GiB MXNet
  ``.params`` listing against 35 ms; ``inspector --version`` against ``python -c pass``. Whole
  processes, the least of ``--runs`` (after a warm-up), files written by the real frameworks
  (``bench/.venvs/frameworks``, ``bench/.venvs/mxnet``).
* formats: each ``bench/*_list.py`` / ``dcp_metadata.py`` script run as a subprocess with
  ``--json``; its own table is printed too.
* values: ``bench/values_pass.py`` run as a subprocess; its output lines are printed and kept.

``--sections startup,formats,values`` measures only those; the other rows are kept from the
existing results file, each with the date and commit that measured it (``measured``).

The results go to ``--results`` (default ``bench/out/results.json``)::

    {"date": "2026-11-27T15:00:00Z", "commit": "abc1234", "machine": "...",
     "load_average": {"start": [1.0, 1.1, 1.2], "end": [...]}, "minutes": 7.5,
     "rows": [row, ...], "values_pass": {"command": "...", "lines": ["...", ...]}}

``python bench/run.py --render RESULTS --docs docs/benchmark.md`` rewrites the part of that page
between its ``<!-- bench:begin -->`` and ``<!-- bench:end -->`` markers from a results file and
copies the results beside it (``docs/benchmark.json``).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rows

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True).stdout
        return out + ("+changes" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def make(maker: Path, fmt: str, out: Path, *size: str) -> dict:
    proc = subprocess.run([str(maker), str(HERE / "make_files.py"), fmt, str(out), *size],
                          check=True, capture_output=True, text=True)
    # timed on a file at rest: the gigabytes just written are flushed first, not while the
    # listing runs (the kernel's writeback would be counted in the first file's times)
    os.sync()
    return json.loads(proc.stdout)


def startup_rows(inspector: str, py: str, frameworks: Path, mxnet: Path | None, runs: int,
                 many: int, gib: float, work: Path) -> list[dict]:
    out = []
    ways = str(HERE / "ways.py")
    floor_note = (f"whole processes, least of {runs} runs; floor: struct + json.loads + "
                  "json.dumps of the header")
    pass_s = rows.min_wall([py, "-c", "pass"], max(runs, 10))
    version = rows.min_wall([inspector, "--version"], max(runs, 10))

    d = work / "st-big"
    log(f"writing a {gib:g} GiB safetensors file")
    made = make(frameworks, "safetensors", d, "--gb", str(gib))
    show = [inspector, "show", "--format", "json", made["path"]]
    floor_cmd = [py, ways, "floor-safetensors-json", made["path"]]
    ours = rows.min_wall(show, runs)
    floor = rows.min_wall(floor_cmd, runs)
    out.append(rows.at_most_floor(
        "startup", f"show --format json, {gib:g} GiB safetensors (header only)", ours, floor, 2,
        f"{floor_note}; {rows.cpu_ratio(show, floor_cmd)}"))
    shutil.rmtree(d)

    d = work / "st-many"
    log(f"writing a {many:,}-tensor safetensors file")
    made = make(frameworks, "safetensors", d, "--many", str(many))
    floor_cmd = [py, ways, "floor-safetensors-json", made["path"]]
    show = [inspector, "show", "--format", "json", made["path"]]
    table = [inspector, "show", made["path"]]
    floor = rows.min_wall(floor_cmd, runs)
    ours = rows.min_wall(show, runs)
    out.append(rows.at_most_floor(
        "startup", f"show --format json, {many:,} tensors (safetensors)", ours, floor, 2,
        f"{floor_note}; {rows.cpu_ratio(show, floor_cmd)}"))
    ours = rows.min_wall(table, runs)
    out.append(rows.at_most_floor(
        "startup", f"show (table), {many:,} tensors (safetensors)", ours, floor, 2,
        f"{floor_note}; {rows.cpu_ratio(table, floor_cmd)}"))
    shutil.rmtree(d)

    name = f"show --format json, {gib:g} GiB MXNet .params"
    if mxnet is None:
        out.append(rows.missing("startup", name, "<= 35 ms",
                                "n/a (mxnet 1.9.1, which writes the file, did not install)"))
    else:
        d = work / "mx-big"
        log(f"writing a {gib:g} GiB MXNet file")
        made = make(mxnet, "mxnet", d, "--gb", str(gib))
        show = [inspector, "show", "--format", "json", made["path"]]
        ours = rows.min_wall(show, runs)
        out.append(rows.at_most_seconds(
            "startup", name, ours, pass_s, 0.035,
            f"whole processes, least of {runs} runs; python -c pass {pass_s * 1000:.1f} ms; "
            f"{rows.cpu_ratio(show, [py, '-c', 'pass'])} against python -c pass"))
        shutil.rmtree(d)

    out.append(rows.at_most_floor(
        "startup", "inspector --version", version, pass_s, 1.49,
        f"whole processes, least of {max(runs, 10)} runs; floor: python -c pass; "
        f"{rows.cpu_ratio([inspector, '--version'], [py, '-c', 'pass'])}"))
    return out


CACHE = HERE / "out" / "files"


def cached(script: str) -> str:
    """Where ``script`` keeps the files its producer wrote, from one run to the next (under
    it, the script names each set by a hash of its generator's code, its arguments and the
    producer: ``rows.kept``). Writing is most of a format row's cost (torch.onnx.export,
    TensorFlow, torch pickling 100,000 chunks); what is timed, reading them, is the same either
    way. ``rm -r bench/out/files`` starts over."""
    return str(CACHE / Path(script).stem)


def format_rows(py: str, producers: Path, runs: int) -> tuple[list[dict], list[str]]:
    """Each format script's rows (and its printed table)."""
    def venv(name: str) -> str:
        return str(producers / name / "bin" / "python")

    scripts = [
        ("dcp_metadata.py", ["--torch-python", venv("torch"), "--runs", str(runs),
                             "--keep", cached("dcp_metadata.py")]),
        ("gguf_list.py", ["--producer", venv("gguf"), "--runs", str(runs), "--quick",
                          "--keep", cached("gguf_list.py")]),
        ("onnx_list.py", ["--producer", venv("onnx"), "--python", py, "--runs", str(runs),
                          "--keep", cached("onnx_list.py")]),
        ("tf_list.py", ["--producer", venv("tf"), "--runs", str(runs),
                        "--keep", cached("tf_list.py")]),
        ("deepspeed_list.py", ["--ds-python", venv("ds-hf"), "--runs", str(runs), "--quick"]),
        ("megatron_list.py", ["--producer", venv("megatron"), "--runs", str(runs)]),
    ]
    out: list[dict] = []
    printed: list[str] = []
    for script, args in scripts:
        if not (HERE / script).exists():
            continue
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            log(f"running bench/{script}")
            t0 = time.time()
            proc = subprocess.run([py, str(HERE / script), *args, "--json", f.name],
                                  capture_output=True, text=True, cwd=HERE)
            log(f"  {script}: {time.time() - t0:.0f} s")
            printed += ["", f"### bench/{script}", "", *proc.stdout.strip().splitlines()]
            if proc.returncode != 0:
                printed.append(f"failed: {proc.stderr.strip()[-600:]}")
                continue
            try:
                out += json.loads(Path(f.name).read_text() or "[]")
            except ValueError:
                printed.append("(no result rows)")
    return out, printed


def values_lines(py: str, torch_python: str, runs: int, mib: int) -> dict:
    script = HERE / "values_pass.py"
    cmd = [py, str(script), "--repeat", "3", "--mib", str(mib),
           "--torch-python", torch_python]
    if not script.exists():
        return {"command": " ".join(cmd), "lines": ["bench/values_pass.py: not in this tree"]}
    work = tempfile.mkdtemp(prefix="inspector-values-")
    lines = []
    try:
        # the compiled kernels (the [fast] extra, installed in the bench's venv), then NumPy
        for label, numba in (("with numba ([fast] extra)", "1"), ("NumPy only", "0")):
            log(f"running bench/values_pass.py ({label})")
            env = {**os.environ, "INSPECTOR_NUMBA": numba}
            proc = subprocess.run([*cmd, "--dir", work], capture_output=True, text=True,
                                  env=env)
            lines.append(f"{label}:")
            lines += proc.stdout.strip().splitlines()
            if proc.returncode != 0:
                lines.append(f"bench/values_pass.py failed: {proc.stderr.strip()[-600:]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"command": " ".join(["bench/values_pass.py", *cmd[2:]]), "lines": lines}


def report(result: dict) -> list[str]:
    """The results as Markdown: the header line, the rows table, the value-pass lines."""
    la = result["load_average"]
    out = [f"Measured {result['date']} at commit {result['commit']} on {result['machine']}; "
           f"load average {' '.join(f'{x:.2f}' for x in la['start'])} at the start, "
           f"{' '.join(f'{x:.2f}' for x in la['end'])} at the end; "
           f"{result['minutes']:.1f} min in all.", ""]
    for section, title in (("startup", "Startup and the common path"),
                           ("formats", "Formats against their producers"),
                           ("values", "Value passes")):
        got = [_dated(r, result) for r in result["rows"] if r["section"] == section]
        if got:
            out += [f"#### {title}", "", *rows.markdown(got), ""]
    vp = result.get("values_pass")
    if vp:
        m = vp.get("measured")
        when = f" (measured {m['date']} at {m['commit']})" if m else ""
        out += ["#### Value passes (`bench/values_pass.py`)", "",
                f"`python {vp['command']}`{when}", "", *vp["lines"], ""]
    return out


def _dated(row: dict, result: dict) -> dict:
    """``row``, its note naming the run that measured it when that is not ``result``'s."""
    m = row.get("measured")
    if not m or (m.get("date"), m.get("commit")) == (result["date"], result["commit"]):
        return row
    note = f"measured {m.get('date')} at {m.get('commit')}"
    return {**row, "note": f"{row['note']}; {note}" if row.get("note") else note}


def render_docs(results: Path, docs: Path) -> None:
    """Rewrite the part of ``docs`` between the bench markers from ``results``."""
    result = json.loads(results.read_text())
    text = docs.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{docs} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    docs.write_text(head + BEGIN + "\n" + "\n".join(report(result)).rstrip() + "\n" + END + tail)
    # the data beside the page it is drawn from (bench/out/ is not committed)
    docs.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")


SECTIONS = ("startup", "formats", "values")


def main(inspector: str, py: str, frameworks: Path, mxnet: Path | None, machine: str,
         results: Path, producers: Path, runs: int, values_mib: int,
         sections: tuple[str, ...] = SECTIONS) -> int:
    """Measure ``sections``; rows of the other sections are kept from an existing
    ``results`` file (each row keeps the date and commit of the run that measured it)."""
    started = time.time()
    load_start = list(os.getloadavg())
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    found: list[dict] = []
    printed: list[str] = []
    values = None
    if "startup" in sections:
        work = Path(tempfile.mkdtemp(prefix="inspector-quick-"))
        try:
            found += startup_rows(inspector, py, frameworks, mxnet, runs, 50_000, 4.0, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if "formats" in sections:
        more, printed = format_rows(py, producers, runs)
        found += more
    if "values" in sections:
        values = values_lines(py, str(frameworks), runs, values_mib)  # torch + safetensors
    for row in found:
        row.setdefault("measured", {"date": date, "commit": commit()})
    if set(sections) != set(SECTIONS) and results.exists():
        old = json.loads(results.read_text())
        kept = [r for r in old.get("rows", []) if r["section"] not in sections]
        for row in kept:
            row.setdefault("measured", {"date": old.get("date"), "commit": old.get("commit")})
        found = [r for s in SECTIONS for r in kept + found if r["section"] == s]
        if values is None and old.get("values_pass"):
            values = {"measured": {"date": old.get("date"), "commit": old.get("commit")},
                      **old["values_pass"]}
    result = {"date": date, "commit": commit(), "machine": machine,
              "load_average": {"start": load_start, "end": list(os.getloadavg())},
              "minutes": (time.time() - started) / 60, "rows": found, "values_pass": values}
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(result, indent=1))
    print("\n".join(report(result)))
    print("\n".join(printed))
    print(f"\nresults: {results}")
    return 0
