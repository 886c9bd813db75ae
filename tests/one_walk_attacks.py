"""Hostile files built from scratch (no producer, no scanner test suite) for the classes where
``scan`` and the listing used to walk a container differently (issue 26: classes 1, 5, 6, 8, 9,
the appended pickle, data prepended to a zip).

Each payload runs ``os.system("touch MARKER")`` under the real loader; every file has its own
marker (``<dir>/ran-<file name>``), so a loader proof names exactly which file ran.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import pickle
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# payloads


def marker(path: Path) -> Path:
    return path.with_name("ran-" + path.name)


def payload(cmd: str, protocol: int = 2) -> bytes:
    """A pickle calling ``os.system(cmd)``, written opcode by opcode."""
    if protocol == 0:
        return b"cos\nsystem\n(V" + cmd.encode() + b"\ntR."
    arg = cmd.encode()
    return (b"\x80" + bytes([protocol]) + b"cos\nsystem\nX" + struct.pack("<I", len(arg)) + arg
            + b"\x85R.")


def touch(path: Path, protocol: int = 2) -> bytes:
    return payload(f"touch {marker(path)}", protocol)


BENIGN = pickle.dumps({"weight": [1.0, 2.0]}, protocol=2)


# ---------------------------------------------------------------------------------------------
# zips


def zip_bytes(members: list[tuple[str, bytes]], stored: bool = True) -> bytes:
    b = io.BytesIO()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are the point
        with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as z:
            for name, data in members:
                z.writestr(name, data)
    return b.getvalue()


def torch_zip(root: str, pkl: bytes, pkl_name: str = "data.pkl") -> bytes:
    return zip_bytes([(f"{root}/{pkl_name}", pkl), (f"{root}/byteorder", b"little"),
                      (f"{root}/version", b"3\n")])


def duplicated(path: Path, copies: int, bad: int, extra: int) -> bytes:
    """``copies`` members named archive/data.pkl, the ``bad``-th the payload, ``extra`` other
    members: which copy torch reads depends on miniz's sort of the whole directory."""
    members = [("archive/version", b"3\n")]
    for i in range(copies):
        members.append(("archive/data.pkl", touch(path) if i == bad else BENIGN))
    members += [(f"archive/x{i}", b"1") for i in range(extra)]
    return zip_bytes(members)


def local_name_differs(path: Path) -> bytes:
    data = bytearray(torch_zip("archive", touch(path)))
    at = data.find(b"archive/data.pkl")  # the first occurrence: the local header's name
    data[at : at + 16] = b"archive/xata.pkl"
    return bytes(data)


def stray_eocd(path: Path, copies: int = 1) -> bytes:
    data = torch_zip("archive", touch(path))
    at = data.rfind(b"PK\x05\x06")
    return data + data[at : at + 22] * copies


def trailing(path: Path) -> bytes:
    return torch_zip("archive", touch(path)) + b"\0" * 100


# ---------------------------------------------------------------------------------------------
# torch's pre-0.4 tar


def _tar(members: list[tuple[str, bytes]], fmt: int = tarfile.GNU_FORMAT) -> bytes:
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return b.getvalue()


def _storages_empty() -> bytes:
    return pickle.dumps(0, protocol=2) + pickle.dumps([], protocol=2)


def _tensors_empty() -> bytes:
    return pickle.dumps(0, protocol=2)


def tar_in_pickle(path: Path, fmt: int = tarfile.GNU_FORMAT, protocol: int = 2) -> bytes:
    return _tar([("storages", _storages_empty()), ("tensors", _tensors_empty()),
                 ("pickle", touch(path, protocol))], fmt)


def tar_in_storages(path: Path) -> bytes:
    return _tar([("storages", touch(path)), ("tensors", _tensors_empty()),
                 ("pickle", BENIGN)])


def tar_in_storage_views(path: Path) -> bytes:
    """One real float storage (its raw bytes skipped by size), then the views pickle."""
    args = b"\x80\x02(X\x01\x00\x00\x000X\x03\x00\x00\x00cpuctorch\nFloatStorage\nq\x00t."
    raw = struct.pack("<q", 2) + struct.pack("<2f", 1.0, 2.0)
    storages = pickle.dumps(1, protocol=2) + args + raw + touch(path)
    return _tar([("storages", storages), ("tensors", _tensors_empty()), ("pickle", BENIGN)])


def tar_in_tensors(path: Path) -> bytes:
    return _tar([("storages", _storages_empty()), ("tensors", pickle.dumps(1, protocol=2)
                                                            + touch(path)),
                 ("pickle", BENIGN)])


def tar_pax_text(path: Path) -> bytes:
    """PAX headers (text) and protocol-0 pickles: printable, the first 4 KiB without NUL would
    pass for text to a sniffer that looks for NUL bytes."""
    return tar_in_pickle(path, tarfile.PAX_FORMAT, protocol=0)


# ---------------------------------------------------------------------------------------------
# NumPy object dtypes


def npy(descr: str, body: bytes, major: int = 1) -> bytes:
    header = ("{'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), }").encode()
    lead = 10 if major == 1 else 12
    header += b" " * (-(lead + len(header) + 1) % 64) + b"\n"
    size = struct.pack("<H", len(header)) if major == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([major, 0]) + size + header + body


DESCRS = ("[('a', '|O')]", "('|O', (2,))", "'O'", "'|O8'", "'i4,O'",
          "[('a', [('b', '|O')])]", "[('x', '<f4'), ('y', ('|O', (3,)))]", "'object'")


# ---------------------------------------------------------------------------------------------
# streams


