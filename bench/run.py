"""Benchmark: ``inspector show --format json`` against the naive and lazy ways of listing.

One command from a clean clone (Python >= 3.10, stdlib only here)::

    python bench/run.py                # ~1 GiB and ~4 GiB files + 50,000-tensor files
    python bench/run.py --10gb         # also ~10 GiB files (needs ~25 GB free and ~12 GB RAM)
    python bench/run.py --quick        # the headline table: startup, every format, value
                                       # passes, each row ratio first (bench/quick.py)
    python bench/run.py --render bench/out/results.json --docs docs/benchmark.md
                                       # the docs tables regenerated from a results file

It makes its own venvs under ``bench/.venvs`` (kept between runs): ``inspector`` (this repo,
installed), ``frameworks`` (torch, safetensors, h5py, numpy: writes the files and runs the
torch/safetensors/h5py ways) and ``mxnet`` (mxnet 1.9.1 with numpy < 1.24, which it pins; skipped
with a note if it does not install). Every file is written by the real framework into a temporary
directory, timed, and deleted before the next one is written. Each way runs as a whole process:
one untimed warm-up run (it also checks the tensor count), then ``--runs`` timed runs, the ways
alternating; the table shows the median wall time and the peak RSS (``ru_maxrss`` of that child,
from ``os.wait4``) and CPU time (user + system: less sensitive to other load than wall time).
If ``inspector diff --values`` exists, its peak RSS is measured on two torch zip files of the
largest size up to 4 GiB. Results: a markdown report on stdout and in ``--out`` (+ ``.json``).
The default run took 20 minutes on a 2-core machine shared with other jobs (plus ~1 minute to
make the venvs the first time).

``--quick`` is the headline table instead: the five startup rows (4 GiB safetensors JSON,
50,000-tensor JSON and table, 4 GiB MXNet, ``--version``), one row per format against its
producer's reader and a plain-Python floor (``dcp_metadata.py``, ``gguf_list.py``,
``onnx_list.py``, ``tf_list.py``, ``deepspeed_list.py``, ``megatron_list.py``, each run as a
subprocess with the producers' venvs under ``--producers``; a missing producer gives a row
"n/a (producer not installed)") and the value-pass rows of ``values_pass.py`` as it prints them.
It prints the rows ratio first with the date, commit and load average, and writes them to
``bench/out/results.json`` (schema: ``bench/rows.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WAYS = HERE / "ways.py"
MAKE = HERE / "make_files.py"

VENVS = {
    # torch==2.13.0: on this project's machines a CPU wheel of it lies on disk and pip takes it;
    # elsewhere pip fetches it from the registry (with CUDA packages, several GB).
    "frameworks": ["torch==2.13.0", "safetensors", "h5py", "numpy"],
    # mxnet 1.9.1 (the last 1.x) needs numpy < 1.24 (np.bool alias).
    "mxnet": ["mxnet==1.9.1", "numpy<1.24"],
}

# format -> ways besides the inspector: (label, way in ways.py, venv that runs it)
BASELINES: dict[str, list[tuple[str, str, str]]] = {
    "torch-zip": [
        ("floor", "floor-torch-zip", "inspector"),
        ("lazy", "lazy-torch-zip", "frameworks"),
        ("naive", "naive-torch", "frameworks"),
    ],
    "torch-legacy": [
        ("floor", "floor-torch-legacy", "inspector"),
        ("lazy", "lazy-torch-legacy", "frameworks"),
        ("naive", "naive-torch", "frameworks"),
    ],
    "safetensors": [
        ("floor-json", "floor-safetensors-json", "inspector"),
        ("rows-only", "floor-safetensors-rows", "inspector"),
        ("floor", "floor-safetensors", "inspector"),
        ("lazy", "lazy-safetensors", "frameworks"),
        ("naive", "naive-safetensors", "frameworks"),
    ],
    "safetensors-sharded": [
        ("floor", "floor-safetensors-sharded", "inspector"),
        ("lazy", "lazy-safetensors-sharded", "frameworks"),
        ("naive", "naive-safetensors-sharded", "frameworks"),
    ],
    "mxnet": [
        ("floor", "floor-mxnet", "inspector"),
        ("naive", "naive-mxnet", "mxnet"),
    ],
    "hdf5": [
        ("floor", "floor-hdf5", "frameworks"),
        ("lazy", "lazy-hdf5", "frameworks"),
        ("naive", "naive-hdf5", "frameworks"),
    ],
}
WAY_NOTES = {
    "floor-torch-zip": "zipfile + data.pkl through a stub unpickler",
    "floor-torch-legacy": "the five pickles + a seek per storage",
    "floor-safetensors": "8-byte length + json.loads",
    "floor-safetensors-json": "struct + json.loads + json.dumps of the header (issue 18's floor)",
    "floor-safetensors-rows": "a reference: json.loads + one dict per tensor with a JSON row's "
    "stored fields + json.dumps (the report's tensor rows alone: no checks, groups or layers)",
    "inspector show (table)": "`inspector show`, the default table",
    "floor-safetensors-sharded": "index + each shard's header",
    "floor-mxnet": "struct + seek",
    "floor-hdf5": "h5py low-level h5o.visit + h5d.open",
    "lazy-torch-zip": "torch.load(mmap=True)",
    "lazy-torch-legacy": "torch.load(map_location='meta')",
    "lazy-safetensors": "safe_open + get_slice",
    "lazy-safetensors-sharded": "safe_open per shard",
    "lazy-hdf5": "h5py visititems, shape/dtype",
    "naive-torch": "torch.load",
    "naive-safetensors": "safetensors.torch.load_file",
    "naive-safetensors-sharded": "load_file per shard",
    "naive-mxnet": "mx.nd.load",
    "naive-hdf5": "h5py, read every dataset",
}
BIG_TENSOR_MB = 256  # make_files.BIG: 8192 x 8192 float32
# The HDF5 adapter name(s) that `inspector formats` lists once a Keras/HDF5 adapter exists.
HDF5_ADAPTER_WORDS = ("keras", "hdf5", "h5")


@dataclass
class Sample:
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # user + system seconds
    rss_kb: list[int] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def peak_mb(self) -> float:
        return max(self.rss_kb) / 1024


@dataclass
class Row:
    case: str  # "1 GiB", "50,000 tensors"
    format: str
    tensors: int
    nbytes: int
    ways: dict[str, tuple[str, Sample]]  # label -> (way, sample)


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# venvs


def venv_python(venvs: Path, name: str) -> Path:
    return venvs / name / "bin" / "python"


def ensure_venv(venvs: Path, name: str, packages: list[str]) -> Path | None:
    """Create (once) a venv with ``packages``; None if they cannot be installed."""
    py = venv_python(venvs, name)
    stamp = venvs / name / ".bench-packages"
    want = json.dumps(packages)
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return py
    log(f"creating venv {venvs / name}: {' '.join(packages)}")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venvs / name)], check=True)
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", *packages], capture_output=True, text=True
    )
    if proc.returncode != 0:
        log(f"venv {name}: pip install failed, its ways are skipped:\n{proc.stderr[-2000:]}")
        return None
    stamp.write_text(want)
    return py


def install_inspector(venvs: Path) -> Path:
    """This checkout, installed (not editable) into its own venv; reinstalled on every run."""
    py = venv_python(venvs, "inspector")
    # with the [fast] extra (numba), which the value passes use when it is installed
    stamp = venvs / "inspector" / ".bench-packages-fast"
    if not py.exists():
        log(f"creating venv {venvs / 'inspector'}")
        subprocess.run([sys.executable, "-m", "venv", str(venvs / "inspector")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        # A copy of the sources: an in-tree build would leave build/ and *.egg-info in the repo.
        src = Path(tmp) / "src"
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for part in ("inspector", "adapters"):
            shutil.copytree(REPO / part, src / part, ignore=ignore)
        for part in ("pyproject.toml", "README.md"):
            shutil.copy(REPO / part, src / part)
        again = ["--force-reinstall", "--no-deps"] if stamp.exists() else []
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", *again, f"{src}[fast]"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    stamp.write_text("installed")
    return py.parent / "inspector"


# --------------------------------------------------------------------------------------------
# running and timing


# A timed run is started by this small, fresh launcher: Linux carries the peak RSS of the process
# that forks or vforks a child into the child's ru_maxrss, so a child of this script (which has
# parsed a 50,000-tensor JSON report by then) would report this script's memory, not its own.
LAUNCHER = """
import json, os, sys, time
t0 = time.perf_counter()
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ,
                      file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_, status, ru = os.wait4(pid, 0)
