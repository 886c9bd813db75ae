"""A corpus of malicious torch checkpoints, every protocol 0-5, zip and legacy containers.

Unlike the hand-assembled pickles of ``test_torch_adapter``, these are written by Python's own
pickler (``pickle._Pickler``) from objects whose ``__reduce__`` returns the payload, so each
protocol gets the opcodes Python itself chooses for it (GLOBAL or STACK_GLOBAL, BINGET or
MEMOIZE, FRAME, BINUNICODE8 ...). The torch parts (``_rebuild_tensor_v2``, ``FloatStorage``) are
stand-ins written under torch's names, so no torch is needed. For every case: the marker file the
payload would create does not exist, the real tensor is still listed, the dangerous global is
reported, and ``inspector show`` refuses in one line with exit 2.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
from collections import OrderedDict
from pathlib import Path

import pytest

from conftest import run_cli
from hostile import assert_clean_error
from test_torch_adapter import floats, open_file, write_legacy, write_zip

PROTOCOLS = range(0, pickle.HIGHEST_PROTOCOL + 1)


class _TorchName:
    """A stand-in pickled under a torch global's name."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle requires reduce callables to be callable
        raise AssertionError("stand-ins are never called")


REBUILD = _TorchName("torch._utils", "_rebuild_tensor_v2")
FLOAT_STORAGE = _TorchName("torch", "FloatStorage")


class _Storage:
    def __init__(self, key: str, numel: int) -> None:
        self.key, self.numel = key, numel


class _Tensor:
    def __init__(self, storage: _Storage, shape: tuple[int, ...]) -> None:
        self.storage, self.shape = storage, shape

    def __reduce__(self):
        stride = (self.shape[1], 1) if len(self.shape) == 2 else (1,)
        return (REBUILD, (self.storage, 0, self.shape, stride, False, OrderedDict()))


class _Call:
    """Pickles as ``func(*args)``; ``func`` may itself be a ``_Call`` (a reduce chain)."""

    def __init__(self, func, *args) -> None:
        self.func, self.args = func, args

    def __call__(self, *args):
        raise AssertionError("never called while pickling")

    def __reduce__(self):
        return (self.func, self.args)


class _NamingPickler(pickle._Pickler):
    """Python's own (pure-Python) pickler, naming stand-ins for any ``module.name`` (GLOBAL or
    STACK_GLOBAL as the protocol dictates)."""

    def save_global(self, obj, name=None):
        if not isinstance(obj, _TorchName):
            return super().save_global(obj, name)
        if self.proto >= 4:
            self.save(obj.module)
            self.save(obj.name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[_TorchName] = save_global


class _Pickler(_NamingPickler):
    """The naming pickler with torch's persistent ids for storages."""

    def __init__(self, file, protocol: int, legacy: bool) -> None:
        super().__init__(file, protocol)
        self.legacy = legacy

    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            pid = ("storage", FLOAT_STORAGE, obj.key, "cpu", obj.numel)
            return pid + (None,) if self.legacy else pid
        return None


def _dumps(obj, protocol: int, legacy: bool) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol, legacy).dump(obj)
    return buf.getvalue()


def _payloads(marker: Path) -> dict[str, tuple[object, str]]:
    """name -> (object whose pickle is the payload, the global the tool must report)."""
    import builtins
    import subprocess as sp

    cmd = f"touch {marker}"
    code = f"open({str(marker)!r}, 'w').write('pwned')"
    imported_os = _Call(builtins.__import__, "os")
    return {
        "os.system": (_Call(os.system, cmd), os.system.__module__ + ".system"),
        "subprocess.Popen": (_Call(sp.Popen, ["touch", str(marker)]), "subprocess.Popen"),
        "builtins.eval": (_Call(builtins.eval, code), "builtins.eval"),
        "builtins.exec": (_Call(builtins.exec, code), "builtins.exec"),
        "getattr-chain": (
            _Call(_Call(builtins.getattr, imported_os, "system"), cmd),
            "builtins.getattr",
        ),
        "__import__": (_Call(builtins.__import__, "os"), "builtins.__import__"),
        "shared-memo": (  # the same callable reused through the memo in two places
            [_Call(os.system, cmd), _Call(os.system, cmd + "2")],
            os.system.__module__ + ".system",
        ),
    }


PAYLOADS = list(_payloads(Path("/x")))


def _evil_checkpoint(tmp_path: Path, container: str, protocol: int, payload: str) -> Path:
    marker = tmp_path / "pwned"
    value, _ = _payloads(marker)[payload]
    legacy = container == "legacy"
    state = {"weight": _Tensor(_Storage("0", 4), (2, 2)), "evil": value}
    if protocol == 0:  # protocol 0 cannot hold torch's tuple persistent ids: payload only
        del state["weight"]
    data = _dumps(state, protocol, legacy)
    path = tmp_path / f"evil-{container}-p{protocol}.pt"
    if legacy:
        if "weight" not in state:
            return write_legacy(path, data, [], [])
        return write_legacy(path, data, ["0"], [(4, floats(4))])
    return write_zip(path, data, {"0": floats(4)})


