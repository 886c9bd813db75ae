"""The other ways of listing a checkpoint, one per process: ``python ways.py WAY PATH``.

Each way lists every tensor's name, shape and dtype and prints the tensor count. ``floor-*`` ways
are the plain-Python (stdlib, or h5py's low-level API for HDF5) header-only floor; ``lazy-*`` the
framework's own cheap way; ``naive-*`` the framework's full load. Imports happen inside each way so
that a process pays only for what it uses.
"""

from __future__ import annotations

import sys

# torch storage class -> bytes per element (torch/storage.py _dtype_to_storage_type_map).
_TORCH_ITEMSIZE = {
    "DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2,
    "LongStorage": 8, "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1, "ByteStorage": 1,
    "BoolStorage": 1, "UntypedStorage": 1,
}  # fmt: skip


def _stub_unpickler(data_file, persistent):
    """A pickle loader that builds tuples instead of torch objects (torch files only)."""
    import pickle

    def rebuild(*args):
        return args

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) == ("collections", "OrderedDict"):
                return dict
            if module == "torch" and name.endswith("Storage"):
                return name
            return rebuild

        def persistent_load(self, pid):
            persistent.append(pid)
            return pid

    return Unpickler(data_file, encoding="latin1")


def _shapes_from_state_dict(obj) -> dict:
    # _rebuild_tensor_v2(storage, offset, size, stride, ...): storage is the persistent id tuple
    # ('storage', StorageClass, key, location, numel).
    return {k: (list(v[2]), v[0][1]) for k, v in obj.items()}


def floor_torch_zip(path: str) -> int:
    import io
    import zipfile

    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("data.pkl") and n.count("/") <= 1)
        data = z.read(name)
    obj = _stub_unpickler(io.BytesIO(data), []).load()
    return len(_shapes_from_state_dict(obj))


def floor_torch_legacy(path: str) -> int:
    import os
    import struct

    storages: list = []
    with open(path, "rb") as f:
        for _ in range(3):  # magic number, protocol version, sys_info
            _stub_unpickler(f, []).load()
        obj = _stub_unpickler(f, storages).load()
        keys = _stub_unpickler(f, []).load()
        types = {pid[2]: pid[1] for pid in storages}
        for key in keys:  # an 8-byte element count, then the data, skipped
            (count,) = struct.unpack("<q", f.read(8))
            f.seek(count * _TORCH_ITEMSIZE[types[key]], os.SEEK_CUR)
    return len(_shapes_from_state_dict(obj))


def _safetensors_header(path: str) -> dict:
    import json
    import struct

    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return {k: (v["shape"], v["dtype"]) for k, v in header.items()}


def floor_safetensors(path: str) -> int:
    return len(_safetensors_header(path))


def floor_safetensors_rows(path: str) -> int:
    """A reference, not a floor: the JSON report's tensor rows alone, written the direct way:
    json.loads of the header, one dict per tensor with the stored fields a row has (name,
    stored_name, shape, dtype, role, numel, nbytes, offset, file), json.dumps. No checks, no
    groups, no per-layer records."""
    import json
    import math
    import struct

    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    start = 8 + n
    rows = [{"name": k, "stored_name": k, "shape": v["shape"], "dtype": v["dtype"],
             "role": "parameter", "numel": math.prod(v["shape"]),
             "nbytes": v["data_offsets"][1] - v["data_offsets"][0],
             "offset": start + v["data_offsets"][0], "file": None} for k, v in header.items()]
    sys.stdout.write(json.dumps(rows) + "\n")
    return len(rows)


def floor_safetensors_json(path: str) -> int:
    """Issue 18's floor for ``show --format json``: struct + json.loads + json.dumps of the
    header, written out (to stdout, as the inspector writes its report), then the count."""
    import json
    import struct

    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    sys.stdout.write(json.dumps(header) + "\n")
    header.pop("__metadata__", None)
    return len(header)


def floor_safetensors_sharded(path: str) -> int:
    import json
    import os

    with open(path, encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]
    base = os.path.dirname(path)
    out: dict = {}
    for shard in dict.fromkeys(weight_map.values()):
        out.update(_safetensors_header(os.path.join(base, shard)))
    return len(out)


