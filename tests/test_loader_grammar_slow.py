"""Differential proof of the loaders' grammar (slow: the real loaders run in a producer venv).

Hypothesis writes variants of what CPython's unpicklers, ``numpy.load(allow_pickle=True)`` and
``joblib.load`` accept: protocol-0 opcode arguments in every spelling (blanks, signs,
underscores, base prefixes, C-only forms after a NUL, ``\\r``, quoting and escapes), object
dtypes in nested descr forms under every header version and key order, joblib files under each
compressor. Each variant exists twice: with a payload that runs ``touch grammar_marker`` and
with a harmless call. The real loaders read every file in the producer venv (numpy, joblib,
lz4: ``/work/venvs/grammar``, made here when missing). The property: whenever a loader runs the
payload, ``scan`` says dangerous; whenever a loader accepts the harmless twin, the tool examines
it as the loader's format (never "a text file", never "not a checkpoint")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import inspector  # noqa: E402
from inspector.adapters.security.scan import scan_file  # noqa: E402

pytestmark = pytest.mark.slow
VENV = Path("/work/venvs/grammar")
PRODUCER = VENV / "bin" / "python"
PAYLOAD = b"cos\nsystem\n(S'touch grammar_marker'\ntR"
HARMLESS = b"cbuiltins\nlen\n(S'ab'\ntR"

RUNNER = r"""
import json, os, pickle, sys, tempfile, warnings
warnings.simplefilter("ignore")
import joblib, numpy
LOADERS = {
    "pickle.loads": lambda p: pickle.loads(open(p, "rb").read()),
    "pickle._loads": lambda p: pickle._loads(open(p, "rb").read()),
    "joblib.load": lambda p: joblib.load(p),
    "numpy.load": lambda p: numpy.load(p, allow_pickle=True),
}
out = {}
for path in sys.argv[1:]:
    row = out[path] = {}
    names = ["numpy.load"] if path.endswith(".npy") else (
        ["joblib.load"] if path.endswith(".joblib") else ["pickle.loads", "pickle._loads",
                                                          "joblib.load"])
    for name in names:
        with tempfile.TemporaryDirectory() as cwd:
            os.chdir(cwd)
            try:
                LOADERS[name](path)
                row[name] = "accepted"
            except BaseException:
                row[name] = "rejected"
            if os.path.exists("grammar_marker"):
                row[name] = "executed"
            os.chdir("/")
