"""NeMo ``.nemo`` archives, read in place: never extracted.

Layout (NeMo ``core/connectors/save_restore_connector.py``): ``save_to`` packs a folder with
``tarfile.open(path, "w:")`` (``arcname="."``, so members are ``./model_config.yaml``,
``./model_weights.ckpt``, ``./<hash>_<artifact>`` such as tokenizer files); NeMo before 1.7 wrote
``"w:gz"`` and ``_tar_open`` still reads both (``r:`` first, then ``r:gz``). ``restore_from``
extracts the members (``safe_extract``: members leaving the folder and links are skipped), loads
``model_config.yaml`` with OmegaConf (its ``model`` key when present) and
``torch.load(model_weights.ckpt)``; model-parallel models keep one
``mp_rank_NN/`` or ``tp_rank_NN_pp_rank_NNN/`` folder of weights per rank.

Here the tar headers are walked (bounded), ``model_config.yaml`` is read as inert YAML (the
hyperparameters, under ``config``) and ``model_weights.ckpt`` is handed to the torch reader as a
window of the archive's bytes (uncompressed tar: its data is a plain range of the file). A
gzip-compressed archive cannot be read in place: its weights member is decompressed into memory
when it is at most :data:`MAX_GZ_MEMBER` bytes, else refused with the reason. Hostile archives
(a member name leaving the folder, links, members running past the end, too many members) are
refused in one line; nothing is ever written to disk.
"""

from __future__ import annotations

import gzip
import re
import tarfile
import zlib
from pathlib import PurePosixPath

from .bytes_source import BytesSource
from .errors import FormatError, InspectorError
from .model import Checkpoint, Finding
from .registry import Adapter, load
from .source import Source
from .source_interface import Window

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    from .security.examination import FileResult

NAME = "nemo"
CONFIG = "model_config.yaml"
WEIGHTS = "model_weights.ckpt"
MAX_MEMBERS = 100_000
MAX_CONFIG = 16 << 20
MAX_GZ_MEMBER = 256 << 20  # a gzip archive's weights are decompressed into memory up to this
MAX_GZ_TOTAL = 1 << 30  # decompressed bytes walked in a gzip archive (a bomb stops here)
GZ_SNIFF = 1 << 20
RANK_DIR = re.compile(r"^(mp_rank_\d+|tp_rank_\d+_pp_rank_\d+)$")
GZIP_MAGIC = b"\x1f\x8b"


def _names_hint(data: bytes) -> bool:
    return any(n.encode() in data for n in (CONFIG, WEIGHTS))


def sniff(head: bytes, source: Source) -> str | None:
    """'tar' or 'gz' for a tar whose headers name NeMo's members."""
    from .torch.tar_legacy import is_tar

    if source.is_dir():
        return None
    if head.startswith(GZIP_MAGIC):
        try:
            with source.open() as f, gzip.GzipFile(fileobj=f) as gz:
                data = gz.read(GZ_SNIFF)
        except (OSError, EOFError, ValueError):
            return None
        return "gz" if is_tar(data) and _names_hint(data) else None
    if not is_tar(head):
        return None
    try:
        members = _walk(source, "tar")[0]
    except (InspectorError, OSError):
        return "tar" if _names_hint(head) else None
    return "tar" if CONFIG in members or any(n.endswith("/" + WEIGHTS) or n == WEIGHTS
                                             for n in members) else None


