"""DeepSpeed ZeRO checkpoints (``engine.save_checkpoint``, stages 1, 2 and 3, and the universal
checkpoints of ``ds_to_universal.py``): a directory is one checkpoint, read without torch and
without running anything from its files.

Layout (deepspeed 0.19.8, ``runtime/engine.py``, ``utils/zero_to_fp32.py``,
``checkpoint/ds_to_universal.py``):

* ``<dir>/latest`` (text: the tag, e.g. ``global_step3``), ``<dir>/<tag>/``, ``zero_to_fp32.py``;
  HF Trainer puts ``config.json`` (the model's config) in ``<dir>`` too.
* ``<tag>/mp_rank_00_model_states.pt`` (stage 1/2) or
  ``zero_pp_rank_<r>_mp_rank_00_model_states.pt`` (stage 3, one per rank): ``torch.save`` of
  ``{"module": state dict (stage 3: empty placeholders), "buffer_names", "param_shapes":
  [OrderedDict name -> torch.Size per group], "frozen_param_shapes", "frozen_param_fragments",
  "shared_params": {alias: name}, "ds_config", "ds_version", ...}``.
* ``<tag>/[bf16_|fp16_]zero_pp_rank_<r>_mp_rank_00_optim_states.pt``, one per data-parallel rank:
  ``{"optimizer_state_dict": {"zero_stage", "partition_count", ...}}``. Stage 1/2:
  ``single_partition_of_fp32_groups[g]`` (rank r's slice of group g's flat fp32 vector, the last
  rank's without its padding), ``base_optimizer_state["state"][g]`` (exp_avg, exp_avg_sq: the
  padded slice), ``param_alignment_paddings[g]``. Stage 3: ``fp32_flat_groups[g]`` and
  ``optimizer_state_dict["state"][g]`` per sub-group, each parameter partitioned on its own
  (``ceil(numel / world_size)`` elements per rank, the last padded).
* universal (``ds_to_universal.py``): ``<tag>_universal/zero/<param>/{fp32,exp_avg,exp_avg_sq,
  step}.pt`` (each ``torch.save`` of ``{"param": tensor}`` or of the tensor) beside the copied
  model states; ``latest_universal`` names it.

Parameters are assembled as ``zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint`` does:
buffers from the model states, then frozen parameters, then the trainable ones in
``param_shapes`` order, shared (tied) names last. Each is listed with its full shape; its
values are runs of the ranks' flat partitions (byte ranges of the ``.pt`` files: every pickle
is read through the restricted unpickler, no tensor bytes at listing time). The optimizer
moments are placed the same way (``optimizer.state.<param>.<slot>``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from contextlib import ExitStack
from math import ceil, prod

from .dtypes import BITS
from .errors import FormatError, InspectorError, UnsafeContentError
from .model import ByteRange, Checkpoint, Finding, Role, Stream, TensorEntry, ValueLocation
from .registry import Adapter
from .source import Source
from .source_interface import RunReader

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    from .security.examination import FileResult

NAME = "deepspeed"
LATEST = ("latest", "latest_universal")
CONFIG = "config.json"
MAX_TAG = 4096  # bytes of a ``latest`` file
MAX_RANKS = 65_536
MAX_PARAMS = 10_000_000
_MODEL = re.compile(r"(?:zero_pp_rank_(\d+)_)?mp_rank_(\d+)_model_states\.pt\Z")
_OPTIM = re.compile(r"(?:bf16_|fp16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt\Z")
_ANY_STATES = re.compile(r"_(model|optim)_states\.pt\Z")  # a states file under any name
_EXPERT = re.compile(r"(?:layer|expp_rank)_.*_model_states\.pt\Z")
_UNIVERSAL = ("fp32.pt", "exp_avg.pt", "exp_avg_sq.pt", "step.pt")
_UNIVERSAL_OPTIM = "optimizer_state.pt"  # zero/optimizer_state.pt: param groups, loss scaler
_MARKER = b"ds_version"  # the last key of every model/optim states dict DeepSpeed saves
_TAIL = 4096


# ---------------------------------------------------------------------------------------------
# sniffing


def _names(directory: Source) -> list[str]:
    try:
        return directory.list()
    except (InspectorError, OSError, RuntimeError):
        return []


def _states_files(names: list[str]) -> tuple[list[str], list[str]]:
    return ([n for n in names if _MODEL.match(n)], [n for n in names if _OPTIM.match(n)])


def sniff(head: bytes, source: Source) -> str | None:
    """'checkpoint' (a directory with ``latest`` beside its tag directories), 'step' (a tag
    directory: model and optim states), 'universal' (``zero/`` beside model states), or for a
    file 'model_states' / 'optim_states' / 'universal_state': a torch zip that DeepSpeed wrote
    (by its name and the ``ds_version`` key at the end of its pickle)."""
    if source.is_dir():
        names = _names(source)
        if any(n in names for n in LATEST) and (
            "zero_to_fp32.py" in names or any(n.startswith("global_step") for n in names)
                or _tag_has_states(source)):
            return "checkpoint"
        model, optim = _states_files(names)
        if model and optim:
            return "step"
        if model and "zero" in names:
            return "universal"
        return None
    if not head.startswith(b"PK\x03\x04"):
        return None
    name = source.name
    kind = _ANY_STATES.search(name)
    if kind is not None:
        if _pickle_tail_has(source, _MARKER):
            return f"{kind.group(1)}_states"
        return None
    if name in _UNIVERSAL or name == _UNIVERSAL_OPTIM:
        try:
            zero = source.parent_dir()
            if name != _UNIVERSAL_OPTIM:
                zero = zero.parent_dir()
            top = zero.parent_dir()
        except (InspectorError, OSError, RuntimeError):
            return None
        if zero.name == "zero" and any(_MODEL.match(n) for n in _names(top)):
            return "universal_state"
    return None


def _tag_has_states(directory: Source) -> bool:
    """Whether the tag ``latest`` names (any name: ``save_checkpoint(tag=...)``) holds model
    states files."""
    try:
        return any(_MODEL.match(n) for n in _names(_tag_dir(directory)[0]))
    except (InspectorError, OSError, RuntimeError):
        return False


def _pickle_tail_has(source: Source, marker: bytes) -> bool:
    """Whether the last bytes of the zip's ``data.pkl`` hold ``marker``."""
    from .torch.zip_archive import walk_zip
    from .zip_container import local_header

    try:
        with source.view() as mm:
            size = len(mm)
            tz = walk_zip(mm, size, source.where)
            start, _ = local_header(mm, size, tz.pkl, source.where, with_name=False)
            end = start + tz.pkl.csize
            return tz.pkl.method == 0 and marker in mm[max(start, end - _TAIL):end]
    except (InspectorError, OSError, ValueError, RuntimeError):
        return False


