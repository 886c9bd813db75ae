"""The common HDF5 dataset (contiguous, a standard numeric type) described by direct libhdf5 calls.

On a file of 50,000 small datasets, h5py's per-object Python wrappers (an ObjectID per opened
object, dataspace and datatype, each registered in h5py's weak registry, and a numpy dtype built
per datatype) cost more than libhdf5's own work. :class:`Direct` calls the same libhdf5 that h5py
loaded (found in ``/proc/self/maps``, checked to hold h5py's open file), through :mod:`ctypes`
with the GIL held as h5py holds it, for the one case the walk needs nothing else for: a dataset
with an offset in the file and a datatype equal to one of HDF5's predefined numeric types.
Anything else (a group, chunked, compact, external or virtual storage, another datatype, any
failing call) is handed back to the caller's h5py path, which describes it and reports its
errors exactly as before. Without ``/proc`` (macOS, Windows), :func:`bind` returns None.
"""

from __future__ import annotations

import ctypes
import re

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

HID = ctypes.c_int64  # hid_t since HDF5 1.10
HADDR_UNDEF = (1 << 64) - 1
MAX_RANK = 32  # H5S_MAX_RANK
ENCODABLE_RANK = 255  # the dataspace message's one-byte dimensionality
# libhdf5.so.310 (conda), libhdf5-9e18f0c6.so.320.0.0 (h5py wheel), libhdf5_serial.so.103 (Debian)
LIBHDF5 = re.compile(r"/libhdf5(_serial|_openmpi|_mpich)?(-[0-9a-f]+)?\.(so|dylib)[.0-9]*$")

# Predefined file types a Keras file's datasets use; h5py's numpy dtype for each is computed once.
PREDEFINED = (
    "IEEE_F16LE", "IEEE_F32LE", "IEEE_F64LE", "IEEE_F16BE", "IEEE_F32BE", "IEEE_F64BE",
    "STD_I8LE", "STD_I16LE", "STD_I32LE", "STD_I64LE", "STD_U8LE", "STD_U16LE", "STD_U32LE",
    "STD_U64LE", "STD_I8BE", "STD_I16BE", "STD_I32BE", "STD_I64BE", "STD_U8BE", "STD_U16BE",
    "STD_U32BE", "STD_U64BE",
)


class _Token(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint8 * 16)]  # H5O_token_t (H5public.h, HDF5 >= 1.12)


def _libhdf5_paths() -> list[str]:
    """The libhdf5 files mapped into this process (h5py's wheel, conda's or a distribution's)."""
    paths: dict[str, None] = {}
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if LIBHDF5.search(path):
                    paths[path] = None
    except OSError:
        pass
    return list(paths)


def _declare(lib: ctypes.PyDLL, name: str, restype: Any, *argtypes: Any) -> Any:
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


