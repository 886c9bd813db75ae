"""Hugging Face model directories: ``save_pretrained`` output of transformers and of PEFT.

Layouts (file names from ``transformers/utils/constants`` and ``peft/utils/constants.py``):

* transformers: ``config.json`` (CONFIG_NAME) beside ``model.safetensors`` (SAFE_WEIGHTS_NAME),
  ``model.safetensors.index.json`` (SAFE_WEIGHTS_INDEX_NAME) + shards, ``pytorch_model.bin``
  (WEIGHTS_NAME) or ``pytorch_model.bin.index.json`` (WEIGHTS_INDEX_NAME) + shards;
* PEFT: ``adapter_config.json`` beside ``adapter_model.safetensors`` or ``adapter_model.bin``.

When several weight files are present, the one ``from_pretrained`` loads is listed (its order:
safetensors before ``.bin``, a single file before an index) and a finding says which and why.
The weights are opened by the adapter their content calls for (safetensors, torch); a ``.bin``
shard index is read here: every shard through the torch adapter, each tensor checked against the
``weight_map``, shard names that leave the directory refused. ``config.json`` (or
``adapter_config.json``) is the checkpoint's hyperparameters (``hyperparameters["config"]``,
with the shape-relevant keys in ``hyperparameters["summary"]``); the ``gpt2``/``llama``
architectures of ``inspector check`` read it from there.
"""

from __future__ import annotations

from .errors import FormatError
from .model import Checkpoint, Finding, TensorEntry, ValueLocation
from .registry import Adapter, load
from .safetensors import is_shard_index, read_weight_map, shard_source
from .side_files import HF_CONFIG, file_in, read_json_object
from .source import Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

NAME = "hf-directory"
PEFT_FORMAT = "peft-adapter-directory"
CONFIG_NAME = "config.json"
ADAPTER_CONFIG_NAME = "adapter_config.json"
# In from_pretrained's order of preference.
WEIGHTS_NAMES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
BIN_INDEX_NAME = "pytorch_model.bin.index.json"
BIN_INDEX_SUFFIX = ".bin.index.json"
ADAPTER_WEIGHTS_NAMES = ("adapter_model.safetensors", "adapter_model.bin")
# config.json keys shown above the table (every key is in --format json).
SUMMARY_KEYS = (
    "architectures",
    "model_type",
    "vocab_size",
    "hidden_size",
    "n_embd",
    "d_model",
    "num_hidden_layers",
    "n_layer",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "n_inner",
    "max_position_embeddings",
    "n_positions",
    "tie_word_embeddings",
    "torch_dtype",
    "dtype",
    "transformers_version",
    # adapter_config.json
    "peft_type",
    "task_type",
    "r",
    "lora_alpha",
    "target_modules",
    "base_model_name_or_path",
)


def _layout(directory: Source) -> tuple[str, list[str]] | None:
    """(config file name, weight files present in preference order), or None. A config or
    weights name that resolves outside the directory is refused, never followed."""
    names = set(directory.list())
    for name in (CONFIG_NAME, ADAPTER_CONFIG_NAME, *WEIGHTS_NAMES, *ADAPTER_WEIGHTS_NAMES):
        if name in names:
            directory.child(name)  # raises for ../, absolute or escaping symlinks
    if file_in(directory, CONFIG_NAME) is not None:
        found = [n for n in WEIGHTS_NAMES if file_in(directory, n) is not None]
        if found:
            return CONFIG_NAME, found
    if file_in(directory, ADAPTER_CONFIG_NAME) is not None:
        found = [n for n in ADAPTER_WEIGHTS_NAMES if file_in(directory, n) is not None]
        if found:
            return ADAPTER_CONFIG_NAME, found
    if file_in(directory, BIN_INDEX_NAME) is not None:
        return "", [BIN_INDEX_NAME]  # .bin shards without a config (no other reader joins them)
    return None


def sniff(head: bytes, source: Source) -> str | None:
    if not source.is_dir():
        # a torch shard index opened on its own (its shards beside it)
        bin_index = source.name.endswith(BIN_INDEX_SUFFIX) and is_shard_index(source.name)
        return "bin-index" if bin_index and b'"weight_map"' in head else None
    layout = _layout(source)
    if layout is None:
        return None
    return "peft" if layout[0] == ADAPTER_CONFIG_NAME else "transformers"


