"""What an HDF5 file makes a reader fetch from elsewhere, examined in an isolated child.

An HDF5 dataset's values need not be in the file: *external raw storage*
(``H5Pset_external``) reads them from any file at any offset (``/etc/passwd`` decodes as
float32 weights), a *virtual dataset* maps them from datasets of other HDF5 files, and an
*external link* makes a path of the file another file's object. h5py follows all three when
values are read (Keras' legacy ``.h5`` loader reads weights through h5py; Keras 3's ``.keras``
loader refuses them). Every link and every dataset's storage is examined, with no cap on their
number. libhdf5 runs in a forked child with a time budget (:mod:`inspector.adapters.isolated`):
a crash or a hang on a corrupt file becomes an error for that file.

A target is ``dangerous`` when it is absolute or climbs out (``..``): the data comes from
anywhere on the reader's machine. A target that stays beside the file is ``foreign``. A virtual
source ``.`` is the file itself (how HDF5 writes same-file sources): nothing is reported.
The legacy Keras attributes ``model_config`` / ``training_config`` are handed to
:mod:`inspector.adapters.security.keras_config`.
"""

from __future__ import annotations

import json
import os

from ..errors import FormatError
from ..isolated import budget_seconds, call_isolated
from ..memory_cap import address_space_capped
from .examination import ERROR, FOREIGN
from .file_reference import target_level

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

    from ..source import Source
    from .examination import FileResult

MAX_CONFIG_CHARS = 64 << 20  # a Keras model_config / training_config attribute
MEMORY_FLOOR = 1 << 30  # address space the child may add beyond 4x the file size
SECONDS = 10.0  # the child's time budget: a base plus one second per MiB
BYTES_PER_SECOND = 1 << 20
CONFIG_ATTRS = ("model_config", "training_config")


def examine_hdf5(
    target: Source | BinaryIO | str, result: FileResult, where: str | None = None,
    size: int | None = None,
) -> None:
    """Add to ``result`` every external link, external raw storage and virtual-dataset source
    of the HDF5 file ``target`` (a Source, a seekable file object or a path), and the Keras
    config attributes' findings; ``where`` names the file inside a container. A file libhdf5
    cannot read, crashes on or hangs on is an ``error`` item."""
    from ..source import Source

    label = where or result.path
    try:
        if isinstance(target, Source):
            local = target.local_path
            size = target.size if size is None else size
            if local is not None:
                found = _isolated(os.fspath(local), label, size)
            else:
                with target.open() as f:
                    found = _isolated(f, label, size)
        else:
            if size is None:
                if isinstance(target, str):
                    size = os.path.getsize(target)
                else:
                    size = target.seek(0, os.SEEK_END)
                    target.seek(0)
            found = _isolated(target, label, size)
    except FormatError as e:
        result.add(ERROR, e.message, where)
        return
    add_found(found, result, where)


def add_found(found: dict[str, Any], result: FileResult, where: str | None) -> None:
    """The child's answer (:func:`examine_here`) as items of ``result``."""
    from .keras_config import examine_keras_config

    for level, text in found["items"]:
        result.add(level, text, where)
    if found.get("keras") and result.kind == "hdf5":
        result.kind = "keras-h5"
    for name, text in found["configs"].items():
        label = f"{where}:{name}" if where else name
        try:
            config = json.loads(text)
        except ValueError as e:
            result.add(ERROR, f"{name} attribute is not JSON ({e})", label)
            continue
        examine_keras_config(config, result, label)


def _isolated(fileobj: BinaryIO | str, where: str, size: int) -> dict[str, Any]:
    # h5py imported here, once, not in every child: a scan forks one child per HDF5 file
    import h5py  # noqa: F401

    budget = budget_seconds(SECONDS, size, BYTES_PER_SECOND)
    return call_isolated(lambda: examine_here(fileobj, where, size), budget, where,
                         "the HDF5 library")


