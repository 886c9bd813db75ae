"""The HDF5 walk's direct libhdf5 calls (``adapters/h5_direct.py``) describe every dataset as
h5py's own path does, hand everything unusual back to it, and keep the hostile-input refusals.

The reference is the walk through h5py alone (``bind`` returning None), on the real Keras
fixtures, the malicious corpus and files written here with h5py's less common storage."""

from __future__ import annotations

import json
import os
import sys

import h5py
import numpy as np
import pytest

import inspector.adapters.h5_direct as h5_direct
import inspector.adapters.keras as keras_adapter
from inspector.adapters.errors import FormatError
from inspector.adapters.registry import load

from conftest import FIXTURES, ROOT
from hostile import assert_clean_error

H5_FILES = sorted(
    p for root in (FIXTURES, ROOT / "tests" / "corpus") for p in root.rglob("*")
    if p.suffix in (".h5", ".hdf5")
)
KERAS_ARCHIVES = sorted(
    p for root in (FIXTURES, ROOT / "tests" / "corpus") for p in root.rglob("*.keras")
)
LINUX = sys.platform.startswith("linux")
BIND = h5_direct.bind


def _walk(path, monkeypatch, direct: bool, size: int | None = None, columns: bool = False):
    """The walk's facts as columns, or its refusal; through the direct calls or h5py alone;
    gathered as records or (as in the isolated child) straight into columns."""
    monkeypatch.setattr(h5_direct, "bind", BIND if direct else lambda *a: None)
    try:
        facts = keras_adapter._read_h5_here(
            str(path), str(path), os.path.getsize(path) if size is None else size, 100,
            keras_adapter.DatasetColumns() if columns else None)
        return keras_adapter._facts_to_json(facts)
    except FormatError as e:
        return ("refused", str(e))


@pytest.mark.skipif(not LINUX, reason="the direct calls find libhdf5 in /proc/self/maps")
def test_direct_calls_bind_to_h5pys_libhdf5():
    with h5py.File(FIXTURES / "keras" / "lm_adam.legacy.h5", "r") as f:
        direct = h5_direct.bind(h5py, f.id)
        assert direct is not None
        oid = direct.open(b"nope", None)
        assert oid < 0  # a failed call answers a negative ID, printing nothing


@pytest.mark.parametrize("path", H5_FILES, ids=lambda p: p.name)
def test_same_facts_as_h5py_alone(path, monkeypatch):
    alone = _walk(path, monkeypatch, False)
    assert _walk(path, monkeypatch, True) == alone
    assert _walk(path, monkeypatch, True, columns=True) == alone


@pytest.mark.parametrize("path", KERAS_ARCHIVES, ids=lambda p: p.name)
def test_same_listing_of_keras_archives(path, monkeypatch):
    """A ``.keras`` member is read through a Python file object (libhdf5 calls back into
    Python from inside the direct calls)."""
    monkeypatch.setattr(h5_direct, "bind", lambda *a: None)
    alone = load(path, allow_unsafe=True)
    monkeypatch.setattr(h5_direct, "bind", BIND)
    direct = load(path, allow_unsafe=True)
    assert direct.tensors == alone.tensors and direct.findings == alone.findings


