"""``stats --dask`` and ``diff --values --dask`` (issue 21): a LocalCluster of 2 worker processes
(127.0.0.1, no dashboard, a small memory limit) against moto's S3 server holding real fixtures.
Each worker reads its shard's bytes from S3 itself; the statistics and the diff verdicts equal
the single-process pass over the local files; a failed task or an unreachable scheduler is one
line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, ROOT, local_cluster, moto_bucket

pytest.importorskip("distributed")
pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
# a second scheduler's status server moves off a taken port 8787 (the module's cluster holds it)
pytestmark = pytest.mark.filterwarnings("ignore:Port .* is already in use:UserWarning")

BUCKET = "ckpts"
STATS = ["stats/torch/lm_nan_zero.pt", "stats/torch/dtypes.pt", "stats/torch/dtypes.safetensors",
         "stats/keras/lstm_lm.keras", "stats/keras/lstm_lm.h5",
         *(f"stats/sockeye1_run/params.0000{k}" for k in (1, 2, 3))]
SHARDED = "dirs/hf_llama_safetensors_sharded"
BIN_SHARDED = "dirs/hf_gpt2_bin_sharded"
PAIRS = [("diff/sockeye1_consecutive/params.00001", "diff/sockeye1_consecutive/params.00002"),
         ("diff/torch_finetune/before.pt", "diff/torch_finetune/after.pt"),
         ("diff/state_dict_vs_safetensors/zoo.pt", "diff/state_dict_vs_safetensors/zoo.safetensors"),
         ("diff/torch_finetune_bf16/before.bf16.safetensors",
          "diff/torch_finetune_bf16/after.bf16.safetensors"),
         ("diff/keras_h5_vs_keras/model.h5", "diff/keras_h5_vs_keras/model.keras"),
         # complex64 among every torch dtype: a note (values not compared), not an error
         ("stats/torch/dtypes.pt", "stats/torch/dtypes.pt")]


def _uploads() -> list[str]:
    out = list(STATS)
    for d in (SHARDED, BIN_SHARDED):
        out += [f"{d}/{p.name}" for p in sorted((FIXTURES / d).iterdir()) if p.is_file()]
    out += [p for pair in PAIRS for p in pair]
    return out


@pytest.fixture(scope="module")
def moto():
    with moto_bucket(BUCKET, [(FIXTURES / rel, rel) for rel in _uploads()]) as (m, _s3):
        yield m


@pytest.fixture(scope="module")
def scheduler(moto):
    """The address of a LocalCluster whose 2 worker processes know the S3 endpoint."""
    with local_cluster(moto.env) as address:
        yield address


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, **(env or {})})


def as_local(doc: dict) -> dict:
    """A report over s3:// with the URLs written as the local fixture paths."""
    text = json.dumps(doc).replace(f"s3://{BUCKET}/", f"{FIXTURES}/")
    return json.loads(text)