elapsed = time.perf_counter() - t0
print(json.dumps([elapsed, ru.ru_utime + ru.ru_stime, ru.ru_maxrss,
                  os.waitstatus_to_exitcode(status)]))
"""


def run_once(
    cmd: list[str], capture: bool = False, ok: tuple[int, ...] = (0,)
) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, peak RSS in KiB, stdout if captured) of one whole process;
    timed runs (not captured) go through :data:`LAUNCHER`."""
    if not capture:
        proc = subprocess.run([sys.executable, "-c", LAUNCHER, *cmd], capture_output=True,
                              text=True)
        elapsed, cpu, rss, code = json.loads(proc.stdout)
        if code not in ok:
            raise RuntimeError(f"{' '.join(cmd)} exited {code}")
        return elapsed, cpu, rss, ""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out if capture else subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in ok:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.read()[-800:]!r}")
        out.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        return elapsed, cpu, usage.ru_maxrss, out.read().decode() if capture else ""


def tensor_count(label: str, stdout: str) -> int | None:
    if label == "inspector":
        return len(json.loads(stdout)["tensors"])
    if label == "table":
        return None  # the table's footer says it; the JSON run of the same file is checked
    return int(stdout.strip().splitlines()[-1])


def measure(
    cmds: dict[str, list[str]], runs: int, expect: int | None, ok: tuple[int, ...] = (0,)
) -> dict[str, Sample]:
    """Warm-up (and check) each command once, then ``runs`` rounds, the commands alternating."""
    samples = {label: Sample() for label in cmds}
    for label, cmd in cmds.items():
        _, _, _, out = run_once(cmd, capture=True, ok=ok)
        if expect is not None and (got := tensor_count(label, out)) not in (None, expect):
            raise RuntimeError(f"{label}: listed {got} tensors, expected {expect}")
    for i in range(runs):
        order = list(cmds) if i % 2 == 0 else list(reversed(cmds))
        for label in order:
            elapsed, cpu, rss, _ = run_once(cmds[label], ok=ok)
            samples[label].times.append(elapsed)
            samples[label].cpu.append(cpu)
            samples[label].rss_kb.append(rss)
    return samples


