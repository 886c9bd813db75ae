"""A model store as a database you can query: ``inspector inventory PATH... -o store.duckdb``.

One row per checkpoint, one per tensor, one per finding and one per lineage edge, in DuckDB
(embedded: a file, no server; the ``inventory`` extra) or as Parquet files (``-o DIR.parquet``:
one ``<table>.parquet`` each in that directory). Re-running over the same paths is incremental:
a checkpoint whose files are unchanged (path, size and modification time of every file, or a
remote etag: :func:`inspector.fingerprint.file_key`) is skipped without reading a tensor byte;
a changed one is read again (one fingerprint pass and one statistics pass over its values, and
its scan). Lineage edges are rebuilt from the fingerprints stored in the table ``tensors`` (the
samples are a column), so they need no other cache.

Tables (documented in docs/inventory.md):

* ``checkpoints``: path, file_key, format, tensors, parameters, stored_elements, bytes,
  scan_verdict, stats_errors, stats_warnings, error, indexed_at, info (JSON: training step,
  declared base, PEFT adapter settings);
* ``tensors``: checkpoint, name, stored_name, shape, dtype, role, group, layer, numel, nbytes,
  digest, samples, nan, inf, min, max, mean, std;
* ``findings``: checkpoint, source (scan/stats/lineage), severity, code, subject, message;
* ``edges``: parent, child, kind, confidence, direction, evidence (JSON);
* ``pairs``: the lineage byte checks' results, by key.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA = "inspector.inventory/1"
TABLES = ("checkpoints", "tensors", "findings", "edges", "pairs")
DDL = """
CREATE TABLE IF NOT EXISTS checkpoints (
    path VARCHAR PRIMARY KEY, file_key VARCHAR, format VARCHAR, tensors BIGINT,
    parameters BIGINT, stored_elements BIGINT, bytes BIGINT, scan_verdict VARCHAR,
    stats_errors INTEGER, stats_warnings INTEGER, error VARCHAR, indexed_at TIMESTAMP,
    info JSON);
CREATE TABLE IF NOT EXISTS tensors (
    checkpoint VARCHAR, name VARCHAR, stored_name VARCHAR, shape BIGINT[], dtype VARCHAR,
    role VARCHAR, "group" VARCHAR, layer VARCHAR, numel BIGINT, nbytes BIGINT, digest VARCHAR,
    samples DOUBLE[], nan BIGINT, inf BIGINT, min DOUBLE, max DOUBLE, mean DOUBLE, std DOUBLE);
CREATE TABLE IF NOT EXISTS findings (
    checkpoint VARCHAR, source VARCHAR, severity VARCHAR, code VARCHAR, subject VARCHAR,
    message VARCHAR);
CREATE TABLE IF NOT EXISTS edges (
    parent VARCHAR, child VARCHAR, kind VARCHAR, confidence VARCHAR, direction VARCHAR,
    evidence JSON);
