"""``inspector inventory``: a tree of real checkpoints (the lineage zoo written by transformers and
peft, a torch file holding NaN, and a pickle that runs ``os.system``) indexed into DuckDB and
Parquet; the queries documented in docs/inventory.md return the rows the producers' truths say;
a second run reads no tensor bytes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

duckdb = pytest.importorskip("duckdb")

from inspector.inventory import build  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "fixtures" / "lineage" / "zoo"
TRUTH = json.loads((ROOT / "fixtures" / "lineage" / "zoo.truth.json").read_text())
NAN = ROOT / "fixtures" / "stats" / "torch" / "lm_nan_zero.pt"
DOC = ROOT / "docs" / "inventory.md"
# protocol 0: os.system('true') when unpickled (never unpickled here)
PAYLOAD = b"cos\nsystem\n(S'true'\ntR."


def queries() -> list[str]:
    text = DOC.read_text()
    return re.findall(r"```sql\n(.*?)```", text, flags=re.S)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tree = tmp_path_factory.mktemp("store")
    shutil.copytree(ZOO, tree / "zoo")
    shutil.copy(NAN, tree / "lm_nan_zero.pt")
    (tree / "payload.pkl").write_bytes(PAYLOAD)
    db = tree.parent / f"{tree.name}.duckdb"
    counts = build([str(tree)], db)
    return tree, db, counts


def rows(db, sql, **params):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or None).fetchall()
    finally:
        con.close()


def test_every_checkpoint_is_a_row(store):
    tree, db, counts = store
    assert counts["indexed"] == len(TRUTH["num_parameters"]) + 3  # + adapter, .pt, NaN file
    assert counts["errors"] == 1  # the payload: refused, its row kept
    got = dict(rows(db, "SELECT path, parameters FROM checkpoints WHERE error IS NULL"))
    for rel, n in TRUTH["num_parameters"].items():  # transformers' num_parameters()
        assert got[str(tree / "zoo" / rel)] == n


def test_documented_queries(store):
    tree, db, _ = store
    nan_q, tunes_q, unsafe_q, largest_q = queries()
    assert rows(db, nan_q) == [(str(tree / "lm_nan_zero.pt"),)]
    # descendants of base through training kinds, from the producer's edges
    kinds = {"fine-tune", "continued-training", "lora-merge", "adapter-of"}
    down, frontier = set(), {"base"}
    while frontier:
        frontier = {e["child"] for e in TRUTH["edges"] if e["parent"] in frontier} - down
        down |= frontier
    want = sorted((str(tree / "zoo" / e["child"]), e["kind"]) for e in TRUTH["edges"]
                  if e["child"] in down and e["kind"] in kinds)
    assert rows(db, tunes_q, base=str(tree / "zoo" / "base")) == want
    assert rows(db, unsafe_q) == [(str(tree / "payload.pkl"), "dangerous")]
    top = rows(db, largest_q)
    vocab = 128  # make_lineage.py: resize_token_embeddings(128)
    assert {r[1] for r in top[:2]} == {"lm_head.weight", "model.embed_tokens.weight"}
    assert all(r[0] == str(tree / "zoo" / "resized") and r[2] == vocab * 32 for r in top[:2])


def test_second_run_reads_no_tensor_bytes(store, monkeypatch):
    tree, db, _ = store
    import inspector.values as values

    def refuse(*a, **k):
        raise AssertionError("a tensor's bytes were read for an unchanged checkpoint")

    monkeypatch.setattr(values, "iter_values", refuse)
    counts = build([str(tree)], db)
    assert counts["indexed"] == 0 and counts["skipped"] == len(TRUTH["num_parameters"]) + 3


def test_parquet_and_cli(tmp_path):
    out = tmp_path / "store.parquet"
    r = subprocess.run([sys.executable, "-m", "inspector", "inventory", str(ZOO), "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "lineage edges" in r.stdout
    con = duckdb.connect()
    n = con.execute("SELECT count(*) FROM read_parquet(?)", [str(out / "checkpoints.parquet")])
    assert n.fetchall() == [(len(TRUTH["num_parameters"]) + 2,)]
    edges = con.execute("SELECT count(*) FROM read_parquet(?)", [str(out / "edges.parquet")])
    assert edges.fetchall() == [(len(TRUTH["edges"]),)]
