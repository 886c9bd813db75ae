"""Structured fuzzing of every adapter, starting from the real fixtures.

Each case mutates a real file (truncation, byte flips, a length or count field set to an extreme)
and opens it the way the CLI does, but without the registry's last-resort wrapper, so an adapter
that lets a bare ``KeyError`` or ``struct.error`` escape fails here instead of being papered over.
A case passes when it lists or raises the project's own :class:`InspectorError`. A hang is caught
by an alarm far above any honest case (not a timing assertion); memory growth is bounded for the
whole run. Budget: ``FUZZ_EXAMPLES`` per strategy and fixture (env ``INSPECTOR_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.adapters.errors import InspectorError
from inspector.adapters.registry import detect
from inspector.adapters.source import LocalSource

from conftest import FIXTURES

FUZZ_EXAMPLES = int(os.environ.get("INSPECTOR_FUZZ_EXAMPLES", "400"))
HANG_SECONDS = 20
MAX_GROWTH_MB = 200

SEEDS = {
    "safetensors": FIXTURES / "safetensors" / "seed001_transformer_lm.safetensors",
    "safetensors-dtypes": FIXTURES / "safetensors" / "dtype_zoo.safetensors",
    "torch-zip": FIXTURES / "torch" / "seed001_model1.pt",
    "torch-zip-train": FIXTURES / "torch" / "train_checkpoint.pt",
    "torch-legacy": FIXTURES / "torch" / "seed001_model1_legacy.pt",
    "mxnet-1.9.1": FIXTURES / "mxnet" / "mxnet-1.9.1" / "all_dtypes.params",
    "mxnet-sparse": FIXTURES / "mxnet" / "mxnet-1.9.1" / "csr.params",
    "mxnet-0.11.0": FIXTURES / "mxnet" / "mxnet-0.11.0" / "dict3.params",
    "tf-index-tf2": FIXTURES / "tf" / "tf2_lm" / "ckpt-1.index",
    "tf-index-tf1": FIXTURES / "tf" / "tf1_graph" / "model.ckpt.index",
    "gguf": FIXTURES / "gguf" / "kv_zoo_v2.gguf",
    "onnx-zoo": FIXTURES / "onnx" / "dtype_zoo.onnx",
    "onnx-external": FIXTURES / "onnx" / "lstm_external" / "lstm.onnx",
    "ctranslate2": FIXTURES / "ctranslate2" / "fairseq_transformer_int8_float16" / "model.bin",
    "marian-npz": FIXTURES / "marian" / "transformer_untied.npz",
    "deepspeed-z3-model-states": FIXTURES / "deepspeed" / "llama-z3" / "checkpoint-3"
    / "global_step3" / "zero_pp_rank_0_mp_rank_00_model_states.pt",
    "flax-msgpack": FIXTURES / "flax" / "transformer_train_state.msgpack",
    "flax-chunked": FIXTURES / "flax" / "chunked.msgpack",
    "nemo": FIXTURES / "nemo" / "tiny_model.nemo",
}
KERAS_SEEDS = {
    "keras-weights-h5": FIXTURES / "keras" / "lstm.weights.h5",
    "keras-legacy-h5": FIXTURES / "keras" / "keras2_lm_adam.h5",
    "keras-archive": FIXTURES / "keras" / "lstm.keras",
}

EXTREMES_U64 = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**60, 2**63 - 1, 2**63, 2**64 - 1]

STATS = {"cases": 0, "slowest": 0.0, "slowest_case": "", "rss_jump_mb": 0.0, "rss_jump_case": ""}


def _seeds() -> dict[str, Path]:
    seeds = dict(SEEDS)
    npz = sorted((FIXTURES / "mxnet" / "mxnet-2.0.0b1").glob("*"))
    picked = [p for p in npz if p.suffix in (".npz", ".npy", ".params")][:3]
    seeds.update({f"mxnet2:{p.name}": p for p in picked})
    seeds.update({k: v for k, v in KERAS_SEEDS.items() if v.exists()})
    return {k: v for k, v in seeds.items() if v.exists()}


SEED_FILES = _seeds()


@contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def _hang(signum, frame):  # noqa: ARG001
        raise TimeoutError(f"no result after {seconds} s")

    old = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _open_like_cli(path: Path) -> None:
    """detect + open with no catch-all: only InspectorError may come out."""
    source = LocalSource(path)
    adapter, variant = detect(source)
    ckpt = adapter.open(source, variant)
    for t in ckpt.tensors:  # everything a listing touches must be well-formed
        assert all(isinstance(d, int) and d >= 0 for d in t.shape), (t.name, t.shape)
        assert isinstance(t.name, str) and isinstance(t.dtype, str)
    ckpt.totals()


def _check_case(path: Path, data: bytes, label: str) -> None:
    path.write_bytes(data)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        with _alarm(HANG_SECONDS):
            _open_like_cli(path)
    except InspectorError as e:
        message = str(e)
        assert "\n" not in message.strip(), message
        assert str(path) in message or path.name in message, message
    finally:
        elapsed = time.perf_counter() - start
        STATS["cases"] += 1
        if elapsed > STATS["slowest"]:
            STATS["slowest"], STATS["slowest_case"] = elapsed, label
        jump = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
        if jump > STATS["rss_jump_mb"]:
            STATS["rss_jump_mb"], STATS["rss_jump_case"] = jump, label


def _mutate(seed: Path, tmp_path: Path) -> tuple[Path, bytes]:
    target = tmp_path / seed.name
    return target, seed.read_bytes()


_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module", autouse=True)
def _memory_bound():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(
        f"\nfuzz: {STATS['cases']} cases, slowest {STATS['slowest']:.3f} s "
        f"({STATS['slowest_case']}), peak RSS growth {growth_mb:.1f} MB, largest jump in one "
        f"case {STATS['rss_jump_mb']:.1f} MB ({STATS['rss_jump_case']})"
    )
    assert growth_mb < MAX_GROWTH_MB, growth_mb


@pytest.mark.parametrize("name", sorted(SEED_FILES))
def test_truncation_at_every_offset_class(name: str, tmp_path: Path) -> None:
    """Cut at 0..64, around every 4 KiB and the tail, plus hypothesis-chosen offsets."""
    target, data = _mutate(SEED_FILES[name], tmp_path)
    n = len(data)
    cuts = set(range(0, min(n, 65))) | {n - k for k in range(1, min(n, 65))}
    cuts |= {c for b in range(4096, n, 4096) for c in (b - 1, b, b + 1) if 0 < c < n}
    for cut in sorted(cuts):
        _check_case(target, data[:cut], f"{name} cut {cut}")

    @_SETTINGS
    @given(st.integers(min_value=0, max_value=max(n - 1, 0)))
    def cut_anywhere(cut: int) -> None:
        _check_case(target, data[:cut], f"{name} cut {cut}")

    cut_anywhere()


@pytest.mark.parametrize("name", sorted(SEED_FILES))
def test_byte_flips(name: str, tmp_path: Path) -> None:
    target, data = _mutate(SEED_FILES[name], tmp_path)
    n = len(data)
    # Headers and zip central directories live at the two ends: bias positions there.
    position = st.one_of(
        st.integers(0, min(n, 512) - 1), st.integers(max(0, n - 512), n - 1), st.integers(0, n - 1)
    )

    @_SETTINGS
    @given(st.lists(st.tuples(position, st.integers(0, 255)), min_size=1, max_size=8))
    def flip(edits: list[tuple[int, int]]) -> None:
        buf = bytearray(data)
        for pos, value in edits:
            buf[pos] = value
        _check_case(target, bytes(buf), f"{name} flips {edits}")

    flip()


@pytest.mark.parametrize("name", sorted(SEED_FILES))
def test_extreme_fields(name: str, tmp_path: Path) -> None:
    """A u32/u64 at any position (lengths, counts, ndims, dims) set to an extreme value."""
    target, data = _mutate(SEED_FILES[name], tmp_path)
    n = len(data)

    @_SETTINGS
    @given(
        st.integers(0, max(n - 8, 0)),
        st.sampled_from(EXTREMES_U64),
        st.sampled_from(["<Q", "<I", "<q", "<i"]),
    )
    def overwrite(pos: int, value: int, fmt: str) -> None:
        size = struct.calcsize(fmt)
        buf = bytearray(data)
        buf[pos : pos + size] = struct.pack(fmt, _fit(value, fmt))
        _check_case(target, bytes(buf), f"{name} {fmt}@{pos}={value}")

    overwrite()


def _fit(value: int, fmt: str) -> int:
    bits = 8 * struct.calcsize(fmt)
    value %= 2**bits
    if fmt[-1] in "qi" and value >= 2 ** (bits - 1):
        value -= 2**bits
    return value


# Targeted cases, one per rule the issue names.


def _safetensors_with_length(length: int, body: bytes = b"{}") -> bytes:
    return struct.pack("<Q", length) + body


@pytest.mark.parametrize("length", [2**63, 2**64 - 1, 2**32, 10**12])
def test_safetensors_header_length_extremes(length: int, tmp_path: Path) -> None:
    _check_case(tmp_path / "x.safetensors", _safetensors_with_length(length), f"st len {length}")


@pytest.mark.parametrize(
    "shape",
    [[-1, 4], [2**62, 2**62], [2**31, 2**31, 2**31], [0, 2**64], ["3"], [1.5], [True]],
)
def test_safetensors_hostile_shapes(shape: list, tmp_path: Path) -> None:
    import json

    header = json.dumps({"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 16]}}).encode()
    data = struct.pack("<Q", len(header)) + header + b"\0" * 16
    path = tmp_path / "x.safetensors"
    path.write_bytes(data)
    with pytest.raises(InspectorError):
        _open_like_cli(path)


def _mxnet_list(count: int, ndim: int, dims: list[int]) -> bytes:
    # kMXAPINDArrayListMagic, reserved, count, then one V2 NDArray: magic, stype, ndim, dims
    head = struct.pack("<QQQ", 0x112, 0, count)
    arr = struct.pack("<Ii", 0xF993FAC9, 0) + struct.pack("<I", ndim & 0xFFFFFFFF)
    arr += b"".join(struct.pack("<q", d) for d in dims)
    return head + arr + b"\0" * 32


@pytest.mark.parametrize(
    "count,ndim,dims",
    [
        (2**60, 1, [4]),
        (1, 2**31, [4]),
        (1, 2, [-3, 4]),
        (1, 2, [2**62, 2**62]),
        (1, 3, [2**31, 2**31, 2**31]),
        (2**64 - 1, 1, [1]),
    ],
)
def test_mxnet_declared_extremes(count: int, ndim: int, dims: list[int], tmp_path: Path) -> None:
    path = tmp_path / "x.params"
    path.write_bytes(_mxnet_list(count, ndim, dims))
    with pytest.raises(InspectorError):
        with _alarm(HANG_SECONDS):
            _open_like_cli(path)


def _zip_with_lying_directory(seed: Path, edit: Callable[[bytearray, int], None]) -> bytes:
    buf = bytearray(seed.read_bytes())
    eocd = buf.rfind(b"PK\x05\x06")
    assert eocd > 0
    edit(buf, eocd)
    return bytes(buf)


@pytest.mark.parametrize(
    "what,edit",
    [
        ("cd offset past end", lambda b, e: b.__setitem__(slice(e + 16, e + 20), b"\xff" * 4)),
        ("cd size huge", lambda b, e: b.__setitem__(slice(e + 12, e + 16), b"\xff" * 4)),
        ("entry count huge", lambda b, e: b.__setitem__(slice(e + 8, e + 12), b"\xff" * 4)),
        ("cd offset zero", lambda b, e: b.__setitem__(slice(e + 16, e + 20), b"\0" * 4)),
    ],
)
def test_torch_zip_central_directory_lies(what: str, edit, tmp_path: Path) -> None:
    data = _zip_with_lying_directory(SEEDS["torch-zip"], edit)
    _check_case(tmp_path / "m.pt", data, f"zip {what}")


def test_torch_zip_member_sizes_lie(tmp_path: Path) -> None:
    """Every central-directory record claims a 4 GiB uncompressed size and a wrong CRC."""
    buf = bytearray(SEEDS["torch-zip"].read_bytes())
    pos = buf.find(b"PK\x01\x02")
    while pos != -1:
        buf[pos + 16 : pos + 20] = struct.pack("<I", zlib.crc32(b"x"))
        buf[pos + 24 : pos + 28] = b"\xff\xff\xff\xfe"
        pos = buf.find(b"PK\x01\x02", pos + 4)
    _check_case(tmp_path / "m.pt", bytes(buf), "zip sizes lie")


@pytest.mark.skipif(not KERAS_SEEDS["keras-weights-h5"].exists(), reason="no Keras fixture")
@pytest.mark.parametrize("start", [0, 8, 9, 12, 16, 24, 32, 40, 48])
def test_hdf5_corrupt_superblock(start: int, tmp_path: Path) -> None:
    buf = bytearray(KERAS_SEEDS["keras-weights-h5"].read_bytes())
    buf[start : start + 8] = b"\xff" * 8
    path = tmp_path / "m.weights.h5"
    shutil.copyfile(KERAS_SEEDS["keras-weights-h5"], path)
    _check_case(path, bytes(buf), f"hdf5 superblock @{start}")


def test_hdf5_global_heap_loop_is_stopped(tmp_path: Path) -> None:
    """Three bytes flipped in a real Keras .weights.h5 (found by this fuzzer) make libhdf5 loop in
    C, holding the GIL, while reading a layer's ``name`` attribute: the walk runs in a child with
    a time budget, so the listing ends in one line instead of hanging."""
    data = bytearray((FIXTURES / "keras" / "lstm.weights.h5").read_bytes())
    for pos, value in ((2538, 144), (2192, 109), (6024, 255)):
        data[pos] = value
    target = tmp_path / "loop.weights.h5"
    target.write_bytes(bytes(data))
    with pytest.raises(InspectorError, match="did not finish within"):
        with _alarm(HANG_SECONDS):
            _open_like_cli(target)