# ---------------------------------------------------------------------------------------------
# the layout: which files, which tag


def _tag_dir(directory: Source) -> tuple[Source, str]:
    """The tag directory ``latest`` (else ``latest_universal``) names, checked to stay inside
    ``directory`` and to exist."""
    names = _names(directory)
    which = next(n for n in LATEST if n in names)
    latest = directory.child(which)
    if not latest.is_file():
        raise FormatError(f"{which} is not a file", directory.where)
    tag = latest.read_text(MAX_TAG).strip()
    if not tag:
        raise FormatError(f"{which} is empty: it should name the checkpoint's tag directory",
                          directory.where)
    if "/" in tag or "\\" in tag or tag in (".", "..") or "\x00" in tag:
        raise FormatError(f"{which} names {tag[:80]!r}, which is not a directory inside "
                          f"{directory.where}: refused", directory.where)
    try:
        step = directory.child(tag)
        ok = step.is_dir()
    except (InspectorError, OSError, RuntimeError) as e:
        raise FormatError(f"{which} names {tag[:80]!r}: {e}", directory.where) from None
    if not ok:
        raise FormatError(f"{which} names {tag[:80]!r}, which is not a directory here "
                          "(missing: the checkpoint was not saved completely?)", directory.where)
    return step, tag


def _config_near(directories: list[Source]) -> tuple[dict[str, Any] | None, str | None]:
    """The model's ``config.json`` of the first directory that has one (HF Trainer writes it
    beside ``global_stepN/``)."""
    from .directory import file_in
    from .hf_dir import read_config

    for d in directories:
        found = file_in(d, CONFIG)
        if found is not None:
            return read_config(found), found.where
    return None, None


# ---------------------------------------------------------------------------------------------
# the pickles


class _Read:
    """One states file read through the restricted unpickler."""

    def __init__(self, source: Source) -> None:
        from .torch.zip_archive import read_zip

        self.source = source
        try:
            self.zip = read_zip(source)
        except FormatError as e:
            raise _unsafe_or(source, e) from None
        self.obj = self.zip.obj
        self.globals = self.zip.globals

    def dangerous(self) -> list[str]:
        return sorted(g.name for g in self.globals.values() if g.severity == "danger")


_EXAMINE_ERRORS = (InspectorError, OSError, ValueError, KeyError, IndexError, TypeError,
                   EOFError, RuntimeError, RecursionError, MemoryError)


def _unsafe_or(source: Source, error: FormatError) -> InspectorError:
    """A states file that cannot be read: refused as unsafe, naming what a loader would run,
    when scan's walk of it finds anything dangerous before the damage; else ``error``."""
    from .security.examination import DANGEROUS, FileResult
    from .torch.examine import examine_zip

    res = FileResult(source.where)
    try:
        examine_zip(source, res)
    except _EXAMINE_ERRORS:
        pass  # what was found before the break stays
    bad = [i.text for i in res.items if i.level == DANGEROUS]
    if bad:
        return UnsafeContentError(f"refused: {'; '.join(bad[:2])}; and {error.message}; nothing "
                                  "was run", source.where)
    return error


def _guard(reads: list[_Read], why: str, where: str) -> InspectorError:
    """The error for a structure that cannot be read: naming a dangerous global first (a real
    loader would have run it before failing)."""
    bad = sorted({n for r in reads for n in r.dangerous()})
    if bad:
        return UnsafeContentError(
            f"refused: a pickle references {', '.join(bad[:3])}; {why}; nothing was run", where)
    return FormatError(why, where)


def _int(value: Any, what: str) -> int:
    """An int, or an Enum member read as a placeholder whose one argument is its int value."""
    if type(value) is int:
        return value
    args = getattr(value, "args", None)
    if isinstance(args, tuple) and len(args) == 1 and type(args[0]) is int:
        return args[0]
    raise FormatError(f"{what} is {_short(value)}, not an int")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _shape(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, tuple) and all(type(d) is int and d >= 0 for d in value):
        return tuple(value)
    raise FormatError(f"{what} is {_short(value)}, not a shape")


