"""The bench's result rows: one schema for every script under ``bench/`` and for
``bench/out/results.json`` (``docs/benchmark.md`` documents it; charts read it).

A row is a dict::

    {"section": "startup" | "formats" | "values",
     "name": "show --format json, 4 GiB safetensors (header only)",
     "ours_s": 0.031,          # seconds, the inspector's way (min of the runs)
     "floor_s": 0.019,         # the plain-Python floor, or null
     "producer_s": null,       # the producer's own reader, or null ("n/a" in tables)
     "ratio": 1.63,            # see ratio_of
     "ratio_of": "ours/floor" | "producer/ours" | "ours/python",
     "target": "<= 2x floor",  # the target as text
     "met": true | false | null,   # null: not measurable here (a producer missing)
     "note": "..."}            # how it was measured, or why a value is missing

``ratio`` is always the figure the target is about: ``ours/floor`` (lower is better) for a
floor target, ``producer/ours`` (how many times faster than the producer; higher is better) for
a producer target. A time target (``<= 35 ms``) keeps ``ours/python`` (against ``python -c
pass``) as its ratio and is met on ``ours_s``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

NA = "n/a (producer not installed)"


def at_most_floor(section: str, name: str, ours: float, floor: float, factor: float,
                  note: str = "", producer: float | None = None) -> dict:
    r = ours / floor
    return {"section": section, "name": name, "ours_s": ours, "floor_s": floor,
            "producer_s": producer, "ratio": r, "ratio_of": "ours/floor",
            "target": f"<= {factor:g}x floor", "met": r <= factor, "note": note}


def faster_than_producer(section: str, name: str, ours: float, producer: float | None,
                         factor: float, note: str = "", floor: float | None = None) -> dict:
    r = None if producer is None else producer / ours
    return {"section": section, "name": name, "ours_s": ours, "floor_s": floor,
            "producer_s": producer, "ratio": r, "ratio_of": "producer/ours",
            "target": f">= {factor:g}x faster than the producer" if factor != 1
            else "at least as fast as the producer",
            "met": None if r is None else r >= factor, "note": note if producer else
            (f"{note}; {NA}" if note else NA)}


def at_most_seconds(section: str, name: str, ours: float, python: float, limit: float,
                    note: str = "") -> dict:
    return {"section": section, "name": name, "ours_s": ours, "floor_s": python,
            "producer_s": None, "ratio": ours / python, "ratio_of": "ours/python",
            "target": f"<= {limit * 1000:g} ms", "met": ours <= limit, "note": note}


def missing(section: str, name: str, target: str, why: str = NA) -> dict:
    """A row that could not be measured here (its files are written by a missing producer)."""
    return {"section": section, "name": name, "ours_s": None, "floor_s": None,
            "producer_s": None, "ratio": None, "ratio_of": None, "target": target,
            "met": None, "note": why}


def write(path: str | None, rows: list[dict]) -> None:
    """``rows`` as JSON to ``path`` (for bench/run.py), when given."""
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


def fmt_s(s: float | None) -> str:
    if s is None:
        return "n/a"
    return f"{s * 1000:,.1f} ms" if s < 10 else f"{s:,.1f} s"


def fmt_ratio(row: dict) -> str:
    r = row["ratio"]
    return "n/a" if r is None else f"{r:.2f}x"


def verdict(row: dict) -> str:
    return {True: "ok", False: "**MISS**", None: "n/a"}[row["met"]]


def markdown(rows: list[dict]) -> list[str]:
    """The rows as a Markdown table, ratio first."""
    out = ["| ratio | target | met | work | ours | floor | producer | note |",
           "|---:|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        of = f" ({r['ratio_of']})" if r["ratio_of"] else ""
        out.append(f"| {fmt_ratio(r)}{of} | {r['target']} | {verdict(r)} | "
                   f"{r['name']} | {fmt_s(r['ours_s'])} | {fmt_s(r['floor_s'])} | "
                   f"{fmt_s(r['producer_s'])} | {r.get('note', '')} |")
    return out


CPU_SEEN: dict[str, float] = {}  # " ".join(argv) -> least CPU time, by min_wall


def min_wall(argv: list[str], runs: int, env: dict | None = None) -> float:
    """The least wall time of ``runs`` whole processes of ``argv`` (after one warm-up run),
    stdout discarded; raises on a non-zero exit. The least CPU time (user + system of the
    child, less sensitive to other load) goes to :data:`CPU_SEEN`."""
    best = cpu = float("inf")
    for i in range(runs + 1):
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=env)
        _, err = proc.communicate()
        t = time.perf_counter() - t0
        usage = _child_cpu()
        if proc.returncode != 0:
            raise RuntimeError(f"{argv[:3]} exited {proc.returncode}: {err[-500:]!r}")
        if i:
            best, cpu = min(best, t), min(cpu, usage)
    CPU_SEEN[" ".join(argv)] = cpu
    return best


_last_cpu = [0.0]


def _child_cpu() -> float:
    """CPU seconds of the children reaped since the last call."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = ru.ru_utime + ru.ru_stime
    used, _last_cpu[0] = total - _last_cpu[0], total
    return used


def cpu_ratio(ours: list[str], floor: list[str]) -> str:
    """"CPU ratio X" of two commands min_wall ran, for a row's note."""
    a, b = CPU_SEEN.get(" ".join(ours)), CPU_SEEN.get(" ".join(floor))
    return f"CPU ratio {a / b:.2f}x ({a * 1000:.0f} / {b * 1000:.0f} ms)" if a and b else ""


def min_inner(argv: list[str], runs: int, env: dict | None = None) -> tuple[float, list[str]]:
    """The least of the seconds each process prints as its first word of its last line (a
    time measured inside the process), and that last line's other words of the last run."""
    best, rest = float("inf"), []
    for _ in range(runs):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{argv[:3]} exited {proc.returncode}: {proc.stderr[-800:]}")
        words = proc.stdout.strip().splitlines()[-1].split()
        best, rest = min(best, float(words[0])), words[1:]
    return best, rest


def kept(keep: str, *made_by: str) -> str:
    """The directory under ``keep`` for files made by ``made_by`` (the generator's code, its
    arguments, the producer): named by their hash, so other code or arguments write afresh."""
    import hashlib

    h = hashlib.sha256("\0".join(made_by).encode()).hexdigest()[:12]
    return os.path.join(keep, h)


def python_ok(python: str | None) -> bool:
    return bool(python) and os.path.exists(python)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


if __name__ == "__main__":  # print a results file's rows as Markdown
    with open(sys.argv[1]) as f:
        data = json.load(f)
    print("\n".join(markdown(data["rows"] if isinstance(data, dict) else data)))
