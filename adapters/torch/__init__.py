"""PyTorch checkpoints written by ``torch.save``: metadata only, no torch, no code from the file.

Two on-disk variants (``torch/serialization.py``):

* **zip** (torch >= 1.6, the default): a STORED zip whose members sit under one root directory
  of any name (``archive/`` since torch 2.x, the file stem before, whatever a re-zipper chose):
  ``<root>/data.pkl`` (the object, pickle protocol 2 by default), ``<root>/data/<key>`` (one raw
  record per storage, 64-byte aligned), ``<root>/byteorder``, ``<root>/.format_version``,
  ``<root>/.storage_alignment``, ``<root>/version``, ``<root>/.data/serialization_id``.
  Only the central directory, ``data.pkl``, the small text records and the 30-byte local header
  of each storage record are read.
* **legacy** (``_use_new_zipfile_serialization=False``, torch < 1.6): five concatenated pickles
  -- the magic number, the protocol version (1001), a ``sys_info`` dict, the object, the list of
  storage keys -- then per storage in that order an 8-byte little-endian element count and the
  raw bytes, which are skipped. torch's even older tar format (:mod:`.tar_legacy`) is
  recognised, examined by ``scan`` and refused by the listing.

Tensors arrive through torch's rebuild functions, implemented here as record builders
(:class:`Builder`): ``_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
backward_hooks[, metadata])`` for dtypes with a legacy typed storage, where the storage is the
persistent id ``('storage', torch.FloatStorage, key, location, numel)`` (legacy: plus a view
tuple); ``_rebuild_tensor_v3(..., dtype[, metadata])`` with ``torch.storage.UntypedStorage``
(numel = bytes) and the dtype as a global for the dtypes without one (uint16/32/64,
complex32, float8_*, float4_e2m1fn_x2, bits*); ``_rebuild_parameter[_with_state]`` around them
for parameters, ``_rebuild_qtensor`` for quantized tensors (QInt8Storage, ... plus a qscheme
global), ``_rebuild_sparse_tensor`` for COO/CSR/CSC/BSR/BSC. See ``ALLOWED`` for the full list.

Names (see :func:`_classify`): ``stored_name`` is the dotted path through dicts, lists, tuples
and module attributes (``model.encoder.weight``, ``optimizer.state.0.exp_avg``); a pickled
``nn.Module`` contributes ``<module path>.<name>`` from its ``_parameters``/``_buffers``/
``_modules``. ``name`` drops the model container key of a training dict (``MODEL_KEYS``) and a
DDP ``module.`` / torch.compile ``_orig_mod.`` prefix carried by every model tensor.

Roles: exact for a pickled module (``_parameters`` vs ``_buffers``) and for ``nn.Parameter``
records; under an optimizer key (``OPTIMIZER_KEYS``) optimizer; elsewhere in a training dict
other; in a state dict buffer for the well-known buffer names of ``BUFFER_NAMES``, parameter
otherwise. Quantized per-channel scales/zero points are kept in ``extra`` (``q_scales``,
``q_zero_points``), not as entries, so counts match torch's ``numel()``; a sparse tensor is one
entry of its logical shape whose ``stored_numel`` is its number of stored values, with
``extra["indices"]``/``extra["values"]`` describing the parts.
"""

from __future__ import annotations

import struct

from ..errors import FormatError
from ..model import Checkpoint
from ..registry import Adapter
from ..security.pickle_grammar import genops
from ..security.restricted_pickle import gc_paused
from ..source import Source
from .constants import MAGIC_NUMBER, MAX_DEPTH, NAME, ZIP_LOCAL_MAGIC
from .examine import examine
from .legacy import open_legacy
from .plain import open_plain, protocol_0_1_pickle
from .tar_legacy import is_tar, torch_members
from .zip_archive import central_directory, find_data_pkl, open_zip

__all__ = ["ADAPTER", "MAGIC_NUMBER", "MAX_DEPTH", "NAME", "open_checkpoint", "sniff"]

# ---------------------------------------------------------------------------------------------
# sniffing


def sniff(head: bytes, source: Source) -> str | None:
    """'zip', 'legacy', 'tar' (refused on open) or 'pickle' (a plain pickle, read for its
    globals and values: it holds no storages)."""
    if source.is_dir():
        return None
    if head.startswith(ZIP_LOCAL_MAGIC):
        return "zip" if _zip_has_data_pkl(head, source) else None
    if is_tar(head) and torch_members(source) is not None:
        return "tar"  # torch.load tries the tar reader before anything else but a zip
    magic = _first_pickle_int(head)
    if magic == MAGIC_NUMBER:
        return "legacy"
    if len(head) > 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"  # a protocol 2-5 pickle, but not torch's
    if protocol_0_1_pickle(head):
        return "pickle"
    return None


def _zip_has_data_pkl(head: bytes, source: Source) -> bool:
    if len(head) >= 30:
        (nlen,) = struct.unpack_from("<H", head, 26)
        if head[30 : 30 + nlen].endswith(b"data.pkl"):
            return True  # torch writes data.pkl first
    try:
        with source.view() as mm:
            d = central_directory(mm, len(mm), source.where)
    except (FormatError, OSError, ValueError):
        return False
    return find_data_pkl(d) is not None


def _first_pickle_int(head: bytes) -> int | None:
    """The value of the first pickle in ``head`` if it is a lone integer, else None."""
    value = None
    try:
        for n, (op, arg, _pos) in enumerate(genops(head)):
            if op.name in ("PROTO", "FRAME"):
                continue
            if op.name == "STOP":
                return value
            if n > 3 or not isinstance(arg, int) or value is not None:
                return None
            value = arg
    except Exception:  # noqa: BLE001 - not a pickle at all
        return None
    return None


# ---------------------------------------------------------------------------------------------
# opening


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    where = source.where
    if variant in ("zip", "legacy"):
        with gc_paused():  # ~4 objects per tensor, none of them garbage until we are done
            return open_zip(source) if variant == "zip" else open_legacy(source)
    if variant == "tar":
        _refuse_dangerous_tar(source)
        raise FormatError(
            "torch's pre-1.0 tar checkpoint format is not supported; load and re-save it with "
            "torch.save to get the zip format",
            where,
        )
    if variant == "pickle":
        with gc_paused():
            return open_plain(source)
    raise FormatError(f"unsupported torch variant {variant!r}", where)


def _refuse_dangerous_tar(source: Source) -> None:
    """A tar torch.load would run code from is refused as unsafe, naming it, not merely as an
    unsupported format (nothing is listed either way)."""
    from ..errors import UnsafeContentError
    from ..security.examination import DANGEROUS, FileResult

    res = FileResult(source.where)
    examine(source, "tar", res)
    found = [i.text for i in res.items if i.level == DANGEROUS]
    if found:
        raise UnsafeContentError(
            "refused: torch's pre-1.0 tar checkpoint, whose pickles reference "
            f"{'; '.join(found[:3])}; nothing was run", source.where)


ADAPTER = Adapter(
    name=NAME,
    description="PyTorch torch.save checkpoint (zip with data.pkl, or the legacy pickle stream)",
    extensions=(".pt", ".pth", ".bin", ".ckpt"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,
)