def _dict(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise FormatError(f"{what} is {type(value).__name__}, not a dict")
    return value


def _tensor(value: Any, what: str) -> Any:
    from .torch.rebuild import TensorRecord

    if type(value) is not TensorRecord or value.storage is None:
        raise FormatError(f"{what} is {type(value).__name__}, not a tensor")
    return value


class Piece:
    """A 1-D run of elements in one file: where its first element is, how many, which dtype."""

    __slots__ = ("source", "offset", "numel", "dtype")

    def __init__(self, source: Source, rec: Any, what: str) -> None:
        from .torch.walk import byte_offset

        contiguous = rec.stride is None or len(rec.shape) == 0 or all(
            s == 1 for d, s in zip(rec.shape[-1:], rec.stride[-1:], strict=True) if d > 1)
        if len(rec.shape) > 1 or not contiguous:
            raise FormatError(f"{what} is {list(rec.shape)} with stride {rec.stride}, not a "
                              "flat contiguous partition")
        offset = byte_offset(rec)
        if offset is None or rec.storage.root.compressed:
            raise FormatError(f"{what}: its storage has no plain byte offset")
        bits = BITS.get(rec.dtype)
        if bits is None or bits % 8:
            raise FormatError(f"{what}: dtype {rec.dtype} is not a whole number of bytes")
        self.source = source
        self.offset = offset
        self.numel = prod(rec.shape)
        self.dtype = rec.dtype


Run = tuple  # (Piece, first element in it, elements)


class Flat(list):
    """Pieces end to end (a group's partitions across ranks, a rank's sub-groups), with the
    element index each starts at."""

    def __init__(self, pieces: list[Piece]) -> None:
        super().__init__(pieces)
        self.starts = [0]
        for p in pieces:
            self.starts.append(self.starts[-1] + p.numel)


def _slice(pieces: Flat, start: int, count: int, what: str) -> list[Run]:
    """Elements ``start .. start+count`` of the concatenation of ``pieces`` as runs (the first
    piece found by bisection: a parameter costs its own runs, not the number of ranks)."""
    starts = pieces.starts
    if start + count > starts[-1]:
        raise FormatError(f"{what}: its elements end past the flat partitions ({starts[-1]:,} "
                          "elements): truncated or not this checkpoint's files")
    runs: list[Run] = []
    i = max(bisect_right(starts, start) - 1, 0)
    while count > 0:
        p = pieces[i]
        a = start - starts[i]
        n = min(p.numel - a, count)
        if n > 0:
            runs.append((p, a, n))
            start += n
            count -= n
        i += 1
    return runs


class Item:
    """One listed tensor: its entry facts and its runs (None: a whole stored tensor)."""

    __slots__ = ("name", "shape", "dtype", "role", "runs", "storage")

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str, role: Role,
                 runs: list[Run], storage: str | None = None) -> None:
        self.name, self.shape, self.dtype, self.role = name, shape, dtype, role
        self.runs, self.storage = runs, storage


