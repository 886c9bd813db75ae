"""The loaders' grammar, not a narrower one: every file of ``tests/corpus/loader_grammar`` (pickles
whose opcode arguments use spellings CPython's unpicklers accept, object ``.npy`` headers in every
descr form ``numpy.load`` reads, joblib streams under every compressor joblib detects) made a real
loader run its payload (``loader_grammar.truth.json``, recorded by
``tests/corpus/make_loader_grammar.py``), so ``scan`` must call each dangerous and
``inspector.load`` must refuse it, whatever the file is called. The pickle grammar itself is
checked against CPython's own C and pure-Python unpicklers, run here with a ``find_class`` that
imports nothing."""

from __future__ import annotations

import io
import json
import pickle
import shutil
from pathlib import Path

import pytest

import inspector
from inspector.adapters.joblib_compression import compression, decompress
from inspector.adapters.security.pickle_grammar import genops, walk
from inspector.adapters.security.scan import scan_file

CORPUS = Path(__file__).parent / "corpus"
FILES = CORPUS / "loader_grammar"
TRUTH = json.loads((CORPUS / "loader_grammar.truth.json").read_text())["files"]
EXECUTED = sorted(n for n, row in TRUTH.items() if "executed" in row.values())


def test_the_corpus_is_live() -> None:
    """Every file made at least one real loader run its payload (nothing else is kept)."""
    assert len(EXECUTED) == len(TRUTH) > 150
    assert any(row.get("pickle.loads") == "rejected" for row in TRUTH.values())  # Python only
    assert any(row.get("pickle._loads") == "rejected" for row in TRUTH.values())  # C only


@pytest.mark.parametrize("name", EXECUTED)
def test_scan_and_load_refuse_what_a_loader_runs(name: str) -> None:
    res = scan_file(FILES / name)
    assert res.verdict == "dangerous", (name, res.kind, [i.text for i in res.items])
    with pytest.raises(inspector.UnsafeContentError):
        inspector.load(FILES / name)


@pytest.mark.parametrize("name", [n for n in EXECUTED if n.startswith("p_")])
@pytest.mark.parametrize("as_name", ["model.joblib", "model.pt", "weights.bin", "notes.txt"])
def test_a_text_pickle_is_a_pickle_under_any_name(name: str, as_name: str,
                                                  tmp_path: Path) -> None:
    path = tmp_path / as_name
    shutil.copyfile(FILES / name, path)
    assert scan_file(path).verdict == "dangerous"
    with pytest.raises(inspector.UnsafeContentError):
        inspector.load(path)


# -- the grammar against CPython's unpicklers ---------------------------------------------------

class _C(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: ANN201 - nothing is imported
        return lambda *a, **k: (module, name)


class _Py(pickle._Unpickler):  # type: ignore[name-defined,misc]
    def find_class(self, module: str, name: str):  # noqa: ANN201
        return lambda *a, **k: (module, name)


def _accepted(data: bytes) -> set[str]:
    out = set()
    for kind, cls in (("c", _C), ("py", _Py)):
        try:
            cls(io.BytesIO(data), encoding="bytes").load()
            out.add(kind)
        except Exception:  # noqa: BLE001 - the loader refuses these bytes
            pass
    return out


ARGUMENTS = [
    b"I0x10\n", b"I0X1f\n", b"I010\n", b"I0b11\n", b"I0o17\n", b"I1_0\n", b"I +7 \n",
    b"I\t-3\n", b"I5\x00junk\n", b"I5\r\n", b"I01\n", b"I00\n", b"I\x00\n", b"I 1\n",
    b"I0x" + b"f" * 40 + b"\n", b"I99999999999999999999999\n", b"I0x\n",
    b"L0x10L\n", b"L0o17\n", b"L12\n", b"L1_0L\n", b"L 5 L\n", b"L5\x00L\n", b"LL\n",
    b"Finf\n", b"F-Infinity\n", b"Fnan\n", b"F 1e3 \n", b"F1_0.5\n", b"F2.5\x00x\n", b"F1e999\n",
    b"S'a'\n", b'S"a"\n', b"S'\\x41\\q'\n", "S'\u00e9'\n".encode(), b"S''\n", b"S'\n",
    b"V\\u0041\\U0001F600\n", b"V\xff\n",
    b"I1\np 3 \ng+3\n", b"I1\np1_0\ng10\n", b"I1\np-1\n", b"I1\np0x1\n",
    b"I1\nq\x05h\x05", b"I1\nr\x05\x00\x00\x00j\x05\x00\x00\x00",
]


@pytest.mark.parametrize("arg", ARGUMENTS, ids=repr)
def test_the_grammar_takes_whatever_an_unpickler_takes(arg: bytes) -> None:
    for data in (b"(" + arg + b"l.", b"(" + arg + b"cos\nsystem\n(S'x'\ntRl."):
        accepted = _accepted(data)
        end, n, _ = walk(data)
        if accepted:
            assert end == "stop", (data, accepted)
            assert [op.name for op, _, _ in genops(data)][-1] == "STOP"


def test_the_grammar_names_the_global_after_any_argument_form() -> None:
    data = b"(I0x10\nL0o7L\nF 1e3 \nS'\\q'\ncos\nsystem\n(S'x'\ntRl."
    assert "c" in _accepted(data) or "py" in _accepted(data)
    assert [a for op, a, _ in genops(data) if op.name == "GLOBAL"] == ["os system"]


# -- joblib's compressors ------------------------------------------------------------------------

def test_every_joblib_compressor_decompresses_to_the_same_pickle() -> None:
    """joblib.dump wrote the same object under each compressor: the same pickle comes out of
    each (lz4 and the LZMA "alone" format included, by the tool's own decoders)."""
    out = {}
    for c in ("zlib", "gzip", "bz2", "lzma", "xz", "lz4"):
        data = (FILES / f"j_{c}.joblib").read_bytes()
        assert compression(data) == c
        out[c] = decompress(c, data, 1 << 24)
        assert decompress(c, data[:64], 1 << 24, partial=True) == out[c][:len(
            decompress(c, data[:64], 1 << 24, partial=True))]
    assert len(set(out.values())) == 1
    assert b"NumpyArrayWrapper" in out["lz4"]
    compat = (FILES / "j_compat_zf.joblib").read_bytes()
    assert compression(compat) == "compat"
    assert decompress("compat", compat, 1 << 20).startswith(b"\x80\x02")


def test_a_decompression_bomb_is_capped() -> None:
    import zlib

    bomb = zlib.compress(b"\0" * (8 << 20))
    assert len(decompress("zlib", bomb, 1 << 20)) == (1 << 20) + 1
    from inspector.adapters.lz4_frame import decompress as lz4

    lz4_data = (FILES / "j_lz4.joblib").read_bytes()
    assert len(lz4(lz4_data, 100)) == 101