def read_config(source: Source) -> dict[str, Any]:
    """A ``config.json`` / ``adapter_config.json`` as a dict (the one reader of these files)."""
    return read_json_object(source, source.name)


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    if variant == "bin-index":
        return open_bin_index(source)
    layout = _layout(source)
    if layout is None:
        raise FormatError("no Hugging Face weights file beside a config", source.where)
    config_name, weights = layout
    chosen = weights[0]
    weights_source = source.child(chosen)
    if chosen.endswith(BIN_INDEX_SUFFIX):
        inner = open_bin_index(weights_source)
    else:
        inner = load(weights_source)
        if not is_shard_index(chosen):  # index entries already carry their shard
            inner.tensors = [_with_file(t, chosen) for t in inner.tensors]
    config = read_config(source.child(config_name)) if config_name else {}
    findings = list(inner.findings)
    findings += _code_findings(source, config)
    if len(weights) > 1:
        findings.insert(0, Finding(
            "info",
            f"{' and '.join(weights)} are all here; listed {chosen}, which from_pretrained loads "
            "first (safetensors before .bin, a single file before an index); give another's "
            "path to list it",
            source.where,
            chosen,
        ))
    summary = {k: config[k] for k in SUMMARY_KEYS if k in config}
    metadata = {
        "layout": "peft" if config_name == ADAPTER_CONFIG_NAME else "transformers",
        "config_file": config_name or None,
        "weights_file": chosen,
        "weights_files": weights,
        "weights_format": inner.format,
        "weights_metadata": inner.metadata,
    }
    return Checkpoint(
        paths=(source.where, *inner.paths),
        format=PEFT_FORMAT if config_name == ADAPTER_CONFIG_NAME else NAME,
        tensors=inner.tensors,
        metadata=metadata,
        hyperparameters={"config": config, "summary": summary},
        findings=findings,
        source=source,
        reader=inner.reader,
        side_configs={HF_CONFIG: config} if config_name == CONFIG_NAME else {},
    )


def _code_findings(source: Source, config: dict[str, Any]) -> list[Finding]:
    """What ``from_pretrained`` would run from the folder: ``auto_map`` code and chat
    templates (:mod:`.security.side_code`); dangerous ones refuse the checkpoint."""
    from .security.side_code import hf_dir_findings

    return hf_dir_findings(source, config)


def _with_file(t: TensorEntry, file: str) -> TensorEntry:
    return t.replace(file=file)


def open_bin_index(index: Source) -> Checkpoint:
    """A ``pytorch_model.bin.index.json`` and its torch shards as one checkpoint."""
    where = index.where
    doc, weight_map = read_weight_map(index)
    tensors: list[TensorEntry] = []
    readers: dict[str, Any] = {}
    paths = [where]
    found_in: dict[str, str] = {}
    findings: list[Finding] = []
    for shard in dict.fromkeys(weight_map.values()):
        shard_file = shard_source(index, shard, where)
        if not shard_file.is_file():
            raise FormatError(f"shard {shard!r} listed in the index is missing", where)
        ckpt = load(shard_file)
        paths.append(shard_file.where)
        readers[shard] = ckpt.reader
        findings.extend(ckpt.findings)
        for t in ckpt.tensors:
            if t.stored_name in found_in:
                raise FormatError(
                    f"tensor {t.stored_name!r} is stored in both {found_in[t.stored_name]!r} "
                    f"and {shard!r}",
                    where,
                )
            found_in[t.stored_name] = shard
            tensors.append(_with_file(t, shard))
    for name, shard in weight_map.items():
        if found_in.get(name) != shard:
            raise FormatError(
                f"tensor {name!r}: the index says shard {shard!r}, "
                + (f"found in {found_in[name]!r}" if name in found_in else "not found there"),
                where,
            )
    extra = [n for n in found_in if n not in weight_map]
    if extra:
        raise FormatError(
            f"{len(extra)} tensor(s) in the shards are missing from the index, e.g. {extra[0]!r}",
            where,
        )

    def locate(entry: TensorEntry) -> ValueLocation:
        reader = readers.get(entry.file or "")
        if reader is None:
            raise FormatError(f"tensor {entry.stored_name!r}: no shard {entry.file!r}", where)
        return reader(entry)

    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return Checkpoint(
        paths=tuple(paths),
        format="torch-sharded",
        tensors=tensors,
        metadata={"index_metadata": metadata, "shards": list(readers)},
        findings=findings,
        source=index,
        reader=locate,
    )


ADAPTER = Adapter(
    name=NAME,
    description="Hugging Face save_pretrained directory (config.json + weights; PEFT adapters)",
    extensions=("<directory>",),
    sniff=sniff,
    open=open_checkpoint,
)
