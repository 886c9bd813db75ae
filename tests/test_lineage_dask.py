"""``lineage --dask`` and ``inventory --dask``: a LocalCluster of 2 worker processes (127.0.0.1)
against moto's S3 server holding copies of the lineage zoo (written by transformers and peft:
fixtures/lineage/make_lineage.py). Each worker reads its checkpoint's bytes from S3 itself; the
edges and the inventory rows equal the local run's over the same files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, local_cluster, moto_bucket

pytest.importorskip("distributed")
pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
duckdb = pytest.importorskip("duckdb")
pytestmark = pytest.mark.filterwarnings("ignore:Port .* is already in use:UserWarning")

ZOO = ROOT / "fixtures" / "lineage" / "zoo"
BUCKET = "store"
COPIES = 40  # 40 x 50 files: 2,000 objects


def _files() -> list[Path]:
    return sorted(p for p in ZOO.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def moto():
    with moto_bucket(BUCKET, [(p, f"one/{p.relative_to(ZOO)}") for p in _files()]) as got:
        yield got


@pytest.fixture(scope="module")
def scheduler(moto):
    with local_cluster(moto[0].env) as address:
        yield address


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600):
    return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout, env={**os.environ, **(env or {})})


def edges(doc: dict, prefix: str) -> set[tuple[str, str, str]]:
    cut = len(prefix.rstrip("/")) + 1
    return {(e["parent"][cut:], e["child"][cut:], e["kind"]) for e in doc["edges"]}


def test_inventory_on_the_cluster_equals_the_local_one(scheduler, moto, tmp_path):
    m, _ = moto
    local_db, remote_db = tmp_path / "local.duckdb", tmp_path / "remote.duckdb"
    here = cli("inventory", str(ZOO), "-o", str(local_db))
    assert here.returncode == 0, here.stderr
    there = cli("inventory", f"s3://{BUCKET}/one/", "-o", str(remote_db), "--dask", scheduler,
                env=m.env)
    if there.returncode:
        con = duckdb.connect(str(remote_db), read_only=True)
        bad = con.execute("SELECT path, error FROM checkpoints WHERE error IS NOT NULL").fetchall()
        raise AssertionError(f"{there.stdout} {bad}")
    cols = ("name, shape, dtype, role, numel, digest, samples, nan, inf, min, max, mean, std")

    def table(db: Path, prefix: str) -> list:
        con = duckdb.connect(str(db), read_only=True)
        got = con.execute(f"SELECT replace(checkpoint, ?, ''), {cols} FROM tensors "
                          "ORDER BY 1, 2", [prefix]).fetchall()
        con.close()
        return got

    assert table(remote_db, f"s3://{BUCKET}/one/") == table(local_db, f"{ZOO}/")
    con_l, con_r = (duckdb.connect(str(d), read_only=True) for d in (local_db, remote_db))
    le = con_l.execute("SELECT replace(parent, ?, ''), replace(child, ?, ''), kind FROM edges "
                       "ORDER BY 1, 2", [f"{ZOO}/", f"{ZOO}/"]).fetchall()
    re_ = con_r.execute("SELECT replace(parent, ?, ''), replace(child, ?, ''), kind FROM edges "
                        "ORDER BY 1, 2", [f"s3://{BUCKET}/one/"] * 2).fetchall()
    assert le == re_ and len(le) == len(json.loads(
        (ROOT / "fixtures" / "lineage" / "zoo.truth.json").read_text())["edges"])


@pytest.mark.slow
def test_lineage_of_thousands_of_objects(scheduler, moto, tmp_path):
    """2,000 objects (40 copies of the zoo): the cluster's forest equals the local one."""
    m, s3 = moto
    local = tmp_path / "tree"
    for k in range(COPIES):
        shutil.copytree(ZOO, local / f"copy{k:02d}")
        for p in _files():
            s3.upload_file(str(p), BUCKET, f"many/copy{k:02d}/{p.relative_to(ZOO)}")
    assert sum(1 for p in local.rglob("*") if p.is_file()) == COPIES * len(_files()) >= 2000
    here = cli("lineage", str(local), "--no-cache", "--format", "json")
    assert here.returncode == 0, here.stderr
    there = cli("lineage", f"s3://{BUCKET}/many/", "--no-cache", "--format", "json",
                "--dask", scheduler, env=m.env)
    assert there.returncode == 0, there.stderr
    a, b = json.loads(here.stdout), json.loads(there.stdout)
    assert edges(a, str(local)) == edges(b, f"s3://{BUCKET}/many/")
    assert len(a["edges"]) == len(a["nodes"]) - 2  # two families: the base's and the other seed's
