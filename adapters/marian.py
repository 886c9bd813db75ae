"""Marian NMT ``model.npz``: a NumPy ``.npz`` whose ``special:model.yml`` member is the model's
YAML configuration.

Marian writes its models with cnpy (``src/common/io.cpp`` ``saveItemsNpz``): a zip of stored
``<name>.npy`` members, one per parameter (``Wemb``, ``encoder_l1_self_Wq``,
``decoder_ff_logit_out_b``, ...), plus the items ``addMetaToItems`` adds: the model options as
YAML text in an int8 array, NUL-terminated and padded with NULs to a multiple of 256 bytes,
under ``special:model.yml``. Marian reads the options back from that item
(``ModelWeights::getYamlFromModel``) and never loads a ``special:`` item as a parameter.

Here the arrays are listed by the NumPy reader (:mod:`inspector.adapters.numpy_npy`: headers
only, values streamed from the members, object members never unpickled); this module claims the
``.npz`` that has ``special:model.yml``, reads that one member (bounded) with the inert YAML
parser into the hyperparameters, and gives the ``special:`` items the role ``other``. The NumPy
adapter is the home of the container; Marian's meaning (the options and what is a weight) is
here, so a plain ``np.savez`` file never changes reader.
"""

from __future__ import annotations

import zipfile

from . import numpy_npy
from .errors import FormatError
from .model import Checkpoint, Finding, Role
from .registry import Adapter
from .source import Source
from .zip_container import open_member
from .zip_errors import ZIP_ERRORS

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

NAME = "marian"
CONFIG_ITEM = "special:model.yml"
SPECIAL = "special:"
MAX_CONFIG_BYTES = 4 << 20  # Marian's options are a few KB


def sniff(head: bytes, source: Source) -> str | None:
    """'npz' for a zip of ``.npy`` members that holds ``special:model.yml.npy``."""
    if not head.startswith(b"PK\x03\x04") or not source.is_file():
        return None
    try:
        with source.open() as raw, zipfile.ZipFile(raw) as z:
            names = z.namelist()
    except ZIP_ERRORS:
        return None
    if CONFIG_ITEM + ".npy" in names and all(n.endswith(".npy") for n in names):
        return "npz"
    return None


def read_config(source: Source) -> tuple[dict[str, Any], int]:
    """The options in ``special:model.yml`` (parsed inertly) and the item's size in bytes."""
    from .yaml_safe import YamlProblem, parse_yaml

    member = f"{source.where}:{CONFIG_ITEM}.npy"
    try:
        with source.open() as raw, zipfile.ZipFile(raw) as z:
            try:
                info = z.getinfo(CONFIG_ITEM + ".npy")
            except KeyError:
                raise FormatError(f"no {CONFIG_ITEM} in this .npz: not a Marian model",
                                  source.where) from None
            if info.file_size > MAX_CONFIG_BYTES:
                raise FormatError(f"{CONFIG_ITEM} holds {info.file_size:,} bytes (more than "
                                  f"{MAX_CONFIG_BYTES:,} for a YAML configuration)", member)
            with open_member(z, info, source.where) as f:
                dtype, shape, _, _ = numpy_npy.parse_header(f, member)
                if dtype not in ("int8", "uint8") or len(shape) != 1:
                    raise FormatError(f"{CONFIG_ITEM} is a {dtype} array of shape "
                                      f"{list(shape)}, not the bytes of a YAML text (int8, one "
                                      "dimension)", member)
                data = f.read(min(shape[0], MAX_CONFIG_BYTES))
    except FormatError:
        raise
    except ZIP_ERRORS as e:
        raise FormatError(f"{CONFIG_ITEM} cannot be read ({e})", member) from None
    if len(data) != shape[0]:
        raise FormatError(f"{CONFIG_ITEM} ends after {len(data)} of its {shape[0]} bytes", member)
    text = data.split(b"\0", 1)[0].decode("utf-8", "replace")
    try:
        config = parse_yaml(text)
    except YamlProblem as e:
        raise FormatError(f"{CONFIG_ITEM} is not readable YAML ({e.problem})", member) from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise FormatError(f"{CONFIG_ITEM} is not a YAML mapping", member)
    return config, len(data)


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    ckpt = numpy_npy.open_checkpoint(source, "npz")
    config, size = read_config(source)
    findings = list(ckpt.findings)
    tensors = [t.replace(role=Role.OTHER) if t.stored_name.startswith(SPECIAL) else t
               for t in ckpt.tensors]
    for t in tensors:
        if t.role is Role.PARAMETER and t.dtype not in _MARIAN_TYPES:
            findings.append(Finding("warning", f"{t.dtype} is not a type Marian loads "
                                    "(loadItemsFromNpz aborts)", t.stored_name))
    meta = {**ckpt.metadata, "model_yml_bytes": size}
    version = config.get("version")
    if isinstance(version, str):
        meta["marian_version"] = version
    out = Checkpoint(paths=ckpt.paths, format=NAME + "-npz", tensors=tensors, metadata=meta,
                     hyperparameters=config, findings=findings, source=source)
    out.reader = ckpt.reader
    return out


# loadItemsFromNpz: the NumPy type codes and sizes Marian maps to its types
_MARIAN_TYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                 "uint16", "uint32", "uint64"}


ADAPTER = Adapter(
    name=NAME,
    description="Marian NMT model.npz (the .npz with special:model.yml): options and weights",
    extensions=(".npz",),
    sniff=sniff,
    open=open_checkpoint,
    examine=numpy_npy.examine,  # type: ignore[arg-type]
)