def compressed(kind: str, data: bytes) -> bytes:
    return {"zlib": zlib.compress, "gzip": gzip.compress, "bz2": bz2.compress,
            "xz": lzma.compress}[kind](data)


def appended(path: Path, protocol: int) -> bytes:
    """A benign pickle, then the payload after its STOP."""
    return pickle.dumps({"a": 1}, protocol=protocol) + touch(path, protocol)


def prepended_zip(path: Path) -> bytes:
    """Bytes before a zip (its end record is found from the end): a Keras-style zip whose
    pickle member is the payload."""
    return b"#!/bin/sh\necho not a zip\n" * 40 + zip_bytes(
        [("metadata.json", b"{}"), ("assets/data.pkl", touch(path))])


def _object_npy(descr: str, p: Path) -> bytes:
    return npy(descr, touch(p))


def _compressed_payload(kind: str, p: Path) -> bytes:
    return compressed(kind, touch(p))


def _appended(protocol: int, p: Path) -> bytes:
    return appended(p, protocol)


def _duplicated(copies: int, bad: int, extra: int, p: Path) -> bytes:
    return duplicated(p, copies, bad, extra)


# name -> (builder, which real loader runs it)
Builder = Callable[[Path], bytes]
ATTACKS: dict[str, tuple[Builder, str]] = {
    # class 1: a torch zip under any root, names matched as miniz matches them
    "root_data.pt": (lambda p: torch_zip("data", touch(p)), "torch"),
    "root_DATA_upper.pt": (lambda p: torch_zip("DATA", touch(p)), "torch"),
    "member_upper.pt": (lambda p: torch_zip("archive", touch(p), "DATA.PKL"), "torch"),
    "root_odd.bin": (lambda p: torch_zip("weights-v2.final", touch(p, 4)), "torch"),
    # class 5: the zip's own disagreements
    "local_name_differs.pt": (local_name_differs, "torch"),
    "stray_eocd.pt": (stray_eocd, "torch"),
    "stray_eocd_x3.pt": (lambda p: stray_eocd(p, 3), "torch"),
    "trailing_zeros.pt": (trailing, "torch"),
    "deflated_member.pt": (lambda p: zip_bytes([("archive/data.pkl", touch(p)),
                                                 ("archive/version", b"3\n")], stored=False),
                           "torch"),
    # class 6: torch's pre-0.4 tar
    "tar_pickle.tar": (tar_in_pickle, "torch"),
    "tar_storages.pt": (tar_in_storages, "torch"),
    "tar_storage_views.pt": (tar_in_storage_views, "torch"),
    "tar_tensors.pt": (tar_in_tensors, "torch"),
    "tar_pax_text.pt": (tar_pax_text, "torch"),
    # class 8: object dtypes in every descr form (.npy), and an .npz member
    **{f"obj_{i}.npy": (partial(_object_npy, d), "numpy") for i, d in enumerate(DESCRS)},
    "obj_v2.npy": (lambda p: npy("[('a', '|O')]", touch(p), major=2), "numpy"),
    "obj_member.npz": (lambda p: zip_bytes([("x.npy", npy("('|O', (2,))", touch(p)))]),
                       "numpy-npz"),
    # streams: compressed (joblib.load), appended pickles (pickle.load until the end)
    **{f"compressed.{k}.pkl": (partial(_compressed_payload, k), "joblib")
       for k in ("zlib", "gzip", "bz2", "xz")},
    **{f"appended_p{n}.pkl": (partial(_appended, n), "pickle-all") for n in (0, 2, 5)},
    "protocol0_text.pkl": (lambda p: touch(p, 0), "pickle"),
    # protocol 0 whose first opcode is a 2 MiB string: no sniff sees past it in 4 KiB
    "protocol0_long_string.dat": (lambda p: b"S'" + b"a" * (2 << 20) + b"'\n0" + touch(p, 0),
                                  "pickle"),
    "prepended.zip": (prepended_zip, "zipfile"),
}
# class 9: duplicates, the payload at each position among 2, 3 and 5 copies
for _n in (2, 3, 5):
    for _bad in range(_n):
        for _extra in (0, 3, 20):
            ATTACKS[f"dup{_n}_bad{_bad}_x{_extra}.pt"] = (
                partial(_duplicated, _n, _bad, _extra), "torch?")


def build(directory: Path) -> list[Path]:
    out = []
    for name, (make, _) in ATTACKS.items():
        p = directory / name
        p.write_bytes(make(p))
        out.append(p)
    return out


# The real loaders, run in the producer venv: prints {file name: whether its marker appeared}.
LOADER_SCRIPT = r"""
import json, os, pickle, sys, warnings, zipfile
warnings.simplefilter("ignore")
import joblib, numpy as np, torch
out = {}
for path, how in json.loads(sys.argv[1]):
    m = os.path.join(os.path.dirname(path), "ran-" + os.path.basename(path))
    try:
        if how.startswith("torch"):
            torch.load(path, weights_only=False)
        elif how == "numpy":
            np.load(path, allow_pickle=True)
        elif how == "numpy-npz":
            z = np.load(path, allow_pickle=True)
            [z[k] for k in z.files]
        elif how == "joblib":
            joblib.load(path)
        elif how == "pickle":
            with open(path, "rb") as f:
                pickle.load(f)
        elif how == "pickle-all":
            with open(path, "rb") as f:
                while f.tell() < os.path.getsize(path):
                    pickle.load(f)
        elif how == "zipfile":
            with zipfile.ZipFile(path) as z:
                pickle.loads(z.read("assets/data.pkl"))
    except Exception as e:
        pass
    out[os.path.basename(path)] = os.path.exists(m)
print(json.dumps(out))
"""