CREATE TABLE IF NOT EXISTS pairs (key VARCHAR PRIMARY KEY, value JSON);
"""


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        from inspector.adapters.errors import UsageError

        raise UsageError(
            "the inventory needs DuckDB: pip install 'ckpt-inspector[inventory]'") from None
    return duckdb


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def index_checkpoint(label: str, allow_unsafe: bool = False) -> dict[str, Any]:
    """Everything the inventory stores about one checkpoint, as plain rows (runs where the
    checkpoint is: in this process or on a Dask worker). ``{"error": ...}`` when it cannot be
    read; its scan verdict is kept even then."""
    from inspector.adapters.errors import InspectorError
    from inspector.adapters.registry import load
    from inspector.fingerprint import dequantized_rows, file_key, fingerprint

    verdict, scan_findings = scan_verdict(label)
    try:
        ckpt = load(label, allow_unsafe=allow_unsafe)
        key = file_key(ckpt)
        fp = fingerprint(ckpt, key)
        stats_rows, stats_findings = _stats(ckpt)
    except InspectorError as e:
        return {"path": label, "error": str(e), "scan_verdict": verdict,
                "findings": scan_findings}
    totals = ckpt.totals()
    tensors = []
    for t in ckpt.values():
        p = fp.tensors.get(t.name)
        s = stats_rows.get(t.name, {})
        tensors.append({
            "checkpoint": ckpt.path, "name": t.name, "stored_name": t.stored_name,
            "shape": list(t.shape), "dtype": t.dtype, "role": str(t.role),
            "group": s.get("group"), "layer": s.get("layer"), "numel": t.numel,
            "nbytes": t.nbytes, "digest": p.digest if p else None,
            "samples": [_num(x) for x in p.samples] if p else None,
            "nan": s.get("nan"), "inf": s.get("inf"), "min": s.get("min"),
            "max": s.get("max"), "mean": s.get("mean"), "std": s.get("std")})
    findings = scan_findings + stats_findings
    return {
        "path": ckpt.path, "file_key": key, "format": ckpt.format, "tensors": tensors,
        "parameters": totals.get("parameters"), "stored_elements": totals.get("all"),
        "bytes": sum(t.nbytes or 0 for t in ckpt.values()), "scan_verdict": verdict,
        "stats_errors": sum(1 for f in stats_findings if f["severity"] == "error"),
        "stats_warnings": sum(1 for f in stats_findings if f["severity"] == "warning"),
        "findings": findings,
        "info": {**fp.info, "dequantized": dequantized_rows(fp)} if fp.dequantized else fp.info}


def scan_verdict(label: str) -> tuple[str, list[dict[str, Any]]]:
    """``inspector scan``'s verdict on the files of one checkpoint (the worst of them) and its
    findings, as rows."""
    from inspector.adapters.security import scan

    worst, rows = "safe", []
    rank = {"safe": 0, "foreign": 1, "error": 2, "dangerous": 3}
    for res in scan.scan([label]):
        if rank[res.verdict] > rank[worst]:
            worst = res.verdict
        for item in res.items:
            rows.append({"checkpoint": label, "source": "scan", "severity": item.level,
                         "code": res.kind, "subject": item.where or res.path,
                         "message": item.text})
    return worst, rows


def _stats(ckpt: Any) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    from inspector import value_stats as stats

    result = stats.file_stats(ckpt)
    rows = {}
    for t in result.tensors:
        p = t.stats
        row: dict[str, Any] = {"group": t.group, "layer": t.layer}
        if p is not None:
            std = math.sqrt(p.m2 / p.finite) if p.finite else None
            row.update(nan=p.nan, inf=p.posinf + p.neginf, min=_num(p.min) if p.finite else None,
                       max=_num(p.max) if p.finite else None,
                       mean=_num(p.mean) if p.finite else None, std=_num(std))
        rows[t.entry.name] = row
    findings = [{"checkpoint": ckpt.path, "source": "stats", "severity": f.severity,
                 "code": f.code, "subject": f.subject, "message": f.message}
                for f in result.findings]
    return rows, findings


class Store:
    """The inventory database (a DuckDB file, or Parquet files loaded into an in-memory one
    and written back on :meth:`close`)."""

    def __init__(self, out: str | Path) -> None:
        duckdb = _duckdb()
        self.out = Path(out)
        self.parquet = self.out.suffix == ".parquet"
        self.con = duckdb.connect(":memory:" if self.parquet else str(self.out))
        self.con.execute(DDL)
        if self.parquet and self.out.is_dir():
            for table in TABLES:
                f = self.out / f"{table}.parquet"
                if f.exists():
                    self.con.execute(f"INSERT INTO {table} SELECT * FROM read_parquet(?)",
                                     [str(f)])

    # -- the cache protocol of inspector.lineage_bytes.Confirm
    def get_json(self, key: str) -> Any:
        row = self.con.execute("SELECT value FROM pairs WHERE key = ?", [key]).fetchone()
        return None if row is None else json.loads(row[0])

    def put_json(self, key: str, value: Any) -> None:
        self.con.execute("INSERT OR REPLACE INTO pairs VALUES (?, ?)", [key, json.dumps(value)])

    def known(self) -> dict[str, str]:
        return dict(self.con.execute(
            "SELECT path, file_key FROM checkpoints WHERE error IS NULL").fetchall())

    def replace(self, doc: dict[str, Any]) -> None:
        path = doc["path"]
        for table, col in (("checkpoints", "path"), ("tensors", "checkpoint"),
                           ("findings", "checkpoint")):
            self.con.execute(f"DELETE FROM {table} WHERE {col} = ?", [path])
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        self.con.execute(
            "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [path, doc.get("file_key"), doc.get("format"), len(doc.get("tensors") or []),
             doc.get("parameters"), doc.get("stored_elements"), doc.get("bytes"),
             doc.get("scan_verdict"), doc.get("stats_errors"), doc.get("stats_warnings"),
             doc.get("error"), now, json.dumps(doc.get("info") or {"path": path})])
        cols = ("checkpoint", "name", "stored_name", "shape", "dtype", "role", "group", "layer",
                "numel", "nbytes", "digest", "samples", "nan", "inf", "min", "max", "mean",
                "std")
        rows = [[t.get(c) for c in cols] for t in doc.get("tensors") or []]
        if rows:
            self.con.executemany(f"INSERT INTO tensors VALUES ({', '.join('?' * len(cols))})",
                                 rows)
        f_cols = ("checkpoint", "source", "severity", "code", "subject", "message")
        f_rows = [[f.get(c) for c in f_cols] for f in doc.get("findings") or []]
        for r in f_rows:
            r[0] = path
        if f_rows:
            self.con.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?)", f_rows)

    def prints(self) -> list[Any]:
        """The fingerprints of every readable checkpoint, from the ``tensors`` table."""
        import numpy as np

        from inspector.fingerprint import CheckpointPrint, TensorPrint, dequantized_from_rows

        out = []
        for path, key, info in self.con.execute(
                "SELECT path, file_key, info FROM checkpoints WHERE error IS NULL "
                "ORDER BY path").fetchall():
            info = json.loads(info)
            tensors = {}
            for name, shape, dtype, role, numel, digest, samples in self.con.execute(
                    "SELECT name, shape, dtype, role, numel, digest, samples FROM tensors "
                    "WHERE checkpoint = ? AND digest IS NOT NULL", [path]).fetchall():
                s = np.array([np.nan if x is None else x for x in samples or []], dtype=float)
                tensors[name] = TensorPrint(name, tuple(shape), dtype, role, numel, digest, s)
            dequantized = dequantized_from_rows(info.pop("dequantized", None))
            out.append(CheckpointPrint(key, info, tensors, dequantized))
        return out

    def set_edges(self, edges: Iterable[Any]) -> None:
        self.con.execute("DELETE FROM edges")
        self.con.execute("DELETE FROM findings WHERE source = 'lineage'")
        rows = [[e.parent, e.child, e.kind, e.confidence, e.direction, json.dumps(e.evidence)]
                for e in edges]
        if rows:
            self.con.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?)", rows)

    def close(self) -> None:
        if self.parquet:
            self.out.mkdir(parents=True, exist_ok=True)
            for table in TABLES:
                tmp = self.out / f".{table}.{os.getpid()}.parquet"
                self.con.execute(f"COPY {table} TO '{tmp}' (FORMAT PARQUET)")
                os.replace(tmp, self.out / f"{table}.parquet")
        self.con.close()


def build(paths: Sequence[str], out: str | Path, *, jobs: int = 2, allow_unsafe: bool = False,
          mapper: Callable[..., Any] | None = None, progress: Any = None,
          on_error: Callable[[str], None] | None = None) -> dict[str, int]:
    """Index every checkpoint below ``paths`` into ``out`` (incremental) and rebuild the
    lineage edges; returns counts (``indexed``, ``skipped``, ``errors``, ``edges``).
    ``on_error(message)``: each checkpoint that could not be read (its row keeps the error).
    ``mapper(fn, labels)``: where the per-checkpoint work runs (default: threads here; a Dask
    client's map with ``--dask``)."""
    from inspector.adapters.errors import InspectorError
    from inspector.adapters.registry import load
    from inspector.fingerprint import file_key
    from inspector.fleet import expand, run_ordered
    from inspector.lineage import build as lineage
    from inspector.lineage_bytes import Confirm

    store = Store(out)
    try:
        known = store.known()
        todo, skipped, errors = [], 0, 0
        for t in expand(paths):
            if t.error is not None:
                store.replace({"path": t.label, "error": str(t.error), "scan_verdict": "error"})
                errors += 1
                if on_error is not None:
                    on_error(str(t.error))
                continue
            if t.source is not None and t.source.where in known:
                try:
                    if file_key(load(t.source, allow_unsafe=True)) == known[t.source.where]:
                        skipped += 1
                        continue
                except InspectorError:
                    pass
            todo.append(t.source.where if t.source is not None else t.label)
        if mapper is None:
            results = (got for _, got in run_ordered(
                todo, lambda label: index_checkpoint(label, allow_unsafe), jobs))
        else:
            results = iter(mapper(index_checkpoint, todo, allow_unsafe))
        indexed = 0
        for label, doc in zip(todo, results, strict=True):
            if isinstance(doc, Exception):
                doc = {"path": label, "error": str(doc), "scan_verdict": "error"}
            store.replace(doc)
            errors += bool(doc.get("error"))
            indexed += not doc.get("error")
            if doc.get("error") and on_error is not None:
                on_error(doc["error"])
            if progress is not None:
                progress.advance(1)
        opened: dict[str, Any] = {}

        def opener(path: str) -> Any:
            if path not in opened:
                opened[path] = load(path, allow_unsafe=allow_unsafe)
            return opened[path]

        forest = lineage(store.prints(), Confirm(opener, store))
        store.set_edges(forest.edges)
        return {"indexed": indexed, "skipped": skipped, "errors": errors,
                "edges": len(forest.edges)}
    finally:
        store.close()
