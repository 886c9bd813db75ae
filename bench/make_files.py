"""Write one benchmark checkpoint with the real framework and print what it wrote as JSON.

``python make_files.py FORMAT OUT_DIR (--gb G | --many N)``, run in a venv that has the framework
(torch + safetensors + h5py for the first five formats, mxnet for ``mxnet``). ``--gb`` writes a
few big tensors of 256 MiB (8192 x 8192 float32) adding up to about G GiB; ``--many`` writes N
small (16 x 16 float32) tensors with transformer-like names. The data is zeros: only the layout
matters to a listing, and every byte is really written to the file.
"""

from __future__ import annotations

import argparse
import json
import os

FORMATS = ("torch-zip", "torch-legacy", "safetensors", "safetensors-sharded", "hdf5", "mxnet")
BIG = (8192, 8192)  # 256 MiB of float32
SMALL = (16, 16)
TENSORS_PER_SHARD = 4  # 1 GiB shards
# Keras 2 save_weights: an attribute above this many bytes is split (saving_utils.py
# HDF5_OBJECT_HEADER_LIMIT); chunks are kept below it by the layout chosen here.
WEIGHTS_PER_LAYER = 50
FILE_NAMES = {
    "torch-zip": "model.pt",
    "torch-legacy": "model.legacy.pt",
    "hdf5": "model.weights.h5",
    "mxnet": "model.params",
}


def names(count: int, big: bool) -> list[str]:
    if big:
        return [f"layers.{i}.weight" for i in range(count)]
    parts = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "norm.weight")
    return [f"encoder.layers.{i // len(parts)}.attn.{parts[i % len(parts)]}" for i in range(count)]


def write_torch(
    path: str, keys: list[str], shape: tuple[int, ...], legacy: bool, fill: float = 0.0
) -> None:
    import torch

    sd = {k: torch.full(shape, fill) if fill else torch.zeros(shape) for k in keys}
    torch.save(sd, path, _use_new_zipfile_serialization=not legacy)


def write_safetensors(out: str, keys: list[str], shape: tuple[int, ...], sharded: bool) -> str:
    import torch
    from safetensors.torch import save_file

    if not sharded:
        path = os.path.join(out, "model.safetensors")
        save_file({k: torch.zeros(shape) for k in keys}, path)
        return path
    groups = [keys[i : i + TENSORS_PER_SHARD] for i in range(0, len(keys), TENSORS_PER_SHARD)]
    weight_map, total = {}, 0
    for n, group in enumerate(groups, 1):
        shard = f"model-{n:05d}-of-{len(groups):05d}.safetensors"
        tensors = {k: torch.zeros(shape) for k in group}
        save_file(tensors, os.path.join(out, shard))
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        weight_map.update(dict.fromkeys(group, shard))
    index = os.path.join(out, "model.safetensors.index.json")
    with open(index, "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return index


def write_hdf5(path: str, keys: list[str], shape: tuple[int, ...]) -> None:
    """The Keras 2 ``model.save_weights('x.h5')`` layout: one group per layer, ``layer_names`` and
    ``weight_names`` attributes, datasets at ``<layer>/<weight name>``."""
    import h5py
    import numpy as np

    layers: dict[str, list[str]] = {}
    for i, _key in enumerate(keys):
        layer = f"layer_{i // WEIGHTS_PER_LAYER}"
        layers.setdefault(layer, []).append(f"{layer}/kernel_{i % WEIGHTS_PER_LAYER}:0")
    data = np.zeros(shape, dtype="float32")
    with h5py.File(path, "w") as f:
        f.attrs["backend"] = "tensorflow"
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["layer_names"] = np.array([n.encode() for n in layers])
        for layer, weights in layers.items():
            g = f.create_group(layer)
            g.attrs["weight_names"] = np.array([w.encode() for w in weights])
            for w in weights:
                g.create_dataset(w, data=data)


def write_mxnet(path: str, keys: list[str], shape: tuple[int, ...]) -> None:
    import mxnet as mx

    mx.nd.save(path, {f"arg:{k}": mx.nd.zeros(shape) for k in keys})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("format", choices=FORMATS)
    p.add_argument("out", help="directory to write into")
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--gb", type=float, help="about this many GiB in 256 MiB tensors")
    size.add_argument("--many", type=int, help="this many small tensors")
    p.add_argument("--fill", type=float, default=0.0, help="torch formats: fill with this value")
    a = p.parse_args()
    big = a.gb is not None
    count = max(1, round(a.gb * 4)) if big else a.many
    keys, shape = names(count, big), BIG if big else SMALL
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, FILE_NAMES.get(a.format, ""))
    if a.format in ("torch-zip", "torch-legacy"):
        write_torch(path, keys, shape, legacy=a.format == "torch-legacy", fill=a.fill)
    elif a.format.startswith("safetensors"):
        path = write_safetensors(a.out, keys, shape, sharded=a.format.endswith("sharded"))
    elif a.format == "hdf5":
        write_hdf5(path, keys, shape)
    else:
        write_mxnet(path, keys, shape)
    on_disk = sum(os.path.getsize(os.path.join(a.out, n)) for n in os.listdir(a.out))
    print(json.dumps({"path": path, "tensors": count, "bytes": on_disk}))


if __name__ == "__main__":
    main()
