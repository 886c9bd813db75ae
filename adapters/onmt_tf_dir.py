"""OpenNMT-tf model directories: the TensorFlow checkpoint with its model description attached.

``onmt-main`` writes into the model directory the TensorFlow checkpoints (``ckpt-N.index`` /
``.data-*``, ``checkpoint``) and ``model_description.py``: the ``--model`` file copied, or for
``--model_type NAME`` the two lines ``from opennmt import models`` / ``model = lambda:
models.get_model_from_catalog("NAME")``. Neither the checkpoint nor the directory holds the
run configuration unless it was put there (``config.yml``, read when present).

The model description is Python: it is never run. It is parsed (``ast``, size-capped) and only
two shapes are understood, each as data: a catalog name, or a ``model()`` function returning one
call (``opennmt.models.Transformer(num_layers=2, ...)``) whose arguments are literals or dotted
names. The result is ``hyperparameters["onmt_tf_model"]``: ``{"catalog": NAME}``, ``{"class":
"Transformer", "kwargs": {...}}`` (a dotted name kept as its text, any other expression as
``"<expr>"``), or ``{"unparsed": reason}``; ``config.yml`` is ``hyperparameters
["onmt_tf_config"]``. The checkpoint is read by the TensorFlow adapter.
"""

from __future__ import annotations

import ast

from .ast_parse import parse
from .directory import file_in
from .errors import FormatError, InspectorError
from .model import Checkpoint
from .registry import Adapter, load
from .source import Source
from .yaml_safe import load_yaml

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAME = "onmt-tf"
DESCRIPTION = "model_description.py"  # opennmt.config.MODEL_DESCRIPTION_FILENAME
CONFIGS = ("config.yml", "config.yaml")
MAX_DESCRIPTION = 256 << 10
EXPR = "<expr>"


def sniff(head: bytes, source: Source) -> str | None:
    if not source.is_dir() or file_in(source, DESCRIPTION) is None:
        return None
    return NAME if file_in(source, "checkpoint") is not None else None


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _value(node: ast.AST) -> Any:
    dotted = _dotted(node)
    if dotted is not None:
        return dotted
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return EXPR


def _returned_call(tree: ast.Module) -> ast.Call | None:
    """The call a top-level ``model`` function (or ``model = lambda: ...``) returns."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "model":
            rets = [n for n in node.body if isinstance(n, ast.Return)]
            if len(rets) == 1 and isinstance(rets[0].value, ast.Call):
                return rets[0].value
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "model" \
                and isinstance(node.value, ast.Lambda) and isinstance(node.value.body, ast.Call):
            return node.value.body
    return None


def parse_description(text: str) -> dict[str, Any]:
    """What a model description says, as data (see the module docstring); never runs it."""
    try:
        tree = parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        return {"unparsed": f"not Python ({type(e).__name__})"}
    call = _returned_call(tree)
    if call is None:
        return {"unparsed": "no model() returning one call"}
    func = _dotted(call.func) or EXPR
    if func.endswith("get_model_from_catalog"):
        if len(call.args) == 1 and isinstance(call.args[0], ast.Constant) \
                and isinstance(call.args[0].value, str):
            return {"catalog": call.args[0].value}
        return {"unparsed": "a catalog call without a literal name"}
    return {"class": func.rsplit(".", 1)[-1], "callee": func,
            "args": [_value(a) for a in call.args],
            "kwargs": {k.arg: _value(k.value) for k in call.keywords if k.arg is not None}}


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    desc_source = file_in(source, DESCRIPTION)
    if desc_source is None:
        raise FormatError(f"OpenNMT-tf model directory without {DESCRIPTION}", source.where)
    if desc_source.size > MAX_DESCRIPTION:
        description = {"unparsed": f"{desc_source.size} bytes (limit {MAX_DESCRIPTION})"}
    else:
        try:
            description = parse_description(desc_source.read_text(MAX_DESCRIPTION))
        except UnicodeDecodeError:
            description = {"unparsed": "not UTF-8 text"}
    inner = load(source, format="tf-checkpoint")
    hyper: dict[str, Any] = {**inner.hyperparameters, "onmt_tf_model": description}
    paths = [*inner.paths, desc_source.where]
    for name in CONFIGS:
        cfg_source = file_in(source, name)
        if cfg_source is not None:
            try:
                cfg = load_yaml(cfg_source)
            except (InspectorError, UnicodeDecodeError):
                cfg = None
            if isinstance(cfg, dict):
                hyper["onmt_tf_config"] = cfg
                paths.append(cfg_source.where)
            break
    return Checkpoint(
        paths=tuple(paths),
        format=inner.format,
        tensors=inner.tensors,
        metadata={**inner.metadata, "model_description": DESCRIPTION},
        hyperparameters=hyper,
        findings=inner.findings,
        source=inner.source,
        reader=inner.reader,
    )


ADAPTER = Adapter(
    name=NAME,
    description="OpenNMT-tf model directory (TensorFlow checkpoint + model_description.py, "
                "parsed, never run)",
    extensions=("<directory>",),
    sniff=sniff,
    open=open_checkpoint,
)