def floor_mxnet(path: str) -> int:
    """V2/V3 dense records (what mx.nd.save writes): struct reads and a seek over each array."""
    import math
    import os
    import struct

    itemsize = {0: 4, 1: 8, 2: 2, 3: 1, 4: 4, 5: 1, 6: 8, 7: 1, 12: 2}
    with open(path, "rb") as f:
        _magic, _reserved, n = struct.unpack("<QQQ", f.read(24))
        shapes = []
        for _ in range(n):
            _version, _stype, ndim = struct.unpack("<Iii", f.read(12))
            shape = struct.unpack(f"<{ndim}q", f.read(8 * ndim))
            _dev_type, _dev_id, flag = struct.unpack("<iii", f.read(12))
            shapes.append((shape, flag))
            f.seek(math.prod(shape) * itemsize[flag], os.SEEK_CUR)
        (k,) = struct.unpack("<Q", f.read(8))
        names = []
        for _ in range(k):
            (length,) = struct.unpack("<Q", f.read(8))
            names.append(f.read(length).decode())
    return len(dict(zip(names, shapes, strict=True)))


def floor_hdf5(path: str) -> int:
    """h5py's low-level API: visit every object, open each dataset for its shape and dtype."""
    import h5py

    fid = h5py.h5f.open(path.encode(), h5py.h5f.ACC_RDONLY)
    out = {}

    def visit(name, info):
        if info.type == h5py.h5o.TYPE_DATASET:
            d = h5py.h5d.open(fid, name)
            out[name] = (d.shape, d.dtype)

    h5py.h5o.visit(fid, visit, info=True)
    return len(out)


def lazy_torch_zip(path: str) -> int:
    import torch

    sd = torch.load(path, mmap=True, weights_only=True)
    return len({k: (tuple(v.shape), v.dtype) for k, v in sd.items()})


def lazy_torch_legacy(path: str) -> int:
    import torch

    sd = torch.load(path, map_location="meta", weights_only=True)
    return len({k: (tuple(v.shape), v.dtype) for k, v in sd.items()})


def naive_torch(path: str) -> int:
    import torch

    sd = torch.load(path, weights_only=True)
    return len({k: (tuple(v.shape), v.dtype) for k, v in sd.items()})


def _safe_open_shapes(path: str) -> dict:
    from safetensors import safe_open

    with safe_open(path, framework="numpy") as f:
        return {k: (f.get_slice(k).get_shape(), f.get_slice(k).get_dtype()) for k in f.keys()}  # noqa: SIM118


def lazy_safetensors(path: str) -> int:
    return len(_safe_open_shapes(path))


def _shards(index: str) -> list[str]:
    import json
    import os

    with open(index, encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]
    return [os.path.join(os.path.dirname(index), s) for s in dict.fromkeys(weight_map.values())]


def lazy_safetensors_sharded(path: str) -> int:
    return sum(len(_safe_open_shapes(s)) for s in _shards(path))


def naive_safetensors(path: str) -> int:
    from safetensors.torch import load_file

    return len({k: (tuple(v.shape), v.dtype) for k, v in load_file(path).items()})


def naive_safetensors_sharded(path: str) -> int:
    from safetensors.torch import load_file

    out: dict = {}
    for shard in _shards(path):
        out.update({k: (tuple(v.shape), v.dtype) for k, v in load_file(shard).items()})
    return len(out)


def naive_mxnet(path: str) -> int:
    import mxnet as mx

    return len({k: (v.shape, v.dtype) for k, v in mx.nd.load(path).items()})


def _h5_datasets(path: str, read: bool) -> int:
    import h5py

    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name] = (obj.shape, obj.dtype, obj[()] if read else None)

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return len(out)


def lazy_hdf5(path: str) -> int:
    return _h5_datasets(path, read=False)


def naive_hdf5(path: str) -> int:
    return _h5_datasets(path, read=True)


WAYS = {
    name.replace("_", "-"): fn
    for name, fn in list(globals().items())
    if name.startswith(("floor_", "lazy_", "naive_")) and callable(fn)
}

if __name__ == "__main__":
    way, target = sys.argv[1], sys.argv[2]
    print(WAYS[way](target))
