"""Big checkpoints written as sparse files (the tensor data is a hole: no disk, no GBs written)
for the request/byte budgets of remote reads. The layouts follow the formats' writers:
safetensors (8-byte length, JSON header, byte buffer), torch.save's zip (``archive/data.pkl``,
``byteorder``, ``data/<key>`` records, ``version``; the pickle built opcode by opcode as in
tests/test_torch_adapter.py) and torch's legacy stream (pickles, then per storage an 8-byte count
and its bytes).
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
from pathlib import Path

from test_torch_adapter import dict_of, pkl, tensor

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
CHUNK = bytes(64 << 20)  # zeros that the hole writer turns into a seek


def safetensors(path: Path, tensors: list[tuple[str, str, tuple[int, ...]]]) -> int:
    """A safetensors file of ``(name, dtype, shape)`` tensors; returns the header length."""
    item = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1}
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    pos = 0
    for name, dtype, shape in tensors:
        n = item[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + n]}
        pos += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + pos)
    return len(raw)


class _Holes(io.RawIOBase):
    """A writable file that seeks over :data:`CHUNK` instead of writing it."""

    def __init__(self, f: io.BufferedRandom) -> None:
        self.f = f

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        if b is CHUNK:
            self.f.seek(len(b), io.SEEK_CUR)
            return len(b)
        return self.f.write(b)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.f.seek(offset, whence)

    def tell(self) -> int:
        return self.f.tell()

    def flush(self) -> None:
        self.f.flush()


def sharded_safetensors(d: Path, shards: int = 4, side: int = 8192) -> None:
    """``shards`` sparse safetensors files of four F32 ``side x side`` tensors each in ``d``,
    with the ``model.safetensors.index.json`` that transformers writes beside them."""
    d.mkdir()
    weight_map = {}
    for k in range(1, shards + 1):
        name = f"model-{k:05d}-of-{shards:05d}.safetensors"
        tensors = [(f"layers.{k}.w{j}", "F32", (side, side)) for j in range(4)]
        safetensors(d / name, tensors)
        weight_map.update({t[0]: name for t in tensors})
    total = shards * 4 * side * side * 4
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))


def torch_zip(path: Path, storages: int, gib_each: int = 1, mib_each: int = 0) -> None:
    """A torch.save zip of ``storages`` float32 tensors of ``gib_each`` GiB (+ ``mib_each``
    MiB) each."""
    nbytes = (gib_each << 30) + (mib_each << 20)
    numel = nbytes // 4
    body = dict_of(*((f"layers.{k}.weight", tensor(str(k), numel, (numel // 1024, 1024)))
                     for k in range(storages)))
    with open(path, "wb") as raw, zipfile.ZipFile(_Holes(raw), "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl(body))
        z.writestr("archive/byteorder", b"little")
        for k in range(storages):
            info = zipfile.ZipInfo(f"archive/data/{k}")
            info.file_size = nbytes
            with z.open(info, "w", force_zip64=nbytes > zipfile.ZIP64_LIMIT) as m:
                for _ in range(nbytes // len(CHUNK)):
                    m.write(CHUNK)
        z.writestr("archive/version", b"3\n")


def torch_legacy(path: Path, storages: int, mib_each: int) -> None:
    """A legacy (torch < 1.6) torch.save stream of ``storages`` float32 tensors."""
    numel = (mib_each << 20) // 4
    main = pkl(dict_of(*((f"layers.{k}.weight", tensor(str(k), numel, (numel,), legacy=True))
                         for k in range(storages))))
    sys_info = {"protocol_version": 1001, "little_endian": True,
                "type_sizes": {"short": 2, "int": 4, "long": 4}}
    with open(path, "wb") as f:
        f.write(pickle.dumps(MAGIC_NUMBER, protocol=2) + pickle.dumps(1001, protocol=2)
                + pickle.dumps(sys_info, protocol=2) + main
                + pickle.dumps([str(k) for k in range(storages)], protocol=2))
        for _ in range(storages):
            f.write(struct.pack("<q", numel))
            f.seek(numel * 4, io.SEEK_CUR)
        f.truncate(f.tell())
