"""A TensorFlow SavedModel's graph, listed without TensorFlow: every op TensorFlow would run.

``saved_model.pb`` is a ``SavedModel`` protobuf (tensorflow/core/protobuf/saved_model.proto):
meta graphs, each with a ``GraphDef`` whose nodes and whose function library's
``FunctionDef.node_def`` are what ``tf.saved_model.load`` turns into functions the caller runs.
Each op is judged by :mod:`.tf_ops`: file, process and Python ops are ``dangerous``, the saver's
own checkpoint ops are inert inside the save/restore functions TensorFlow writes, vetted ops
are inert, and any other op is ``foreign``, named, never ``safe``. A node whose op is a function
of the library calls that function, which is examined itself.
"""

from __future__ import annotations

import re

from ..errors import FormatError
from ..protobuf import fields
from .examination import DANGEROUS, ERROR, FOREIGN, FileResult

MAX_BYTES = 1 << 30  # a SavedModel with large constants inlined
MAX_NODES = 10_000_000
# the functions tf.saved_model.save writes for tf.train.Checkpoint (their paths come from the
# caller), and TF1's Saver name scope
SAVER_FUNCTION = re.compile(r"^__inference__traced_(save|restore)_\d+$")
SAVER_SCOPE = re.compile(r"^save(_\d+)?/")


def examine_saved_model(data: bytes | memoryview, res: FileResult) -> None:
    """Every op of every meta graph and library function of a SavedModel, judged."""
    from .tf_ops import DANGEROUS as DANGEROUS_OPS
    from .tf_ops import INERT, SAVER

    res.kind = "tf-savedmodel"
    try:
        nodes, functions = graph_ops(data, res.path)
    except FormatError as e:
        res.add(ERROR, f"not a readable SavedModel protobuf ({e.message}): not examined")
        return
    unknown: dict[str, int] = {}
    flagged: set[tuple[str, str]] = set()
    for function, node, op in nodes:
        if op in functions or op in INERT:
            continue
        place = f"function {function}" if function else "the graph"
        if op in DANGEROUS_OPS:
            if (op, place) not in flagged:
                flagged.add((op, place))
                res.add(DANGEROUS, f"op {op} (node {node!r} in {place}): {DANGEROUS_OPS[op]}; "
                        "TensorFlow runs it when the model is called", place)
        elif op in SAVER:
            if SAVER_FUNCTION.match(function) or (not function and SAVER_SCOPE.match(node)):
                continue
            if (op, place) not in flagged:
                flagged.add((op, place))
                res.add(DANGEROUS, f"op {op} (node {node!r} in {place}): writes or reads a "
                        "checkpoint at a path the graph sets, outside the saver's own "
                        "functions", place)
        else:
            unknown[op] = unknown.get(op, 0) + 1
    if unknown:
        names = ", ".join(sorted(unknown)[:20]) + (" ..." if len(unknown) > 20 else "")
        res.add(FOREIGN, f"{len(unknown)} op type(s) not on the vetted list, not examined: "
                f"{names}")


def graph_ops(data: bytes | memoryview, where: str
              ) -> tuple[list[tuple[str, str, str]], set[str]]:
    """``[(function name or "" for a graph node, node name, op)]`` over every meta graph, and
    the names of the library's functions."""
    nodes: list[tuple[str, str, str]] = []
    functions: set[str] = set()
    for number, wire, mg in fields(memoryview(data), where):
        if number != 2 or wire != 2:
            continue
        for n2, w2, graph in fields(mg, where):
            if n2 == 2 and w2 == 2:
                _graph(graph, where, nodes, functions)
        if len(nodes) > MAX_NODES:
            raise FormatError(f"more than {MAX_NODES:,} graph nodes", where)
    return nodes, functions


def _graph(graph: memoryview, where: str, nodes: list[tuple[str, str, str]],
           functions: set[str]) -> None:
    for number, wire, value in fields(graph, where):
        if wire != 2:
            continue
        if number == 1:
            nodes.append(("", *_node(value, where)))
        elif number == 2:  # FunctionDefLibrary
            for n2, w2, fn in fields(value, where):
                if n2 == 1 and w2 == 2:
                    _function(fn, where, nodes, functions)


def _function(fn: memoryview, where: str, nodes: list[tuple[str, str, str]],
              functions: set[str]) -> None:
    name = ""
    body: list[tuple[str, str]] = []
    for number, wire, value in fields(fn, where):
        if wire != 2:
            continue
        if number == 1:  # signature: OpDef, its name is field 1
            for n2, w2, v2 in fields(value, where):
                if n2 == 1 and w2 == 2:
                    name = bytes(v2).decode("utf-8", "replace")
        elif number == 3:
            body.append(_node(value, where))
    functions.add(name)
    nodes.extend((name, node, op) for node, op in body)


def _node(node: memoryview, where: str) -> tuple[str, str]:
    name = op = ""
    for number, wire, value in fields(node, where):
        if wire != 2:
            continue
        if number == 1:
            name = bytes(value).decode("utf-8", "replace")
        elif number == 2:
            op = bytes(value).decode("utf-8", "replace")
    return name, op


def looks_like_saved_model(head: bytes) -> bool:
    """A SavedModel's first field: ``saved_model_schema_version`` (1, varint) or a meta graph
    (2, bytes)."""
    return head[:1] in (b"\x08", b"\x12")