def examine_here(fileobj: BinaryIO | str, where: str, size: int) -> dict[str, Any]:
    """The examination itself, in this process: ``{"items": [[level, text], ...], "configs":
    {attribute: JSON text}, "keras": bool}``."""
    import h5py

    items: list[list[str]] = []
    seen: set[int] = set()

    def note(level: str | None, text: str) -> None:
        if level is not None:
            items.append([level, text])

    try:
        with address_space_capped(MEMORY_FLOOR + 4 * size), h5py.File(fileobj, "r") as f:
            configs = _config_attrs(f, items)
            keras = bool(configs) or "model_weights" in f or "layers" in f

            def visit(raw: bytes, info: Any) -> None:
                path = "/" + raw.decode("utf-8", "surrogateescape")
                if info.type == h5py.h5l.TYPE_EXTERNAL:
                    filename, obj = (v.decode("utf-8", "replace")
                                     for v in f.id.links.get_val(raw))
                    note(target_level(filename),
                         f"external link {path} -> {filename}:{obj} (data from another file; "
                         "never read)")
                elif info.type == h5py.h5l.TYPE_HARD:
                    # A hard link is followed, so an object under several names is seen once.
                    address = info.u if isinstance(info.u, int) else hash(info.u)
                    if address in seen:
                        return
                    seen.add(address)
                    oid = h5py.h5o.open(f.id, raw)
                    if isinstance(oid, h5py.h5d.DatasetID):
                        _storage(oid, path, note)
                elif info.type != h5py.h5l.TYPE_SOFT:
                    # a user-defined link class: followed only by a handler registered in the
                    # reader's process
                    note(FOREIGN, f"user-defined link type {info.type} at {path} (not followed)")

            f.id.links.visit(visit, info=True)
    except MemoryError:
        raise FormatError("HDF5 metadata asks for more memory than is available (corrupt "
                          "sizes?)", where) from None
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:
        raise FormatError(f"not a readable HDF5 file ({' '.join(str(e).split())[:300]})",
                          where) from None
    return {"items": items, "configs": configs, "keras": keras}


def _storage(dsid: Any, path: str, note: Any) -> None:
    """Every external file and every virtual source of one dataset (no cap)."""
    import h5py

    dcpl = dsid.get_create_plist()
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        targets: dict[str, list[str]] = {}
        for i in range(dcpl.get_virtual_count()):
            src = dcpl.get_virtual_filename(i)
            targets.setdefault(src, []).append(dcpl.get_virtual_dsetname(i))
        for src, names in targets.items():
            more = f" and {len(names) - 1} more" if len(names) > 1 else ""
            note(target_level(src),
                 f"virtual dataset {path} reads {src}:{names[0]}{more} (data from another "
                 "file; never read)")
    files: dict[str, int] = {}
    for i in range(dcpl.get_external_count()):
        name = dcpl.get_external(i)[0]
        name = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
        files[name] = files.get(name, 0) + 1
    for name, count in files.items():
        pieces = f" ({count} pieces)" if count > 1 else ""
        note(target_level(name) or FOREIGN,
             f"dataset {path} stores its data in external file {name}{pieces} (data from "
             "another file; never read)")


def _config_attrs(f: Any, items: list[list[str]]) -> dict[str, str]:
    """The root's Keras config attributes as text (bounded)."""
    out: dict[str, str] = {}
    for name in CONFIG_ATTRS:
        if name not in f.attrs:
            continue
        value = f.attrs[name]
        if isinstance(value, bytes):
            if len(value) > MAX_CONFIG_CHARS:
                items.append([ERROR, f"{name} attribute of {len(value):,} bytes: not examined"])
                continue
            value = value.decode("utf-8", "replace")
        if not isinstance(value, str):
            items.append([FOREIGN, f"{name} attribute is not text: not examined"])
            continue
        if len(value) > MAX_CONFIG_CHARS:
            items.append([ERROR, f"{name} attribute of {len(value):,} chars: not examined"])
            continue
        out[name] = value
    return out
