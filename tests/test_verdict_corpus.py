"""The hostile corpus: every published dangerous global, and the generic ways to reach code.

Built here from the peers' lists (recorded as data in ``adapters/security/lists.py``: picklescan,
fickling, modelscan, plus ours) and from generic forms: protocols 0-5 written by Python's own
pickler, plain/zip/legacy/npy/npz containers, dotted attribute chains, ``getattr`` chains,
``copyreg`` and ``__setstate__`` routes, calls on instances, and Keras Lambda bytecode (files
Keras itself wrote, ``tests/corpus/``). Every case must come out ``dangerous`` and no payload may
run: each case's marker file must be absent afterwards. A sample of the live payloads is shown to
run under ``pickle.loads`` (they are not duds).
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_malicious_corpus import _Call, _NamingPickler, _TorchName

from inspector.adapters.security import lists as L
from inspector.adapters.security import verdicts as V
from inspector.adapters.security.scan import scan_file
from inspector.adapters.security.vetted import VETTED

from conftest import run_cli
from test_torch_adapter import (
    BUILD,
    EMPTY_TUPLE,
    MARK,
    NEWOBJ,
    NONE,
    OBJ,
    PROTO2,
    REDUCE,
    dict_of,
    floats,
    g,
    pkl,
    s,
    tensor,
    tup,
    write_legacy,
    write_zip,
)

CORPUS = Path(__file__).parent / "corpus"
PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)
PROBE = "run"  # the name used for a module listed as a whole


def _entries() -> list[tuple[str, str, str]]:
    """(source, module, qualname) for every entry of every list; whole modules get PROBE."""
    out = []
    for source, table in (
        ("picklescan", L.PICKLESCAN),
        ("modelscan", L.MODELSCAN),
        ("fickling-ml", L.FICKLING_ML_NAMES),
        ("inspector", L.INSPECTOR),
    ):
        for module, names in table.items():
            for name in (PROBE,) if names == L.ALL else names:
                out.append((source, module, name))
    for module in L.FICKLING_MODULES + L.FICKLING_ML_MODULES:
        out.append(("fickling", module, PROBE))
    return out


ENTRIES = _entries()


# ---------------------------------------------------------------------------------------------
# writers


def dumps(obj, protocol: int) -> bytes:
    buf = io.BytesIO()
    _NamingPickler(buf, protocol).dump(obj)
    return buf.getvalue()


def npy(payload: bytes) -> bytes:
    """An object-dtype .npy: numpy.save's header, then the array's pickle."""
    text = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
    pad = 64 - (10 + len(text) + 1) % 64
    header = (text + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + payload


def containers(tmp: Path, payload: bytes, tag: str) -> list[Path]:
    """The payload pickle as a plain pickle, a torch zip (odd root, odd extension), a legacy
    torch file, an object .npy and a .npz member."""
    out = [tmp / f"{tag}.pkl"]
    out[0].write_bytes(payload)
    out.append(write_zip(tmp / f"{tag}.bin", payload, {}, root="weights-v2"))
    out.append(write_legacy(tmp / f"{tag}.legacy", payload, [], []))
    out.append(tmp / f"{tag}.npy")
    out[-1].write_bytes(npy(payload))
    out.append(tmp / f"{tag}.npz")
    with zipfile.ZipFile(out[-1], "w") as z:
        z.writestr("w.npy", npy(payload))
    return out


def assert_dangerous(path: Path, needle: str, marker: Path) -> None:
    r = scan_file(path)
    assert not marker.exists(), f"the payload of {path.name} ran"
    assert r.verdict == "dangerous", (path.name, r.to_dict())
    text = " ".join(i.text for i in r.items if i.level == "dangerous")
    assert needle in text, (needle, text)


# ---------------------------------------------------------------------------------------------
# the published lists


@pytest.mark.parametrize("source,module,name", ENTRIES, ids=lambda x: str(x))
def test_every_list_entry_is_dangerous_however_used(source, module, name):
    for use in (V.CALLED, V.CONSTRUCTED, V.NAMED):
        v = V.verdict(module, name, {use})
        assert v.level == V.DANGEROUS, (source, module, name, use, v)


@pytest.mark.parametrize("source,module,name", ENTRIES, ids=lambda x: str(x))
def test_every_list_entry_in_every_container_and_protocol(tmp_path, source, module, name):
    marker = tmp_path / "pwned"
    fn = _TorchName(module, name)
    for protocol in PROTOCOLS:
        # called with a command that would create the marker, and only named (a dict value)
        for form, obj in (
            ("call", {"x": _Call(fn, f"touch {marker}")}),
            ("named", {"x": fn}),
        ):
            for path in containers(tmp_path, dumps(obj, protocol), f"{form}-p{protocol}"):
                assert_dangerous(path, f"{module}.{name}", marker)


def test_vetted_set_and_lists_do_not_overlap():
    """No vetted entry is on a list by exact name; whole-module exemptions are explicit. Each is
    safe for the uses it was vetted for."""
    for name, (_, kinds, _) in VETTED.items():
        module, _, qual = name.rpartition(".")
        uses = {{"call": V.CALLED, "value": V.MEMBER, "new": V.CONSTRUCTED}[k]
                for k in kinds.split() if k in ("call", "value", "new")} or {V.NAMED}
        assert V.verdict(module, qual, uses).level == V.SAFE, name
        assert name not in V.EXACT, name


def test_unknown_global_is_never_safe():
    """Constructed, called, or called with one plain value (an Enum's shape): dangerous; only a
    name never invoked is foreign."""
    assert V.verdict("mylib.models", "Net", {V.CONSTRUCTED}).level == V.DANGEROUS
    assert V.verdict("mylib.models", "Color", {V.CONSTRUCTED, V.MEMBER}).level == V.DANGEROUS
    assert V.verdict("mylib.models", "Net", {V.NAMED}).level == V.FOREIGN
    assert V.verdict("mylib.utils", "run_command", {V.CALLED}).level == V.DANGEROUS


def test_a_vetted_name_used_beyond_its_vetting_is_dangerous():
    enum = V.verdict("transformers.trainer_utils", "IntervalStrategy", {V.CONSTRUCTED},
                     ran=["__setstate__"])
    assert enum.level == V.DANGEROUS and "vetted only to" in enum.why
    attrs = V.verdict("lightning.fabric.utilities.data", "AttributeDict", {V.CONSTRUCTED},
                      ran=["__setitem__", "__setstate__"])
    assert attrs.level == V.DANGEROUS
    assert V.verdict("lightning.fabric.utilities.data", "AttributeDict", {V.CONSTRUCTED},
                     ran=["__setitem__"]).level == V.SAFE


# ---------------------------------------------------------------------------------------------
# generic forms


def _import_os():
    import builtins

    return _Call(builtins.__import__, "os")


def _generic(marker: Path) -> dict[str, tuple[object, str]]:
    """name -> (object whose pickle is the payload, what the verdict must name)."""
    import builtins

    cmd = f"touch {marker}"
    code = f"open({str(marker)!r}, 'w').close()"
    n = _TorchName
    return {
        "eval.__call__ chain": (_Call(n("builtins", "eval.__call__"), code), "builtins.eval"),
        "module attribute chain": (_Call(n("posixpath", "os.system"), cmd), "os.system"),
        "method chain on an instance": (
            _Call(n("bdb", "Bdb.run"), _Call(n("bdb", "Bdb")), code),
            "bdb.Bdb.run",
        ),
        "getattr chain": (_Call(_Call(builtins.getattr, _import_os(), "system"), cmd),
                          "builtins.getattr"),
        "timeit": (_Call(n("timeit", "timeit"), code), "timeit.timeit"),
        "cProfile.run": (_Call(n("cProfile", "run"), code), "cProfile.run"),
        "pydoc.pipepager": (_Call(n("pydoc", "pipepager"), "x", cmd), "pydoc.pipepager"),
        "uuid._get_command_stdout": (
            _Call(n("uuid", "_get_command_stdout"), "touch", str(marker)),
            "uuid._get_command_stdout",
        ),
        "runpy._run_code": (_Call(n("runpy", "_run_code"), code, {}), "runpy._run_code"),
        "nested pickle": (_Call(n("pickle", "loads"), b"cos\nsystem\n."), "pickle.loads"),
        "torch.storage._load_from_bytes": (
            _Call(n("torch.storage", "_load_from_bytes"), b"x"),
            "torch.storage._load_from_bytes",
        ),
        "unlisted call": (_Call(n("mylib.tools", "run_command"), cmd), "mylib.tools.run_command"),
        "call through a dunder": (
            _Call(n("mylib.models", "Net.__init__.__globals__"), "x"),
            "__globals__",
        ),
        "logging.FileHandler": (_Call(n("logging", "FileHandler"), str(marker)),
                                "logging.FileHandler"),
        "_xxsubinterpreters": (_Call(n("_xxsubinterpreters", "create")), "_xxsubinterpreters"),
        "network client": (_Call(n("smtplib", "SMTP"), "localhost"), "smtplib.SMTP"),
    }


GENERIC = list(_generic(Path("/x")))


@pytest.mark.parametrize("case", GENERIC)
def test_generic_forms_every_protocol_and_container(tmp_path, case):
    marker = tmp_path / "pwned"
    obj, needle = _generic(marker)[case]
    for protocol in PROTOCOLS:
        data = dumps({"evil": obj}, protocol)
        for path in containers(tmp_path, data, f"p{protocol}"):
            assert_dangerous(path, needle, marker)


def _hand(marker: Path) -> dict[str, tuple[bytes, str]]:
    """Opcode-level forms Python's pickler does not write by itself."""
    cmd = s(f"touch {marker}")
    code = s(f"open({str(marker)!r}, 'w').close()")
    ns = g("argparse", "Namespace") + EMPTY_TUPLE + NEWOBJ
    return {
        # BUILD (None, {"__setstate__": f}) plants f on the instance; the next BUILD calls it
        "planted __setstate__ (listed)": (
            ns + tup(NONE, dict_of(("__setstate__", g("builtins", "exec")))) + BUILD + code
            + BUILD,
            "builtins.exec",
        ),
        "planted __setstate__ (unlisted)": (
            ns + tup(NONE, dict_of(("__setstate__", g("mylib", "hook")))) + BUILD + cmd + BUILD,
            "mylib.hook",
        ),
        "planted append": (
            ns + tup(NONE, dict_of(("append", g("mylib", "sink")))) + BUILD + cmd + b"a",
            "mylib.sink",
        ),
        "copyreg._reconstructor base": (
            g("copyreg", "_reconstructor") + tup(g("mylib", "Obj"), g("mylib", "Base"), cmd)
            + REDUCE,
            "mylib.Base",
        ),
        "copy_reg spelling, protocol 0": (
            g("copy_reg", "_reconstructor") + tup(g("mylib", "Obj"), g("mylib", "Base"), cmd)
            + REDUCE,
            "mylib.Base",
        ),
        "INST": (MARK + cmd + b"imylib\nrun\n", "mylib.run"),
        "OBJ": (MARK + g("mylib", "run") + cmd + OBJ, "mylib.run"),
        "NEWOBJ of a listed class": (
            g("subprocess", "Popen") + tup(cmd) + NEWOBJ, "subprocess.Popen"
        ),
        "calling a constructed instance": (
            g("mylib", "Runner") + EMPTY_TUPLE + NEWOBJ + tup(cmd) + REDUCE, "mylib.Runner"
        ),
        "_rebuild_from_type_v2 func": (
            g("torch._tensor", "_rebuild_from_type_v2")
            + tup(g("mylib", "make"), g("torch", "Tensor"), tup(cmd), dict_of())
            + REDUCE,
            "mylib.make",
        ),
        "python 2 module name": (g("commands", "getoutput") + tup(cmd) + REDUCE, "commands"),
    }


HAND = list(_hand(Path("/x")))


@pytest.mark.parametrize("case", HAND)
def test_opcode_forms_every_container(tmp_path, case):
    marker = tmp_path / "pwned"
    body, needle = _hand(marker)[case]
    data = pkl(dict_of(("evil", body)), PROTO2)
    for path in containers(tmp_path, data, "hand"):
        assert_dangerous(path, needle, marker)
    # beside a real tensor, in a torch zip: the listing verbs refuse it in one line
    zipped = write_zip(
        tmp_path / "with_tensor.pt",
        pkl(dict_of(("weight", tensor("0", 4, (2, 2))), ("evil", body)), PROTO2),
        {"0": floats(4)},
    )
    assert_dangerous(zipped, needle, marker)


# (not timeit: it runs its statement a million times, ~50 s of file opens)
@pytest.mark.parametrize("case", ["getattr chain", "eval.__call__ chain", "runpy._run_code",
                                  "method chain on an instance", "module attribute chain"])
def test_generic_payloads_are_live_under_pickle(tmp_path, case):
    """The same bytes DO run under pickle.loads: the corpus is not made of duds."""
    marker = tmp_path / "pwned"
    obj, _ = _generic(marker)[case]
    blob = tmp_path / "payload.pkl"
    blob.write_bytes(dumps({"evil": obj}, 4))
    subprocess.run(
        [sys.executable, "-c", "import pickle,sys; pickle.loads(open(sys.argv[1],'rb').read())",
         str(blob)],
        cwd=tmp_path, timeout=60, capture_output=True,
    )
    assert marker.exists()


@pytest.mark.parametrize("case", ["planted __setstate__ (listed)"])
def test_hand_payloads_are_live_under_pickle(tmp_path, case):
    marker = tmp_path / "pwned"
    body, _ = _hand(marker)[case]
    blob = tmp_path / "payload.pkl"
    blob.write_bytes(pkl(body, PROTO2))
    subprocess.run(
        [sys.executable, "-c", "import pickle,sys; pickle.loads(open(sys.argv[1],'rb').read())",
         str(blob)],
        cwd=tmp_path, timeout=60, capture_output=True,
    )
    assert marker.exists()


# ---------------------------------------------------------------------------------------------
# Keras Lambda layers (files Keras 3.15.1 wrote; see tests/corpus/make_keras_lambda.py)

KERAS_MARKER = Path("/tmp/inspector-corpus-keras-lambda-pwned")


@pytest.mark.parametrize("name", ["lambda_v3.keras", "lambda_legacy.h5"])
def test_keras_written_lambda_is_dangerous(tmp_path, name):
    truth = json.loads((CORPUS / "keras_lambda.truth.json").read_text())
    assert truth["files"][name]["payload_ran_under_keras_load_model"] is True
    KERAS_MARKER.unlink(missing_ok=True)
    path = tmp_path / name
    shutil.copy(CORPUS / name, path)
    assert_dangerous(path, "Lambda layer 'payload'", KERAS_MARKER)
    for verb in (["show"], ["show", "--globals"]):
        run_cli(*verb, str(path))
    assert not KERAS_MARKER.exists()


def test_keras2_lambda_config_is_dangerous(tmp_path):
    """Keras 2 wrote a Lambda's function as [base64 marshal, defaults, closure] with
    function_type "lambda": assembled here from the Keras-written file, as Keras 2 lays it out
    (keras 2.x Lambda.get_config -> func_dump)."""
    import h5py

    path = tmp_path / "keras2_lambda.h5"
    shutil.copy(CORPUS / "lambda_legacy.h5", path)
    with h5py.File(path, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        for layer in config["config"]["layers"]:
            if layer["class_name"] == "Lambda":
                code = layer["config"]["function"]["config"]["code"]
                layer["config"]["function"] = [code, None, None]
                layer["config"]["function_type"] = "lambda"
        f.attrs["model_config"] = json.dumps(config)
    assert_dangerous(path, "Keras 2 func_dump", KERAS_MARKER)


# ---------------------------------------------------------------------------------------------
# one policy for every verb


def _evil_copy_of_real_fixture(tmp_path: Path, marker: Path) -> Path:
    """fixtures/torch/seed001_model1.pt (written by torch) with one more state-dict entry whose
    value is a timeit.timeit payload, appended as SETITEM before the final STOP."""
    from conftest import FIXTURES

    src = FIXTURES / "torch" / "seed001_model1.pt"
    obj, _ = _generic(marker)["timeit"]
    payload = dumps(obj, 2)[2:-1]  # no PROTO, no STOP
    out = tmp_path / "seed001_model1_evil.pt"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("/data.pkl"):
                assert data.endswith(b".")
                data = data[:-1] + s("evil") + payload + b"s."
            zout.writestr(info, data)
    return out


@pytest.mark.parametrize("verb", [["show"], ["check"], ["diff", "{real}"]])
def test_every_verb_refuses_a_dangerous_pickle(tmp_path, verb):
    from conftest import FIXTURES

    marker = tmp_path / "pwned"
    path = _evil_copy_of_real_fixture(tmp_path, marker)
    real = str(FIXTURES / "torch" / "seed001_model1.pt")
    args = [a.replace("{real}", real) for a in verb]
    proc = run_cli(*args, str(path))
    assert proc.returncode == 2, proc
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "timeit.timeit (would be called" in err and "refused" in err and str(path) in err
    allowed = run_cli(*args, "--allow-unsafe", str(path))
    assert allowed.returncode in (0, 1), allowed.stderr
    if verb == ["check"]:  # the same tensors verify OK in the real file; never here
        assert allowed.returncode == 1
        assert "UNSAFE" in allowed.stdout and ": OK" not in allowed.stdout
        assert run_cli("check", real).returncode == 0
    globals_view = run_cli("show", "--globals", str(path))
    assert globals_view.returncode == 1
    assert not marker.exists()


def test_scan_exit_codes(tmp_path):
    marker = tmp_path / "pwned"
    obj, _ = _generic(marker)["timeit"]
    evil = write_zip(tmp_path / "evil.pt", dumps({"evil": obj}, 2), {})
    proc = run_cli("scan", str(evil))
    assert proc.returncode == 1 and proc.stdout.startswith("dangerous")
    assert "timeit.timeit" in proc.stdout and "1 dangerous" in proc.stdout
    proc = run_cli("scan", "--format", "json", str(tmp_path))
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["summary"]["dangerous"] == 1
    assert run_cli("scan", str(tmp_path / "missing")).returncode == 2
    assert run_cli("scan").returncode == 2
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------
# pickles inside a pickle: torch.storage._load_from_bytes(b"<a torch.save file>")


def _nested(tmp_path: Path, inner_body: bytes) -> bytes:
    """A plain pickle calling torch.storage._load_from_bytes on a torch zip's bytes."""
    inner = write_zip(tmp_path / "inner.pt", pkl(inner_body, PROTO2), {"0": floats(4)})
    blob = inner.read_bytes()
    arg = b"C" + bytes([len(blob)]) + blob if len(blob) < 256 else (
        b"B" + struct.pack("<I", len(blob)) + blob
    )
    return b"\x80\x03" + g("torch.storage", "_load_from_bytes") + tup(arg) + REDUCE + b"."


def test_nested_torch_save_with_a_payload_is_dangerous(tmp_path):
    marker = tmp_path / "pwned"
    body = g("os", "system") + tup(s(f"touch {marker}")) + REDUCE
    path = tmp_path / "outer.pkl"
    path.write_bytes(_nested(tmp_path, body))
    assert_dangerous(path, "the nested bytes: os.system", marker)
    for container in containers(tmp_path, path.read_bytes(), "nested"):
        assert_dangerous(container, "os.system", marker)


def test_nested_torch_save_of_a_tensor_is_foreign_not_safe(tmp_path):
    path = tmp_path / "outer.pkl"
    path.write_bytes(_nested(tmp_path, tensor("0", 4, (2, 2))))
    r = scan_file(path)
    assert r.verdict == "foreign", r.to_dict()
    assert "nested bytes were examined" in r.items[0].text