def test_unusual_datasets_take_h5pys_path_unchanged(tmp_path, monkeypatch):
    p = tmp_path / "mixed.h5"
    with h5py.File(p, "w") as f:
        f["plain/f32"] = np.ones((3, 4), "float32")
        f["plain/f16be"] = np.ones(4, ">f2")
        f["plain/i64"] = np.arange(5)
        f["plain/u8"] = np.zeros((2, 2, 2), "uint8")
        f["plain/scalar"] = np.float64(1.5)
        f["odd/bool"] = np.array([True, False])
        f["odd/complex"] = np.ones(2, "complex64")
        f["odd/strings"] = np.array([b"ab", b"cd"])
        f["odd/compound"] = np.zeros(2, [("a", "<i4"), ("b", "<f8")])
        f.create_dataset("odd/chunked", data=np.ones(8, "float32"), chunks=(4,),
                         compression="gzip")
        f.create_dataset("odd/compact", data=np.ones(3, "int16"),
                         dcpl=_compact_dcpl())
        f.create_dataset("odd/unallocated", shape=(6,), dtype="float32")
        f.create_dataset("odd/empty", shape=(0,), dtype="int8")
        f["odd/null"] = h5py.Empty("float32")
        bf16 = f.create_dataset("odd/bfloat16", data=np.zeros(4, "uint16"))
        bf16.attrs["dtype"] = "bfloat16"
        f["odd/named_type"] = np.dtype("float32")
        f["hard_alias"] = f["plain/f32"]
        f["soft_alias"] = h5py.SoftLink("/plain/i64")
    described = []
    contiguous = keras_adapter._contiguous
    monkeypatch.setattr(keras_adapter, "_contiguous",
                        lambda facts, path, *a: described.append(path)
                        or contiguous(facts, path, *a))
    here = _walk(p, monkeypatch, True)
    if LINUX:  # the plain ones by the direct calls, the rest by h5py
        # (odd/bfloat16 is uint16 data: its tag is read only for types NUMPY_KINDS lacks)
        assert sorted(described) == ["/hard_alias", "/odd/bfloat16", *(
            f"/plain/{n}" for n in ("f16be", "f32", "i64", "scalar", "u8"))]
    assert here == _walk(p, monkeypatch, False) == _walk(p, monkeypatch, True, columns=True)
    assert len(here["paths"]) == 16 and here["soft_links"] == {"/soft_alias": "/plain/i64"}


def _compact_dcpl():
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    return dcpl


def test_extent_past_the_end_is_refused_on_both_paths(tmp_path, monkeypatch):
    """A contiguous dataset reaching past the stated end of the file (a ``.keras`` member
    shorter than its HDF5 content says) is refused the same way by both paths."""
    p = tmp_path / "w.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.ones(1024, "float32")
    short = os.path.getsize(p) - 1000
    got = _walk(p, monkeypatch, True, size=short)
    assert got == _walk(p, monkeypatch, False, size=short)
    assert got[0] == "refused" and "past the end of the file" in got[1] and "/x" in got[1]


def test_expansion_refusal_holds_on_both_paths(tmp_path, monkeypatch):
    p = tmp_path / "w.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.ones(1024, "float32")
    monkeypatch.setattr(keras_adapter, "BOMB_FLOOR_BYTES", 1000)
    monkeypatch.setattr(keras_adapter, "BOMB_MAX_EXPANSION", 0.5)
    got = _walk(p, monkeypatch, True)
    assert got == _walk(p, monkeypatch, False)
    assert got[0] == "refused" and "refused, as Keras does" in got[1]


def test_corrupt_dataset_header_is_one_line(tmp_path, cli):
    """A layout message pointing past the end: libhdf5 refuses to open the dataset; the direct
    call's failure hands it to h5py, whose error becomes the one line."""
    p = tmp_path / "w.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.ones(256, "float32")
        offset = f["x"].id.get_offset()
    data = p.read_bytes()
    layout = offset.to_bytes(8, "little") + (1024).to_bytes(8, "little")
    assert data.count(layout) == 1
    p.write_bytes(data.replace(layout, (len(data) - 512).to_bytes(8, "little") + layout[8:]))
    assert_clean_error(cli("show", str(p)), str(p), "HDF5")


def _fixed_str_attr(obj, name: str, values: list[bytes], pad: int, cset: int, scalar: bool):
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(8)
    tid.set_strpad(pad)
    tid.set_cset(cset)
    space = h5py.h5s.create(h5py.h5s.SCALAR) if scalar else h5py.h5s.create_simple((len(values),))
    data = np.array(values, dtype="S8")
    h5py.h5a.create(obj.id, name.encode(), tid, space).write(
        data.reshape(()) if scalar else data, mtype=tid)


