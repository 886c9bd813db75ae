"""tf.keras 2's op layers: a TensorFlow function, class method or attribute named in the config,
which the layer calls (``keras/layers/core/tf_op_layer.py`` of Keras 2.6-2.15, and
``TensorFlowOpLayer``, whose config holds a TensorFlow ``NodeDef`` that it runs).

* ``TFOpLambda`` / ``SlicingOpLambda``: ``from_config`` looks ``function`` up in the TensorFlow
  API (``get_symbol_from_name``: ``"math.add"`` is ``tf.math.add``) and the layer calls it on the
  graph's tensors. Safe for the array operations of :data:`PURE_NAMESPACES` and
  :data:`PURE_FUNCTIONS` (they compute on tensors: no file, process, Python callback or
  library loading); any other function (``io.write_file``, ``py_function``,
  ``numpy_function``, ``raw_ops.*``, ``load_op_library``, ``print``) is dangerous.
* ``ClassMethod`` (``cls_symbol`` + ``method_name``), ``InstanceProperty`` / ``InstanceMethod``
  (``attr_name``): the names tf.keras itself registers for ragged and sparse tensors are safe,
  any other name is dangerous (``getattr`` with a name from the file).
* ``TensorFlowOpLayer`` (tf.keras 2.0-2.3): the ``NodeDef``'s ``op`` must be one of
  :data:`PURE_OPS`; any other op (``ReadFile``, ``WriteFile``, ``PyFunc``) is dangerous.
"""

from __future__ import annotations

from .examination import DANGEROUS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OP_LAYERS = frozenset({"TFOpLambda", "SlicingOpLambda", "ClassMethod", "InstanceProperty",
                       "InstanceMethod", "TensorFlowOpLayer"})
PURE_NAMESPACES = ("math.", "nn.", "linalg.", "signal.", "__operators__.", "bitwise.",
                   "random.", "ragged.", "sparse.", "image.")
PURE_FUNCTIONS = frozenset({
    "abs", "add", "add_n", "argmax", "argmin", "argsort", "boolean_mask", "broadcast_to",
    "cast", "clip_by_norm", "clip_by_value", "concat", "cond", "constant", "cos", "cumsum",
    "divide", "einsum", "equal", "exp", "expand_dims", "eye", "fill", "floor", "gather",
    "gather_nd", "greater", "greater_equal", "identity", "less", "less_equal", "linspace",
    "log", "logical_and", "logical_not", "logical_or", "matmul", "maximum", "minimum",
    "multiply", "negative", "norm", "not_equal", "one_hot", "ones", "ones_like", "pad", "pow",
    "range", "rank", "reduce_all", "reduce_any", "reduce_logsumexp", "reduce_max",
    "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "repeat", "reshape", "reverse",
    "round", "scatter_nd", "searchsorted", "sequence_mask", "shape", "sigmoid", "sign", "sin",
    "size", "slice", "sort", "split", "sqrt", "square", "squeeze", "stack", "stop_gradient",
    "strided_slice", "subtract", "tanh", "tensor_scatter_nd_update", "tile", "transpose",
    "truediv", "unstack", "where", "zeros", "zeros_like",
})
COMPOSITE_ATTRIBUTES = frozenset({
    "values", "flat_values", "row_splits", "nested_row_splits", "value_rowids",
    "nested_value_rowids", "nrows", "row_starts", "row_limits", "row_lengths",
    "nested_row_lengths", "bounding_shape", "with_values", "with_flat_values",
    "with_row_splits_dtype", "merge_dims", "to_tensor", "to_sparse", "indices", "dense_shape",
})
RAGGED_CLASS_METHODS = frozenset({
    "from_value_rowids", "from_row_splits", "from_row_lengths", "from_row_starts",
    "from_row_limits", "from_uniform_row_length", "from_nested_value_rowids",
    "from_nested_row_splits", "from_nested_row_lengths", "from_tensor", "from_sparse",
})
PURE_OPS = frozenset({
    "Abs", "Add", "AddV2", "ArgMax", "ArgMin", "BatchMatMulV2", "Cast", "ConcatV2", "Cos",
    "Div", "Einsum", "Equal", "Erf", "Exp", "ExpandDims", "Fill", "FloorDiv", "GatherV2",
    "Greater", "GreaterEqual", "Identity", "Less", "LessEqual", "Log", "LogicalAnd",
    "LogicalNot", "LogicalOr", "MatMul", "Max", "Maximum", "Mean", "Min", "Minimum", "Mul",
    "Neg", "NotEqual", "OneHot", "OnesLike", "Pack", "Pad", "Pow", "Prod", "Range", "Rank",
    "RealDiv", "Relu", "Relu6", "Reshape", "Rsqrt", "Select", "SelectV2", "Shape", "Sigmoid",
    "Sin", "Size", "Slice", "Softmax", "Split", "SplitV", "Sqrt", "Square", "Squeeze",
    "StridedSlice", "Sub", "Sum", "Tanh", "Tile", "Transpose", "Unpack", "ZerosLike",
})


def pure_function(name: str) -> bool:
    """A TensorFlow API name (``"math.add"``, ``"compat.v1.reshape"``) of an array operation."""
    for prefix in ("compat.v1.", "compat.v2."):
        name = name.removeprefix(prefix)
    return name in PURE_FUNCTIONS or (name.startswith(PURE_NAMESPACES) and "." not in
                                      name.split(".", 1)[1] and "py_func" not in name)


def op_layer_items(cls: str, conf: dict[str, Any], owner: str) -> list[tuple[str, str]]:
    """What one tf.keras 2 op layer would call, when it is not a pure array operation."""
    if cls in ("TFOpLambda", "SlicingOpLambda"):
        fn = conf.get("function")
        if isinstance(fn, str) and pure_function(fn):
            return []
        return [(DANGEROUS, f"{owner} (function): tf.keras calls tf.{fn}, which is not among "
                            "the pure array operations")]
    if cls == "ClassMethod":
        symbol, method = conf.get("cls_symbol"), conf.get("method_name")
        if symbol == "RaggedTensor" and method in RAGGED_CLASS_METHODS:
            return []
        return [(DANGEROUS, f"{owner}: tf.keras calls tf.{symbol}.{method}, a class method "
                            "named in the file")]
    if cls in ("InstanceProperty", "InstanceMethod"):
        attr = conf.get("attr_name")
        if attr in COMPOSITE_ATTRIBUTES:
            return []
        return [(DANGEROUS, f"{owner} (attr_name): tf.keras reads attribute {attr!r} of a "
                            "tensor by a name from the file")]
    node = conf.get("node_def")
    op = node.get("op") if isinstance(node, dict) else None
    if op in PURE_OPS:
        return []
    return [(DANGEROUS, f"{owner} (node_def): tf.keras runs the TensorFlow op {op!r}, which is "
                        "not among the pure array operations")]