class Direct:
    """Direct libhdf5 calls on h5py's open file ``fid`` (an h5py FileID)."""

    def __init__(self, lib: ctypes.PyDLL, h5py: Any, fid: Any) -> None:
        d = _declare
        self._fid = fid.id
        self._oopen = d(lib, "H5Oopen", HID, HID, ctypes.c_char_p, HID)
        self._oclose = d(lib, "H5Oclose", ctypes.c_int, HID)
        self._itype = d(lib, "H5Iget_type", ctypes.c_int, HID)
        self._offset = d(lib, "H5Dget_offset", ctypes.c_uint64, HID)
        self._storage = d(lib, "H5Dget_storage_size", ctypes.c_uint64, HID)
        self._dspace = d(lib, "H5Dget_space", HID, HID)
        self._dims = d(lib, "H5Sget_simple_extent_dims", ctypes.c_int, HID, ctypes.c_void_p,
                       ctypes.c_void_p)
        self._sclose = d(lib, "H5Sclose", ctypes.c_int, HID)
        self._dtype = d(lib, "H5Dget_type", HID, HID)
        self._tequal = d(lib, "H5Tequal", ctypes.c_int, HID, HID)
        self._tclose = d(lib, "H5Tclose", ctypes.c_int, HID)
        self._buf = (ctypes.c_uint64 * ENCODABLE_RANK)()
        # Opening by the link's object address skips the path lookup (HDF5 >= 1.12).
        self._token = _Token()
        try:
            self._to_token = d(lib, "H5VLnative_addr_to_token", ctypes.c_int, HID,
                               ctypes.c_uint64, ctypes.POINTER(_Token))
            self._open_token = d(lib, "H5Oopen_by_token", HID, HID, _Token)
        except AttributeError:
            self._to_token = self._open_token = None
        # (h5py TypeID kept open, its hid, numpy dtype) per predefined type; last match first.
        self._types: list[tuple[Any, int, Any]] = []
        for name in PREDEFINED:
            tid = getattr(h5py.h5t, name, None)
            if tid is not None:
                self._types.append((tid, tid.id, tid.dtype))

    def open(self, name: bytes, addr: int | None) -> int:
        """The object of the hard link ``name`` (whose object address is ``addr``): an ID the
        caller owns, or a negative number."""
        if isinstance(addr, int) and self._open_token is not None:
            if self._to_token(self._fid, addr, ctypes.byref(self._token)) >= 0:
                return int(self._open_token(self._fid, self._token))
        return int(self._oopen(self._fid, name, 0))

    def close(self, oid: int) -> None:
        self._oclose(oid)

    def kind(self, oid: int) -> int:
        """The H5I type of ``oid`` (compare with ``h5py.h5i.DATASET``, ``GROUP``)."""
        return int(self._itype(oid))

    def plain(self, oid: int) -> tuple[tuple[int, ...], Any, int, int] | None:
        """(shape, numpy dtype, offset, stored bytes) of the contiguous dataset ``oid`` with a
        predefined numeric type; None when it is anything else or a call fails."""
        offset = self._offset(oid)
        if offset == HADDR_UNDEF:
            return None
        stored = self._storage(oid)
        if not stored:  # 0 is also libhdf5's error value: h5py decides
            return None
        tid = self._dtype(oid)
        if tid < 0:
            return None
        dt = None
        types = self._types
        for i, (_, known, numpy_dtype) in enumerate(types):
            if self._tequal(tid, known) > 0:
                if i:
                    types.insert(0, types.pop(i))
                dt = numpy_dtype
                break
        self._tclose(tid)
        if dt is None:
            return None
        space = self._dspace(oid)
        if space < 0:
            return None
        # The buffer holds any rank a dataspace message can encode (one byte), so a rank
        # libhdf5 would let through cannot write past it.
        rank = self._dims(space, self._buf, None)
        self._sclose(space)
        if not 0 <= rank <= MAX_RANK:
            return None
        return tuple(self._buf[:rank]), dt, offset, stored


def bind(h5py: Any, fid: Any) -> Direct | None:
    """Direct calls on h5py's open file ``fid``, or None where they are not possible."""
    for path in _libhdf5_paths():
        try:
            # PyDLL: the GIL stays held during each call, as during h5py's own calls into
            # libhdf5 (not thread-safe): no other thread's h5py call enters it meanwhile.
            lib = ctypes.PyDLL(path)
            valid = _declare(lib, "H5Iis_valid", ctypes.c_int, HID)
            version = (ctypes.c_uint * 3)()
            _declare(lib, "H5get_libversion", ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                     ctypes.c_void_p)(version, ctypes.byref(version, 4), ctypes.byref(version, 8))
            # The library h5py itself uses: its version, and h5py's file ID is valid in it.
            if (tuple(version) == tuple(h5py.version.hdf5_version_tuple)[:3]
                    and valid(fid.id) > 0):
                return Direct(lib, h5py, fid)
        except (OSError, AttributeError):
            continue
    return None
