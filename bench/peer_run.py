"""Run one scanner's own command line over many files in one process (for ``bench/peers.py``).

    PYTHON bench/peer_run.py TOOL < files.txt

``PYTHON`` is the interpreter the tool is installed in. For each path read from stdin (one a
line) the tool's console entry point is called with ``sys.argv`` set as its command line would
set it, and one JSON line is printed to the real stdout: path, exit code, wall and CPU seconds,
and whether the tool's own report names a finding (for tools whose exit code 2 hides one).
The tool's imports are paid once, at the first file; ``bench/peers.py`` adds them to the total.
A ``START`` line precedes each file, so the parent can tell a hang or a crash from its file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import sys
import time
from collections.abc import Callable
from typing import Any


def _entry(tool: str) -> tuple[Callable[[], Any], Callable[[str], list[str]]]:
    if tool == "inspector":
        from inspector.cli import console_main
        return console_main, lambda p: ["inspector", "scan", p]
    if tool == "modelaudit":
        os.environ.setdefault("PROMPTFOO_DISABLE_TELEMETRY", "1")
        from modelaudit.cli import main
        return main, lambda p: ["modelaudit", "scan", "--no-cache", "--format", "json", p]
    if tool == "modelscan":
        from modelscan.cli import main
        return main, lambda p: ["modelscan", "-p", p]
    if tool == "picklescan":
        from picklescan.cli import main
        return main, lambda p: ["picklescan", "--path", p]
    raise SystemExit(f"unknown tool {tool}")


def _found(tool: str, out: str) -> bool | None:
    """Whether the tool's own report names a finding, read from what it printed."""
    if tool == "modelaudit":
        try:
            start = out.index("{")
            report = json.JSONDecoder().raw_decode(out[start:])[0]
        except ValueError:
            return None
        return any(i.get("severity") in ("warning", "critical") for i in report.get("issues", []))
    if tool == "modelscan":
        m = re.search(r"Total Issues: (\d+)", out)
        return bool(m and int(m.group(1)))
    if tool == "picklescan":
        m = re.search(r"Infected files: (\d+)", out)
        return bool(m and int(m.group(1)))
    return None


def _cpu() -> float:
    """CPU seconds of this process and of the children it waited for (isolated examinations)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    tool = sys.argv[1]
    real_out = sys.stdout
    t0, c0 = time.perf_counter(), _cpu()
    func, argv = _entry(tool)
    print(json.dumps({"import_wall": time.perf_counter() - t0,
                      "import_cpu": _cpu() - c0}), file=real_out, flush=True)
    for line in sys.stdin:
        path = line.rstrip("\n")
        if not path:
            continue
        print("START " + path, file=real_out, flush=True)
        sys.argv = argv(path)
        buf = io.StringIO()
        t0, c0 = time.perf_counter(), _cpu()
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
                code = func()
        except SystemExit as e:
            code = e.code
        except BaseException as e:  # noqa: BLE001 - a crash of the tool is its result
            code = f"crash {type(e).__name__}"
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        if code is None:
            code = 0
        print(json.dumps({"path": path, "code": code, "wall": wall, "cpu": cpu,
                          "found": _found(tool, buf.getvalue())}), file=real_out, flush=True)


if __name__ == "__main__":
    main()
