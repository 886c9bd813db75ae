"""``inventory --dask`` and ``lineage --dask``: the per-checkpoint work (one fingerprint pass,
one statistics pass, the scan) runs on the workers of a Dask cluster, each reading its
checkpoint's bytes where it runs (ranged reads for remote objects); the client writes the
results. The numbers are the same as without a cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any


def remote_print(label: str, allow_unsafe: bool = False) -> dict[str, Any]:
    """A checkpoint's fingerprint as plain arrays (runs on a worker)."""
    from inspector.adapters.registry import load
    from inspector.fingerprint import fingerprint

    return fingerprint(load(label, allow_unsafe=allow_unsafe)).to_arrays()


def _safe(fn: Callable[..., Any], label: str, *args: Any) -> Any:
    """``fn(label, ...)``, or the error as a value (so one checkpoint never fails the pass)."""
    from inspector.adapters.errors import InspectorError

    try:
        return fn(label, *args)
    except InspectorError as e:
        return InspectorError(str(e))
    except Exception as e:  # noqa: BLE001 - reported as that checkpoint's error
        return InspectorError(f"{label}: {type(e).__name__}: {e}")


class DaskMapper:
    """``mapper(fn, labels, *args)``: ``fn(label, *args)`` for each label on the cluster, in
    order; the cluster stays connected until :meth:`close`."""

    def __init__(self, spec: str, allow_unsafe: bool = False) -> None:
        from inspector import cluster

        self._stack = ExitStack()
        self.cluster = self._stack.enter_context(cluster.connect(spec,
                                                                 allow_unsafe=allow_unsafe))

    def __call__(self, fn: Callable[..., Any], labels: Sequence[str], *args: Any
                 ) -> Iterator[Any]:
        client = self.cluster.client
        futures = [client.submit(_safe, fn, label, *args, pure=False) for label in labels]
        try:
            for fut in futures:
                yield fut.result()
        finally:
            client.cancel([f for f in futures if not f.done()])

    def close(self) -> None:
        self._stack.close()


@contextmanager
def mapper(spec: str | None, allow_unsafe: bool = False) -> Iterator[DaskMapper | None]:
    """The mapper of the cluster at ``spec`` (a verb's ``--dask``), closed on exit; None (run
    here) when no cluster is named."""
    if not spec:
        yield None
        return
    m = DaskMapper(spec, allow_unsafe)
    try:
        yield m
    finally:
        m.close()