class Layout:
    """What a ZeRO tag directory holds, assembled."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.reads: list[_Read] = []
        self.meta: dict[str, Any] = {}
        self.hyper: dict[str, Any] = {}
        self.findings: list[Finding] = []
        self.paths: list[str] = []


def _rank_files(names: list[str], pattern: re.Pattern[str], what: str,
                where: str) -> list[str]:
    """The files of mp rank 00 in data-parallel rank order (tensor/pipeline parallel files,
    mp_rank_01 and up, are refused by name)."""
    rows = []
    for n in names:
        m = pattern.match(n)
        if m is None:
            continue
        dp, mp = (int(m.group(1)) if m.group(1) is not None else 0), int(m.group(2))
        if mp != 0:
            raise FormatError(f"{n}: a tensor/pipeline-parallel checkpoint (mp_rank "
                              f"{mp}); only mp_rank_00 checkpoints are read", where)
        rows.append((dp, n))
    rows.sort()
    ranks = [r for r, _ in rows]
    if ranks != list(range(len(ranks))):
        raise FormatError(f"{what} files of ranks {ranks[:8]} (not 0..{len(ranks) - 1}): a rank "
                          "file is missing or duplicated", where)
    if len(rows) > MAX_RANKS:
        raise FormatError(f"{len(rows):,} rank files (limit {MAX_RANKS:,})", where)
    return [n for _, n in rows]


def read_step(step: Source) -> Layout:
    """The tensors of a ZeRO tag directory (stage 1, 2 or 3), as zero_to_fp32 assembles them."""
    names = _names(step)
    lay = Layout()
    models = _rank_files(names, _MODEL, "model states", step.where)
    optims = _rank_files(names, _OPTIM, "optimizer states", step.where)
    if not models:
        raise FormatError("no *_model_states.pt file: not a DeepSpeed checkpoint directory",
                          step.where)
    experts = [n for n in names if _EXPERT.match(n)]
    if experts:
        lay.findings.append(Finding("warning", f"{len(experts)} MoE expert states file(s) not "
                                    f"read (e.g. {experts[0]})", step.where))
    model_reads = [_Read(step.child(n)) for n in models]
    lay.reads += model_reads
    if "zero" in names and not optims:
        try:
            _read_universal(step, model_reads[0], lay)
        except FormatError as e:
            raise _guard(lay.reads, e.message, e.where or step.where) from None
    else:
        if not optims:
            raise FormatError("no *_optim_states.pt file: the fp32 weights and optimizer state "
                              "of a ZeRO checkpoint are in them (only the model states are "
                              "here)", step.where)
        optim_reads = [_Read(step.child(n)) for n in optims]
        lay.reads += optim_reads
        try:
            _assemble(model_reads, optim_reads, lay)
        except FormatError as e:
            raise _guard(lay.reads, e.message, e.where or step.where) from None
    lay.paths = [r.source.where for r in lay.reads]
    return lay


def _model_state(read: _Read) -> dict:
    obj = read.obj
    if not isinstance(obj, dict) or "param_shapes" not in obj or "buffer_names" not in obj:
        raise FormatError(f"{read.source.name} is not a DeepSpeed model states file (no "
                          "param_shapes/buffer_names)", read.source.where)
    return obj


def _param_groups(ms: dict) -> list[list[tuple[str, tuple[int, ...]]]]:
    groups = ms.get("param_shapes")
    if isinstance(groups, dict):
        groups = [groups]
    if not isinstance(groups, list):
        raise FormatError(f"param_shapes is {type(groups).__name__}, not a list of groups")
    out = []
    total = 0
    for g, shapes in enumerate(groups):
        shapes = _dict(shapes, f"param_shapes[{g}]")
        total += len(shapes)
        if total > MAX_PARAMS:
            raise FormatError(f"over {MAX_PARAMS:,} parameters in param_shapes")
        out.append([(str(n), _shape(s, f"param_shapes[{g}][{n!r}]")) for n, s in shapes.items()])
    return out


def _common(ms: dict, lay: Layout, read: _Read) -> None:
    """Buffers, hyperparameters and facts of the model states."""
    from .security.restricted_pickle import render

    lay.hyper["ds_config"] = render(ms.get("ds_config"))  # placeholders as plain values
    lay.hyper["ds_version"] = render(ms.get("ds_version"))
    for k in ("global_steps", "global_samples", "skipped_steps", "dp_world_size",
              "mp_world_size"):
        if type(ms.get(k)) is int:
            lay.hyper[k] = ms[k]
    lay.meta["ds_version"] = lay.hyper["ds_version"]
    module = ms.get("module")
    buffer_names = ms.get("buffer_names") or []
    if not isinstance(buffer_names, list) or not all(type(n) is str for n in buffer_names):
        raise FormatError("buffer_names is not a list of names", read.source.where)
    if isinstance(module, dict):
        prefix = read.source.name
        dtypes = {getattr(v, "dtype", None) for k, v in module.items()
                  if k not in buffer_names and getattr(v, "shape", (0,)) != (0,)}
        dtypes.discard(None)  # stage 3 stores empty placeholders: no copy of the weights
        if dtypes:
            lay.meta["module_dtype"] = ", ".join(sorted(dtypes))
        for name in buffer_names:
            if name not in module:
                continue
            rec = _tensor(module[name], f"{prefix}: module[{name!r}]")
            lay.items.append(Item(name, rec.shape, rec.dtype, Role.BUFFER,
                                  _whole(read.source, rec, f"buffer {name!r}")))
    elif buffer_names:
        raise FormatError("buffer_names without a module state dict", read.source.where)


def _whole(source: Source, rec: Any, what: str) -> list[Run]:
    """A whole stored tensor as one run (C-contiguous), or [] for an empty one."""
    from .model import c_strides
    from .torch.walk import byte_offset

    if rec.stride is not None and any(d > 1 and s != w for d, s, w in
                                      zip(rec.shape, rec.stride, c_strides(rec.shape),
                                          strict=True)):
        raise FormatError(f"{what} is stored as a strided view")
    offset = byte_offset(rec)
    if offset is None:
        raise FormatError(f"{what}: its storage has no plain byte offset")
    p = Piece.__new__(Piece)
    p.source, p.offset, p.numel, p.dtype = source, offset, prod(rec.shape), rec.dtype
    return [(p, 0, p.numel)] if p.numel else []


def _assemble(model_reads: list[_Read], optim_reads: list[_Read], lay: Layout) -> None:
    ms = _model_state(model_reads[0])
    osds = []
    for r in optim_reads:
        top = _dict(r.obj, f"{r.source.name}")
        osds.append(_dict(top.get("optimizer_state_dict"),
                          f"{r.source.name}: optimizer_state_dict"))
    stage = _int(osds[0].get("zero_stage"), "zero_stage")
    pc = osds[0].get("partition_count")
    world = max(_int(x, "partition_count") for x in pc) if isinstance(pc, list) and pc else (
        _int(pc, "partition_count"))
    if world != len(optim_reads):
        raise FormatError(f"partition_count says {world} ranks, but {len(optim_reads)} "
                          "*_optim_states.pt files are here: a rank file is missing or extra")
    if stage == 3 and len(model_reads) != world:
        raise FormatError(f"stage 3 with {world} ranks, but {len(model_reads)} model states "
                          "files are here")
    lay.meta.update(zero_stage=stage, world_size=world)
    _common(ms, lay, model_reads[0])
    groups = _param_groups(ms)
    if stage in (1, 2):
        _frozen_12(ms, model_reads[0], lay)
        _stage_12(groups, osds, optim_reads, lay)
    elif stage == 3:
        _frozen_3(ms, model_reads, lay)
        _stage_3(groups, osds, optim_reads, lay)
    else:
        raise FormatError(f"zero_stage {stage}: only ZeRO stages 1, 2 and 3 are read")
    _shared(ms, lay)


def _frozen_12(ms: dict, read: _Read, lay: Layout) -> None:
    shapes = ms.get("frozen_param_shapes") or {}
    frags = ms.get("frozen_param_fragments") or {}
    for name, shape in _dict(shapes, "frozen_param_shapes").items():
        shape = _shape(shape, f"frozen_param_shapes[{name!r}]")
        rec = _tensor(_dict(frags, "frozen_param_fragments").get(name),
                      f"frozen_param_fragments[{name!r}]")
        runs = _whole(read.source, rec, f"frozen parameter {name!r}")
        if prod(rec.shape) != prod(shape):
            raise FormatError(f"frozen parameter {name!r}: its fragment holds "
                              f"{prod(rec.shape):,} elements, its shape {list(shape)} needs "
                              f"{prod(shape):,}")
        lay.items.append(Item(name, shape, rec.dtype, Role.PARAMETER, runs))


def _frozen_3(ms: dict, model_reads: list[_Read], lay: Layout) -> None:
    shapes = _dict(ms.get("frozen_param_shapes") or {}, "frozen_param_shapes")
    for name, shape in shapes.items():
        shape = _shape(shape, f"frozen_param_shapes[{name!r}]")
        pieces = []
        for r in model_reads:
            frags = _dict(r.obj.get("frozen_param_fragments") or {}, "frozen_param_fragments")
            rec = _tensor(frags.get(name), f"{r.source.name}: frozen_param_fragments[{name!r}]")
            pieces.append(Piece(r.source, rec, f"frozen parameter {name!r}"))
        runs = _slice(Flat(pieces), 0, prod(shape), f"frozen parameter {name!r}")
        lay.items.append(Item(name, shape, pieces[0].dtype, Role.PARAMETER, runs))


def _moment_keys(states: list[dict], where: str) -> tuple[list[str], list[str]]:
    """(flat moment slots, 0-d slots) of a group's optimizer state on every rank."""
    from .torch.rebuild import TensorRecord

    flat = [k for k, v in states[0].items() if type(v) is TensorRecord and len(v.shape) == 1]
    scalar = [k for k, v in states[0].items() if type(v) is TensorRecord and len(v.shape) == 0]
    for s in states[1:]:
        if [k for k in flat if k not in s]:
            raise FormatError(f"{where}: the ranks' optimizer states hold different slots")
    return flat, scalar


