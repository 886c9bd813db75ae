"""JoeyNMT model directories and checkpoints: the checkpoint with its configuration attached.

``joeynmt train`` writes a model directory: ``config.yaml`` (the training configuration it was
given, copied), the vocabularies and ``torch.save`` checkpoints (``best.ckpt``, ``latest.ckpt``,
``N.ckpt``: a dict of ``model_state``, ``optimizer_state``, ``scheduler_state``, ...). The
checkpoint does not embed its configuration; this adapter attaches it:

- a directory with a JoeyNMT ``config.yaml`` and ``best.ckpt`` (else ``latest.ckpt``, else its one
  ``*.ckpt``): that checkpoint;
- a ``*.ckpt`` torch file whose sibling ``config.yaml`` is JoeyNMT's: that file.

The checkpoint itself is read by the torch adapter (``registry.load(..., format="torch")``);
the configuration, parsed by the inert YAML reader, is ``hyperparameters["joeynmt_config"]``
(the documented key the ``joeynmt-*`` formulas read). A ``config.yaml`` is JoeyNMT's when it has
the sections JoeyNMT's ``load_config`` / ``build_model`` read: ``model`` with ``encoder`` and
``decoder`` mappings, and ``data`` with ``src`` and ``trg``.
"""

from __future__ import annotations

from .directory import file_in
from .errors import FormatError, InspectorError
from .model import Checkpoint
from .registry import Adapter, load
from .source import Source
from .yaml_safe import load_yaml

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAME = "joeynmt"
CONFIG = "config.yaml"
PREFERRED = ("best.ckpt", "latest.ckpt")
DIR, FILE = "joeynmt-dir", "joeynmt-ckpt"
MAX_LISTED = 1000  # entries of a directory looked at for its one *.ckpt
_ZIP = b"PK\x03\x04"


def is_joeynmt_config(cfg: Any) -> bool:
    """The sections JoeyNMT's ``build_model`` and ``load_data`` read."""
    if not isinstance(cfg, dict):
        return False
    model, data = cfg.get("model"), cfg.get("data")
    return (isinstance(model, dict) and isinstance(model.get("encoder"), dict)
            and isinstance(model.get("decoder"), dict) and isinstance(data, dict)
            and isinstance(data.get("src"), dict) and isinstance(data.get("trg"), dict))


def read_config(source: Source) -> dict[str, Any] | None:
    """A JoeyNMT ``config.yaml`` as a dict, None when the file is not one (or unreadable)."""
    try:
        cfg = load_yaml(source)
    except (InspectorError, OSError, UnicodeDecodeError):
        return None
    return cfg if is_joeynmt_config(cfg) else None


def checkpoint_name(directory: Source) -> str | None:
    """The checkpoint of a model directory JoeyNMT's ``test`` would load: ``best.ckpt``, else
    ``latest.ckpt``, else the directory's one ``*.ckpt``."""
    for name in PREFERRED:
        if file_in(directory, name) is not None:
            return name
    try:
        names = directory.list()
    except (InspectorError, OSError):
        return None
    if len(names) > MAX_LISTED:
        return None
    ckpts = [n for n in names if n.endswith(".ckpt") and file_in(directory, n) is not None]
    return ckpts[0] if len(ckpts) == 1 else None


def _sibling_config(source: Source) -> Source | None:
    try:
        cfg = source.sibling(CONFIG)
        return cfg if cfg.is_file() else None
    except (InspectorError, OSError, RuntimeError):
        return None


def sniff(head: bytes, source: Source) -> str | None:
    if source.is_dir():
        cfg = file_in(source, CONFIG)
        if cfg is None or checkpoint_name(source) is None:
            return None
        return DIR if read_config(cfg) is not None else None
    if not head.startswith(_ZIP) or not source.name.endswith(".ckpt"):
        return None
    cfg = _sibling_config(source)
    return FILE if cfg is not None and read_config(cfg) is not None else None


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    if variant == DIR:
        name = checkpoint_name(source)
        if name is None:
            raise FormatError("JoeyNMT model directory without best.ckpt, latest.ckpt or one "
                              "*.ckpt", source.where)
        ckpt_source, cfg_source = source.child(name), source.child(CONFIG)
    else:
        ckpt_source, cfg_source, name = source, _sibling_config(source), source.name
        if cfg_source is None:
            raise FormatError(f"no {CONFIG} beside the JoeyNMT checkpoint", source.where)
    cfg = read_config(cfg_source)
    if cfg is None:
        raise FormatError(f"{CONFIG} is not a JoeyNMT configuration (model.encoder, "
                          "model.decoder, data.src, data.trg)", cfg_source.where)
    inner = load(ckpt_source, format="torch")
    paths = (source.where, *inner.paths) if variant == DIR else (*inner.paths, cfg_source.where)
    return Checkpoint(
        paths=paths,
        format=inner.format,
        tensors=inner.tensors,
        metadata={**inner.metadata, "config_file": CONFIG, "checkpoint_file": name,
                  "layout": variant},
        hyperparameters={**inner.hyperparameters, "joeynmt_config": cfg},
        findings=inner.findings,
        source=inner.source,
        reader=inner.reader,
    )


def examine(source: Source, variant: str, result: Any) -> None:
    """``scan``: the checkpoint file's own examination by the torch adapter (the YAML
    configuration is read inertly and runs nothing)."""
    from .torch import ADAPTER as TORCH
    from .torch import sniff as torch_sniff

    target = source.child(checkpoint_name(source) or PREFERRED[0]) if variant == DIR else source
    with target.open() as fh:
        head = fh.read(4096)
    torch_variant = torch_sniff(head, target)
    if torch_variant is None:
        raise FormatError("not a torch checkpoint", target.where)
    result.kind = torch_variant  # as scan names a file the torch adapter claims
    TORCH.examine(target, torch_variant, result)


ADAPTER = Adapter(
    name=NAME,
    description="JoeyNMT model directory or *.ckpt with its config.yaml attached",
    extensions=("<directory>", ".ckpt"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,
)
