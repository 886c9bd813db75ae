"""TensorFlow operations by what they do when a SavedModel's function runs, as data.

Each op was judged from TensorFlow's op registrations and API docs (``tf.raw_ops``;
tensorflow-cpu 2.21.0): what its kernel does with its inputs at inference. ``DANGEROUS`` ops
read or write files, list the file system, run Python or reach other processes; ``SAVER`` ops
write or read a checkpoint at a path given as an input (every SavedModel's own save/restore
functions hold them: inert there, dangerous anywhere else); ``INERT`` ops compute on tensors
and variables only. An op in none of the three is named as not examined (never ``safe``).
"""

from __future__ import annotations

# op -> why it is dangerous
DANGEROUS: dict[str, str] = {
    "ReadFile": "reads a file named by a tensor",
    "WriteFile": "writes a file named by a tensor",
    "MatchingFiles": "lists the file system (glob)",
    "PyFunc": "calls Python (tf.numpy_function / tf.py_func)",
    "PyFuncStateless": "calls Python (tf.py_func, stateless)",
    "EagerPyFunc": "calls Python (tf.py_function)",
    "ImmutableConst": "memory-maps a file named in its attributes",
    "WholeFileReader": "reads whole files named by a queue",
    "WholeFileReaderV2": "reads whole files named by a queue",
    "TextLineReader": "reads files named by a queue",
    "TextLineReaderV2": "reads files named by a queue",
    "FixedLengthRecordReader": "reads files named by a queue",
    "FixedLengthRecordReaderV2": "reads files named by a queue",
    "TFRecordReader": "reads files named by a queue",
    "TFRecordReaderV2": "reads files named by a queue",
    "LMDBReader": "reads an LMDB database file",
    "TextLineDataset": "reads text files named by a tensor",
    "TFRecordDataset": "reads record files named by a tensor",
    "TFRecordDatasetV2": "reads record files named by a tensor",
    "FixedLengthRecordDataset": "reads files named by a tensor",
    "FixedLengthRecordDatasetV2": "reads files named by a tensor",
    "LoadDataset": "reads a saved dataset from a path",
    "SaveDataset": "writes a dataset to a path",
    "SaveDatasetV2": "writes a dataset to a path",
    "DatasetToTFRecord": "writes a record file named by a tensor",
    "CacheDatasetV2": "writes a cache file named by a tensor",
    "CacheDataset": "writes a cache file named by a tensor",
    "SnapshotDataset": "writes and reads snapshot files at a path",
    "SnapshotDatasetV2": "writes and reads snapshot files at a path",
    "WriteSummary": "writes an event file",
    "CreateSummaryFileWriter": "opens an event file for writing at a path",
    "CreateSummaryDbWriter": "opens a database file for writing at a path",
    "WriteRawProtoSummary": "writes an event file",
    "InitializeTableFromTextFile": "reads a vocabulary file named by a tensor",
    "InitializeTableFromTextFileV2": "reads a vocabulary file named by a tensor",
    "LoadAndRemapMatrix": "reads a checkpoint file named by a tensor",
    "GenerateVocabRemapping": "reads vocabulary files named by tensors",
    "DecodeProtoV2": "can read a descriptor file named in its attributes",
    "EncodeProto": "can read a descriptor file named in its attributes",
    "PrintV2": "writes to a stream or a file named in its attributes",
    "DebugIdentityV2": "writes debug events to a directory",
    "DebugIdentityV3": "writes debug events to a directory",
}

SAVER = frozenset({
    "SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "ShardedFilespec",
    "Save", "SaveSlices", "Restore", "RestoreSlice",
})