def _group_state(base: Any, g: int, what: str) -> dict:
    state = base.get("state") if isinstance(base, dict) else None
    if isinstance(state, dict):
        return _dict(state.get(g, {}), f"{what}[{g}]")
    if isinstance(base, list) and g < len(base):  # older DeepSpeed: a list per group
        return _dict(base[g], f"{what}[{g}]")
    return {}


def _stage_12(groups: list, osds: list[dict], reads: list[_Read], lay: Layout) -> None:
    fp32 = [o.get("single_partition_of_fp32_groups") for o in osds]
    if not all(isinstance(f, list) and len(f) == len(groups) for f in fp32):
        raise FormatError(f"single_partition_of_fp32_groups does not hold the {len(groups)} "
                          "parameter group(s) of param_shapes on every rank")
    paddings = osds[0].get("param_alignment_paddings")
    world = len(osds)
    for g, shapes in enumerate(groups):
        pieces = Flat([Piece(r.source, _tensor(f[g], f"{r.source.name}: fp32 group {g}"),
                             f"{r.source.name}: fp32 group {g}")
                       for r, f in zip(reads, fp32, strict=True)])
        states = [_group_state(o.get("base_optimizer_state"), g, "base_optimizer_state")
                  for o in osds]
        flat, scalar = _moment_keys(states, f"group {g}") if all(states) else ([], [])
        moments = {k: Flat([Piece(r.source, _tensor(s[k], f"{r.source.name}: {k}"),
                                  f"{r.source.name}: state {g} {k}")
                            for r, s in zip(reads, states, strict=True)]) for k in flat}
        pads = paddings[g] if isinstance(paddings, list) and g < len(paddings) else None
        if pads is not None and (not isinstance(pads, list) or len(pads) != len(shapes)):
            raise FormatError(f"param_alignment_paddings[{g}] does not hold one padding per "
                              f"parameter ({len(shapes)})")
        offset = 0
        for i, (name, shape) in enumerate(shapes):
            n = prod(shape)
            what = f"parameter {name!r}"
            lay.items.append(Item(name, shape, pieces[0].dtype, Role.PARAMETER,
                                  _slice(pieces, offset, n, what)))
            for k, mp in moments.items():
                lay.items.append(Item(f"optimizer.state.{name}.{k}", shape, mp[0].dtype,
                                      Role.OPTIMIZER, _slice(mp, offset, n, f"{what} {k}")))
            offset += n + (_int(pads[i], "a padding") if pads is not None else 0)
        # zero_to_fp32's check: both ends aligned to 2 * world_size elements agree
        align = 2 * world
        avail = sum(p.numel for p in pieces)
        if ceil(offset / align) * align != ceil(avail / align) * align:
            raise FormatError(f"group {g}: param_shapes consume {offset:,} elements of the "
                              f"{avail:,} in the ranks' fp32 partitions: truncated or not this "
                              "checkpoint's files")
        _scalars(states[0], scalar, reads[0], g, lay)


