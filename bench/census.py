"""Census of `inspector check` over every real fixture: verdicts per producer family.

Every ``X.truth.json`` under ``fixtures/`` describes a file or directory ``X`` written by a real
producer. This runs ``inspector check --format json X`` on each and counts the verdicts
(verified / incomplete / mismatch / error) per family (the fixture folder, split by producer
where one folder holds several). A real, valid fixture that gets ``mismatch`` is a false alarm.

    python bench/census.py            # table
    python bench/census.py --list     # one line per fixture
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# fixtures that are hostile or deliberately broken on purpose: not models to check
SKIP_FOLDERS = {"security"}


def family(path: Path) -> str:
    folder = path.relative_to(FIXTURES).parts[0]
    name = path.name
    if folder == "keras":
        if name.startswith(("keras2", "tfkeras1")):
            return "keras (2.0-2.3, tf.keras 1.x)"
        return "keras (tf.keras 2.15, Keras 3)"
    if folder == "sockeye":
        return "sockeye " + ("1" if name.startswith("sockeye1") else
                             "2" if name.startswith("sockeye2") else
                             "3" if name.startswith("sockeye3") else "?")
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="one line per fixture")
    args = ap.parse_args()
    counts: dict[str, Counter] = defaultdict(Counter)
    for truth in sorted(FIXTURES.rglob("*.truth.json")):
        if truth.name == "pair.truth.json":
            continue
        target = truth.with_name(truth.name[: -len(".truth.json")])
        if not target.exists() or target.relative_to(FIXTURES).parts[0] in SKIP_FOLDERS:
            continue
        if target.name.startswith("params.") and (target.parent / "config").is_file():
            target = target.parent  # a Sockeye model directory, checked as users do
        proc = subprocess.run([sys.executable, "-m", "inspector", "check", "--format", "json",
                               str(target)], capture_output=True, text=True, cwd=ROOT,
                              timeout=300)
        try:
            verdict = json.loads(proc.stdout)["verdict"]
        except (json.JSONDecodeError, KeyError):
            verdict = "error"
        fam = family(target)
        counts[fam][verdict] += 1
        if args.list:
            print(f"{verdict:<11} {proc.returncode}  {target.relative_to(ROOT)}")
    cols = ["verified", "incomplete", "mismatch", "error"]
    print(f"{'family':<34}" + "".join(f"{c:>12}" for c in cols))
    for fam in sorted(counts):
        print(f"{fam:<34}" + "".join(f"{counts[fam][c]:>12}" for c in cols))
    total = sum(counts.values(), Counter())
    print(f"{'all':<34}" + "".join(f"{total[c]:>12}" for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
