"""Keras 3 sharded weights: ``model.save_weights("m.weights.json", max_shard_size=...)``.

Keras (``keras/src/saving/saving_lib.py``, ``ShardedH5IOStore``) writes a JSON index
``{"metadata": {"total_size": ...}, "weight_map": {"/layers/<key>/vars": [shard, ...]}}`` and
``.weights.h5`` shards next to it (``m_00000.weights.h5``, ...) in the Keras 3 ``layers/<key>/
vars/<i>`` layout; one layer's variables may be split across shards. The shards are read by the
Keras adapter's HDF5 walk and merged into one tree before the variables are named, so a layer
split across shards is named as a whole. A directory holding one ``*.weights.json`` opens the
same way; shard names that leave the directory are refused.
"""

from __future__ import annotations

import os

from .errors import FormatError
from .model import Checkpoint, Finding, TensorEntry, ValueLocation
from .registry import Adapter
from .side_files import file_in, read_json_object
from .source import Source

NAME = "keras-weights-sharded"
INDEX_SUFFIX = ".weights.json"


def _index_in(directory: Source) -> Source | None:
    found = [n for n in directory.list() if n.endswith(INDEX_SUFFIX)]
    if len(found) > 1:
        raise FormatError(f"several Keras weight indexes ({', '.join(found)}); open one",
                          directory.where)
    return file_in(directory, found[0]) if found else None


def sniff(head: bytes, source: Source) -> str | None:
    if source.is_dir():
        return "directory" if _index_in(source) is not None else None
    if source.name.endswith(INDEX_SUFFIX) and b'"weight_map"' in head:
        return "index"
    return None


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    # Imported here: sniffing any other input must not load the Keras/HDF5 reader.
    from .keras import H5Facts, build_checkpoint, h5_value_reader, read_h5

    index = _index_in(source) if source.is_dir() else source
    if index is None:
        raise FormatError("no *.weights.json index", source.where)
    where = index.where
    doc = read_json_object(index, "Keras weights index")
    weight_map = doc.get("weight_map")
    if not isinstance(weight_map, dict) or not all(
        isinstance(v, list) and all(isinstance(s, str) for s in v) for v in weight_map.values()
    ):
        raise FormatError("index has no 'weight_map' of layer path -> list of shards", where)
    shards = list(dict.fromkeys(s for v in weight_map.values() for s in v))
    merged = H5Facts()
    file_of: dict[str, str] = {}
    shard_sources: dict[str, Source] = {}
    for shard in shards:
        try:
            shard_source = index.sibling(shard)
        except FormatError:
            raise FormatError(f"shard name {shard!r} points outside the index's directory",
                              where) from None
        if not shard_source.is_file():
            raise FormatError(f"shard {shard!r} listed in the index is missing", where)
        shard_sources[shard] = shard_source
        local = shard_source.local_path
        facts = read_h5(os.fspath(local) if local else shard_source.open(), shard_source.where,
                         shard_source.size, base=0)
        for path, attrs in facts.groups.items():
            merged.groups.setdefault(path, {}).update(attrs)
        for path, info in facts.datasets.items():
            if path in merged.datasets:
                raise FormatError(f"dataset {path!r} is in both {file_of[path]!r} and {shard!r}",
                                  where)
            merged.datasets[path] = info
            file_of[path] = shard
        merged.soft_links.update(facts.soft_links)
        merged.findings.extend(facts.findings)
    for group, listed in weight_map.items():
        held = {file_of[p] for p in file_of if p.startswith(group.rstrip("/") + "/")}
        if not held:
            raise FormatError(f"index lists {group!r}, but no shard holds its variables", where)
        if not held <= set(listed):
            raise FormatError(f"{group!r}: the index says {listed}, found in {sorted(held)}",
                              where)
    base = build_checkpoint(index, merged, config=None, metadata={})
    tensors = [t.replace(file=file_of.get(t.stored_name)) for t in base.tensors]
    readers = {s: h5_value_reader(src, archive=False) for s, src in shard_sources.items()}

    def locate(entry: TensorEntry) -> ValueLocation:
        reader = readers.get(entry.file or "")
        if reader is None:
            raise FormatError(f"tensor {entry.stored_name!r}: no shard {entry.file!r}", where)
        return reader(entry)

    findings: list[Finding] = list(base.findings)
    metadata = {**base.metadata, "file_kind": NAME, "index_metadata": doc.get("metadata"),
                "shards": shards}
    return Checkpoint(
        paths=(source.where, *(s.where for s in shard_sources.values())),
        format=NAME,
        tensors=tensors,
        metadata=metadata,
        hyperparameters=base.hyperparameters,
        findings=findings,
        source=source,
        reader=locate,
    )


ADAPTER = Adapter(
    name=NAME,
    description="Keras 3 sharded weights (*.weights.json index + .weights.h5 shards)",
    extensions=(".weights.json", "<directory>"),
    sniff=sniff,
    open=open_checkpoint,
)