def _scalars(state: dict, keys: list[str], read: _Read, g: int, lay: Layout) -> None:
    for k in keys:
        rec = state[k]
        lay.items.append(Item(f"optimizer.state.group{g}.{k}", (), rec.dtype, Role.OPTIMIZER,
                              _whole(read.source, rec, f"group {g} {k}")))


def _stage_3(groups: list, osds: list[dict], reads: list[_Read], lay: Layout) -> None:
    world = len(osds)
    flat_groups = [o.get("fp32_flat_groups") for o in osds]
    if not all(isinstance(f, list) and len(f) == len(groups) for f in flat_groups):
        raise FormatError(f"fp32_flat_groups does not hold the {len(groups)} sub-group(s) of "
                          "param_shapes on every rank")
    per_rank = [Flat([Piece(r.source, _tensor(t, f"{r.source.name}: fp32 sub-group {g}"),
                            f"{r.source.name}: fp32 sub-group {g}") for g, t in enumerate(f)])
                for r, f in zip(reads, flat_groups, strict=True)]
    inner = [o.get("optimizer_state_dict") for o in osds]
    states = [[_group_state(s, g, "optimizer_state_dict.state") for g in range(len(groups))]
              for s in inner]
    flat: list[str] = []
    scalar: list[str] = []
    if all(all(s) for s in states):
        flat, scalar = _moment_keys([s[0] for s in states], "sub-group 0")
    moments = {k: [Flat([Piece(r.source, _tensor(s[g][k], f"{r.source.name}: {k}"),
                               f"{r.source.name}: state {g} {k}") for g in range(len(groups))])
                   for r, s in zip(reads, states, strict=True)] for k in flat}
    offset = 0
    for name, shape in (p for g in groups for p in g):
        n = prod(shape)
        part = ceil(n / world)
        what = f"parameter {name!r}"
        lay.items.append(Item(name, shape, per_rank[0][0].dtype, Role.PARAMETER,
                              _partitioned(per_rank, offset, part, n, what)))
        for k, mp in moments.items():
            lay.items.append(Item(f"optimizer.state.{name}.{k}", shape, mp[0][0].dtype,
                                  Role.OPTIMIZER, _partitioned(mp, offset, part, n, f"{what} {k}")))
        offset += part
    avail = sum(p.numel for p in per_rank[0])
    if offset != avail:
        raise FormatError(f"param_shapes consume {offset * world:,} elements of the "
                          f"{avail * world:,} in the ranks' fp32 partitions: truncated or not "
                          "this checkpoint's files")
    for g in range(len(groups)):
        _scalars(states[0][g], scalar, reads[0], g, lay)


def _partitioned(ranks: list[Flat], offset: int, part: int, n: int,
                 what: str) -> list[Run]:
    """A stage 3 parameter: ``part`` elements at ``offset`` of each rank's flat sub-groups, in
    rank order, the last rank's padding cut (``zero_to_fp32.GatheredTensor``)."""
    out: list[Run] = []
    for r, pieces in enumerate(ranks):
        take = min(part, n - r * part)
        if take > 0:
            out += _slice(pieces, offset, take, what)
    return out


def _shared(ms: dict, lay: Layout) -> None:
    """zero_to_fp32's ``state_dict[alias] = state_dict[name]``: the same tensor, listed under
    both names and counted once."""
    shared = ms.get("shared_params") or {}
    if not isinstance(shared, dict):
        return
    by_name = {it.name: it for it in lay.items}
    for alias, name in shared.items():
        target = by_name.get(name)
        if target is None or not isinstance(alias, str) or alias in by_name:
            continue
        target.storage = name
        lay.items.append(Item(alias, target.shape, target.dtype, target.role, target.runs,
                              storage=name))


