"""Score ``inspector scan`` and its peers (modelaudit, modelscan, picklescan) on the same files.

The files, each malicious or benign by its producer's truth:

* ``corpus``: the project's attack corpora under ``tests/corpus`` (pickle attacks, loader-grammar
  variants, hostile Keras files, archives, TorchServe archives, SavedModels, ONNX external data,
  HDF5 denial of service) with their benign twins; labels and "a real loader executes it" from
  the ``*.truth.json`` files the generators wrote.
* ``peers``: modelscan's, modelaudit's and picklescan's public test assets, labelled by their own
  tests (``bench/peer_assets/labels.json``, made by ``bench/peer_assets/make_peer_assets.py``).
* ``security``: the benign real checkpoints of ``fixtures/security``.
* ``fixtures``: other benign real checkpoints: up to ``--per-kind`` files of each checkpoint
  extension in each ``fixtures/*`` folder.

Each tool runs its own command line on one file at a time (``bench/peer_run.py``: in one process
per tool, so imports are paid once). Exit codes by each tool's documentation: inspector 1 =
dangerous, 2 = not fully examined; modelaudit 1 = issues, 2 = errors (even with issues);
modelscan 1 = issues, 2 = errors, 3 = no supported file; picklescan 1 = issues, 2 = error.
"flagged" is exit 1; exit 2, a crash or a timeout is an error, counted apart (the report's own
findings behind an exit 2 are counted in a column of their own). modelscan's 3 is neither.

    /work/venvs/peers/bin/pip install modelaudit==0.2.54 modelscan==0.8.8 picklescan==1.0.5
    nice -n 10 .venv/bin/python bench/peers.py [--peers /work/venvs/peers/bin/python]
        [--timeout 120] [--tools inspector ...] [--sets corpus peers security fixtures]
        [--json out.json]

Prints Markdown tables: per tool and set, then the files where the tools disagree.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pickletools
import select
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
PEER_ASSETS = ROOT / "bench" / "peer_assets"
CHECKPOINT_EXT = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".h5", ".keras",
                  ".safetensors", ".gguf", ".onnx", ".npz", ".npy", ".msgpack", ".pb", ".nemo",
                  ".joblib", ".params", ".best", ".distcp", ".zip", ".tar", ".mar")
TOOLS = ("inspector", "modelaudit", "modelscan", "picklescan")


@dataclass
class Case:
    path: Path
    set: str
    label: str  # "malicious" | "benign"
    executes: bool | None = None  # a real loader runs its payload
    kind: str = ""  # a finer group for the report
    results: dict[str, dict] = field(default_factory=dict)


def _truth(name: str) -> dict:
    return json.loads((CORPUS / name).read_text())["files"]


def corpus_cases() -> list[Case]:
    out: list[Case] = []
    add = out.append
    for name, t in _truth("pickle/attacks.truth.json").items():
        add(Case(CORPUS / "pickle/attacks" / name, "corpus", "malicious",
                 any(t["ran"].values()), "pickle attack"))
    for name in _truth("pickle/benign/benign.truth.json"):
        add(Case(CORPUS / "pickle/benign" / name, "corpus", "benign", False, "pickle benign"))
    for name, t in _truth("loader_grammar.truth.json").items():
        add(Case(CORPUS / "loader_grammar" / name, "corpus", "malicious",
                 "executed" in t.values(), "loader grammar"))
    for name, t in _truth("keras_hostile.truth.json").items():
        ran = t["unsafe_mode"]["payload_ran"]
        if name == "benign_extra_member.keras":
            # a benign model whose zip also carries assets/data.pkl calling os.system: Keras
            # never reads it, pickle.loads of the member runs it (tests/test_keras_hostile.py::
            # test_pickle_member_of_a_keras_zip_is_examined proves it with a marker file)
            add(Case(CORPUS / "keras_hostile" / name, "corpus", "malicious", True,
                     "keras zip with a pickle member"))
            continue
        add(Case(CORPUS / "keras_hostile" / name, "corpus", "malicious" if ran else "benign",
                 ran, "keras"))
    for name, t in _truth("keras_lambda.truth.json").items():
        add(Case(CORPUS / name, "corpus", "malicious", t["payload_ran_under_keras_load_model"],
                 "keras"))
    for name in _truth("archives/archives.truth.json"):
        if name.startswith("payload"):
            add(Case(CORPUS / "archives" / name, "corpus", "malicious", True, "archive payload"))
        elif name.startswith("benign"):
            add(Case(CORPUS / "archives" / name, "corpus", "benign", False, "archive"))
        else:  # a member that escapes the extraction folder or is a device: no code runs
            add(Case(CORPUS / "archives" / name, "corpus", "malicious", False, "archive escape"))
    for name in _truth("serving/mars.truth.json"):
        bad = "system" in name
        add(Case(CORPUS / "serving" / name, "corpus", "malicious" if bad else "benign", bad,
                 "torchserve"))
    for name in _truth("serving/savedmodels.truth.json"):
        bad = not name.startswith("benign")
        add(Case(CORPUS / "serving" / name, "corpus", "malicious" if bad else "benign", bad,
                 "savedmodel"))
    add(Case(CORPUS / "onnx_escape/model/escape.onnx", "corpus", "malicious", False,
             "onnx external data escape"))
    for name in ("hdf5_hang.h5.hang", "hdf5_segfault.h5.crash"):
        add(Case(CORPUS / name, "corpus", "malicious", False, "hdf5 denial of service"))
    return [c for c in out if c.path.is_file()]


def peer_cases() -> list[Case]:
    rows = json.loads((PEER_ASSETS / "labels.json").read_text())["files"]
    return [Case(PEER_ASSETS / r["path"], "peers", r["label"], r["executes"],
                 r["source"].split("@")[0]) for r in rows]


def _is_checkpoint(p: Path) -> bool:
    return p.is_file() and p.name.endswith(CHECKPOINT_EXT)


def security_cases() -> list[Case]:
    d = ROOT / "fixtures" / "security"
    return [Case(p, "security", "benign", False, "security fixture") for p in sorted(d.iterdir())
            if _is_checkpoint(p)]


def fixture_cases(per_kind: int) -> list[Case]:
    """Up to ``per_kind`` files of each checkpoint extension in each ``fixtures/*`` folder. A
    fixture made as an attack (its ``.truth.json`` says the loader ran a payload, or its verdict
    is not benign) is malicious."""
    out = []
    for d in sorted(p for p in (ROOT / "fixtures").iterdir() if p.is_dir()):
        if d.name == "security":
            continue
        by_ext: dict[str, list[Path]] = {}
        for p in sorted(d.rglob("*")):
            if _is_checkpoint(p):
                by_ext.setdefault(p.suffix, []).append(p)
        for files in by_ext.values():
            for p in files[:per_kind]:
                truth = p.with_name(p.name + ".truth.json")
                t = json.loads(truth.read_text()) if truth.is_file() else {}
                ran = bool(t.get("loader_ran_payload") or t.get("payload_ran"))
                bad = ran or t.get("verdict", "benign") != "benign"
                out.append(Case(p, "fixtures", "malicious" if bad else "benign", ran,
                                f"fixtures/{d.name}"))
    return out


# Modules of the user's own code in the benign files: the training script (``__main__``) and
# ``user_enums`` (tests/corpus/pickle/make_benign.py, an Enum of the user's project).
USER_MODULES = ("__main__", "user_enums")


def user_class_globals(path: Path) -> list[str]:
    """Globals of the user's own modules (``USER_MODULES``) that the pickles of a file name (a
    plain pickle or a sequence of them, as legacy ``torch.save`` writes; ``data.pkl`` of a torch
    zip): a class of the user's code that a loader calls, which nobody vetted. Read with
    pickletools, nothing loaded."""
    try:
        data = path.read_bytes()
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                names = [n for n in z.namelist() if n.endswith("data.pkl")]
                data = z.read(names[0]) if names else b""
    except (OSError, zipfile.BadZipFile):
        return []
    found: set[str] = set()
    stream = io.BytesIO(data)
    for _ in range(16):  # legacy torch: magic, protocol, sys_info, the object, storage keys
        strings: list[str] = []
        try:
            for op, arg, _pos in pickletools.genops(stream):
                if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
                    strings.append(arg)
                elif op.name in ("GLOBAL", "INST") and str(arg).split(" ")[0] in USER_MODULES:
                    found.add(str(arg).replace(" ", "."))
                elif op.name == "STACK_GLOBAL" and len(strings) >= 2 \
                        and strings[-2] in USER_MODULES:
                    found.add(f"{strings[-2]}.{strings[-1]}")
        except Exception:  # noqa: BLE001 - the end of the pickles, or not a pickle
            break
    return sorted(found)


def run_tool(tool: str, python: str, cases: list[Case], timeout: float) -> tuple[float, float]:
    """Run one tool over the cases; fill ``case.results[tool]``. Returns (wall, cpu) totals,
    the tool's import included."""
    runner = ROOT / "bench" / "peer_run.py"
    env = {**os.environ, "PROMPTFOO_DISABLE_TELEMETRY": "1", "PYTHONWARNINGS": "ignore"}
    todo = list(cases)
    wall = cpu = 0.0
    while todo:
        proc = subprocess.Popen([python, str(runner), tool], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env=env, cwd=ROOT)
        assert proc.stdin and proc.stdout
        proc.stdin.write("".join(f"{c.path}\n" for c in todo))
        proc.stdin.close()
        by_path = {str(c.path): c for c in todo}
        current: Case | None = None
        started = time.perf_counter()
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 5)
            if not ready:
                if current is not None and time.perf_counter() - started > timeout:
                    proc.kill()
                    current.results[tool] = {"code": "timeout", "wall": timeout, "cpu": None}
                    wall += timeout
                    break
                continue
            line = proc.stdout.readline()
            if not line:  # the tool's process died (a crash in C) or finished
                proc.wait()
                if current is not None and tool not in current.results:
                    current.results[tool] = {"code": f"died {proc.returncode}",
                                             "wall": time.perf_counter() - started, "cpu": None}
                break
            if line.startswith("START "):
                current, started = by_path[line[6:].rstrip("\n")], time.perf_counter()
                continue
            rec = json.loads(line)
            if "import_wall" in rec:
                wall += rec["import_wall"]
                cpu += rec["import_cpu"]
                continue
            by_path[rec["path"]].results[tool] = rec
            wall += rec["wall"]
            cpu += rec["cpu"]
            current = None
        todo = [c for c in todo if tool not in c.results]
    return wall, cpu


def verdict(res: dict | None) -> str:
    if res is None:
        return "?"
    code = res["code"]
    if code == 1:
        return "flagged"
    if code == 0:
        return "-"
    if code == 3:
        return "not scanned"
    if code == 2:
        return "error+found" if res.get("found") else "error"
    return str(code)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="/work/venvs/peers/bin/python",
                    help="the Python the peers are installed in")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per file")
    ap.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    ap.add_argument("--sets", nargs="+", default=["corpus", "peers", "security", "fixtures"])
    ap.add_argument("--per-kind", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write every result here")
    ap.add_argument("--merge", nargs="+", type=Path,
                    help="no run: report from --json files of earlier runs (tools run apart)")
    args = ap.parse_args()
    if args.merge:
        merged(args.merge, args.per_kind)
        return
    cases = [c for s in args.sets for c in make_set(s, args.per_kind)]
    totals = {}
    load0 = os.getloadavg()
    for tool in args.tools:
        python = sys.executable if tool == "inspector" else args.peers
        totals[tool] = run_tool(tool, python, cases, args.timeout)
        print(f"{tool}: {totals[tool][0]:.1f} s wall, {totals[tool][1]:.1f} s CPU",
              file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    whole = {str(c.path): user_class_globals(c.path) for c in cases if c.label == "benign"}
    report(cases, args.tools, totals, load0, load1, whole)
    if args.json:
        args.json.write_text(json.dumps({"totals": totals, "load": [load0, load1], "cases": [
            {"path": str(c.path.relative_to(ROOT)), "set": c.set, "label": c.label,
             "executes": c.executes, "kind": c.kind, "results": c.results} for c in cases]},
            indent=1))


def merged(files: list[Path], per_kind: int) -> None:
    """Report from earlier runs' results, with today's labels (the sets are built again)."""
    results: dict[str, dict] = {}
    totals: dict[str, tuple[float, float]] = {}
    loads = []
    sets: dict[str, None] = {}
    for f in files:
        d = json.loads(f.read_text())
        for tool, (w, c) in d["totals"].items():
            old = totals.get(tool, (0.0, 0.0))
            totals[tool] = (old[0] + w, old[1] + c)
        loads += d["load"]
        for r in d["cases"]:
            sets[r["set"]] = None
            results.setdefault(r["path"], {}).update(r["results"])
    cases = [c for s in sets for c in make_set(s, per_kind)]
    for c in cases:
        c.results = results.get(str(c.path.relative_to(ROOT)), {})
    whole = {str(c.path): user_class_globals(c.path) for c in cases if c.label == "benign"}
    report(cases, list(totals), totals, loads[0], loads[-1], whole)


def make_set(name: str, per_kind: int) -> list[Case]:
    return {"corpus": corpus_cases, "peers": peer_cases, "security": security_cases,
            "fixtures": lambda: fixture_cases(per_kind)}[name]()


def report(cases: list[Case], tools: list[str], totals: dict, load0: tuple, load1: tuple,
           whole: dict[str, list[str]]) -> None:
    def count(group: list[Case], tool: str, what: tuple[str, ...]) -> int:
        return sum(verdict(c.results.get(tool)) in what for c in group)

    mal = [c for c in cases if c.label == "malicious"]
    exe = [c for c in mal if c.executes]
    ben_whole = [c for c in cases if c.label == "benign" and whole.get(str(c.path))]
    ben = [c for c in cases if c.label == "benign" and not whole.get(str(c.path))]
    print(f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}\n")
    print("| tool | malicious flagged | of which a loader executes | benign flagged | "
          "benign, user's own class, flagged | errors (malicious / benign) | wall time | "
          "CPU time |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for t in tools:
        seen = {verdict(c.results.get(t)) for c in cases}
        err = ("error", "error+found", "timeout", *(v for v in seen
                                                     if v.startswith(("died", "crash"))))
        print(f"| {t} | {count(mal, t, ('flagged',))} of {len(mal)} | "
              f"{count(exe, t, ('flagged',))} of {len(exe)} | {count(ben, t, ('flagged',))} of "
              f"{len(ben)} | {count(ben_whole, t, ('flagged',))} of {len(ben_whole)} | "
              f"{count(mal, t, err)} / {count(ben + ben_whole, t, err)} | "
              f"{totals[t][0]:.1f} s | {totals[t][1]:.1f} s |")
    print("\nPer set (flagged malicious / executes flagged / benign flagged):\n")
    print("| set | files | " + " | ".join(tools) + " |")
    print("| --- | --- |" + " --- |" * len(tools))
    for s in dict.fromkeys(c.set for c in cases):
        g = [c for c in cases if c.set == s]
        gm = [c for c in g if c.label == "malicious"]
        ge = [c for c in gm if c.executes]
        gb = [c for c in g if c.label == "benign"]
        cells = [f"{count(gm, t, ('flagged',))}/{len(gm)} · {count(ge, t, ('flagged',))}/"
                 f"{len(ge)} · {count(gb, t, ('flagged',))}/{len(gb)}" for t in tools]
        print(f"| {s} | {len(g)} | " + " | ".join(cells) + " |")
    if ben_whole:
        print("\nBenign files whose pickle calls a class of the user's own code (a loader runs "
              "that class's code; nobody vetted it):\n")
        for c in ben_whole:
            print(f"- {c.path.relative_to(ROOT)}: {', '.join(whole[str(c.path)])}")
    print("\nFiles where the verdicts are not all the same:\n")
    print("| file | label | executes | " + " | ".join(tools) + " |")
    print("| --- | --- | --- |" + " --- |" * len(tools))
    for c in cases:
        v = [verdict(c.results.get(t)) for t in tools]
        if len(set(v)) > 1 or (c.label == "benign" and "flagged" in v) or \
                (c.label == "malicious" and "flagged" not in v):
            print(f"| {c.path.relative_to(ROOT)} | {c.label} | {c.executes} | "
                  + " | ".join(v) + " |")


if __name__ == "__main__":
    main()