def _walk(source: Source, variant: str) -> tuple[dict[str, tarfile.TarInfo], list[str]]:
    """name (without ``./``) -> the member NeMo would extract last under it, and the names seen
    more than once. Refuses what NeMo's ``safe_extract`` would skip and anything that cannot be
    read in place."""
    where = source.where
    out: dict[str, tarfile.TarInfo] = {}
    twice: list[str] = []
    size = source.size
    total = 0
    with source.open() as f:
        try:
            mode = "r:gz" if variant == "gz" else "r:"
            with tarfile.open(fileobj=f, mode=mode) as tar:
                for n, info in enumerate(tar):
                    if n >= MAX_MEMBERS:
                        raise FormatError(f"more than {MAX_MEMBERS:,} tar members: refused",
                                          where)
                    name = _check(info, where)
                    if name is None:
                        continue
                    total += info.size
                    if variant == "gz" and total > MAX_GZ_TOTAL:
                        raise FormatError(f"the gzip archive's members hold more than "
                                          f"{MAX_GZ_TOTAL:,} bytes: not decompressed", where)
                    if variant == "tar" and info.offset_data + info.size > size:
                        raise FormatError(f"member {name!r} ({info.size:,} bytes at "
                                          f"{info.offset_data:,}) runs past the end of the file "
                                          f"({size:,} bytes): truncated", where)
                    if name in out:
                        twice.append(name)
                    out[name] = info
        except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise FormatError(f"not a readable tar archive ({type(e).__name__}: {e})",
                              where) from None
    return out, twice


def _check(info: tarfile.TarInfo, where: str) -> str | None:
    """The member's name relative to the archive root, None for a directory; refuses names
    that leave the folder, links and special files."""
    raw = info.name
    path = PurePosixPath(raw)
    if path.is_absolute() or ".." in path.parts or "\x00" in raw or "\\" in raw:
        raise FormatError(f"member {raw!r} leaves the archive's folder (path traversal): "
                          "refused, nothing extracted", where)
    if info.issym() or info.islnk():
        raise FormatError(f"member {raw!r} is a {'sym' if info.issym() else 'hard '}link to "
                          f"{info.linkname!r}: refused (NeMo's safe_extract skips links)", where)
    if info.isdir():
        return None
    if not info.isreg() or info.issparse():
        raise FormatError(f"member {raw!r} is not a regular file (type {info.type!r}): refused",
                          where)
    name = "/".join(p for p in path.parts if p != ".")
    return name or None


def _weights(members: dict[str, tarfile.TarInfo], where: str) -> tuple[str, list[str]]:
    """The weights member NeMo loads: ``model_weights.ckpt``, or rank 0's of a model-parallel
    archive (with the other ranks named)."""
    if WEIGHTS in members:
        return WEIGHTS, []
    ranked = sorted(n for n in members if n.endswith("/" + WEIGHTS)
                    and RANK_DIR.match(n.rsplit("/", 1)[0]))
    if ranked:
        return ranked[0], ranked[1:]
    if any(n.startswith("model_weights/") for n in members):
        raise FormatError("model_weights/ is a distributed (torch_dist / zarr) checkpoint "
                          "folder inside the tar: not read in place; extract it and list the "
                          "folder", where)
    raise FormatError(f"no {WEIGHTS} in the archive (members: "
                      f"{', '.join(sorted(members)[:5])})", where)


def _member(source: Source, variant: str, info: tarfile.TarInfo, name: str) -> Source:
    """One member as a source: a window of the archive, or (gzip) its decompressed bytes."""
    label = f"{name}"
    if variant == "tar":
        return Window(source, info.offset_data, info.size, label)
    if info.size > MAX_GZ_MEMBER:
        raise FormatError(f"{name} is {info.size:,} bytes inside a gzip-compressed archive "
                          f"(NeMo < 1.7): not decompressed (limit {MAX_GZ_MEMBER:,}); repack it "
                          "uncompressed (tar -cf) to list it in place", source.where)
    with source.open() as f, tarfile.open(fileobj=f, mode="r:gz") as tar:
        handle = tar.extractfile(info)
        data = handle.read(info.size) if handle is not None else b""
    if len(data) != info.size:
        raise FormatError(f"{name}: the gzip archive ends early", source.where)
    return BytesSource(data, f"{source.where}:{label}", source)


