"""Score ``inspector scan`` and its peers (modelaudit, modelscan, picklescan) on the same files.

Each tool runs once per file, from its own command line, and a file counts as flagged when the
tool exits 1 (each tool's "found something" code). Files are malicious or benign by their
producer's truth: an archive whose payload ran after unpacking, a TorchServe archive whose
handler or serialized model runs code, a SavedModel whose graph reads or writes files or calls
Python; their benign twins; and the benign files under ``fixtures/security``.

    python3 -m venv /work/venvs/peers
    /work/venvs/peers/bin/pip install modelaudit==0.2.54 modelscan==0.8.8 picklescan==1.0.5
    python bench/peers.py [--peers /work/venvs/peers/bin] [--timeout 60] [--tools inspector ...]

Prints a Markdown table: per tool, malicious flagged, benign flagged, wall time, and per file.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVES = ROOT / "tests" / "corpus" / "archives"
SERVING = ROOT / "tests" / "corpus" / "serving"

MALICIOUS = [
    *(ARCHIVES / n for n in ("payload.tar", "payload.tar.gz", "payload.tar.bz2", "payload.tar.xz",
                             "payload.7z", "payload_py7zr.7z", "payload_zip_in_zip.zip",
                             "payload_nested.tar.gz")),
    SERVING / "pickle_system.mar", SERVING / "handler_system.mar",
    *(SERVING / d / "saved_model.pb" for d in ("writes_file", "reads_file", "calls_python")),
]
BENIGN = [
    *(ARCHIVES / n for n in ("benign.tar", "benign.tar.gz", "benign.tar.bz2", "benign.tar.xz",
                             "benign.7z", "benign_py7zr.7z", "benign_zip_in_zip.zip",
                             "benign_link_inside.tar")),
    SERVING / "benign.mar", SERVING / "benign" / "saved_model.pb",
    *sorted(p for p in (ROOT / "fixtures" / "security").iterdir()
            if p.is_file() and not p.name.endswith((".json", ".py", ".md"))),
]


def commands(peers: Path) -> dict[str, list[str]]:
    return {
        "inspector": [sys.executable, "-m", "inspector", "scan"],
        "modelaudit": [str(peers / "modelaudit"), "scan"],
        "modelscan": [str(peers / "modelscan"), "-p"],
        "picklescan": [str(peers / "picklescan"), "--path"],
    }


def run(cmd: list[str], path: Path, timeout: float) -> tuple[bool | None, float]:
    start = time.perf_counter()
    try:
        proc = subprocess.run([*cmd, str(path)], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - start
    return proc.returncode == 1, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", type=Path, default=Path("/work/venvs/peers/bin"))
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--tools", nargs="+", choices=list(commands(Path())),
                    help="run only these tools (default: all four)")
    args = ap.parse_args()
    tools = {t: c for t, c in commands(args.peers).items() if not args.tools or t in args.tools}
    rows: dict[str, dict[str, bool | None]] = {}
    totals = {t: [0, 0, 0.0] for t in tools}
    for group, files in (("malicious", MALICIOUS), ("benign", BENIGN)):
        for path in files:
            label = f"{group}: {path.relative_to(ROOT)}"
            rows[label] = {}
            for tool, cmd in tools.items():
                flagged, seconds = run(cmd, path, args.timeout)
                rows[label][tool] = flagged
                totals[tool][2] += seconds
                if flagged:
                    totals[tool][0 if group == "malicious" else 1] += 1
    names = list(tools)
    print("| tool | malicious flagged | benign flagged | wall time |")
    print("| --- | --- | --- | --- |")
    for t in names:
        m, b, s = totals[t]
        print(f"| {t} | {m} of {len(MALICIOUS)} | {b} of {len(BENIGN)} | {s:.1f} s |")
    print()
    print("| file | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    mark = {True: "flagged", False: "-", None: "timeout"}
    for label, r in rows.items():
        print(f"| {label} | " + " | ".join(mark[r[t]] for t in names) + " |")


if __name__ == "__main__":
    main()
