"""Data only: the vetted set, every callable and class a pickle may make a loader invoke.

A global is ``safe`` only when it is here (or is a named torch constant, or the user trusts it:
:mod:`.trust`) for every use the pickle makes of it. Each entry was reviewed against its source:
what its ``__new__``, ``__init__``, ``__setstate__``, ``__reduce__`` and ``__del__`` do, and whether
it evaluates a string it is given. An entry is ``name -> (reviewed version, uses, reason)``:

* the version read (``PY`` is CPython's own ``Lib/`` and ``Objects/``, 3.10 to 3.14);
* the uses it was vetted for, among :data:`USES` (``ANY``: every one):

  - ``call``: called with any arguments (REDUCE, INST, OBJ, an allowed helper calling it);
  - ``value``: called with one plain value (an Enum member lookup: ``Color(1)``);
  - ``new``: constructed without ``__init__`` (NEWOBJ, ``copyreg.__newobj__``,
    ``copyreg._reconstructor``);
  - ``state``: an instance given BUILD state (``__setstate__`` or ``__dict__.update``);
  - ``items``: an instance given SETITEM(S)/APPEND(S) (``__setitem__``, ``append``, ``extend``);

  a use the entry was not vetted for makes the global ``dangerous``, as for a name not here;
* one line saying why that use is inert.

Only referenced (a dict key, a type argument, a class passed as data), an unvetted name is
``foreign``, never ``dangerous``. Nothing here is imported or run: the names are text.
:mod:`.verdicts` applies the set; ``tests/test_vetted.py`` checks the entries' form.
"""

from __future__ import annotations

USES = ("call", "value", "new", "state", "items")
ANY = " ".join(USES)
ENUM = "value new"  # EnumType.__call__ / Enum.__new__ look a member up by value; no state
OBJECT = "new state"  # __new__ without __init__, then the BUILD state (reviewed per entry)
NAMED = ""  # only referenced (a type kept as data), never invoked
PY = "CPython 3.10-3.14"
TORCH = "torch 2.13.0"
OMEGACONF = "omegaconf 2.3.1, 2.4.0"