def _config(source: Source, variant: str, members: dict[str, tarfile.TarInfo]) -> Any:
    info = members.get(CONFIG)
    if info is None:
        return None
    if info.size > MAX_CONFIG:
        raise FormatError(f"{CONFIG} of {info.size:,} bytes (limit {MAX_CONFIG:,})",
                          source.where)
    from .yaml_safe import load_yaml

    conf = load_yaml(_member(source, variant, info, CONFIG))  # inert: never builds objects
    if isinstance(conf, dict) and isinstance(conf.get("model"), dict):
        conf = conf["model"]  # restore_from: "If override is top level config, extract model"
    return conf


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    where = source.where
    members, twice = _walk(source, variant)
    weights, other_ranks = _weights(members, where)
    conf = _config(source, variant, members)
    inner = load(_member(source, variant, members[weights], weights))
    findings = list(inner.findings)
    if twice:
        findings.append(Finding("warning", f"{len(twice)} member name(s) stored twice (e.g. "
                                f"{twice[0]!r}): NeMo extracts both, the last wins; listed: "
                                "the last", twice[0]))
    if other_ranks:
        findings.append(Finding("info", f"{len(other_ranks) + 1} model-parallel ranks; "
                                f"{weights} is listed", weights))
    if variant == "gz":
        findings.append(Finding("info", f"gzip-compressed archive (NeMo < 1.7): {weights} "
                                "decompressed into memory", weights))
    meta = {**inner.metadata, "members": sorted(members), "weights_member": weights,
            "inner_format": inner.format, "compression": "gzip" if variant == "gz" else None}
    if isinstance(conf, dict):
        meta["target"] = conf.get("target")
    from .security.side_code import as_findings

    findings += as_findings(list(_target_items(conf)))
    hyper = {"config": conf} if conf is not None else {}
    return Checkpoint(paths=(where,), format=NAME, tensors=inner.tensors, metadata=meta,
                      hyperparameters=hyper, findings=findings, source=inner.source,
                      reader=inner.reader)


def _target_items(conf: Any) -> list[tuple[str, str, str]]:
    """(level, text, config path) of every callable the config names for NeMo and Hydra to call
    (:mod:`.security.config_targets`): listed or unvetted ones are dangerous."""
    from .security.config_targets import target_items

    return [(lv, f"{CONFIG}: {text}", where) for lv, text, where in target_items(conf, nemo=True)]


def examine(source: Source, variant: str, result: FileResult) -> None:
    """``inspector scan``: the walk of a listing (a hostile member refuses the file as an
    error); the weights member examined by the torch examination (what ``torch.load`` would
    run); every callable the config names for NeMo or Hydra to call, judged by
    :mod:`.security.config_targets`."""
    from .security.examination import FOREIGN
    from .torch import ADAPTER as TORCH

    kind = NAME if variant == "tar" else "nemo-gz"
    result.kind = kind
    members, _ = _walk(source, variant)
    weights, others = _weights(members, source.where)
    for name in [weights, *others]:
        inner = _member(source, variant, members[name], name)
        sub = TORCH.sniff(inner.head(), inner)
        if sub is None:
            result.add(FOREIGN, f"{name} is not a torch checkpoint torch.load reads", name)
            continue
        before = len(result.items)
        TORCH.examine(inner, sub, result)
        for item in result.items[before:]:
            item.where = f"{name}:{item.where}" if item.where else name
    result.kind = kind  # the torch examination names its own kind
    # a member's zip is no zip at the end of the file: for a plain tar, _zip_after looks there
    result.zip_walked = variant == "tar"
    if variant == "tar":
        _zip_after(source, max(members[n].offset_data + members[n].size
                               for n in [weights, *others]), result)
    conf = _config(source, variant, members)
    for level, text, where in _target_items(conf):
        result.add(level, text, where)


def _zip_after(source: Source, end: int, result: FileResult) -> None:
    """The weights' zip ends inside the tar, so Python's zipfile (which looks for the end
    record from the end) also opens the whole ``.nemo`` as that zip, examined above. A zip end
    record after the last weights member is another zip: examined as scan examines one."""
    from .security.scan import zip_at_the_end
    from .zip_container import END_MAGIC

    with source.view() as mm:
        size = len(mm)
        if END_MAGIC not in bytes(mm[max(end, size - (1 << 16) - 22):size]):
            return
    zip_at_the_end(source, result)


ADAPTER = Adapter(
    name=NAME,
    description="NeMo .nemo archive (tar of model_config.yaml + model_weights.ckpt; read in "
    "place)",
    extensions=(".nemo",),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,
)
