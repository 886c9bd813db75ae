"""The runs of chunk and storage records of a DCP ``.metadata``, read as data
(``adapters/dcp_runs.py``): the listing is the one the restricted unpickler gives on the whole
pickle, for torch's own files, their damaged variants and records hidden where the unpickler
would not read records."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from inspector.adapters import dcp_runs
from inspector.adapters.errors import InspectorError
from inspector.adapters.registry import load
from inspector.adapters.security.restricted_pickle import unpickle
from inspector.adapters.torch.rebuild import Builder

from conftest import FIXTURES

DCP = FIXTURES / "dcp"
# Every .metadata torch wrote for the fixtures (directory, file names).
METADATA = sorted({p.parent for p in (*DCP.rglob("*.metadata"),
                                      *(FIXTURES / "dcp_prefixed").rglob("*.metadata"))})


def _listing(path: Path) -> object:
    """What a listing says: the entries, the metadata, the findings; or the error line."""
    try:
        ck = load(path)
    except InspectorError as e:  # an object's repr names its address: not the listing's
        return ("error", type(e).__name__, re.sub(" at 0x[0-9a-f]+", "", str(e)))
    return ([(t.stored_name, t.name, t.shape, t.dtype, str(t.role), t.nbytes, t.file,
              sorted(t.extra.items(), key=str)) for t in ck.tensors],
            repr(ck.metadata), [(f.severity, f.message, f.where) for f in ck.findings])


def _whole(monkeypatch: pytest.MonkeyPatch, path: Path) -> object:
    """The listing with every pickle read whole by the restricted unpickler."""
    with monkeypatch.context() as m:
        m.setattr(dcp_runs, "split", lambda data: None)
        return _listing(path)


@pytest.mark.parametrize("directory", METADATA, ids=lambda p: p.name)
def test_listing_is_the_whole_pickles(directory, monkeypatch):
    assert _listing(directory) == _whole(monkeypatch, directory)


@pytest.mark.parametrize(("name", "kinds"), [
    ("fsdp2", {"ChunkRun", "StorageRun"}),
    ("dtensor_cols", {"ChunkRun", "StorageRun"}),
    ("accelerate_fsdp/optimizer_0", {"ChunkRun", "StorageRun"}),
    ("single", {"StorageRun"}),  # one chunk per tensor: a list of one is no run
])
def test_torchs_files_are_read_in_runs(name, kinds):
    """The runs are found in torch's own files (chunk lists and storage_data entries)."""
    data = (DCP / name / ".metadata").read_bytes()
    cut, runs = dcp_runs.split(data)
    assert kinds <= {type(r).__name__ for r in runs}
    assert len(cut) < len(data)


def test_a_pickle_that_gets_objects_of_a_run_again_is_read_whole():
    """Megatron's ``torch_dist`` metadata refers again to objects made inside its chunk lists
    (memo gets of them): those objects are not made here, so the pickle is read whole."""
    assert dcp_runs.split((DCP / "megatron_dist/iter_0000010/.metadata").read_bytes()) is None


def _damaged(src: Path, tmp_path: Path, data: bytes) -> Path:
    d = tmp_path / "ckpt"
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src, d)
    (d / ".metadata").write_bytes(data)
    return d


@pytest.mark.parametrize(("name", "cut", "change"), [
    ("fsdp2", 211, 37),
    # read whole either way (see above): a sparser sample checks the fallback's errors
    ("megatron_dist/iter_0000010", 1009, 173),
])
def test_damaged_files_list_as_the_whole_pickle_does(name, cut, change, tmp_path, monkeypatch):
    """Truncations and changed bytes all over the pickle (inside runs: ints, gets, keys; and
    between them): the same listing or the same error line as the whole pickle read."""
    src = DCP / name
    data = (src / ".metadata").read_bytes()
    variants = [data[:n] for n in range(0, len(data), cut)]
    for i in range(3, len(data), change):
        for b in (0x00, 0x94, 0x68, data[i] ^ 0x01):
            variants.append(data[:i] + bytes((b,)) + data[i + 1:])
    d = _damaged(src, tmp_path, data)
    for v in variants:
        (d / ".metadata").write_bytes(v)
        assert _listing(d) == _whole(monkeypatch, d), v[:0]


def _p(*ops: bytes) -> bytes:
    return b"".join(ops)


def _s(text: str) -> bytes:
    raw = text.encode()
    return b"\x8c" + bytes((len(raw),)) + raw


CLASS = _p(_s("torch.distributed.checkpoint.metadata"), b"\x94", _s("ChunkStorageMetadata"),
           b"\x94\x93\x94")  # memo 0, 1, 2 (the class)
KEYS = _p(_s("offsets"), b"\x94", _s("sizes"), b"\x94")  # memo 3, 4
SIZE = _p(_s("torch"), b"\x94", _s("Size"), b"\x94\x93\x94")  # memo 5, 6, 7 (torch.Size)
# A ChunkStorageMetadata record as torch's pickler writes one once its names are memoized.
RECORD = (b"h\x02)\x81\x94}\x94(h\x03h\x07K\x00K\x00\x86\x94\x85\x94R\x94"
          b"h\x04h\x07K\x04K\x04\x86\x94\x85\x94R\x94ub")


def _allowed() -> dict:
    from inspector.adapters.dcp import _standins

    allowed = Builder().allowed()
    allowed.update(_standins())
    return allowed


def _rows(items: list) -> list:
    """(offsets, sizes) of each chunk of a list of stand-ins and runs."""
    out = []
    for c in items:
        if isinstance(c, dcp_runs.ChunkRun):
            out.extend(zip(c.offsets, c.sizes, strict=True))
        else:
            out.append((c.__dict__["offsets"], c.__dict__["sizes"]))
    return out


def test_records_inside_a_string_are_the_string():
    """Bytes that spell records inside a bytes object (as the unpickler reads it) stay those
    bytes; the real records after it are read, the ones after the first as a run."""
    hidden = RECORD * 3
    data = _p(b"\x80\x04", CLASS, KEYS, SIZE, b"](", b"C", bytes((len(hidden),)), hidden,
              b"\x94", RECORD, RECORD, RECORD, b"e.")
    whole, _ = unpickle(data, _allowed())
    cut, runs = dcp_runs.split(data)
    assert len(runs) == 1 and hidden in cut
    read, _ = unpickle(cut, _allowed(), lambda pid: runs[pid])
    assert read[0] == whole[0] == hidden and read[2] is runs[0] and len(read) == 3
    assert _rows(read[1:]) == _rows(whole[1:]) == [((0, 0), (4, 4))] * 3


def test_a_later_get_of_a_slot_inside_a_run_reads_the_whole_pickle():
    """A get of an object a run made (the unpickler would hand it out again): not modelled,
    so the pickle is read whole."""
    data = _p(b"\x80\x04", CLASS, KEYS, SIZE, b"](", RECORD, RECORD, b"e", b"h\x0a", b"\x86.")
    assert dcp_runs.split(data) is None


@pytest.mark.parametrize("op", [b"Q", b"P", b"2", b"c", b"q\x00", b"\x82\x01"])
def test_opcodes_outside_torchs_writer_read_the_whole_pickle(op):
    """Persistent ids (the runs' markers), DUP, GLOBAL, BINPUT, EXT1: the pickle is read whole
    by the restricted unpickler, which judges them as before."""
    data = _p(b"\x80\x04", CLASS, KEYS, SIZE, b"](", RECORD, RECORD, b"e", op, b".")
    assert dcp_runs.split(data) is None