def local_json(*args: str) -> dict:
    proc = cli(*args, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def dask_json(scheduler: str, moto, *args: str) -> tuple[dict, int]:
    proc = cli(*args, "--format", "json", "--dask", scheduler, env=moto.env)
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stderr == ""
    return as_local(json.loads(proc.stdout)), proc.returncode


@pytest.mark.parametrize("rel", [*STATS[:5], SHARDED, BIN_SHARDED])
def test_stats_on_the_cluster_equal_the_local_pass(scheduler, moto, rel: str) -> None:
    """Every tensor's count, min, max, NaN/Inf/zero counts and the sums (mean, std, L2) of
    tensors, groups and layers: the same numbers, since each tensor is reduced whole in the
    task in the same chunk order and the client merges in the single pass's order."""
    local = cli("stats", str(FIXTURES / rel), "--format", "json")
    here = json.loads(local.stdout)
    there, code = dask_json(scheduler, moto, "stats", f"s3://{BUCKET}/{rel}")
    assert there == here
    assert code == local.returncode
    assert here["summary"]["elements"] > 0


def test_stats_of_a_run_on_the_cluster(scheduler, moto) -> None:
    """Three checkpoints of a Sockeye run: per group norms and relative changes (each task reads
    a checkpoint and its predecessor) equal the local pass."""
    run = STATS[-3:]
    here = local_json("stats", *(str(FIXTURES / r) for r in run))
    there, _ = dask_json(scheduler, moto, "stats", *(f"s3://{BUCKET}/{r}" for r in run))
    assert there == here
    assert [s["groups"][0]["relative_change"] for s in here["steps"]][1:] == [0, 0]  # frozen io
    # the run as a prefix: its members found by listing the bucket, in natural order
    local = local_json("stats", str(FIXTURES / "stats/sockeye1_run"))
    prefix, _ = dask_json(scheduler, moto, "stats", f"s3://{BUCKET}/stats/sockeye1_run/")
    assert prefix == local == here


@pytest.mark.parametrize("a,b", PAIRS)
def test_diff_values_on_the_cluster_equal_the_local_pass(scheduler, moto, a: str, b: str) -> None:
    here = cli("diff", str(FIXTURES / a), str(FIXTURES / b), "--values", "--all",
               "--format", "json")
    proc = cli("diff", f"s3://{BUCKET}/{a}", f"s3://{BUCKET}/{b}", "--values", "--all",
               "--format", "json", "--dask", scheduler, env=moto.env)
    assert proc.returncode == here.returncode, proc.stderr
    doc = json.loads(here.stdout)
    assert as_local(json.loads(proc.stdout)) == doc
    truth = (FIXTURES / a).parent / "pair.truth.json"  # the producer's per-tensor equality
    if a != b and truth.exists():
        equal = {t["name"]: t["equal"] for t in json.loads(truth.read_text())["tensors"]
                 if "equal" in t}
        ops = {n: t["op"] for t in doc["tensors"]
               for n in (t["name"], (t["a"] or {}).get("stored_name"))}
        checked = [n for n in equal if ops.get(n) in ("changed", "unchanged")]
        assert checked
        assert all((ops[n] == "unchanged") == equal[n] for n in checked)


def test_tensor_ranges_merge_to_the_same_statistics(scheduler, moto) -> None:
    """A file split into many tasks (tensor ranges), shards opened alone by the workers: the
    same :class:`Partial` per tensor as the single-process pass, and group merges equal."""
    from inspector import cluster
    from inspector import value_stats as stats
    from inspector.adapters.registry import load
    from inspector.partial import merge_all

    ckpt = load(FIXTURES / SHARDED)
    local = stats.file_stats(ckpt)
    with _client(scheduler) as client:
        c = cluster.Cluster(client, task_bytes=4096)
        entries = stats.selected(ckpt)
        tasks = c._stats_tasks(0, ckpt, entries, None)
        assert len(tasks) > 6 and any("tensor range" in t.label for t in tasks)
        assert all(t.openers[0].shard for t in tasks)  # each task opens its shard only
        results = c.stats_pass()([(ckpt, entries, None)])[0]
    there = stats.file_stats(ckpt, results=results)
    assert [t.stats for t in there.tensors] == [t.stats for t in local.tensors]
    assert stats.report(there) == stats.report(local)
    # merged in another order (as a cluster's completion order would), counts and extremes stay
    # exact and the sums agree to rounding
    parts = [t.stats for t in there.tensors]
    fwd, rev = merge_all(parts), merge_all(reversed(parts))
    assert (fwd.count, fwd.min, fwd.max, fwd.zeros) == (rev.count, rev.min, rev.max, rev.zeros)
    assert fwd.sumsq == pytest.approx(rev.sumsq, rel=1e-12)
    assert fwd.m2 == pytest.approx(rev.m2, rel=1e-12)


def test_a_failed_task_names_its_shard(scheduler, tmp_path) -> None:
    """A shard truncated after the listing: the task's error is one line naming the shard."""
    from inspector import cluster
    from inspector import value_stats as stats
    from inspector.adapters.registry import load

    d = tmp_path / "model"
    shutil.copytree(FIXTURES / SHARDED, d)
    ckpt = load(d)
    shard = d / "model-00002-of-00003.safetensors"
    shard.write_bytes(shard.read_bytes()[:600])
    with _client(scheduler) as client, pytest.raises(cluster.DaskError) as err:
        c = cluster.Cluster(client)
        c.stats_pass()([(ckpt, stats.selected(ckpt), None)])
    message = str(err.value)
    assert "model-00002-of-00003.safetensors" in message and "\n" not in message


def test_a_failed_task_on_the_command_line(scheduler, moto) -> None:
    """A shard deleted from the bucket after the client listed it and before the workers read
    it (both workers are held busy until then): the pass ends in one line naming that shard,
    exit 2, no traceback, no report."""
    import boto3
    from distributed import Event

    s3 = boto3.client("s3", endpoint_url=moto.endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    for p in sorted((FIXTURES / SHARDED).iterdir()):
        s3.upload_file(str(p), BUCKET, f"doomed/{p.name}")

    def hold(name: str) -> None:
        Event(name).wait(60)

    with _client(scheduler) as client:
        gate = Event("hold-workers", client=client)
        workers = list(client.scheduler_info()["workers"])
        held = [client.submit(hold, "hold-workers", pure=False, workers=[w]) for w in workers]
        proc = subprocess.Popen(
            [sys.executable, "-m", "inspector", "stats", f"s3://{BUCKET}/doomed/", "--dask",
             scheduler], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, **moto.env})

        def queued(dask_scheduler) -> int:  # noqa: ANN001
            return len(dask_scheduler.tasks)

        deadline = time.monotonic() + 60
        while client.run_on_scheduler(queued) <= len(held) and time.monotonic() < deadline:
            time.sleep(0.1)
        s3.delete_object(Bucket=BUCKET, Key="doomed/model-00002-of-00003.safetensors")
        gate.set()
        out, err = proc.communicate(timeout=60)
        client.gather(held)
    assert proc.returncode == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "s3://ckpts/doomed/model-00002-of-00003.safetensors" in lines[0]
    assert "failed" in lines[0] and ("missing" in lines[0] or "no such file" in lines[0])


def test_unreachable_scheduler_is_one_line_and_bounded() -> None:
    start = time.monotonic()
    proc = cli("stats", str(FIXTURES / STATS[0]), "--dask", "tcp://127.0.0.1:9",
               env={"INSPECTOR_DASK_TIMEOUT": "2"})
    assert time.monotonic() - start < 20
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in lines[0]


def test_scheduler_without_workers_is_one_line_and_bounded() -> None:
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None) as empty:
        start = time.monotonic()
        proc = cli("stats", str(FIXTURES / STATS[0]), "--dask", empty.scheduler_address,
                   env={"INSPECTOR_DASK_TIMEOUT": "2"})
        assert time.monotonic() - start < 20
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no worker (waited 2 s)" in lines[0]