def _read_universal(step: Source, model: _Read, lay: Layout) -> None:
    """``zero/<param>/{fp32,exp_avg,exp_avg_sq,step}.pt`` of a universal checkpoint."""
    from .torch.rebuild import TensorRecord

    ms = _model_state(model)
    lay.meta["universal"] = True
    _common(ms, lay, model)
    zero = step.child("zero")
    present = set(_names(zero))
    groups = _param_groups(ms)
    shared = ms.get("shared_params") if isinstance(ms.get("shared_params"), dict) else {}

    def state(name: str, slot: str, shape: tuple[int, ...]) -> Item | None:
        if name not in present:
            return None
        d = zero.child(name)
        if f"{slot}.pt" not in _names(d):
            return None
        r = _Read(d.child(f"{slot}.pt"))
        lay.reads.append(r)
        rec = r.obj.get("param") if isinstance(r.obj, dict) else r.obj
        if type(rec) is not TensorRecord:
            raise _guard(lay.reads, f"zero/{name}/{slot}.pt holds {type(rec).__name__}, not a "
                         "tensor", step.where)
        if prod(rec.shape) != prod(shape):
            raise _guard(lay.reads, f"zero/{name}/{slot}.pt holds {prod(rec.shape):,} elements, "
                         f"{name!r} has shape {list(shape)}", step.where)
        if slot == "step" and prod(rec.shape) == 1:
            shape = rec.shape
        role = Role.PARAMETER if slot == "fp32" else Role.OPTIMIZER
        item_name = name if slot == "fp32" else f"optimizer.state.{name}.{slot}"
        return Item(item_name, shape, rec.dtype, role,
                    _whole(r.source, rec, f"zero/{name}/{slot}.pt"))

    for name, shape in (p for g in groups for p in g):
        fp32 = state(name, "fp32", shape)
        if fp32 is None:
            raise FormatError(f"zero/{name}/fp32.pt is missing", step.where)
        lay.items.append(fp32)
        for slot in ("exp_avg", "exp_avg_sq", "step"):
            it = state(name, slot, () if slot == "step" else shape)
            if it is not None:
                lay.items.append(it)
    lay.meta["zero_stage"] = "universal"
    by_name = {it.name: it for it in lay.items}
    for alias, name in shared.items():
        # ds_to_universal writes the module's copy of a tied name too (zero/<alias>/fp32.pt):
        # listed under its own file, tied to the parameter it aliases (counted once)
        target = by_name.get(name)
        if target is None or not isinstance(alias, str) or alias in by_name:
            continue
        own = state(alias, "fp32", target.shape)
        target.storage = name
        lay.items.append(Item(alias, target.shape, target.dtype, target.role,
                              own.runs if own is not None else target.runs, storage=name))
    extra = sorted(present - {n for n, _ in (p for g in groups for p in g)} - set(shared)
                   - {"optimizer_state.pt"})
    if extra:
        lay.findings.append(Finding("warning", f"zero/ holds {len(extra)} entr(ies) param_shapes "
                                    f"does not name, not listed: {', '.join(extra[:4])}",
                                    zero.where))


# ---------------------------------------------------------------------------------------------
# opening


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    from .security.restricted_pickle import gc_paused

    if variant in ("model_states", "optim_states", "universal_state"):
        with gc_paused():
            return _open_file(source, variant)
    if variant == "checkpoint":
        step, tag = _tag_dir(source)
        near = [source]
    elif variant in ("step", "universal"):
        step, tag = source, source.name
        near = [source, *_parent(source)]
    else:
        raise FormatError(f"unsupported {NAME} variant {variant!r}", source.where)
    with gc_paused():
        lay = read_step(step)
    return _checkpoint(source, step, tag, lay, near)


def _parent(source: Source) -> list[Source]:
    try:
        return [source.parent_dir()]
    except (InspectorError, OSError, RuntimeError):
        return []


def _checkpoint(source: Source, step: Source, tag: str, lay: Layout,
                near: list[Source]) -> Checkpoint:
    from .security.examination import as_findings
    from .security.findings import pickle_findings

    rows: list[dict[str, Any]] = []
    findings = list(lay.findings)
    for r in lay.reads:
        got, f = pickle_findings(r.globals, r.source.where)
        known = {x["name"] for x in rows}
        rows.extend(x for x in got if x["name"] not in known)
        findings.extend(f)
        findings.extend(as_findings(r.zip.side))
    metadata = dict(lay.meta, tag=tag, pickle_globals=rows)
    hyper = dict(lay.hyper)
    _attach_config(near, metadata, hyper)
    if metadata.get("module_dtype"):
        findings.append(Finding(
            "info", f"the model states also hold the model's {metadata['module_dtype']} "
            "weights (module); listed: the fp32 master weights the optimizer states hold, as "
            "zero_to_fp32 assembles them", step.where))
    tensors = []
    locations: dict[str, list[Run]] = {}
    items = [it for it in lay.items if it.role is not Role.OPTIMIZER]
    items += [it for it in lay.items if it.role is Role.OPTIMIZER]
    for it in items:
        bits = BITS.get(it.dtype)
        numel = prod(it.shape)
        tensors.append(TensorEntry(
            it.name, it.name, it.shape, it.dtype, it.role,
            nbytes=numel * bits // 8 if bits else None, storage=it.storage,
            extra={"runs": len(it.runs)}))
        locations[it.name] = it.runs
    paths = (source.where, *lay.paths)
    return Checkpoint(paths=paths, format=NAME, tensors=tensors, metadata=metadata,
                      hyperparameters=hyper, findings=findings, source=source,
                      reader=_reader(locations, source.where))


def _attach_config(near: list[Source], metadata: dict[str, Any], hyper: dict[str, Any]) -> None:
    config, where = _config_near(near)
    if config is not None:
        hyper["config"] = config
        metadata["config_file"] = CONFIG
        metadata["config_path"] = where
    else:
        metadata["config_missing"] = (
            "the model's config.json (DeepSpeed stores its own ds_config, not the model's; "
            "HF Trainer writes config.json beside global_stepN/)")


# ---------------------------------------------------------------------------------------------
# one states file on its own