INERT = frozenset("""
Abs Acos Acosh Add AddN AddV2 All Any ApproximateEqual ArgMax ArgMin AsString Asin Asinh Assert
Assign AssignAdd AssignAddVariableOp AssignSub AssignSubVariableOp AssignVariableOp Atan Atan2
Atanh AvgPool AvgPool3D AvgPoolGrad BatchMatMul BatchMatMulV2 BatchMatMulV3
BatchNormWithGlobalNormalization BatchToSpaceND BiasAdd BiasAddV1 Bitcast BitwiseAnd BitwiseOr
BitwiseXor BroadcastArgs BroadcastGradientArgs BroadcastTo Bucketize Case Cast Ceil
CheckNumerics CheckNumericsV2 Cholesky ClipByValue Complex ComplexAbs Concat ConcatOffset
ConcatV2 Const ControlTrigger Conv2D Conv2DBackpropFilter Conv2DBackpropInput Conv3D Cos Cosh
Cross Cumprod Cumsum DepthToSpace DepthwiseConv2dNative DestroyResourceOp Diag DiagPart
Digamma Dilation2D DisableCopyOnRead Div DivNoNan DynamicPartition DynamicStitch Einsum Elu
EmptyTensorList Enter Equal Erf Erfc EnsureShape Exit Exp ExpandDims Expm1 ExtractImagePatches
FFT Fill Floor FloorDiv FloorMod FusedBatchNorm FusedBatchNormV2 FusedBatchNormV3 Gather
GatherNd GatherV2 Gelu Greater GreaterEqual GuaranteeConst HashTable HashTableV2 Identity
IdentityN If Imag InTopKV2 InvertPermutation IsFinite IsInf IsNan IsVariableInitialized L2Loss
LRN LeakyRelu LeftShift Less LessEqual Lgamma LinSpace ListDiff Log Log1p LogSoftmax LogicalAnd
LogicalNot LogicalOr LookupTableFindV2 LookupTableImportV2 LookupTableSizeV2 LoopCond MatMul
MatrixBandPart MatrixDiag MatrixDiagPart MatrixDiagPartV3 MatrixDiagV3 MatrixInverse
MatrixSetDiag MatrixSetDiagV3 MatrixSolve Max MaxPool MaxPool3D MaxPoolV2 Maximum Mean Merge
Min Minimum MirrorPad Mod Mul MulNoNan MutableHashTableV2 Neg NextIteration NoOp
NonMaxSuppressionV3 NonMaxSuppressionV4 NonMaxSuppressionV5 NotEqual OneHot OnesLike Pack Pad
PadV2 PartitionedCall Placeholder PlaceholderWithDefault Pow Prod QueueDequeueV2
RandomStandardNormal
RandomUniform RandomUniformInt Range Rank ReadVariableOp Real RealDiv Reciprocal Relu Relu6
Reshape ResizeBilinear ResizeNearestNeighbor ResourceGather ResourceScatterAdd
ResourceScatterUpdate ResourceStridedSliceAssign Reverse ReverseSequence ReverseV2 RightShift
Rint Round Rsqrt ScatterNd Select SelectV2 Selu Shape ShapeN Sigmoid Sign Sin Sinh Size Slice
Snapshot Softmax Softplus Softsign SpaceToBatchND SpaceToDepth SparseSoftmaxCrossEntropyWithLogits
SparseToDense Split SplitV Sqrt Square SquaredDifference Squeeze StackV2 StatefulPartitionedCall
StatelessIf StatelessRandomNormal StatelessRandomNormalV2 StatelessRandomUniform
StatelessRandomUniformV2 StatelessWhile StaticRegexFullMatch StaticRegexReplace StopGradient
StridedSlice StridedSliceGrad StringJoin StringLength StringSplitV2 StringToHashBucketFast
StringToNumber Sub Substr Sum Switch Tan Tanh TensorListFromTensor TensorListGetItem
TensorListReserve TensorListSetItem TensorListStack TensorScatterAdd TensorScatterUpdate Tile
TopKV2 Transpose TruncateDiv TruncateMod TruncatedNormal Unique Unpack UnsortedSegmentSum
VarHandleOp VarIsInitializedOp Variable VariableV2 Where While Xdivy Xlog1py ZerosLike
""".split())
