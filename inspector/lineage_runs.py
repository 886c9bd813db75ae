"""What a checkpoint's own run says about where it can come from, for ``inspector lineage``.

Two facts exclude a parent, each from the producer's own record or the run's own bytes:

* a run its producer records as trained from its own seed (:func:`inspector.fingerprint.
  describe`'s ``from_scratch``: Sockeye's ``args.yaml`` with ``params: null``) has no parent
  outside that run;
* a run that holds several numbered checkpoints (``params.00001``, ``params.00002`` ... of one
  directory; ``checkpoint-N`` of one Trainer run) and leaves some informative tensors
  byte-identical over all its steps (frozen: Sockeye's ``--fixed-param-strategy``, a frozen
  encoder) still holds in them the values it started from. A run initialised from another
  checkpoint holds that checkpoint's values there; when the other checkpoint holds other
  values in a frozen tensor, the run did not start from it.

Two runs each excluded as the other's parent are siblings of a shared initialisation (one
seed), not parent and child: lineage draws no edge and lists the pair as ``shared-values``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from inspector.fingerprint import CheckpointPrint
from inspector.lineage_evidence import Evidence


def frozen(prints: Sequence[CheckpointPrint]) -> dict[str, dict[str, str]]:
    """Per run with two or more numbered steps: the informative tensors whose digest is the
    same in every step (name -> digest)."""
    runs: dict[str, list[CheckpointPrint]] = defaultdict(list)
    for p in prints:
        if p.info.get("run") is not None and p.info.get("step") is not None:
            runs[str(p.info["run"])].append(p)
    out: dict[str, dict[str, str]] = {}
    for run, steps in runs.items():
        if len({p.info["step"] for p in steps}) < 2:
            continue
        first = steps[0].informative()
        same = {n: t.digest for n, t in first.items()
                if all(n in p.tensors and p.tensors[n].digest == t.digest for p in steps[1:])}
        if same:
            out[run] = same
    return out


def not_from(parent: CheckpointPrint, child: CheckpointPrint, ev: Evidence,
             held: dict[str, dict[str, str]]) -> str | None:
    """Why ``child`` cannot derive from ``parent`` (``ev`` compares the two, either way
    round; ``held``: :func:`frozen`), or None."""
    run_p, run_c = parent.info.get("run"), child.info.get("run")
    if run_c is not None and run_p == run_c:
        return None  # steps of one run
    if child.info.get("from_scratch"):
        return (f"{child.path} is a run its producer records as trained from its own seed "
                "(Sockeye args.yaml: params null), not from another model")
    fixed = held.get(str(run_c)) if run_c is not None else None
    if fixed:
        moved = sorted(n for n in (*ev.changed, *ev.unrelated) if n in fixed)
        if moved:
            return (f"{child.path}'s run keeps {len(fixed)} tensors unchanged over its steps "
                    f"(its initial values), and {parent.path} holds other values in "
                    f"{len(moved)} of them ({moved[0]}, ...): the run did not start from it")
    return None


def siblings(ev: Evidence, held: dict[str, dict[str, str]]) -> str | None:
    """Why neither checkpoint of a related pair with changed values can derive from the other
    (siblings of one initialisation), or None."""
    if not (ev.changed or ev.unrelated):
        return None
    ab, ba = not_from(ev.a, ev.b, ev, held), not_from(ev.b, ev.a, ev, held)
    if ab is None or ba is None:
        return None
    return ("values shared (one seed?), but neither can derive from the other: "
            f"{ab}; {ba}")
