"""Checkpoints behind URLs, all on this machine: a local HTTP server honouring Range (logging
each request, tests/remote_servers.py) and moto's S3 server driven through real s3fs. Listings
over a URL equal the local ones; requests and bytes per format stay within budgets measured by
the server; bad remote input ends in one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

import remote_bigfiles as big  # noqa: E402
from remote_servers import RangeServer  # noqa: E402

from inspector.adapters.errors import FormatError  # noqa: E402
from inspector.adapters.remote_transport import redact, redact_text  # noqa: E402

KIB = 1 << 10


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the server serves: the fixtures (linked) and big sparse files."""
    root = tmp_path_factory.mktemp("served")
    (root / "fixtures").symlink_to(FIXTURES)
    b = root / "big"
    b.mkdir()
    big.safetensors(b / "big.safetensors", [(f"w{i}", "F32", (16384, 16384)) for i in range(4)])
    (b / "hdr").mkdir()
    hdr = big.safetensors(
        b / "hdr" / "model.safetensors",
        [(f"model.layers.{i // 8}.w{i}", "F32", (256, 1024)) for i in range(4000)],
    )
    (b / "hdr" / "header_len").write_text(str(hdr))
    big.torch_zip(b / "big.pt", 2, gib_each=2)
    big.torch_zip(b / "many.pt", 16, gib_each=0, mib_each=256)
    big.torch_legacy(b / "big_legacy.pt", 4, 256)
    big.sharded_safetensors(b / "sharded")
    return root