def time_diff(
    inspector: str, maker: Path, a_path: str, out: Path, size_args: list[str], runs: int
) -> Sample:
    """Peak RSS and time of ``diff --values`` between ``a_path`` and a same-shaped file of ones."""
    other = out / "b"
    log(f"writing a second torch-zip file for diff --values in {other}")
    made = json.loads(
        subprocess.run(
            [str(maker), str(MAKE), "torch-zip", str(other), *size_args, "--fill", "1"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    cmd = [inspector, "diff", "--values", "--format", "json", a_path, made["path"]]
    sample = measure({"diff": cmd}, max(1, min(runs, 3)), None, ok=(0, 1))["diff"]
    log(f"  diff --values: {cell(sample)}")
    return sample


# --------------------------------------------------------------------------------------------
# the report


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def cell(s: Sample | None) -> str:
    if s is None:
        return "–"
    return f"{ms(s.median)} [CPU {ms(s.cpu_median)}], {s.peak_mb:,.0f} MB"


def ratio(a: Sample | None, b: Sample | None) -> str:
    if a is None or b is None:
        return "–"
    return f"{a.median / b.median:,.0f}× / {a.peak_mb / b.peak_mb:,.0f}×"


def table(rows: list[Row]) -> str:
    out = [
        "| file | on disk | tensors | inspector | floor | lazy | naive "
        "| naive ÷ inspector (time / RSS) |",
        "|---|---:|---:|---|---|---|---|---|",
    ]
    for r in rows:
        get = {label: s for label, (_, s) in r.ways.items()}
        size = f"{r.nbytes / 2**30:.2f} GiB" if r.nbytes >= 2**27 else f"{r.nbytes / 2**20:.0f} MiB"
        out.append(
            f"| {r.format} {r.case} | {size} | {r.tensors:,} | {cell(get.get('inspector'))} | "
            f"{cell(get.get('floor'))} | {cell(get.get('lazy'))} | {cell(get.get('naive'))} | "
            f"{ratio(get.get('naive'), get.get('inspector'))} |"
        )
    return "\n".join(out)


def targets(rows: list[Row], startup: dict[str, Sample], many: int) -> list[str]:
    """Each target of issue 8 with the measured figure; 'MISS' lines say by how much."""
    lines = []

    def verdict(ok: bool) -> str:
        return "ok" if ok else "**MISS**"

    insp = {(r.format, r.case): r.ways["inspector"][1] for r in rows if "inspector" in r.ways}
    fast = ("torch-zip", "torch-legacy", "safetensors", "safetensors-sharded", "mxnet")
    for fmt in fast:
        cases = [(c, s) for (f, c), s in insp.items() if f == fmt and "GiB" in c]
        for case, s in cases:
            lines.append(
                f"- {fmt} {case}: {ms(s.median)} [CPU {ms(s.cpu_median)}] "
                f"(≤ 50 ms: {verdict(s.median <= 0.050)}), "
                f"peak RSS {s.peak_mb:.0f} MB (≤ 40 MB: {verdict(s.peak_mb <= 40)})"
            )
        one, four = insp.get((fmt, "1 GiB")), insp.get((fmt, "4 GiB"))
        if one and four:
            growth = four.median / one.median - 1
            cpu_growth = four.cpu_median / one.cpu_median - 1
            lines.append(
                f"- {fmt} 4 GiB vs 1 GiB: {growth:+.0%} [CPU {cpu_growth:+.0%}] "
                f"(within 20%: {verdict(abs(growth) <= 0.2)})"
            )
    budgets = {"torch-zip": 0.3, "torch-legacy": 0.3, "safetensors": 0.25, "mxnet": 0.3, "hdf5": 4}
    case = f"{many:,} tensors"
    for fmt, budget in budgets.items():
        s = insp.get((fmt, case))
        if s:
            lines.append(
                f"- {fmt} {case}: {ms(s.median)} [CPU {ms(s.cpu_median)}] "
                f"(≤ {ms(budget)}: {verdict(s.median <= budget)}),"
                f" peak RSS {s.peak_mb:.0f} MB (≤ 120 MB: {verdict(s.peak_mb <= 120)})"
            )
    for r in rows:
        if r.format == "hdf5" and "inspector" in r.ways and "floor" in r.ways:
            q = r.ways["inspector"][1].median / r.ways["floor"][1].median
            lines.append(
                f"- hdf5 {r.case}: {q:.2f}× h5py low-level traversal (≤ 1.2×: {verdict(q <= 1.2)})"
            )
    for fmt, naive in (("torch-zip", "torch.load"), ("mxnet", "mx.nd.load")):
        for r in rows:
            if r.format == fmt and r.case == "4 GiB" and {"naive", "inspector"} <= set(r.ways):
                n, i = r.ways["naive"][1], r.ways["inspector"][1]
                t, m = n.median / i.median, n.peak_mb / i.peak_mb
                lines.append(
                    f"- {fmt} 4 GiB vs {naive}: {t:,.0f}× faster (≥ 100×: {verdict(t >= 100)}), "
                    f"{m:,.0f}× less memory (≥ 50×: {verdict(m >= 50)})"
                )
    if "inspector --help" in startup:
        s = startup["inspector --help"]
        lines.append(
            f"- `inspector --help`: {ms(s.median)} [CPU {ms(s.cpu_median)}] "
            f"(≤ 50 ms: {verdict(s.median <= 0.05)})"
        )
    return lines


def ratios18(rows: list[Row], startup: dict[str, Sample]) -> list[str]:
    """Issue 18's rows: each as a ratio to its floor, measured in this run (wall / CPU / RSS)."""
    out = ["| work | inspector | floor | ratio (wall / CPU) | target | peak RSS ratio |",
           "|---|---|---|---|---|---|"]

    def row(work: str, a: Sample, b: Sample, floor: str, target: float, rss: float | None):
        t, c = a.median / b.median, a.cpu_median / b.cpu_median
        ok = "ok" if t <= target else "**MISS**"
        r = a.peak_mb / b.peak_mb
        rss_ok = "ok" if rss is not None and r <= rss else "**MISS**"
        rss_cell = "–" if rss is None else f"{r:.2f}× (≤ {rss:g}×: {rss_ok})"
        out.append(f"| {work} | {cell(a)} | {floor}: {cell(b)} | {t:.2f}× / {c:.2f}× | "
                   f"≤ {target:g}×: {ok} | {rss_cell} |")

    for r in rows:
        if r.format != "safetensors" or "floor-json" not in r.ways:
            continue
        floor = r.ways["floor-json"][1]
        if "GiB" in r.case:
            row(f"`show --format json`, {r.case} safetensors (header only)",
                r.ways["inspector"][1], floor, "struct + json.loads + json.dumps", 2, None)
        else:
            row(f"`show --format json`, {r.case}", r.ways["inspector"][1], floor,
                "struct + json.loads + json.dumps", 1.5, 2)
            if "table" in r.ways:
                row(f"`show` (table), {r.case}", r.ways["table"][1], floor,
                    "struct + json.loads + json.dumps", 2, 2)
            if "rows-only" in r.ways:
                a, b = r.ways["rows-only"][1], floor
                out.append(
                    f"| reference, not the tool: the tensor rows alone written directly "
                    f"(json.loads + a dict per tensor + json.dumps), {r.case} | {cell(a)} | "
                    f"same floor | {a.median / b.median:.2f}× / "
                    f"{a.cpu_median / b.cpu_median:.2f}× | – | "
                    f"{a.peak_mb / b.peak_mb:.2f}× |")
    base = startup.get("python -c pass")
    for k in ("inspector --help", "inspector --version"):
        if base is not None and k in startup:
            row(f"`{k}`", startup[k], base, "`python -c pass`", 2, None)
    for r in rows:
        if r.format == "hdf5" and "floor" in r.ways:
            row(f"HDF5 metadata walk, {r.case}", r.ways["inspector"][1], r.ways["floor"][1],
                "h5py h5o.visit + h5d.open", 1.2, None)
    return out


def values_rows(a: argparse.Namespace) -> list[str]:
    """The value-pass rows (``diff --values``, ``stats``) from ``bench/values_pass.py`` when it
    exists: its markdown output, measured in this run."""
    script = HERE / "values_pass.py"
    if not a.values_mib:
        return ["", "Value passes: not measured (--values-mib 0)."]
    if not script.exists():
        return ["", "Value passes: `bench/values_pass.py` is not in this tree yet (not measured)."]
    log("running bench/values_pass.py")
    # The inspector venv's Python: values_pass.py imports the installed inspector (and numpy).
    python = str(venv_python(a.venvs, "inspector"))
    # values_pass.py writes its files with torch: the frameworks venv's Python
    work = Path(tempfile.mkdtemp(prefix="inspector-values-", dir=a.workdir))
    try:
        proc = subprocess.run(
            [python, str(script), "--repeat", str(max(3, a.runs)), "--mib", str(a.values_mib),
             "--dir", str(work), "--torch-python", str(venv_python(a.venvs, "frameworks"))],
            capture_output=True, text=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if proc.returncode != 0:
        return ["", f"Value passes: bench/values_pass.py failed: {proc.stderr[-400:]!r}"]
    return ["", "### Value passes (bench/values_pass.py)", "", proc.stdout.strip()]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    load = ", load average {:.2f} {:.2f} {:.2f} at the end".format(*os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({cpu}){mem}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}{load}"
    )


# --------------------------------------------------------------------------------------------


def run_quick(a: argparse.Namespace) -> int:
    """``--quick``: the headline table (bench/quick.py) with this bench's venvs."""
    import quick

    a.venvs.mkdir(parents=True, exist_ok=True)
    inspector = str(install_inspector(a.venvs))
    frameworks = ensure_venv(a.venvs, "frameworks", VENVS["frameworks"])
    if frameworks is None:
        raise SystemExit("the frameworks venv (torch, safetensors, h5py) is required")
    mxnet = ensure_venv(a.venvs, "mxnet", VENVS["mxnet"])
    return quick.main(inspector, str(venv_python(a.venvs, "inspector")), frameworks, mxnet,
                      machine().split(", load average")[0], a.results, a.producers, a.runs,
                      a.values_mib if a.values_mib != 1024 else 128,
                      tuple(x for x in a.sections.split(",") if x))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1,4", help='big-file sizes in GiB (default 1,4; "": none)')
    p.add_argument("--10gb", dest="ten", action="store_true", help="add ~10 GiB files")
    p.add_argument("--many", type=int, default=50_000, help="small-tensor file size (0: none)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per way (default 5)")
    p.add_argument("--formats", default=",".join(BASELINES), help="comma-separated formats")
    p.add_argument("--no-baselines", action="store_true", help="time the inspector only")
    p.add_argument("--quick", action="store_true",
                   help="the headline table: startup, formats, value passes (bench/quick.py)")
    p.add_argument("--small", action="store_true", help="0.25 GiB, 5,000 tensors, 3 runs")
    p.add_argument("--producers", type=Path, default=Path("/work/venvs"),
                   help="--quick: the producers' venvs (torch, gguf, onnx, tf, ds-hf)")
    p.add_argument("--results", type=Path, default=HERE / "out" / "results.json",
                   help="--quick: the results file (JSON)")
    p.add_argument("--sections", default="startup,formats,values",
                   help="--quick: the sections to measure (the others kept from --results)")
    p.add_argument("--render", type=Path, help="a results file: print its tables (no run)")
    p.add_argument("--docs", type=Path, help="with --render: rewrite this page's bench tables")
    p.add_argument("--venvs", type=Path, default=HERE / ".venvs", help="where the venvs live")
    p.add_argument("--workdir", type=Path, default=None, help="where files are written")
    p.add_argument("--out", type=Path, default=HERE / "results.md", help="markdown report")
    p.add_argument("--values-mib", type=int, default=1024,
                   help="value passes: MiB per file (default 1024, issue 18's 1 GiB; 0: skip)")
    a = p.parse_args(argv)
    if a.render:
        import quick

        if a.docs:
            quick.render_docs(a.render, a.docs)
        print("\n".join(quick.report(json.loads(a.render.read_text()))))
        return 0
    if a.quick:
        return run_quick(a)
    sizes = [float(s) for s in a.sizes.split(",") if s] + ([10.0] if a.ten else [])
    if a.small:
        sizes, a.many, a.runs = [0.25], 5_000, 3
        a.values_mib = min(a.values_mib, 64)
    formats = [f for f in a.formats.split(",") if f]
    started = time.time()

    a.venvs.mkdir(parents=True, exist_ok=True)
    inspector = str(install_inspector(a.venvs))
    pythons = {"inspector": venv_python(a.venvs, "inspector")}
    for name, pkgs in VENVS.items():
        wanted = name == "frameworks" or "mxnet" in formats
        pythons[name] = ensure_venv(a.venvs, name, pkgs) if wanted else None
    notes: list[str] = []
    if pythons["frameworks"] is None:
        raise SystemExit("the frameworks venv (torch, safetensors, h5py) is required")
    listed = subprocess.run([inspector, "formats"], capture_output=True, text=True).stdout.lower()
    if "hdf5" in formats and not any(w in listed for w in HDF5_ADAPTER_WORDS):
        formats.remove("hdf5")
        notes.append("hdf5: skipped, `inspector formats` lists no Keras/HDF5 adapter yet")
    if "mxnet" in formats and pythons["mxnet"] is None:
        formats.remove("mxnet")
        notes.append("mxnet: skipped, mxnet 1.9.1 did not install (it writes the files)")

    startup_cmds = {
        "python -c pass": [str(pythons["inspector"]), "-c", "pass"],
        "python -c 'import json, struct, pickle, zipfile'": [
            str(pythons["inspector"]), "-c", "import json, struct, pickle, zipfile"],
        "inspector --help": [inspector, "--help"],
        "inspector --version": [inspector, "--version"],
    }  # fmt: skip
    startup = measure(startup_cmds, max(a.runs, 10), None)

    cases = [(f"{g:g} GiB", ["--gb", str(g)]) for g in sizes]
    if a.many:
        cases.append((f"{a.many:,} tensors", ["--many", str(a.many)]))
    rows: list[Row] = []
    # diff --values on two torch zip files of the largest size up to 4 GiB, if the verb exists.
    help_text = subprocess.run([inspector, "diff", "--help"], capture_output=True, text=True)
    has_diff = "--values" in help_text.stdout
    diff_sizes = [g for g in sizes if g <= 4]
    diff_case = f"{max(diff_sizes):g} GiB" if diff_sizes else None
    diffs: dict[str, Sample] = {}
    if not has_diff:
        notes.append("diff --values: skipped, `inspector diff --values` does not exist yet")
    root = Path(tempfile.mkdtemp(prefix="inspector-bench-", dir=a.workdir))
    try:
        for case, size_args in cases:
            for fmt in formats:
                if fmt == "safetensors-sharded" and "tensors" in case:
                    continue  # sharding is about big files
                out = root / f"{fmt}-{case.replace(' ', '').replace(',', '')}"
                maker = pythons["mxnet" if fmt == "mxnet" else "frameworks"]
                log(f"writing {fmt} {case}")
                made = json.loads(
                    subprocess.run(
                        [str(maker), str(MAKE), fmt, str(out), *size_args],
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                )
                cmds = {"inspector": [inspector, "show", "--format", "json", made["path"]]}
                ways = {"inspector": "inspector show --format json"}
                if fmt == "safetensors" and "tensors" in case:
                    cmds["table"] = [inspector, "show", made["path"]]
                    ways["table"] = "inspector show (table)"
                for label, way, venv in [] if a.no_baselines else BASELINES[fmt]:
                    if pythons.get(venv) is None:
                        continue
                    cmds[label] = [str(pythons[venv]), str(WAYS), way, made["path"]]
                    ways[label] = way
                log(f"timing {fmt} {case}: {', '.join(cmds)}")
                samples = measure(cmds, a.runs, made["tensors"])
                rows.append(
                    Row(
                        case,
                        fmt,
                        made["tensors"],
                        made["bytes"],
                        {k: (ways[k], s) for k, s in samples.items()},
                    )
                )
                if fmt == "torch-zip" and case == diff_case and has_diff:
                    diffs[case] = time_diff(inspector, maker, made["path"], out, size_args, a.runs)
                shutil.rmtree(out)
                log("  " + "; ".join(f"{k} {cell(s)}" for k, s in samples.items()))
    finally:
        shutil.rmtree(root, ignore_errors=True)

    minutes = (time.time() - started) / 60
    used_ways = {way for r in rows for way, _ in r.ways.values()}
    report = [
        "# inspector benchmark",
        "",
        f"Machine: {machine()}. Whole processes, warm page cache, median of {a.runs} runs after "
        f"one warm-up, ways alternating; peak RSS is the child's `ru_maxrss`; [CPU] is the "
        f"child's user + system time, less sensitive to other load than wall time. "
        f"Total bench time {minutes:.1f} min.",
        "",
        table(rows),
        "",
        "Ways: " + "; ".join(f"`{w}` = {n}" for w, n in WAY_NOTES.items() if w in used_ways) + ".",
        "",
        "Startup: "
        + "; ".join(
            f"`{k}` {ms(s.median)} [CPU {ms(s.cpu_median)}], {s.peak_mb:.0f} MB"
            for k, s in startup.items()
        )
        + ".",
        "",
        "## Targets",
        "",
        *targets(rows, startup, a.many),
        "",
        "## Issue 18: ratios to the floor",
        "",
        *ratios18(rows, startup),
        *values_rows(a),
    ]
    for case, s in diffs.items():
        budget = 2 * BIG_TENSOR_MB + 100
        report.insert(
            report.index("## Targets") + 2,
            f"- `inspector diff --values` on two torch-zip {case} files (every value differs): "
            f"{ms(s.median)}, peak RSS {s.peak_mb:,.0f} MB (≤ 2 × {BIG_TENSOR_MB} MB + 100 MB "
            f"= {budget} MB: {'ok' if s.peak_mb <= budget else '**MISS**'})",
        )
    if notes:
        report += ["", "## Notes", "", *(f"- {n}" for n in notes)]
    text = "\n".join(report) + "\n"
    a.out.write_text(text)
    (a.out.with_suffix(".json")).write_text(
        json.dumps(
            [
                {
                    "format": r.format,
                    "case": r.case,
                    "tensors": r.tensors,
                    "bytes": r.nbytes,
                    "ways": {
                        k: {"way": w, "times": s.times, "cpu": s.cpu, "rss_kb": s.rss_kb}
                        for k, (w, s) in r.ways.items()
                    },
                }
                for r in rows
            ],
            indent=1,
        )
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
