"""Options shared by several verbs: --allow-unsafe, --set K=V (and its parsing), --input-format,
--dask (and the cluster it names)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    import argparse
    from typing import Any

ALLOW_HELP = (
    "read a pickle whose globals a loader would run (os.system, eval, ...) instead of refusing "
    "it; nothing from the file is run either way"
)


def add_allow_unsafe(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-unsafe", action="store_true", help=ALLOW_HELP)


def add_set_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", metavar="K=V", action="append", default=[], dest="set",
                   help="set a hyperparameter (repeatable), e.g. --set rnn_num_hidden=512")


def parse_sets(items: list[str]) -> dict[str, str]:
    """``--set`` values as a dict; a UsageError for an item without ``=``."""
    from inspector.adapters.errors import UsageError

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def add_input_format(p: argparse.ArgumentParser,
                     text: str = "skip detection and read as this format") -> None:
    p.add_argument("--input-format", metavar="NAME", help=text)


DASK_HELP = (
    "read the values on a Dask cluster: local (a LocalCluster, one worker process per core), "
    "local:N, or a scheduler address tcp://host:8786; each shard (or tensor range) is a task "
    "that reads its own bytes (pip install 'ckpt-inspector[dask]')"
)


def add_dask(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dask", metavar="ADDRESS", help=DASK_HELP)


def dask_cluster(args: argparse.Namespace) -> Any:
    """``--dask``: a connected :class:`inspector.cluster.Cluster` (else nothing)."""
    if not getattr(args, "dask", None):
        from contextlib import nullcontext

        return nullcontext(None)
    from inspector import cluster

    return cluster.connect(args.dask, input_format=args.input_format,
                           allow_unsafe=bool(getattr(args, "allow_unsafe", False)))