@pytest.fixture(scope="module")
def server(served: Path):
    with RangeServer(served, slow_seconds=4) as srv:
        yield srv


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inspector", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def show_json(target: str, *extra: str, env: dict[str, str] | None = None) -> dict:
    proc = run("show", target, "--format", "json", *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def same_listing(local: Path, url: str, env: dict[str, str] | None = None) -> None:
    """The listing over ``url`` equals the local one, paths aside."""
    here = show_json(str(local))
    there = show_json(url, env=env)
    a, b = str(local).rstrip("/").split("/"), url.rstrip("/").split("/")
    while a and b and a[-1] == b[-1]:
        a, b = a[:-1], b[:-1]
    text = json.dumps(there).replace("/".join(b) + "/", "/".join(a) + "/")
    assert json.loads(text) == here


# -- listings equal the local ones, within request budgets -------------------------------------

CASES = [  # (path under fixtures/, most requests)
    ("safetensors/seed001_transformer_lm.safetensors", 1),
    ("safetensors/dtype_zoo.safetensors", 1),
    ("torch/gru.pt", 2),
    ("torch/lstm_bidir_legacy.pt", 2),
    ("torch/dtype_zoo.pt", 2),
    ("keras/batch_norm.keras", 3),
    ("keras/batch_norm.legacy.h5", 3),
    ("dirs/torchscript_trace.pt", 2),
]


@pytest.mark.parametrize("rel,budget", CASES)
def test_http_listing_equals_local(server: RangeServer, rel: str, budget: int) -> None:
    server.reset()
    same_listing(FIXTURES / rel, f"{server.url}/fixtures/{rel}")
    gets = [r for r in server.log]
    assert len(gets) <= budget, [(r.range, r.sent) for r in gets]


def test_every_format_fixture_over_http(server: RangeServer) -> None:
    """Each fixture with a truth file lists the same over HTTP (mxnet, npy/npz, sockeye, HF and
    Keras directories, sharded checkpoints)."""
    picked = [
        "mxnet", "numpy", "sockeye", "dirs/hf_llama_safetensors_sharded",
        "dirs/hf_gpt2_bin_sharded", "dirs/keras_sharded", "dirs/peft_lora_safetensors",
    ]
    done = 0
    for name in picked:
        base = FIXTURES / name
        if not base.exists():
            continue
        files = [base] if base.is_dir() and (base / "config.json").exists() else []
        if not files:
            files = sorted(p.with_name(p.name[: -len(".truth.json")])
                           for p in base.rglob("*.truth.json"))[:4]
        for f in files:
            if not f.exists():
                continue
            rel = f.relative_to(FIXTURES).as_posix()
            same_listing(f, f"{server.url}/fixtures/{rel}" + ("/" if f.is_dir() else ""))
            done += 1
    assert done >= 8


def test_big_safetensors_one_request(server: RangeServer, served: Path) -> None:
    """A 4 GiB safetensors file lists in <= 2 requests and <= header + 64 KiB."""
    server.reset()
    same_listing(served / "big/big.safetensors", f"{server.url}/big/big.safetensors")
    assert len(server.log) <= 2
    assert server.bytes_sent() <= 8 + 352 + 64 * KIB


def test_big_header_two_requests(server: RangeServer, served: Path) -> None:
    """A header larger than the first block (390 KB, 4000 tensors): the rest in one more
    request."""
    hdr = int((served / "big/hdr/header_len").read_text())
    assert hdr > 64 * KIB
    server.reset()
    same_listing(served / "big/hdr/model.safetensors", f"{server.url}/big/hdr/model.safetensors")
    assert len(server.log) <= 2, [(r.range, r.sent) for r in server.log]
    assert server.bytes_sent() <= 8 + hdr + 64 * KIB


def test_big_torch_zip_four_requests(server: RangeServer, served: Path) -> None:
    """A 4 GiB torch zip of two storages: the first block (data.pkl, the first record's local
    header), the end (central directory) and the second record's 30-byte local header."""
    server.reset()
    same_listing(served / "big/big.pt", f"{server.url}/big/big.pt")
    assert len(server.log) <= 4, [(r.range, r.sent) for r in server.log]
    assert server.bytes_sent() <= 4 * 64 * KIB + 64


def test_torch_zip_one_request_per_far_record(server: RangeServer, served: Path) -> None:
    """A 4 GiB torch zip of 16 storages: a record's data offset needs its local header (its extra
    field is not in the central directory), so each record beyond the cached blocks costs one
    small request; never more."""
    server.reset()
    same_listing(served / "big/many.pt", f"{server.url}/big/many.pt")
    assert len(server.log) <= 2 + 15, [(r.range, r.sent) for r in server.log]
    assert server.bytes_sent() <= (2 + 15) * 64 * KIB + 64


def test_big_legacy_torch(server: RangeServer, served: Path) -> None:
    """A 1 GiB legacy torch file: one small request per storage count between the data."""
    server.reset()
    same_listing(served / "big/big_legacy.pt", f"{server.url}/big/big_legacy.pt")
    assert len(server.log) <= 1 + 4
    assert server.bytes_sent() <= 5 * 64 * KIB


def test_hdf5_metadata_scan_reads_each_byte_once(server: RangeServer, served: Path) -> None:
    """An HDF5 file whose metadata is spread through it (2,000 small datasets, Keras 3
    ``.weights.h5`` layout): h5py's file-object reads go through the cache, each byte is fetched
    at most once and a scan grows the read-ahead, so requests stay few."""
    import h5py
    import numpy as np

    path = served / "big" / "many.weights.h5"
    if not path.exists():
        with h5py.File(path, "w") as f:
            f.create_group("vars").attrs["name"] = "sequential"
            layers = f.create_group("layers")
            for i in range(1000):
                v = layers.create_group("dense" if i == 0 else f"dense_{i}").create_group("vars")
                v["0"], v["1"] = np.zeros((4, 4), "float32"), np.zeros((4,), "float32")
    server.reset()
    same_listing(path, f"{server.url}/big/many.weights.h5")
    assert server.bytes_sent() <= path.stat().st_size
    assert len(server.log) <= 48, len(server.log)


def test_sharded_headers_fetched_together(server: RangeServer, served: Path) -> None:
    """A 4 GiB checkpoint in 4 shards: the index, then the four shard headers concurrently (the
    first block of each); nothing else."""
    server.reset()
    url = f"{server.url}/big/sharded/model.safetensors.index.json"
    same_listing(served / "big/sharded/model.safetensors.index.json", url)
    shard_gets = [r for r in server.log if "model-0000" in r.path]
    assert len(shard_gets) == 4
    assert len(server.log) == 5
    assert server.bytes_sent() <= 5 * 64 * KIB


def test_directory_url_opens_like_a_local_directory(server: RangeServer) -> None:
    same_listing(FIXTURES / "dirs/hf_llama_safetensors_sharded",
                 f"{server.url}/fixtures/dirs/hf_llama_safetensors_sharded")


def test_values_over_http_equal_local(server: RangeServer) -> None:
    """diff --values reads tensor bytes through the remote source: equal to the local file."""
    rel = "safetensors/seed001_transformer_lm.safetensors"
    proc = run("diff", "--values", f"{server.url}/fixtures/{rel}", str(FIXTURES / rel),
               "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["values"] is True and doc["values_changed"] == 0
    assert doc["values_not_compared"] == 0 and doc["different"] is False, doc["summary"]


def test_escaping_names_are_refused(server: RangeServer) -> None:
    from inspector.adapters.source import as_source

    src = as_source(f"{server.url}/fixtures/dirs/hf_llama_safetensors_sharded/")
    for bad in ("../x", "/etc/passwd", "a/../../b"):
        with pytest.raises(FormatError):
            src.child(bad)
    f = as_source(f"{server.url}/fixtures/torch/gru.pt")
    with pytest.raises(FormatError):
        f.sibling("../safetensors/dtype_zoo.safetensors")


# -- bad remote input ---------------------------------------------------------------------------


def one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_not_found(server: RangeServer) -> None:
    one_line(run("show", f"{server.url}/fixtures/nothing.safetensors"), "no such file")


def test_forbidden(server: RangeServer) -> None:
    one_line(run("show", f"{server.url}/forbidden/fixtures/torch/gru.pt"), "403")


def test_server_ignoring_range_small_file_is_read(server: RangeServer) -> None:
    rel = "torch/gru.pt"
    same_listing(FIXTURES / rel, f"{server.url}/norange/fixtures/{rel}")


def test_server_ignoring_range_big_file_is_refused(server: RangeServer) -> None:
    server.reset()
    one_line(run("show", f"{server.url}/norange/big/big.safetensors"),
             "ignores Range", "refusing")
    assert server.bytes_sent() < 64 << 20


def test_connection_reset_mid_header(server: RangeServer) -> None:
    one_line(run("show", f"{server.url}/reset/big/hdr/model.safetensors"), "broke off")


def test_redirect_loop(server: RangeServer) -> None:
    one_line(run("show", f"{server.url}/loop/x.safetensors"), "redirect")


def test_slow_server_times_out(server: RangeServer) -> None:
    err = one_line(run("show", f"{server.url}/slow/fixtures/torch/gru.pt",
                       env={"INSPECTOR_REMOTE_TIMEOUT": "1"}, timeout=30), "timed out")
    assert "1 s" in err


def test_unreachable_host() -> None:
    one_line(run("show", "http://127.0.0.1:9/x.pt", env={"INSPECTOR_REMOTE_TIMEOUT": "2"}),
             "cannot connect")


def test_credentials_are_redacted(server: RangeServer) -> None:
    url = f"http://alice:s3cret@127.0.0.1:{server.url.rsplit(':', 1)[1]}/fixtures/none.pt"
    for args in (("show", url), ("--debug", "show", url)):
        proc = run(*args)
        assert proc.returncode == 2
        assert "s3cret" not in proc.stderr + proc.stdout
        assert "alice" not in proc.stderr + proc.stdout  # a user name may be a token
        assert "http://***@127.0.0.1" in proc.stderr
    assert redact("https://h/x?X-Amz-Signature=abc&X-Amz-Credential=k&v=1") == (
        "https://h/x?X-Amz-Signature=***&X-Amz-Credential=***&v=1"
    )
    assert "tok" not in redact_text("see https://u:tok@h/p and s3://b/k")


# -- S3: moto's server through real s3fs ----------------------------------------------------------

S3_FILES = [
    "safetensors/dtype_zoo.safetensors",
    "torch/gru.pt",
    "torch/lstm_bidir_legacy.pt",
    "keras/batch_norm.keras",
    *(f"dirs/hf_llama_safetensors_sharded/{p.name}"
      for p in sorted((FIXTURES / "dirs/hf_llama_safetensors_sharded").iterdir())),
]


@pytest.fixture(scope="module")
def moto():
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    import boto3
    from remote_servers import MotoS3

    with MotoS3() as m:
        s3 = boto3.client("s3", endpoint_url=m.endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
        s3.create_bucket(Bucket="ckpts")
        for rel in S3_FILES:
            s3.upload_file(str(FIXTURES / rel), "ckpts", f"runs/{rel}")
        yield m


@pytest.mark.parametrize("rel,budget", [
    ("safetensors/dtype_zoo.safetensors", 1),
    ("torch/gru.pt", 1),
    ("torch/lstm_bidir_legacy.pt", 1),
    ("keras/batch_norm.keras", 1),
    ("dirs/hf_llama_safetensors_sharded/model.safetensors.index.json", 4),
])
def test_s3_listing_equals_local(moto, rel: str, budget: int) -> None:
    moto.reset()
    same_listing(FIXTURES / rel, f"s3://ckpts/runs/{rel}", env=moto.env)
    gets = [r for r in moto.log if r.method == "GET"]
    assert len(moto.log) == len(gets) <= budget, [(r.method, r.path, r.range) for r in moto.log]
    assert all(r.range for r in gets)  # ranged object reads only, no HEAD, no whole object


def test_s3_prefix_opens_like_a_local_directory(moto) -> None:
    """A prefix is a directory: one listing, then the files' first blocks (shards together)."""
    moto.reset()
    same_listing(FIXTURES / "dirs/hf_llama_safetensors_sharded",
                 "s3://ckpts/runs/dirs/hf_llama_safetensors_sharded", env=moto.env)
    listings = [r for r in moto.log if r.range is None]
    assert len(listings) == 1
    assert len(moto.log) <= 7, [(r.method, r.path, r.range) for r in moto.log]


def test_s3_values_equal_local(moto) -> None:
    rel = "safetensors/dtype_zoo.safetensors"
    proc = run("diff", "--values", f"s3://ckpts/runs/{rel}", str(FIXTURES / rel),
               "--format", "json", env=moto.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["values"] is True and doc["different"] is False


def test_s3_missing_key_and_bucket(moto) -> None:
    one_line(run("show", "s3://ckpts/runs/nothing.pt", env=moto.env), "no such file")
    one_line(run("show", "s3://nobucket/x.pt", env=moto.env), "no such file")


def test_s3_without_credentials(moto) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=moto.endpoint, AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
               AWS_CONFIG_FILE="/nonexistent", AWS_EC2_METADATA_DISABLED="true")
    proc = subprocess.run([sys.executable, "-m", "inspector", "show", "s3://ckpts/runs/torch/gru.pt"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, env=env)
    one_line(proc, "credentials")
    scan = subprocess.run([sys.executable, "-m", "inspector", "scan", "s3://ckpts/runs/"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, env=env)
    assert "Traceback" not in scan.stderr
    assert scan.stdout.startswith("error      s3://ckpts/runs") and "credentials" in scan.stdout


# -- fleets: many paths or a prefix ---------------------------------------------------------------

S3_CHECKPOINTS = [
    "dirs/hf_llama_safetensors_sharded", "keras/batch_norm.keras",
    "safetensors/dtype_zoo.safetensors", "torch/gru.pt", "torch/lstm_bidir_legacy.pt",
]


def test_show_jsonl_over_a_prefix(moto) -> None:
    """``show s3://ckpts/runs/ --format jsonl``: one object per checkpoint below the prefix (the
    HF directory as one), each equal to the local listing."""
    proc = run("show", "s3://ckpts/runs/", "--format", "jsonl", "--jobs", "3", env=moto.env)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [d["path"] for d in lines] == [f"s3://ckpts/runs/{c}" for c in S3_CHECKPOINTS]
    for rel, doc in zip(S3_CHECKPOINTS, lines, strict=True):
        text = json.dumps(doc).replace("s3://ckpts/runs/", str(FIXTURES) + "/")
        assert json.loads(text) == show_json(str(FIXTURES / rel)), rel


def test_one_failure_does_not_stop_the_fleet(server: RangeServer) -> None:
    good = f"{server.url}/fixtures/torch/gru.pt"
    paths = [good, f"{server.url}/fixtures/missing.pt", f"{server.url}/forbidden/x.pt",
             str(FIXTURES / "safetensors/dtype_zoo.safetensors")]
    proc = run("show", *paths, "--format", "jsonl", "--jobs", "2")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == 4
    assert lines[0]["format"] == "torch-zip" and lines[3]["format"] == "safetensors"
    assert "no such file" in lines[1]["error"] and "403" in lines[2]["error"]
    table = run("show", good, f"{server.url}/fixtures/missing.pt", good, "--groups")
    assert table.returncode == 2
    assert table.stdout.count(f"==> {good} <==") == 2
    assert len(table.stderr.strip().splitlines()) == 1 and "missing.pt" in table.stderr
    as_json = run("show", good, f"{server.url}/fixtures/missing.pt", "--format", "json")
    docs = json.loads(as_json.stdout)
    assert docs[0]["format"] == "torch-zip" and "error" in docs[1]


def test_scan_over_a_prefix_equals_local(moto) -> None:
    moto.reset()
    proc = run("scan", "s3://ckpts/runs/", "--format", "json", "--jobs", "4", env=moto.env)
    assert proc.returncode == 0, proc.stderr
    assert len([r for r in moto.log if r.range is None]) == 1  # the prefix in one listing
    doc = json.loads(proc.stdout)
    got = {f["path"].removeprefix("s3://ckpts/runs/"): (f["kind"], f["verdict"])
           for f in doc["files"]}
    assert sorted(got) == sorted(S3_FILES)
    local = json.loads(run("scan", *(str(FIXTURES / r) for r in S3_FILES), "--format", "json").stdout)
    want = {str(Path(f["path"]).relative_to(FIXTURES)): (f["kind"], f["verdict"])
            for f in local["files"]}
    assert got == want


def test_scan_over_http_directory_listing(server: RangeServer) -> None:
    proc = run("scan", f"{server.url}/fixtures/dirs/hf_llama_safetensors_sharded/")
    assert proc.returncode == 0, proc.stderr
    assert "scanned 6 files: 6 safe" in proc.stdout


def test_any_fsspec_protocol_memory() -> None:
    """A protocol without a transport of its own (fsspec's memory://) reads through fsspec's
    cat_file: the same listing as the local file."""
    import fsspec

    from inspector.adapters.registry import load
    from inspector.reports.listing import listing

    rel = "torch/lstm_bidir_legacy.pt"
    fs = fsspec.filesystem("memory")
    fs.pipe("/ckpts/" + rel, (FIXTURES / rel).read_bytes())
    there = listing(load(f"memory://ckpts/{rel}"), None, "stored", "auto", None)
    here = listing(load(FIXTURES / rel), None, "stored", "auto", None)
    assert there["tensors"] == here["tensors"] and there["totals"] == here["totals"]


def test_debug_prints_request_counts(server: RangeServer) -> None:
    proc = run("--debug", "show", f"{server.url}/fixtures/safetensors/dtype_zoo.safetensors")
    assert proc.returncode == 0
    assert "dtype_zoo.safetensors: 1 request(s), 1,591 bytes" in proc.stderr


def test_cache_is_bounded_across_files(server: RangeServer, monkeypatch) -> None:
    """Cached bytes stay under the total budget for the other files (least recently used
    dropped) plus the per-file cap of the one being read, so value passes over many files do
    not accumulate them; reads still succeed."""
    from inspector.adapters import remote
    from inspector.adapters.source import as_source

    monkeypatch.setattr(remote, "TOTAL_MAX", 200 << 10)
    monkeypatch.setattr(remote, "CACHE_MAX", 300 << 10)  # the file being read: its own cap
    sources = [as_source(f"{server.url}/big/sharded/model-0000{k}-of-00004.safetensors")
               for k in range(1, 5)]
    for src in sources:
        for off in range(0, 5 << 20, 512 << 10):
            assert len(src.read(off, 100 << 10)) == 100 << 10
            assert remote._kept_total <= (200 << 10) + (300 << 10)
    assert sum(b.kept for b in remote._blobs.values()) == remote._kept_total