VETTED: dict[str, tuple[str, str, str]] = {
    # -- containers and scalars from builtins (all in fickling's SAFE_BUILTINS)
    "collections.OrderedDict": (PY, ANY, "dict subclass; torch state dicts are OrderedDicts"),
    "collections.Counter": (PY, ANY, "dict subclass built from the given mapping"),
    "collections.defaultdict": (
        PY, ANY,
        "dict subclass; the factory is recorded, called only on missing keys (never during "
        "loading)"),
    "builtins.set": (PY, ANY, "set of the given items"),
    "builtins.frozenset": (PY, ANY, "frozenset of the given items"),
    "builtins.dict": (PY, ANY, "dict of the given items"),
    "builtins.list": (PY, ANY, "list of the given items"),
    "builtins.tuple": (PY, ANY, "tuple of the given items"),
    "builtins.slice": (PY, ANY, "slice object, no evaluation"),
    "builtins.complex": (PY, ANY, "number from numbers"),
    "builtins.float": (PY, ANY, "number from a number or numeric string"),
    "builtins.int": (PY, ANY, "number from a number or numeric string"),
    "builtins.bool": (PY, ANY, "truth value"),
    "builtins.str": (PY, ANY, "text (protocol 0 writes some text this way)"),
    "builtins.object": (PY, ANY, "the base class; the usual `base` of copyreg._reconstructor"),
    "builtins.bytes": (PY, ANY, "bytes from bytes or (str, encoding); size-capped by the reader"),
    "builtins.bytearray": (
        PY, ANY, "bytearray from bytes or (str, encoding); size-capped by the reader"),
    "builtins.range": (PY, ANY, "lazy integer range"),
    # pure builtins: computed on plain values by the reader; on an object of the file they call
    # its class's special method (__index__, __len__, __hash__, ...), recorded on that class
    "builtins.len": (PY, ANY, "length of a plain value"),
    "builtins.abs": (PY, ANY, "absolute value"),
    "builtins.min": (
        PY, ANY, "smallest of plain values (no key function: REDUCE passes no keywords)"),
    "builtins.max": (PY, ANY, "largest of plain values (ditto)"),
    "builtins.sum": (PY, ANY, "sum of plain numbers"),
    "builtins.round": (PY, ANY, "rounded number"),
    "builtins.divmod": (PY, ANY, "quotient and remainder"),
    "builtins.all": (PY, ANY, "truth of plain values"),
    "builtins.any": (PY, ANY, "truth of plain values"),
    "builtins.hash": (PY, ANY, "hash of a plain value"),
    "builtins.repr": (PY, ANY, "text of a plain value"),
    "builtins.ascii": (PY, ANY, "text of a plain value"),
    "builtins.format": (PY, ANY, "text of a plain value"),
    "builtins.ord": (PY, ANY, "code point"),
    "builtins.chr": (PY, ANY, "character"),
    "builtins.hex": (PY, ANY, "text of an int"),
    "builtins.oct": (PY, ANY, "text of an int"),
    "builtins.bin": (PY, ANY, "text of an int"),
    "builtins.sorted": (PY, ANY, "sorted plain values"),
    "builtins.reversed": (PY, ANY, "reversed sequence"),
    "builtins.iter": (PY, ANY, "iterator over a plain value"),
    # -- the pickle protocol's own helpers
    "_codecs.encode": (
        PY, ANY, "protocol 2 spells bytes as encode(str, 'latin1'); text codecs only"),
    "copyreg._reconstructor": (
        PY, ANY, "protocol 0/1 NEWOBJ: constructs `cls`; a foreign `base` is recorded as called"),
    "copyreg.__newobj__": (PY, ANY, "NEWOBJ as a function: constructs `cls` without __init__"),
    "copyreg.__newobj_ex__": (
        PY, ANY, "NEWOBJ_EX as a function: constructs `cls` without __init__"),
    "copyreg._reconstruct": (PY, ANY, "old spelling of _reconstructor"),
    # -- enums: calling an Enum class with a value looks a member up (EnumMeta.__call__); these
    # are the ones transformers' Trainer pickles into every training_args.bin (checked to be Enum
    # subclasses by fixtures/security/make_fixtures.py, transformers 5.23.0, accelerate)
    "transformers.trainer_utils.IntervalStrategy": (
        "transformers 5.23.0, 5.24.0", ENUM, "Enum member by value"),
    "transformers.trainer_utils.SaveStrategy": (
        "transformers 5.23.0, 5.24.0", ENUM, "Enum member by value"),
    "transformers.trainer_utils.HubStrategy": (
        "transformers 5.23.0, 5.24.0", ENUM, "Enum member by value"),
    "transformers.trainer_utils.SchedulerType": (
        "transformers 5.23.0, 5.24.0", ENUM, "Enum member by value"),
    "transformers.training_args.OptimizerNames": (
        "transformers 5.23.0, 5.24.0", ENUM, "Enum member by value"),
    "accelerate.utils.dataclasses.DistributedType": (
        "accelerate 1.13.0, 1.15.0", ENUM, "Enum member by value"),
    # Megatron-LM's args (megatron/training/arguments.py, core_v0.16.1: exit_signal,
    # attention_backend; checked to be Enum subclasses by fixtures/megatron/make_megatron.py)
    "signal.Signals": (PY, ENUM, "IntEnum member by value (a lookup: no handler is installed)"),
    "megatron.core.transformer.enums.AttnBackend": (
        "megatron-core 0.16.1", ENUM, "Enum member by value"),
    # -- paths: a value (hyperparameters such as Lightning's default_root_dir); no I/O on build
    "pathlib.PosixPath": (PY, ANY, "path object built from its parts"),
    "pathlib.WindowsPath": (PY, ANY, "path object built from its parts"),
    "pathlib.PurePosixPath": (PY, ANY, "path object built from its parts"),
    "pathlib.PureWindowsPath": (PY, ANY, "path object built from its parts"),
    "pathlib.Path": (PY, ANY, "path object built from its parts"),
    "pathlib._local.PosixPath": (PY, ANY, "same, Python 3.13 module path"),
    "pathlib._local.WindowsPath": (PY, ANY, "same, Python 3.13 module path"),
    "pathlib._local.PurePosixPath": (PY, ANY, "same, Python 3.13 module path"),
    "pathlib._local.PureWindowsPath": (PY, ANY, "same, Python 3.13 module path"),
    # -- datetime / decimal / fractions / uuid-free value types
    "datetime.datetime": (PY, ANY, "value type built from bytes and a tzinfo"),
    "datetime.date": (PY, ANY, "value type"),
    "datetime.time": (PY, ANY, "value type"),
    "datetime.timedelta": (PY, ANY, "value type"),
    "datetime.timezone": (PY, ANY, "value type"),
    "decimal.Decimal": (PY, ANY, "number from text, no evaluation"),
    "fractions.Fraction": (PY, ANY, "number from numbers or text"),
    # -- NumPy array and scalar reconstruction
    "numpy.core.multiarray._reconstruct": (
        "numpy 2.2.6", ANY, "empty ndarray of a dtype; data comes from BUILD"),
    "numpy._core.multiarray._reconstruct": ("numpy 2.2.6", ANY, "same, NumPy 2 module path"),
    "numpy.core.multiarray.scalar": ("numpy 2.2.6", ANY, "scalar from a dtype and its raw bytes"),
    "numpy._core.multiarray.scalar": ("numpy 2.2.6", ANY, "same, NumPy 2 module path"),
    "numpy.ndarray": ("numpy 2.2.6", ANY, "the array type (argument of _reconstruct)"),
    "numpy.dtype": ("numpy 2.2.6", ANY, "dtype from a type code; no code runs"),
    "numpy.core.numeric._frombuffer": (
        "numpy 2.2.6", ANY, "array from bytes (NumPy >= 1.24 pickles)"),
    "numpy._core.numeric._frombuffer": ("numpy 2.2.6", ANY, "same, NumPy 2 module path"),
    # numpy/random/_pickle.py (numpy 2.2.6, read): each helper builds from a bit generator
    # *name*; given a class or a ctor argument it calls it: CALLS_ARGUMENT says which, so the
    # argument's own verdict decides (an allowlisted bit generator below, or a dangerous callable)
    "numpy.random._pickle.__randomstate_ctor": (
        "numpy 2.2.6", ANY, "RandomState of a named bit generator"),
    "numpy.random._pickle.__bit_generator_ctor": (
        "numpy 2.2.6", ANY, "bit generator of a named kind"),
    "numpy.random._pickle.__generator_ctor": (
        "numpy 2.2.6", ANY, "Generator of a named bit generator"),
    # the bit generators `__bit_generator_ctor(cls)` calls with no argument (np.random.
    # default_rng(0) pickles PCG64 this way): __init__(seed=None) seeds from a SeedSequence, the
    # BUILD state goes to their `state` setter, which checks the dict (numpy/random/_pcg64.pyx,
    # _mt19937.pyx, _philox.pyx, _sfc64.pyx, bit_generator.pyx)
    "numpy.random._pcg64.PCG64": (
        "numpy 2.2.6", ANY, "bit generator; state set from a checked dict"),
    "numpy.random._pcg64.PCG64DXSM": (
        "numpy 2.2.6", ANY, "bit generator; state set from a checked dict"),
    "numpy.random._mt19937.MT19937": (
        "numpy 2.2.6", ANY, "bit generator; state set from a checked dict"),
    "numpy.random._philox.Philox": (
        "numpy 2.2.6", ANY, "bit generator; state set from a checked dict"),
    "numpy.random._sfc64.SFC64": (
        "numpy 2.2.6", ANY, "bit generator; state set from a checked dict"),
    # SeedSequence has no __reduce__: Cython generates `__pyx_unpickle_SeedSequence(type,
    # checksum, state)`, which checks the checksum, calls SeedSequence.__new__(type) (no
    # __init__) and assigns the typed fields of `state` (Cython/Compiler/ParseTreeTransforms.py,
    # the pickle injection, read); the class is its `type` argument
    "numpy.random.bit_generator.__pyx_unpickle_SeedSequence": (
        "numpy 2.2.6", ANY, "SeedSequence from its fields"),
    "numpy.random.bit_generator.SeedSequence": (
        "numpy 2.2.6", ANY, "the class __pyx_unpickle_SeedSequence builds"),
    # -- torch: the rebuild functions torch.save writes, with the reader's own implementations
    "torch._utils._rebuild_tensor": (TORCH, ANY, "tensor view of a storage (metadata only)"),
    "torch._utils._rebuild_tensor_v2": (TORCH, ANY, "tensor view of a storage (metadata only)"),
    "torch._utils._rebuild_tensor_v3": (TORCH, ANY, "tensor view of a storage with a dtype"),
    "torch._utils._rebuild_parameter": (TORCH, ANY, "Parameter around a rebuilt tensor"),
    "torch._utils._rebuild_parameter_with_state": (
        TORCH, ANY, "Parameter with recorded attributes"),
    "torch._utils._rebuild_qtensor": (TORCH, ANY, "quantized tensor view"),
    "torch._utils._rebuild_sparse_tensor": (TORCH, ANY, "sparse tensor from index/value tensors"),
    "torch._utils._rebuild_sparse_csr_tensor": (TORCH, ANY, "CSR tensor from tensors"),
    "torch._utils._rebuild_nested_tensor": (TORCH, ANY, "nested tensor from buffers"),
    "torch._utils._rebuild_device_tensor_from_cpu_tensor": (TORCH, ANY, "device copy of a tensor"),
    "torch._utils._rebuild_device_tensor_from_numpy": (TORCH, ANY, "tensor from an array"),
    "torch._utils._rebuild_xla_tensor": (TORCH, ANY, "tensor from an array"),
    "torch._utils._rebuild_meta_tensor_no_storage": (
        TORCH, ANY, "meta tensor: shape and dtype only"),
    "torch._utils._rebuild_wrapper_subclass": (
        TORCH, ANY, "wrapper subclass shell (the subclass is recorded as constructed)"),
    "torch._tensor._rebuild_from_type_v2": (
        TORCH, ANY, "calls its `func` argument (recorded as called) and re-types the result"),
    "torch._tensor._rebuild_from_type": (TORCH, ANY, "older spelling of the above"),
    "torch.nn.parameter.Parameter": (TORCH, ANY, "Parameter wrapper of a tensor"),
    "torch.nn.Parameter": (TORCH, ANY, "same, short path"),
    "torch.Size": (TORCH, ANY, "tuple of ints"),
    "torch.device": (TORCH, ANY, "device name"),
    "torch.serialization._get_layout": (TORCH, ANY, "layout constant by name"),
    # -- torch Distributed Checkpoint `.metadata` (torch 2.13 torch/distributed/checkpoint/
    # metadata.py, filesystem.py, planner.py, read; the globals of real dcp.save and
    # torch_save_to_dcp output). Plain dataclasses: NEWOBJ + BUILD fills __dict__; the only
    # __setstate__ (TensorProperties) unpacks a 5-tuple and maps an enum to a memory format.
    "torch.distributed.checkpoint.metadata.Metadata": (
        TORCH, OBJECT, "dataclass: state dict metadata"),
    "torch.distributed.checkpoint.metadata.StorageMeta": (
        TORCH, OBJECT, "dataclass: checkpoint id, save id"),
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata": (
        TORCH, OBJECT, "dataclass: properties, size, chunks"),
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata": (
        TORCH, OBJECT, "empty dataclass"),
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata": (
        TORCH, OBJECT, "dataclass: offsets, sizes"),
    "torch.distributed.checkpoint.metadata.TensorProperties": (
        TORCH, OBJECT,
        "dataclass; __setstate__ unpacks (dtype, layout, requires_grad, memory format enum, "
        "pin_memory)"),
    "torch.distributed.checkpoint.metadata.MetadataIndex": (
        TORCH, OBJECT, "frozen dataclass: fqn, offset"),
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING": (
        TORCH, ENUM, "Enum member by value"),
    "torch.distributed.checkpoint.filesystem._StorageInfo": (
        TORCH, OBJECT,
        "dataclass: relative path, offset, length (a path the loader opens under the checkpoint "
        "directory, never at unpickling)"),
    "torch.distributed.checkpoint.filesystem._StoragePrefix": (
        TORCH, OBJECT, "dataclass: file name prefix"),
    "torch.distributed.checkpoint.planner.WriteItemType": (TORCH, ENUM, "Enum member by value"),
    "torch.distributed.checkpoint.planner.LoadItemType": (TORCH, ENUM, "Enum member by value"),
    "torch.distributed.checkpoint.planner.BytesIOWriteData": (
        TORCH, OBJECT, "frozen dataclass: nbytes"),
    "torch.distributed.checkpoint.planner.TensorWriteData": (
        TORCH, OBJECT, "frozen dataclass: chunk, properties, size"),
    "torch.distributed.checkpoint.planner.WriteItem": (
        TORCH, OBJECT, "frozen dataclass: index, type, data"),
    "torch.distributed.checkpoint.planner.ReadItem": (
        TORCH, OBJECT, "frozen dataclass: indices and sizes"),
    "torch.distributed.checkpoint.planner.SavePlan": (
        TORCH, OBJECT, "frozen dataclass: items, plan data"),
    "torch.distributed.checkpoint.planner.LoadPlan": (TORCH, OBJECT, "dataclass: items, plan data"),
    # -- DeepSpeed optimizer/model states (deepspeed 0.19.8, read: runtime/zero/config.py,
    # utils/tensor_fragment.py, runtime/fp16/loss_scaler.py, runtime/config_utils.py; the
    # globals of real ZeRO stage 0-3 checkpoints, fp32 and bf16, written on CPU). No
    # __setstate__/__reduce__: an int Enum by value, dataclasses and plain objects whose BUILD
    # fills __dict__.
    "deepspeed.runtime.zero.config.ZeroStageEnum": (
        "deepspeed 0.19.8", ENUM, "int Enum member by value"),
    "deepspeed.utils.tensor_fragment.fragment_address": (
        "deepspeed 0.19.8", OBJECT, "dataclass: numel, start"),
    "deepspeed.runtime.fp16.loss_scaler.LossScaler": (
        "deepspeed 0.19.8", OBJECT, "plain object (cur_scale, dynamic)"),
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler": (
        "deepspeed 0.19.8", OBJECT,
        "plain object (scale counters); fp16 runs pickle it in place of LossScaler"),
    "joblib.numpy_pickle.NumpyArrayWrapper": (
        "joblib 1.5.2", ANY,
        "joblib's array header (shape, dtype, order); the array's bytes follow it raw (fickling "
        "lists all of joblib for joblib.load)"),
    "torch.storage.UntypedStorage": (
        TORCH, ANY, "storage type tag in a persistent id (torch >= 2.0)"),
    "torch.storage.TypedStorage": (TORCH, ANY, "storage type tag in a persistent id"),
    "torch.Tensor": (TORCH, ANY, "the tensor class (argument of _rebuild_from_type_v2)"),
    "torch._tensor.Tensor": (TORCH, ANY, "same, defining module"),
    "torch.jit._pickle.build_intlist": (TORCH, ANY, "TorchScript data.pkl: list of ints"),
    "torch.jit._pickle.build_floatlist": (TORCH, ANY, "TorchScript data.pkl: list of floats"),
    "torch.jit._pickle.build_boollist": (TORCH, ANY, "TorchScript data.pkl: list of bools"),
    "torch.jit._pickle.build_tensorlist": (TORCH, ANY, "TorchScript data.pkl: list of tensors"),
    "torch.jit._pickle.build_doublelist": (TORCH, ANY, "TorchScript data.pkl: list of floats"),
    "torch.jit._pickle.restore_type_tag": (
        TORCH, ANY, "TorchScript data.pkl: returns its first argument"),
    # -- torch.nn modules, as torch.save(model) pickles them (torch/nn/modules/*.py, read): no
    # __new__, __reduce__ or __del__ of their own; NEWOBJ, then BUILD -> Module.__setstate__:
    # __dict__.update(state) and empty hook dicts for the missing ones (hooks in the state are
    # globals of their own, judged as such); none evaluates a string. A user's own Module
    # subclass is not here: its code is the user's (--trust names it).
    "torch.nn.modules.module.Module": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.linear.Identity": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.linear.Linear": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.linear.NonDynamicallyQuantizableLinear": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.linear.Bilinear": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.sparse.Embedding": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.sparse.EmbeddingBag": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.normalization.LayerNorm": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.normalization.GroupNorm": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.normalization.RMSNorm": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.batchnorm.BatchNorm1d": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.batchnorm.BatchNorm2d": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.batchnorm.BatchNorm3d": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.dropout.Dropout": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.dropout.Dropout1d": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.dropout.Dropout2d": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.dropout.Dropout3d": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.container.Sequential": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.container.ModuleList": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.container.ModuleDict": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.activation.ReLU": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.activation.GELU": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.activation.Tanh": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.activation.Sigmoid": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.activation.SiLU": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.activation.LeakyReLU": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.rnn.RNNCell": (TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.rnn.LSTMCell": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.rnn.GRUCell": (TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.transformer.TransformerEncoder": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.transformer.TransformerDecoder": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.transformer.Transformer": (
        TORCH, OBJECT, "Module.__setstate__ (no setstate of its own)"),
    "torch.nn.modules.rnn.RNN": (
        TORCH, OBJECT,
        "RNNBase.__setstate__: Module's, then rebuilds the weight-name lists from "
        "num_layers/bias/proj_size and weakrefs to its own parameters"),
    "torch.nn.modules.rnn.LSTM": (TORCH, OBJECT, "same RNNBase.__setstate__"),
    "torch.nn.modules.rnn.GRU": (TORCH, OBJECT, "same RNNBase.__setstate__"),
    "torch.nn.modules.conv.Conv1d": (
        TORCH, OBJECT, "_ConvNd.__setstate__: Module's, then padding_mode defaults to 'zeros'"),
    "torch.nn.modules.conv.Conv2d": (TORCH, OBJECT, "same _ConvNd.__setstate__"),
    "torch.nn.modules.conv.Conv3d": (TORCH, OBJECT, "same _ConvNd.__setstate__"),
    "torch.nn.modules.activation.Softmax": (
        TORCH, OBJECT, "__setstate__: Module's, then dim defaults to None"),
    "torch.nn.modules.activation.LogSoftmax": (TORCH, OBJECT, "same as Softmax"),
    "torch.nn.modules.activation.MultiheadAttention": (
        TORCH, OBJECT, "__setstate__: _qkv_same_embed_dim defaults to True, then Module's"),
    "torch.nn.modules.transformer.TransformerEncoderLayer": (
        TORCH, OBJECT, "__setstate__: Module's, then activation defaults to F.relu"),
    "torch.nn.modules.transformer.TransformerDecoderLayer": (
        TORCH, OBJECT, "same as TransformerEncoderLayer"),
    # -- argparse (Lib/argparse.py, read): Namespace(_AttributeHolder) defines __init__
    # (setattr of keyword arguments), __eq__, __contains__, __repr__; nothing pickle-related, so
    # NEWOBJ + BUILD fills __dict__ (fairseq, OpenNMT-py, Megatron keep their options so)
    "argparse.Namespace": (PY, OBJECT, "plain attribute holder: BUILD fills __dict__"),
    # -- omegaconf containers, as Lightning's save_hyperparameters and NeMo pickle a DictConfig
    # (omegaconf 2.3.1 and 2.4.0, read: base.py, basecontainer.py, nodes.py). No __new__,
    # __reduce__ or __del__. BaseContainer.__setstate__ (DictConfig, ListConfig) fills defaults
    # for key/element types, re-subscripts typing.Dict/List with them (a string there becomes a
    # ForwardRef: compiled, never evaluated) and updates __dict__; Node.__setstate__ (every node)
    # updates __dict__ and clears the flag cache. Interpolations ("${a.b}") and resolvers run only
    # when a value is read, never at load. Metadata / ContainerMetadata are plain dataclasses.
    "omegaconf.dictconfig.DictConfig": (OMEGACONF, OBJECT,
                                        "BaseContainer.__setstate__ (types, then __dict__)"),
    "omegaconf.listconfig.ListConfig": (OMEGACONF, OBJECT,
                                        "BaseContainer.__setstate__ (types, then __dict__)"),
    "omegaconf.base.Metadata": (OMEGACONF, OBJECT, "dataclass: BUILD fills it"),
    "omegaconf.base.ContainerMetadata": (OMEGACONF, OBJECT,
                                         "dataclass: BUILD fills it"),
    "omegaconf.nodes.AnyNode": (OMEGACONF, OBJECT, "Node.__setstate__: __dict__"),
    "omegaconf.nodes.StringNode": (OMEGACONF, OBJECT, "Node.__setstate__: __dict__"),
    "omegaconf.nodes.IntegerNode": (OMEGACONF, OBJECT, "Node.__setstate__: __dict__"),
    "omegaconf.nodes.FloatNode": (OMEGACONF, OBJECT, "Node.__setstate__: __dict__"),
    "omegaconf.nodes.BooleanNode": (OMEGACONF, OBJECT, "Node.__setstate__: __dict__"),
    "omegaconf.nodes.BytesNode": (OMEGACONF, OBJECT, "Node.__setstate__: __dict__"),
    "omegaconf.nodes.PathNode": (OMEGACONF, OBJECT, "Node.__setstate__: __dict__"),
    "omegaconf.nodes.EnumNode": (OMEGACONF, OBJECT, "Node.__setstate__: __dict__"),
    # typing.Any is what a container's key and element types default to: a constant, named only
    "typing.Any": (PY, NAMED, "the typing constant Any, kept as a type"),
    # -- transformers' training_args.bin: torch.save(TrainingArguments) beside every checkpoint
    # (transformers 5.24.0 training_args.py, training_args_seq2seq.py, trainer_pt_utils.py;
    # accelerate 1.15.0 state.py, read). Dataclasses without __setstate__, __reduce__, __del__ or
    # __slots__: NEWOBJ skips __init__/__post_init__ (device and directory setup), BUILD fills
    # __dict__. PartialState's Borg __init__ (sharing one dict) does not run either: the BUILD
    # state lands in the new instance's own __dict__; its __getattr__ only raises AttributeError.
    "transformers.training_args.TrainingArguments": (
        "transformers 5.23.0, 5.24.0", OBJECT, "dataclass: BUILD fills __dict__"),
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments": (
        "transformers 5.24.0", OBJECT, "TrainingArguments subclass: no pickle methods added"),
    "transformers.trainer_pt_utils.AcceleratorConfig": (
        "transformers 5.23.0, 5.24.0", OBJECT, "dataclass: BUILD fills __dict__"),
    "accelerate.state.PartialState": (
        "accelerate 1.13.0, 1.15.0", OBJECT,
        "plain object: BUILD fills its own __dict__ (the shared-state __init__ never runs)"),
    # -- Lightning (lightning 2.6.6 and pytorch_lightning 2.6.6, read: fabric/utilities/data.py,
    # pytorch/utilities/parsing.py, pytorch/callbacks/{model_checkpoint,early_stopping,
    # lr_monitor}.py). The callbacks have no __setstate__, __reduce__, __del__ or __getattr__:
    # NEWOBJ + BUILD fills __dict__ (a callback kept in hyperparameters, or as a checkpoint's
    # callback key). AttributeDict is a dict whose __getattr__ reads its items: vetted for
    # NEWOBJ + SETITEMS only, since a BUILD would look __setstate__ up among those items.
    "lightning.pytorch.callbacks.model_checkpoint.ModelCheckpoint": (
        "lightning 2.6.6", OBJECT, "callback: BUILD fills __dict__"),
    "lightning.pytorch.callbacks.early_stopping.EarlyStopping": (
        "lightning 2.6.6", OBJECT, "callback: BUILD fills __dict__"),
    "lightning.pytorch.callbacks.lr_monitor.LearningRateMonitor": (
        "lightning 2.6.6", OBJECT, "callback: BUILD fills __dict__"),
    "lightning.pytorch.callbacks.early_stopping.EarlyStoppingReason": (
        "lightning 2.6.6", ENUM, "Enum member by value"),
    "pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint": (
        "lightning 2.6.6", OBJECT, "callback: BUILD fills __dict__"),
    "pytorch_lightning.callbacks.early_stopping.EarlyStopping": (
        "lightning 2.6.6", OBJECT, "callback: BUILD fills __dict__"),
    "pytorch_lightning.callbacks.lr_monitor.LearningRateMonitor": (
        "lightning 2.6.6", OBJECT, "callback: BUILD fills __dict__"),
    "pytorch_lightning.callbacks.early_stopping.EarlyStoppingReason": (
        "lightning 2.6.6", ENUM, "Enum member by value"),
    "lightning.fabric.utilities.data.AttributeDict": (
        "lightning 2.6.6", "new items", "dict subclass: SETITEMS fill it; no state"),
    "lightning_fabric.utilities.data.AttributeDict": (
        "lightning 2.6.6", "new items", "dict subclass: SETITEMS fill it; no state"),
    "lightning.pytorch.utilities.parsing.AttributeDict": (
        "lightning 2.6.6", "new items", "dict subclass: SETITEMS fill it; no state"),
    "pytorch_lightning.utilities.parsing.AttributeDict": (
        "lightning 2.6.6", "new items", "dict subclass: SETITEMS fill it; no state"),
}