def test_bad_dask_arguments() -> None:
    proc = cli("stats", str(FIXTURES / STATS[0]), "--dask", "local:0")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    proc = cli("diff", str(FIXTURES / STATS[0]), str(FIXTURES / STATS[0]), "--dask", "local")
    assert proc.returncode == 2 and "--values" in proc.stderr


def test_without_dask_installed_the_option_says_so() -> None:
    code = ("import sys; sys.modules['distributed'] = None; from inspector.cli import main; "
            f"sys.exit(main(['stats', {str(FIXTURES / STATS[0])!r}, '--dask', 'local']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and "pip install 'ckpt-inspector[dask]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_dask_is_imported_only_with_the_option() -> None:
    code = ("import sys; from inspector.cli import main; "
            f"main(['stats', {str(FIXTURES / STATS[0])!r}, '--format', 'json']); "
            "print('distributed' in sys.modules, 'dask' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.stderr.strip().splitlines()[-1] == "False False"


def test_local_cluster_from_the_command_line() -> None:
    """``--dask local:2`` starts (and stops) its own LocalCluster of worker processes."""
    rel = "stats/sockeye1_run"
    here = local_json("stats", str(FIXTURES / rel))
    proc = cli("stats", str(FIXTURES / rel), "--format", "json", "--dask", "local:2")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout) == here


def _client(address: str):
    from distributed import Client

    return Client(address, timeout=30)


def test_allow_unsafe_reaches_the_workers(scheduler) -> None:
    """A Keras 2 file with a Lambda layer (bytecode: refused unless --allow-unsafe): with the
    flag, the workers open it as the client did and the statistics equal the local pass; without
    it, the client refuses it before any task (exit 2, one line)."""
    path = str(FIXTURES / "keras" / "keras205_seq2seq_states.h5")
    local = cli("stats", path, "--allow-unsafe", "--format", "json")
    assert local.returncode in (0, 1), local.stderr
    there = cli("stats", path, "--allow-unsafe", "--format", "json", "--dask", scheduler)
    assert there.returncode == local.returncode, there.stderr
    assert json.loads(there.stdout) == json.loads(local.stdout)
    refused = cli("stats", path, "--dask", scheduler)
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1 and "--allow-unsafe" in refused.stderr