def _open_file(source: Source, variant: str) -> Checkpoint:
    from .security.examination import as_findings
    from .torch.walk import build_checkpoint

    r = _Read(source)
    z = r.zip
    ckpt = build_checkpoint(source, "torch-zip", z.obj, z.globals, z.meta, z.pkl_name,
                            z.pickle_bytes)
    ckpt.findings = [*ckpt.findings, *as_findings(z.side)]
    ckpt.format = f"{NAME}-{variant.replace('_', '-')}"
    directory = source.parent_dir()
    ckpt.metadata["part_of"] = directory.where
    if variant == "model_states" and isinstance(r.obj, dict) and "param_shapes" in r.obj:
        try:
            _model_file(ckpt, r.obj)
        except FormatError as e:
            raise _guard([r], e.message, source.where) from None
        near = [directory, *_parent(directory)]
        _attach_config(near, ckpt.metadata, ckpt.hyperparameters)
    if variant == "universal_state" and source.name in _UNIVERSAL:
        _universal_file(ckpt, directory.name, source.name[:-3])
    ckpt.findings.append(Finding(
        "info", f"one file of a DeepSpeed checkpoint ({variant.replace('_', ' ')}); open its "
        "directory for the assembled fp32 weights and optimizer state", source.name))
    return ckpt


def _universal_file(ckpt: Checkpoint, param: str, slot: str) -> None:
    """``zero/<param>/<slot>.pt`` holds ``{"param": tensor}`` (or the tensor): named as the
    directory listing names it."""
    if len(ckpt.tensors) != 1 or ckpt.tensors[0].stored_name not in ("param", "tensor"):
        return
    name = param if slot == "fp32" else f"optimizer.state.{param}.{slot}"
    role = Role.PARAMETER if slot == "fp32" else Role.OPTIMIZER
    ckpt.tensors = [ckpt.tensors[0].replace(name=name, role=role)]


def _model_file(ckpt: Checkpoint, ms: dict) -> None:
    """Roles from ``buffer_names``; stage 3's empty placeholders listed with their full shape
    from ``param_shapes`` (their values are in the optimizer states, not in this file)."""
    buffers = set(ms.get("buffer_names") or [])
    shapes = {n: s for g in _param_groups(ms) for n, s in g}
    frozen = ms.get("frozen_param_shapes") or {}
    for n, s in _dict(frozen, "frozen_param_shapes").items():
        shapes[str(n)] = _shape(s, f"frozen_param_shapes[{n!r}]")
    out = []
    for t in ckpt.tensors:
        if not t.stored_name.startswith("module."):
            out.append(t)
            continue
        if t.name in buffers:
            out.append(t.replace(role=Role.BUFFER))
            continue
        full = shapes.get(t.name)
        if full is not None and full != t.shape and t.numel == 0:
            bits = BITS.get(t.dtype or "")
            out.append(t.replace(
                shape=full, role=Role.PARAMETER, offset=None, storage=None,
                nbytes=prod(full) * bits // 8 if bits else None,
                extra={"stored_shape": t.shape, "partitioned": "ZeRO-3: the values are in the "
                       "optimizer states' flat partitions"}))
            continue
        out.append(t.replace(role=Role.PARAMETER))
    ckpt.tensors = out
    if any("partitioned" in t.extra for t in out):
        ckpt.findings.append(Finding(
            "info", "ZeRO-3 model states: parameters are listed with their shapes from "
            "param_shapes; the file stores empty placeholders", ckpt.path))


# ---------------------------------------------------------------------------------------------
# values


def _reader(locations: dict[str, list[Run]], where: str) -> Any:
    def locate(entry: TensorEntry) -> ValueLocation:
        runs = locations.get(entry.stored_name)
        if runs is None:
            raise FormatError(f"{entry.stored_name!r} is not a tensor of this checkpoint", where)
        if len(runs) == 1:
            p, first, _ = runs[0]
            return ByteRange(p.source, p.offset + first * BITS[p.dtype] // 8)
        return Stream(lambda stack: _Runs(runs, stack, where))

    return locate


class _Runs(RunReader):
    """A tensor's bytes read run by run from the ranks' files."""

    def __init__(self, runs: list[Run], stack: ExitStack, where: str) -> None:
        super().__init__(where, "a partition's file")
        self._runs = iter(runs)
        self._stack = stack
        self._files: dict[int, Any] = {}

    def next_run(self) -> tuple[Any, int] | None:
        try:
            p, first, count = next(self._runs)
        except StopIteration:
            return None
        f = self._files.get(id(p.source))
        if f is None:
            f = self._files[id(p.source)] = self._stack.enter_context(p.source.open())
        size = BITS[p.dtype] // 8
        f.seek(p.offset + first * size)
        return f, count * size


# ---------------------------------------------------------------------------------------------
# security examination (inspector scan): each states file as torch.load reads it


def examine(source: Source, variant: str, result: FileResult) -> None:
    """A states file or a universal fragment: torch's own zip walk (``torch.load(...,
    weights_only=False)`` is how DeepSpeed and zero_to_fp32 load them: every global counts)."""
    from .torch.examine import examine_zip

    examine_zip(source, result)
    result.kind = f"{NAME}-states"


ADAPTER = Adapter(
    name=NAME,
    description="DeepSpeed ZeRO checkpoint (stage 1/2/3: latest + global_stepN/ with "
    "*_model_states.pt and *_optim_states.pt; universal zero/<param>/*.pt)",
    extensions=("<directory>", "_model_states.pt", "_optim_states.pt"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine,
)