def test_string_attributes_read_as_h5py_reads_them(tmp_path):
    """Fixed-length strings of every padding and character set (embedded NULs, bytes that are
    not UTF-8), empty lists, variable-length ones and non-strings: the walk's attributes equal
    h5py's own reading (``AttributeManager``), made plain."""
    p = tmp_path / "attrs.h5"
    strpads = (h5py.h5t.STR_NULLPAD, h5py.h5t.STR_NULLTERM, h5py.h5t.STR_SPACEPAD)
    with h5py.File(p, "w") as f:
        for i, pad in enumerate(strpads):
            for cset in (h5py.h5t.CSET_ASCII, h5py.h5t.CSET_UTF8):
                g = f.create_group(f"g{i}_{cset}")
                _fixed_str_attr(g, "weight_names", [b"ab\0cd", b"x\xff\xfey", "é".encode(), b""],
                                pad, cset, scalar=False)
                _fixed_str_attr(g, "name", [b"na\0me  "], pad, cset, scalar=True)
                _fixed_str_attr(g, "layer_names0", [], pad, cset, scalar=False)
        g = f.create_group("other")
        g.attrs["layer_names"] = np.array([], dtype=h5py.string_dtype())
        g.attrs["weight_names"] = np.array(["a", "é"], dtype=h5py.string_dtype())
        g.attrs["layer_names1"] = np.array([[b"a", b"b"]])
        g.attrs["backend"] = np.array([1, 2])
        g.attrs["keras_version"] = "3.0"
    size = os.path.getsize(p)
    walked = keras_adapter._read_h5_here(str(p), str(p), size, 0).groups
    with h5py.File(p, "r") as f:
        for name, g in f.items():
            assert walked[f"/{name}"] == {k: keras_adapter._plain(v) for k, v in g.attrs.items()}


_CHILD_IMPORTS = r"""
import json, sys
from inspector.adapters import keras, registry

imported = []

def in_process(fn, seconds, where, what):
    # the forked child's work, run here: record the modules it would have to import
    before = set(sys.modules)
    try:
        return fn()
    finally:
        imported.extend(sorted(set(sys.modules) - before))

keras.call_isolated = in_process
# another thread, as in a fleet: the parent then imports what the walk needs before the fork
import threading
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()
for path in sys.argv[1:]:
    try:
        registry.load(path)
    except Exception:
        pass
print(json.dumps(sorted(set(imported))))
"""


def test_the_isolated_walk_imports_nothing():
    """With other threads running, everything the HDF5 walk needs is imported before the
    fork. A child forked while another thread was importing a module would wait forever on
    that module's lock (a fleet with --jobs reads checkpoints on threads) and time out.
    Checked on every HDF5 and .keras fixture, in a fresh interpreter."""
    import subprocess

    root = FIXTURES
    files = sorted(str(p) for p in root.rglob("*") if p.suffix in (".h5", ".keras"))
    assert len(files) > 20
    proc = subprocess.run([sys.executable, "-c", _CHILD_IMPORTS, *files], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_listing_while_another_thread_is_inside_h5py():
    """A thread inside an h5py call at the fork (a fleet reading values) must not leave the
    child waiting for h5py's global lock: h5py, imported before the fork, makes os.fork wait
    for it."""
    import threading

    from h5py._objects import phil

    path = next(p for p in sorted(FIXTURES.rglob("*.h5")))
    inside, leave = threading.Event(), threading.Event()

    def busy() -> None:
        with phil:
            inside.set()
            leave.wait(timeout=60)

    t = threading.Thread(target=busy)
    t.start()
    try:
        assert inside.wait(timeout=60)
        threading.Timer(0.5, leave.set).start()  # the lock is freed while the listing waits
        ckpt = load(str(path))
    finally:
        leave.set()
        t.join(timeout=60)
    assert ckpt.tensors