print(json.dumps(out))
"""


def _producer() -> Path:
    check = [str(PRODUCER), "-c", "import numpy, joblib, lz4"]
    if PRODUCER.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return PRODUCER
    try:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=300,
                       capture_output=True)
        subprocess.run([str(PRODUCER), "-m", "pip", "install", "-q", "numpy", "joblib", "lz4"],
                       check=True, timeout=900, capture_output=True)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"no producer venv with numpy, joblib and lz4 at {VENV} ({e})")
    if subprocess.run(check, capture_output=True).returncode != 0:
        pytest.skip(f"the producer venv at {VENV} cannot import numpy, joblib and lz4")
    return PRODUCER


def _load_all(paths: list[Path]) -> dict[str, dict[str, str]]:
    proc = subprocess.run([str(_producer()), "-c", RUNNER, *map(str, paths)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- strategies -------------------------------------------------------------------------------

_BLANK = st.text(" \t\v\f\r", max_size=2)


def _digits(alphabet: str) -> st.SearchStrategy[str]:
    return st.lists(st.text(alphabet, min_size=1, max_size=4), min_size=1,
                    max_size=3).map("_".join)


_NUMBER = st.one_of(
    _digits("0123456789"), _digits("01234567").map("0".__add__),
    _digits("0123456789abcdefABCDEF").map("0x".__add__),
    _digits("01234567").map("0o".__add__), _digits("01").map("0b".__add__),
    st.sampled_from(["00", "01", "0", "0x", "1" * 30]),
)
_INTEGER = st.builds(lambda a, s, n, b, c: a + s + n + b + c, _BLANK,
                     st.sampled_from(["", "+", "-"]), _NUMBER, _BLANK,
                     st.sampled_from(["", "\x00", "\x00zz"]))
_FLOAT = st.builds(lambda a, n, b, c: a + n + b + c, _BLANK, st.one_of(
    st.sampled_from(["inf", "-inf", "nan", "Infinity", "1e3", "1_0.5", ".5", "5.", "1e999"]),
    st.floats(allow_nan=False).map(repr)), _BLANK, st.sampled_from(["", "\x00", "\x00x"]))
_ESCAPES = st.lists(st.sampled_from(["a", "\\x41", "\\n", "\\q", "\\\\", "\\'", "\u00e9", '"']),
                    max_size=4).map("".join)


def _arg() -> st.SearchStrategy[bytes]:
    text = st.one_of(
        _INTEGER.map(lambda s: b"I" + s.encode("latin-1") + b"\n"),
        st.builds(lambda s, ell: b"L" + s.encode("latin-1") + ell + b"\n", _INTEGER,
                  st.sampled_from([b"", b"L"])),
        _FLOAT.map(lambda s: b"F" + s.encode("latin-1") + b"\n"),
        st.builds(lambda q, s: b"S" + q + s.encode() + q + b"\n", st.sampled_from([b"'", b'"']),
                  _ESCAPES),
        _ESCAPES.map(lambda s: b"V" + s.encode("raw_unicode_escape") + b"\n"),
        st.builds(lambda a, b: b"I1\np" + a.encode("latin-1") + b"\ng" + b.encode("latin-1")
                  + b"\n", _INTEGER, _INTEGER),
    )
    return st.builds(lambda parts, crlf: b"".join(
        p.replace(b"\n", b"\r\n") if crlf else p for p in parts),
        st.lists(text, min_size=1, max_size=3), st.booleans())


_OBJECT_CODE = st.sampled_from(["O", "|O", "<O8", ">O", "=O", "O8", "object", "i4,O", "(2,)O"])
_PLAIN_CODE = st.sampled_from(["<i4", "|u1", "<f8", "|V2"])
_NAME = st.sampled_from(["a", "b", "f0", "x_y"])


def _descr() -> st.SearchStrategy[str]:
    """An object dtype in a descr_to_dtype form (the repr NumPy's safe_eval reads)."""
    def field(sub: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.builds(lambda n, d, shape, as_list: (
            f"[{n!r}, {d}{shape}]" if as_list else f"({n!r}, {d}{shape})"),
            _NAME, sub, st.sampled_from(["", ", (1,)"]), st.booleans())

    def fields(sub: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        plain = field(_PLAIN_CODE.map(repr))
        return st.builds(lambda before, obj, after: "[" + ", ".join([*before, obj, *after])
                         + "]", st.lists(plain, max_size=1), field(sub),
                         st.lists(plain, max_size=1))

    leaf = _OBJECT_CODE.map(repr)
    return st.one_of(
        leaf, st.builds(lambda d: f"({d}, (1,))", leaf),
        st.recursive(leaf, fields, max_leaves=3),
        st.sampled_from(["{'aO': 0}", "['aO']", "{'xO'}", "[(('t', 'a'), '|O')]"]),
    )


def _npy(descr: str, version: int, order: list[int], blank: str, body: bytes) -> bytes:
    import struct

    items = [f"'descr':{blank}{descr}", f"'fortran_order':{blank}False",
             "'shape':" + blank + ("(1L,)" if version < 3 and blank == " " else "(1,)")]
    header = ("{" + ", ".join(items[i] for i in order) + "}").encode(
        "utf-8" if version == 3 else "latin1") + b"\n"
    size = struct.pack("<H" if version == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes((version, 0)) + size + header + body


def _check(files: dict[Path, bytes], twins: dict[Path, Path]) -> None:
    for path, data in files.items():
        path.write_bytes(data)
    truth = _load_all(list(files))
    ran = [p for p in files if "executed" in truth[str(p)].values()]
    assert ran, "no variant ran its payload under any loader: the example proves nothing"
    if os.environ.get("GRAMMAR_STATS"):
        print(f"{len(ran)} of {len(files)} files ran the payload under a real loader")
    for path in files:
        row = truth[str(path)]
        if "executed" in row.values():
            res = scan_file(path)
            assert res.verdict == "dangerous", (path.read_bytes()[:200], row, res.kind,
                                                [i.text for i in res.items])
            with pytest.raises(inspector.UnsafeContentError):
                inspector.load(path)
        if path in twins and "accepted" in truth[str(twins[path])].values():
            res = scan_file(twins[path])
            assert res.kind not in ("text", "unknown", "python"), (twins[path].read_bytes()[:200],
                                                                   res.kind)
            try:
                inspector.load(twins[path])
            except inspector.UnknownFormatError as e:  # "a text file, not a checkpoint"
                pytest.fail(f"{twins[path].read_bytes()[:200]!r}: {e}")
            except inspector.InspectorError:
                pass  # read as the format, and refused or broken as such


# No shrinking: each example runs the loaders in a child process, and the failing files of an
# example are named by the assertion already.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate)
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, phases=PHASES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(st.lists(_arg(), min_size=30, max_size=30))
def test_pickle_arguments_in_every_spelling(args: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files: dict[Path, bytes] = {}
        twins: dict[Path, Path] = {}
        for i, arg in enumerate(args):
            for suffix in (".pkl", ".joblib"):
                bad, good = Path(tmp, f"{i}{suffix}"), Path(tmp, f"{i}_ok{suffix}")
                files[bad] = b"(" + arg + PAYLOAD + b"l."
                files[good] = b"(" + arg + HARMLESS + b"l."
                twins[bad] = good
        _check(files, twins)


@SETTINGS
@given(st.lists(st.tuples(_descr(), st.sampled_from([1, 2, 3]), st.permutations([0, 1, 2]),
                          st.sampled_from(["", " ", "  "])), min_size=20, max_size=20))
def test_object_dtypes_in_every_descr_form(forms: list) -> None:
    import pickle

    body = b"(" + PAYLOAD + b"l."  # what np.load unpickles after an object dtype's header
    body_ok = pickle.dumps([1], protocol=2)
    with tempfile.TemporaryDirectory() as tmp:
        files: dict[Path, bytes] = {}
        twins: dict[Path, Path] = {}
        for i, (descr, version, order, blank) in enumerate(forms):
            bad, good = Path(tmp, f"{i}.npy"), Path(tmp, f"{i}_ok.npy")
            files[bad] = _npy(descr, version, order, blank, body)
            files[good] = _npy(descr, version, order, blank, body_ok)
            twins[bad] = good
        _check(files, twins)


@settings(max_examples=3, deadline=None, derandomize=True, phases=PHASES)
@given(st.lists(st.tuples(st.sampled_from(["zlib", "gzip", "bz2", "lzma", "xz", "lz4"]),
                          st.integers(1, 9)), min_size=6, max_size=6))
def test_joblib_under_every_compressor(choices: list[tuple[str, int]]) -> None:
    script = (
        "import joblib, numpy, os, sys\n"
        "class P:\n"
        "    def __reduce__(self): return (os.system, ('touch grammar_marker',))\n"
        "for i, (c, lvl) in enumerate(zip(sys.argv[2::2], sys.argv[3::2])):\n"
        "    joblib.dump({'w': numpy.arange(5.0), 'p': P()}, f'{sys.argv[1]}/{i}.joblib',"
        " compress=(c, int(lvl)))\n"
        "    joblib.dump({'w': numpy.arange(5.0)}, f'{sys.argv[1]}/{i}_ok.joblib',"
        " compress=(c, int(lvl)))\n")
    with tempfile.TemporaryDirectory() as tmp:
        argv = [x for c, lvl in choices for x in (c, str(lvl))]
        subprocess.run([str(_producer()), "-c", script, tmp, *argv], check=True, timeout=300)
        files = {p: p.read_bytes() for p in Path(tmp).glob("*.joblib")}
        twins = {Path(tmp, f"{i}.joblib"): Path(tmp, f"{i}_ok.joblib")
                 for i in range(len(choices))}
        _check(files, twins)