@pytest.mark.parametrize("container", ["zip", "legacy"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_is_inert_and_reported(tmp_path, container, protocol, payload):
    marker = tmp_path / "pwned"
    _, global_name = _payloads(marker)[payload]
    path = _evil_checkpoint(tmp_path, container, protocol, payload)
    ck = open_file(path)
    assert not marker.exists(), "the payload ran"
    expected = [] if protocol == 0 else [("weight", (2, 2))]
    assert [(t.stored_name, t.shape) for t in ck.tensors] == expected
    # protocols < 3 store Python 2 names (__builtin__.eval, commands.Popen); the finding names
    # both the stored global and what Python 3 maps it to
    dangerous = " ".join(f.message for f in ck.findings if f.severity == "danger")
    assert global_name in dangerous, ck.findings


@pytest.mark.parametrize("container", ["zip", "legacy"])
@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_cli_refuses_every_protocol(tmp_path, container, protocol):
    marker = tmp_path / "pwned"
    path = _evil_checkpoint(tmp_path, container, protocol, "os.system")
    refused = run_cli("show", str(path))
    assert_clean_error(refused, str(path), "refused", "system")
    listed = run_cli("show", "--allow-unsafe", "--format", "json", str(path))
    assert listed.returncode == 0, listed.stderr
    expected = [] if protocol == 0 else ["weight"]
    assert [t["name"] for t in json.loads(listed.stdout)["tensors"]] == expected
    assert not marker.exists(), "the payload ran"


@pytest.mark.parametrize("payload", ["os.system", "builtins.eval", "getattr-chain"])
def test_corpus_is_live_under_plain_pickle(tmp_path, payload):
    """The same data.pkl DOES run under pickle.loads (torch stand-ins aside): not duds."""
    import sys

    marker = tmp_path / "pwned"
    value, _ = _payloads(marker)[payload]
    blob = tmp_path / "payload.pkl"
    blob.write_bytes(_dumps({"evil": value}, 2, legacy=False))
    subprocess.run(
        [sys.executable, "-c", "import pickle,sys; pickle.loads(open(sys.argv[1],'rb').read())",
         str(blob)],
        cwd=tmp_path,
        timeout=60,
        capture_output=True,
    )
    assert marker.exists()


def _with_pid(tmp_path: Path, pid: tuple, name: str) -> Path:
    """A zip checkpoint whose only tensor's persistent id is ``pid`` (persistent_load abuse)."""

    class P(_Pickler):
        def persistent_id(self, obj):
            return pid if isinstance(obj, _Storage) else None

    buf = io.BytesIO()
    P(buf, 2, False).dump({"weight": _Tensor(_Storage("0", 4), (2, 2))})
    return write_zip(tmp_path / name, buf.getvalue(), {"0": floats(4)})


@pytest.mark.parametrize(
    "pid,needle",
    [
        (("storage", FLOAT_STORAGE, "../../etc/passwd", "cpu", 4), "passwd"),
        (("storage", FLOAT_STORAGE, "0", "cpu", 2**62), "0"),
        (("storage", FLOAT_STORAGE, "0", "cpu", -4), "0"),
        (("module", FLOAT_STORAGE, "0", "cpu", 4), "module"),
        (("storage",), "storage"),
        ("storage", "storage"),
        (("storage", "not-a-type", "0", "cpu", 4), "not-a-type"),
    ],
)
def test_persistent_load_abuse_is_a_clean_error(tmp_path, pid, needle):
    path = _with_pid(tmp_path, pid, "pid.pt")
    proc = run_cli("show", str(path))
    err = assert_clean_error(proc, str(path))
    assert needle in err or "storage" in err, err


@pytest.mark.parametrize("container", ["zip", "legacy"])
def test_globals_view_lists_what_the_pickle_references(tmp_path, container):
    """`show --globals` is never refused: it is how a user looks before trusting a file; it
    exits 1 when a global is dangerous (as `scan` does)."""
    marker = tmp_path / "pwned"
    path = _evil_checkpoint(tmp_path, container, 4, "getattr-chain")
    proc = run_cli("show", "--globals", "--format", "json", str(path))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    verdict = {g["name"]: g["severity"] for g in doc["globals"]}
    assert verdict["torch._utils._rebuild_tensor_v2"] == "allowed"
    assert verdict["torch.FloatStorage"] == "allowed"
    assert verdict["builtins.getattr"] == "danger"
    assert verdict["builtins.__import__"] == "danger"
    table = run_cli("show", "--globals", str(path))
    # the verdict says what is known (and why, from the verdict engine), never more
    assert table.returncode == 1 and "dangerous" in table.stdout
    assert "can execute code" not in table.stdout
    assert not marker.exists(), "the payload ran"


def test_globals_view_on_a_format_without_pickle(cli):
    from conftest import FIXTURES

    proc = cli("show", "--globals", str(FIXTURES / "safetensors" / "dtype_zoo.safetensors"))
    assert proc.returncode == 0 and "no pickle in this format" in proc.stdout
