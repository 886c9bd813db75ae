"""The adapter registry: which formats exist and which one a file is, decided by content.

Each adapter module defines ``ADAPTER = Adapter(...)`` with a cheap ``sniff(head, source)`` that
looks at the first bytes (never the extension alone) and returns a variant name or None, and an
``open(source, variant)`` that builds the :class:`~inspector.adapters.model.Checkpoint` (both get
a :class:`~inspector.adapters.source.Source`). An adapter whose tensors are not plain byte ranges
sets ``Checkpoint.reader``; otherwise the registry supplies :func:`byte_ranges`.
Third-party packages add adapters through the ``inspector.adapters`` entry-point group
(value: ``module:ADAPTER``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar

from .errors import FormatError, InspectorError, NotFoundError, UnknownFormatError
from .model import ByteRange, Checkpoint, TensorEntry, ValueLocation, ValueReader
from .side_files import beside, recorded
from .source import Source, as_source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from pathlib import Path

    from .security.examination import FileResult

ENTRY_POINT_GROUP = "inspector.adapters"
# The allow_unsafe of the load in progress, for the loads a directory adapter makes inside it.
_allow_unsafe: ContextVar[bool | None] = ContextVar("allow_unsafe", default=None)
SNIFF_BYTES = 4096
GIT_LFS_POINTER = b"version https://git-lfs.github.com/spec/"

# Order matters only where two sniffs could both match; the most specific comes first.
# Model directories of a known layout come first; a directory of one loose checkpoint file last.
BUILTIN_MODULES = (
    "inspector.adapters.sockeye",
    "inspector.adapters.ctranslate2",  # before hf_dir: its directory holds a config.json too
    "inspector.adapters.hf_dir",
    "inspector.adapters.rau_dir",
    "inspector.adapters.joeynmt_dir",  # before torch: a *.ckpt beside a JoeyNMT config.yaml
    "inspector.adapters.onmt_tf_dir",  # before tf_checkpoint: its directory + model description
    "inspector.adapters.keras_sharded",
    "inspector.adapters.megatron",  # before dcp: a torch_dist iteration directory is DCP too
    "inspector.adapters.dcp",
    # before torch: DeepSpeed's *_states.pt are torch zips (claimed by name + ds_version key)
    "inspector.adapters.deepspeed",
    "inspector.adapters.orbax",  # a folder with _METADATA, a step folder, a manager's steps
    "inspector.adapters.safetensors",
    "inspector.adapters.gguf",
    "inspector.adapters.onnx",  # before the pickle readers: ONNX files never import them
    # before torch: a .keras zip may hold a data.pkl (Keras loads it as Keras, torch as torch;
    # its config.json must be examined), and a Keras HDF5 file may open with any user block
    "inspector.adapters.keras",
    "inspector.adapters.nemo",  # a tar naming model_config.yaml / model_weights.ckpt
    "inspector.adapters.torch.torchscript",
    "inspector.adapters.pickled",
    "inspector.adapters.torch",
    "inspector.adapters.mxnet",
    "inspector.adapters.marian",  # before numpy_npy: a Marian model.npz is an .npz too
    "inspector.adapters.numpy_npy",
    "inspector.adapters.tf_checkpoint",
    "inspector.adapters.flax_msgpack",  # a msgpack map reaching a flax array ext in its head
    "inspector.adapters.directory",
)
# A file whose first bytes are one of these signatures is offered first to that module's
# adapter: the signature is its format's alone (no other built-in sniff claims such a file; a
# test checks every built-in on real files of each), so detection finds the same adapter
# without importing the readers of the formats before it (the pickle machinery, for an HDF5
# file). If that sniff declines, the usual order follows.
SIGNATURES = (
    (b"\x89HDF\r\n\x1a\n", "inspector.adapters.keras"),  # H5F_SIGNATURE at offset 0
    (b"\x93NUMPY", "inspector.adapters.numpy_npy"),  # the .npy magic
    (b"GGUF", "inspector.adapters.gguf"),  # GGUF's magic (llama.cpp)
    # kMXAPINDArrayListMagic (0x112) and the reserved 0, as little-endian uint64s
    (b"\x12\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
     "inspector.adapters.mxnet"),
)
_ZIP = b"PK\x03\x04"


def _never(head: bytes, name: str) -> bool:
    return False


# A regular file is offered to these built-ins only when its head (and name) passes the test:
# each is a necessary condition of the module's own sniff claiming a file (the sniffs claim
# directories by their contents; a directory is offered to every built-in). A file that fails
# is not offered, so listing it does not import the readers of formats it cannot be.
# tests/test_registry.py checks each test against its sniff on every real file.
FILE_GATES: dict[str, Callable[[bytes, str], bool]] = {
    "inspector.adapters.sockeye": _never,
    "inspector.adapters.ctranslate2": lambda h, n: 1 <= int.from_bytes(h[:4], "little") <= 64,
    "inspector.adapters.hf_dir": lambda h, n: n.endswith(".bin.index.json"),
    "inspector.adapters.rau_dir": _never,
    "inspector.adapters.joeynmt_dir": lambda h, n: h.startswith(_ZIP) and n.endswith(".ckpt"),
    "inspector.adapters.onmt_tf_dir": _never,
    "inspector.adapters.keras_sharded": lambda h, n: n.endswith(".json"),
    "inspector.adapters.megatron": _never,
    # the metadata pickle (protocol 2+), or a .distcp torch zip
    "inspector.adapters.dcp": lambda h, n: h[:1] == b"\x80" or h.startswith(_ZIP),
    "inspector.adapters.deepspeed": lambda h, n: h.startswith(_ZIP),
    "inspector.adapters.orbax": _never,
    "inspector.adapters.safetensors": lambda h, n: h[8:9] == b"{" or n.endswith(".json"),
    "inspector.adapters.gguf": lambda h, n: h.startswith(b"GGUF"),
    "inspector.adapters.onnx": lambda h, n: h[:1] == b"\x08",
    "inspector.adapters.mxnet": lambda h, n: len(h) >= 16,
    "inspector.adapters.directory": _never,
}



class Adapter:
    """One on-disk format. ``default_variant``: the variant to try when the user forces this
    format on a file its sniff does not recognise. ``examine(source, variant, result)``: the
    security examination of a file this adapter claims (``inspector scan``): it walks the
    container as the format's real loader does and adds what a loader would run to ``result``
    (a :class:`~inspector.adapters.security.examination.FileResult`); None: scan's generic
    examination. ``magic``: the format's own signatures at offset 0, for the words of an input
    that starts like this format but that its sniff declines (:mod:`.lookalike`). Read-only by
    contract."""

    __slots__ = ("name", "description", "extensions", "sniff", "open", "default_variant",
                 "examine", "magic")

    def __init__(
        self,
        name: str,
        description: str,
        extensions: tuple[str, ...],
        sniff: Callable[[bytes, Source], str | None],
        open: Callable[[Source, str], Checkpoint],
        default_variant: str | None = None,
        examine: Callable[[Source, str, FileResult], None] | None = None,
        magic: tuple[bytes, ...] = (),
    ) -> None:
        self.name = name
        self.description = description
        self.extensions = extensions
        self.sniff = sniff
        self.open = open
        self.default_variant = default_variant
        self.examine = examine
        self.magic = magic

    def __repr__(self) -> str:
        return f"Adapter({self.name!r})"


_cache: list[Adapter] | None = None
_builtin: dict[str, Adapter] = {}  # module name -> its ADAPTER, as imported


def _builtin_adapter(module: str) -> Adapter:
    adapter = _builtin.get(module)
    if adapter is None:
        adapter = _builtin[module] = importlib.import_module(module).ADAPTER
    return adapter


def _builtins(head: bytes = b"", name: str | None = None) -> Iterator[Adapter]:
    """The built-in adapters in order, each module imported only when reached: detection stops
    at the first match, so a safetensors file never imports the Keras or NumPy readers. A
    ``head`` starting with one of :data:`SIGNATURES` has its adapter first. With the ``name``
    of a regular file, the modules whose :data:`FILE_GATES` test it fails are left out."""
    first = next((m for magic, m in SIGNATURES if head.startswith(magic)), None)
    if first is not None:
        yield _builtin_adapter(first)
    for module in BUILTIN_MODULES:
        if module == first:
            continue
        gate = FILE_GATES.get(module) if name is not None else None
        if gate is None or gate(head, name):
            yield _builtin_adapter(module)


def _file_name(source: Source, head: bytes) -> str | None:
    """The name the file gates see: a non-empty head is a regular file's (a directory's head
    is b"")."""
    return source.name if head else None


def formats() -> list[Adapter]:
    """Every known format: the built-in adapters followed by those registered through the
    entry-point group."""
    global _cache
    if _cache is None:
        found = list(_builtins())
        found.extend(_plugins({a.name for a in found}))
        _cache = found
    return _cache


def _plugins(taken: set[str]) -> list[Adapter]:
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            adapter = ep.load()
        except Exception as e:  # a broken plugin must not break the built-in formats
            raise InspectorError(
                f"adapter plugin {ep.name!r} ({ep.value}) failed to load: {e}"
            ) from e
        if not isinstance(adapter, Adapter):
            raise InspectorError(f"adapter plugin {ep.name!r} ({ep.value}) is not an Adapter")
        if adapter.name not in taken:
            out.append(adapter)
            taken.add(adapter.name)
    return out


def read_head(source: Source) -> bytes:
    """The first bytes of a file (b'' for a directory), with the early refusals."""
    if not source.exists():
        local = source.local_path
        if local is not None and local.is_symlink():
            raise NotFoundError("a symlink that loops or points nowhere", source.where)
        raise NotFoundError("no such file or directory", source.where)
    if source.is_dir():
        return b""
    head = source.head(SNIFF_BYTES)
    if not head:
        raise FormatError("file is empty", source.where)
    if head.startswith(GIT_LFS_POINTER):
        raise FormatError(
            "this is a Git LFS pointer, not the checkpoint: run 'git lfs pull' first", source.where
        )
    return head


def detect(path: str | Path | Source, format: str | None = None) -> tuple[Adapter, str]:
    """The adapter and variant for ``path``; ``format`` forces an adapter by name."""
    source = as_source(path)
    head = read_head(source)
    if format is None:
        # Built-ins first, as in formats(); plugins (entry points: importlib.metadata costs
        # tens of ms) are looked up only when no built-in format matches.
        for adapter in _builtins(head, _file_name(source, head)):
            variant = adapter.sniff(head, source)
            if variant is not None:
                return adapter, variant
        candidates = formats()
        rest = candidates[len(BUILTIN_MODULES) :]
    else:
        every = formats()
        candidates = rest = [a for a in every if a.name == format]
        if not candidates:
            raise UnknownFormatError(
                f"unknown format {format!r}; supported: {', '.join(a.name for a in every)}"
            )
    for adapter in rest:
        variant = adapter.sniff(head, source)
        if variant is not None:
            return adapter, variant
    if format is not None and candidates[0].default_variant is not None:
        return candidates[0], candidates[0].default_variant
    if format is not None:
        raise UnknownFormatError(
            f"not recognised as {format} ({candidates[0].description})", source.where
        )
    from .lookalike import describe_dir, describe_file

    found = (describe_dir(source, source.list()) if source.is_dir()
             else describe_file(head, source, formats()))
    raise UnknownFormatError(
        f"{found}, not a checkpoint ('inspector formats' lists the formats read)", source.where
    )


def sniff_file(source: Source) -> Adapter | None:
    """The built-in adapter whose sniff claims the regular file ``source``, or None (also for
    an empty or unreadable file); never raises."""
    found = claim(source)
    return found[0] if found else None


def claim(source: Source) -> tuple[Adapter, str] | None:
    """The built-in adapter and variant whose sniff claims the regular file ``source``, or None
    (also for an empty or unreadable file); never raises."""
    try:
        head = source.head(SNIFF_BYTES)
        if not head or head.startswith(GIT_LFS_POINTER):
            return None
        for adapter in _builtins(head, _file_name(source, head)):
            variant = adapter.sniff(head, source)
            if variant is not None:
                return adapter, variant
    except (InspectorError, OSError, ValueError, RuntimeError):
        return None
    return None


def load(path: str | Path | Source, format: str | None = None,
         allow_unsafe: bool | None = None, trust: Iterable[str] | None = None) -> Checkpoint:
    """Open a checkpoint of any supported format, reading metadata only. ``path`` is a local
    path or a :class:`~inspector.adapters.source.Source`.

    The one policy (:mod:`inspector.adapters.security.policy`): a checkpoint holding anything
    ``inspector scan`` calls dangerous raises
    :class:`~inspector.adapters.errors.UnsafeContentError` unless ``allow_unsafe`` (nothing from
    the file runs either way; its findings say what a loader would run). ``None``: as the
    enclosing load decided (a model directory's inner files), else False.

    ``trust``: pickle globals (``"module.Name"``) the caller vouches for, as torch's
    ``add_safe_globals`` does (:mod:`inspector.adapters.security.trust`): safe, unless on a
    known-dangerous list."""
    if trust:
        from .security.trust import trusting

        with trusting(list(trust)):
            return load(path, format, allow_unsafe)
    outer = _allow_unsafe.get()
    allow = allow_unsafe if allow_unsafe is not None else bool(outer)
    token = _allow_unsafe.set(allow)
    try:
        ckpt = _load(path, format)
    finally:
        _allow_unsafe.reset(token)
    from .security.policy import refuse_if_unsafe

    refuse_if_unsafe(ckpt, allow)
    return ckpt


def _load(path: str | Path | Source, format: str | None) -> Checkpoint:
    source = as_source(path)
    adapter, variant = detect(source, format)
    try:
        ckpt = adapter.open(source, variant)
    except InspectorError:
        raise
    except Exception as e:  # noqa: BLE001 - a bad file must end in one clear line, never a traceback
        raise FormatError(
            f"could not be read as {adapter.name} ({type(e).__name__}: {e})", source.where
        ) from e
    if ckpt.source is None:
        ckpt.source = source
    if ckpt.reader is None:
        ckpt.reader = byte_ranges(ckpt, ckpt.source)
    if ckpt.side_configs is None:
        ckpt.side_configs = beside(source, recorded(ckpt.metadata, ckpt.hyperparameters))
    return ckpt


def byte_ranges(ckpt: Checkpoint, source: Source) -> ValueReader:
    """The default :data:`~inspector.adapters.model.ValueReader`: each tensor at its recorded
    ``offset`` in ``source``, or in the file its ``file`` names (a shard beside an index file,
    or inside a directory); ``stride`` from ``extra``; big-endian when the checkpoint's metadata
    says ``byteorder: big``."""
    big = ckpt.metadata.get("byteorder") == "big"
    files: dict[str, Source] = {}

    def locate(entry: TensorEntry) -> ValueLocation:
        if entry.offset is None:
            raise FormatError(
                f"tensor {entry.stored_name!r}: its data has no byte offset "
                "(a compressed member?)",
                source.where,
            )
        where = source
        if entry.file:
            where = files.get(entry.file) or files.setdefault(
                entry.file,
                source.child(entry.file) if source.is_dir() else source.sibling(entry.file),
            )
        stride = entry.extra.get("stride")
        return ByteRange(where, entry.offset, big, tuple(stride) if stride is not None else None)

    return locate
