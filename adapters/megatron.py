"""Megatron-LM checkpoints: a save directory (``latest_checkpointed_iteration.txt``), one of its
iteration directories (``iter_0000010/``, ``release/``), merged into one checkpoint with global
names and shapes; read without torch and without running anything from the files.

Layout (Megatron-LM ``megatron/training/checkpointing.py``: ``get_checkpoint_tracker_filename``,
``read_metadata``, ``get_checkpoint_name``, ``generate_state_dict``):

* ``latest_checkpointed_iteration.txt`` holds the iteration number or ``release``; the directory
  is ``iter_{:07d}`` or ``release``.
* ``--ckpt-format torch`` (legacy): one ``torch.save`` per model-parallel rank,
  ``mp_rank_{tp:02d}/model_optim_rng.pt`` or, with pipeline parallelism,
  ``mp_rank_{tp:02d}_{pp:03d}/``, each a dict ``{"args": argparse.Namespace, "checkpoint_version",
  "iteration", "model": state dict, "optimizer", "opt_param_scheduler", "rng_state"}``. Each rank
  holds its tensor-parallel piece of its pipeline stage's layers, numbered from 0 in each stage.
  The merge follows Megatron's own rules (``megatron/core/tensor_parallel/layers.py`` and the
  checkpoint converter ``tools/checkpoint/loader_legacy.py``): ``VocabParallelEmbedding`` and
  ``ColumnParallelLinear`` (``word_embeddings``, ``output_layer``, ``linear_qkv`` /
  ``query_key_value``, ``linear_fc1`` / ``dense_h_to_4h`` and their biases) are split along
  dim 0; ``RowParallelLinear`` weights (``linear_proj`` / ``self_attention.dense``,
  ``linear_fc2`` / ``dense_4h_to_h``) along dim 1; with SwiGLU each rank's ``linear_fc1`` is
  ``[gate piece; up piece]``, so the global tensor is every gate piece then every up piece;
  everything else is replicated (tensor-parallel rank 0's copy). Layers of stage ``p`` are
  renumbered by the layers of the stages before it.
* ``--ckpt-format torch_dist`` (Megatron-core ``dist_checkpointing``): a torch Distributed
  Checkpoint (:mod:`.dcp`) with ``metadata.json`` (``{"sharded_backend": "torch_dist", ...}``);
  the non-sharded state (``args``, ``iteration``, ...) in ``common.pt`` (older writers) or in the
  ``common_state`` bytes item. Tensors are global already (layers stacked along a leading
  dimension: ``decoder.layers.mlp.linear_fc1.weight`` is ``(num_layers, ...)``).

Optimizer state of the legacy layout is per rank and is not merged (a finding says so). The
pickles are read by the restricted unpickler (the torch adapter), never run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

from .errors import FormatError, InspectorError
from .model import ByteRange, Checkpoint, Finding, Role, Stream, TensorEntry, c_strides
from .registry import Adapter
from .source import Source
from .source_interface import RunReader, Window

NAME = "megatron"
TRACKER = "latest_checkpointed_iteration.txt"
BASENAME = "model_optim_rng.pt"
CONFIG = "metadata.json"  # megatron/core/dist_checkpointing/core.py CONFIG_FNAME
COMMON = "common.pt"  # strategies/common.py COMMON_STATE_FNAME
_RANK = re.compile(r"mp_rank_(\d{2,})(?:_(\d{3,}))?(?:_(\d{3,}))?\Z")
_ITER = re.compile(r"(?:iter_\d{7,}|release)\Z")
MAX_TRACKER = 64
MAX_RANK_DIRS = 4096
MAX_CONFIG = 1 << 16
# Megatron's args hold ~660 entries, more than a rendered dict keeps: read in full up to this.
MAX_ARGS = 10_000
# the layers of a stage: mcore decoder/encoder, legacy encoder/decoder (local numbering)
_LAYER = re.compile(r"^((?:language_model\.)?(?:decoder|encoder)\.layers\.)(\d+)(\..*)$")
# tensor-parallel split of each module (megatron/core/tensor_parallel/layers.py)
_COLUMN = re.compile(
    r"(?:^|\.)(?:word_embeddings|output_layer|linear_qkv|query_key_value|linear_q|linear_kv|"
    r"query|key_value)\.(?:weight|bias)$")
_GLU = re.compile(r"(?:^|\.)(?:linear_fc1|dense_h_to_4h)\.(?:weight|bias)$")
_ROW = re.compile(r"(?:^|\.)(?:linear_proj|self_attention\.dense|linear_fc2|dense_4h_to_h)"
                  r"\.weight$")
# word_embeddings_for_head (legacy, last stage, tied output): a vocab-parallel embedding
_HEAD = re.compile(r"^word_embeddings_for_head\.weight$")


# ---------------------------------------------------------------------------------------------
# sniffing


def _names(source: Source) -> list[str]:
    try:
        return source.list()
    except (InspectorError, OSError):
        return []


def _is_torch_dist(source: Source, names: list[str]) -> bool:
    if CONFIG not in names:
        return False
    try:
        config = json.loads(source.child(CONFIG).read_text(MAX_CONFIG))
    except (InspectorError, OSError, ValueError):
        return False
    return isinstance(config, dict) and "sharded_backend" in config


def sniff(head: bytes, source: Source) -> str | None:
    """'tracker' (a save directory with ``latest_checkpointed_iteration.txt``), 'torch_dist' (an
    iteration directory with Megatron-core's ``metadata.json``) or 'ranks' (an iteration
    directory of ``mp_rank_*`` directories)."""
    if not source.is_dir():
        return None
    names = _names(source)
    if TRACKER in names:
        return "tracker"
    if _is_torch_dist(source, names):
        return "torch_dist"
    if any(_RANK.match(n) for n in names):
        return "ranks"
    return None


# ---------------------------------------------------------------------------------------------
# the iteration directory


def iteration_dir(save_dir: Source) -> tuple[Source, str]:
    """The directory the tracker file names, as Megatron's ``read_metadata`` reads it: an
    integer iteration (``iter_{:07d}``) or ``release``."""
    tracker = save_dir.child(TRACKER)
    text = tracker.read_text(MAX_TRACKER).strip()
    if text == "release":
        name = "release"
    elif text.isdigit() and text.isascii():
        name = f"iter_{int(text):07d}"
    else:
        raise FormatError(f"{TRACKER} holds {text[:40]!r}, not an iteration number or "
                          "'release'", tracker.where)
    try:
        found = save_dir.child(name)
        ok = found.is_dir()
    except (InspectorError, OSError, RuntimeError) as e:
        raise FormatError(f"{TRACKER} names {name}: {e}", save_dir.where) from None
    if not ok:
        raise FormatError(f"{TRACKER} names {name}, which is not a directory here",
                          save_dir.where)
    return found, text


def _rank_grid(directory: Source) -> dict[tuple[int, int], str]:
    """(tp, pp) -> rank directory name; every rank of the grid present, else a FormatError."""
    grid: dict[tuple[int, int], str] = {}
    names = [n for n in _names(directory) if _RANK.match(n)]
    if not names:
        raise FormatError("no mp_rank_* directories: not a Megatron iteration directory",
                          directory.where)
    if len(names) > MAX_RANK_DIRS:
        raise FormatError(f"{len(names):,} rank directories (limit {MAX_RANK_DIRS:,})",
                          directory.where)
    piped = {bool(_RANK.match(n).group(2)) for n in names}  # type: ignore[union-attr]
    if len(piped) > 1:
        raise FormatError("rank directories with and without a pipeline rank "
                          f"({', '.join(names[:4])}): two checkpoints mixed", directory.where)
    for n in names:
        m = _RANK.match(n)
        assert m is not None
        if m.group(3):
            raise FormatError(f"{n}: expert-parallel ranks are not merged (not supported)",
                              directory.where)
        key = (int(m.group(1)), int(m.group(2) or 0))
        if key in grid:
            raise FormatError(f"{grid[key]} and {n} are the same rank", directory.where)
        grid[key] = n
    tp = 1 + max(t for t, _ in grid)
    pp = 1 + max(p for _, p in grid)
    has_pp = piped.pop()
    for t in range(tp):
        for p in range(pp):
            if (t, p) not in grid:
                want = f"mp_rank_{t:02d}" + (f"_{p:03d}" if has_pp else "")
                raise FormatError(f"{want} is missing: an incomplete checkpoint of {tp} "
                                  f"tensor- x {pp} pipeline-parallel ranks", directory.where)
    return grid


# ---------------------------------------------------------------------------------------------
# merging the legacy per-rank files


class Piece:
    """One rank's stored tensor: the rank file's checkpoint and its entry."""

    __slots__ = ("ckpt", "entry", "rank")

    def __init__(self, ckpt: Checkpoint, entry: TensorEntry, rank: str) -> None:
        self.ckpt, self.entry, self.rank = ckpt, entry, rank


class Merge:
    """How a global tensor is made of its tensor-parallel pieces: concatenated along ``dim``,
    each piece cut into ``parts`` equal blocks along it first (2 for SwiGLU's [gate; up]);
    ``dim`` None: replicated (the first piece)."""

    __slots__ = ("pieces", "dim", "parts", "shape", "why")

    def __init__(self, pieces: list[Piece], dim: int | None, parts: int,
                 shape: tuple[int, ...], why: str | None = None) -> None:
        self.pieces, self.dim, self.parts, self.shape, self.why = pieces, dim, parts, shape, why

    def runs(self, itemsize: int) -> Iterator[tuple[int, int]]:
        """(piece index, bytes) in the global tensor's C order; each piece is read forward."""
        if self.dim is None or len(self.pieces) == 1:
            yield 0, self.pieces[0].entry.numel * itemsize
            return
        d = self.dim
        outer = 1
        for s in self.shape[:d]:
            outer *= s
        inner = 1
        for s in self.shape[d + 1:]:
            inner *= s
        blocks = [p.entry.shape[d] // self.parts * inner * itemsize for p in self.pieces]
        for _ in range(outer):
            for _part in range(self.parts):
                yield from enumerate(blocks)


def _rule(name: str, swiglu: bool | None) -> tuple[int | None, int, str | None]:
    """(dim, parts, why-values-unknown) of a global tensor name."""
    if _GLU.search(name):
        if swiglu is None:
            return 0, 1, "args.swiglu is unknown: the order of linear_fc1's gate/up pieces"
        return 0, 2 if swiglu else 1, None
    if _COLUMN.search(name) or _HEAD.search(name):
        return 0, 1, None
    if _ROW.search(name):
        return 1, 1, None
    return None, 1, None


def _merge_shape(name: str, pieces: list[Piece], dim: int | None, parts: int,
                 where: str) -> tuple[int, ...]:
    shapes = [p.entry.shape for p in pieces]
    first = shapes[0]
    if dim is None or len(pieces) == 1:
        if any(s != first for s in shapes):
            raise FormatError(
                f"{name!r} is {list(first)} in {pieces[0].rank} and "
                f"{list(next(s for s in shapes if s != first))} in another tensor-parallel "
                "rank: split by a rule not known here", where)
        return first
    if len(first) <= dim:
        raise FormatError(f"{name!r} is {list(first)}: no dimension {dim} to split along", where)
    for p in pieces:
        s = p.entry.shape
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first,
                                                                          strict=True))
                                        if i != dim) or s[dim] % parts:
            raise FormatError(f"{name!r}: the pieces {list(first)} ({pieces[0].rank}) and "
                              f"{list(s)} ({p.rank}) do not concatenate along dimension {dim}",
                              where)
    return first[:dim] + (sum(s[dim] for s in shapes),) + first[dim + 1:]


def _renumber(name: str, offset: int) -> str:
    m = _LAYER.match(name)
    return f"{m.group(1)}{int(m.group(2)) + offset}{m.group(3)}" if m and offset else name


def _stage_layers(names: list[str]) -> int:
    """Layers a stage holds: one more than its highest local layer number (0 if none)."""
    found = [int(m.group(2)) for n in names if (m := _LAYER.match(n))]
    return max(found) + 1 if found else 0


def _model_names(ckpt: Checkpoint, where: str) -> list[TensorEntry]:
    if any(t.stored_name.startswith("model0.") for t in ckpt.tensors):
        raise FormatError("virtual pipeline stages (model0, model1, ...) are not merged (not "
                          "supported)", where)
    return [t for t in ckpt.tensors if t.stored_name.startswith("model.")]


def _args(hyper: dict[str, Any]) -> dict[str, Any] | None:
    args = hyper.get("args")
    return args if isinstance(args, dict) else None


def full_args(blob: Source, where: str) -> dict[str, Any] | None:
    """Every entry of the ``args`` namespace of a ``torch.save`` dict (a rank file,
    ``common.pt``, the ``common_state`` item's ``[state_dict]``), each value rendered; None
    when there is none. Read by the restricted unpickler (nothing runs)."""
    from .security.restricted_pickle import Placeholder, render
    from .torch.zip_archive import read_zip

    try:
        obj = read_zip(blob).obj
    except InspectorError as e:
        raise FormatError(f"its args cannot be read: {e.message}", where) from None
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    args = obj.get("args") if isinstance(obj, dict) else None
    if not isinstance(args, Placeholder):
        return None
    state = args.state
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
        state = state[0]
    if not isinstance(state, dict):
        return None
    out = {}
    for i, (k, v) in enumerate(state.items()):
        if i >= MAX_ARGS:
            out["..."] = f"{len(state) - i} more"
            break
        out[str(k)] = render(v)
    return out


def _open_ranks(directory: Source) -> Checkpoint:
    from .registry import load

    grid = _rank_grid(directory)
    tp = 1 + max(t for t, _ in grid)
    pp = 1 + max(p for _, p in grid)
    files: dict[tuple[int, int], Checkpoint] = {}
    for key, rank in sorted(grid.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rank_dir = directory.child(rank)
        try:
            file = rank_dir.child(BASENAME)
            ok = file.is_file()
        except (InspectorError, OSError, RuntimeError):
            ok = False
        if not ok:
            raise FormatError(f"{rank} has no {BASENAME}: an incomplete checkpoint",
                              directory.where)
        try:
            files[key] = load(file)
        except InspectorError as e:
            raise type(e)(f"{rank}/{BASENAME}: {e.message}", directory.where) from None
    first = files[(0, 0)]
    hyper = dict(first.hyperparameters)
    if isinstance(hyper.get("args"), dict):
        hyper["args"] = full_args(directory.child(grid[(0, 0)]).child(BASENAME),
                                  directory.where) or hyper["args"]
    args = _args(hyper)
    findings: list[Finding] = []
    if args is not None:
        want = (args.get("tensor_model_parallel_size"), args.get("pipeline_model_parallel_size"))
        if want != (tp, pp) and all(isinstance(x, int) for x in want):
            raise FormatError(f"args say {want[0]} tensor- x {want[1]} pipeline-parallel ranks, "
                              f"the directory holds {tp} x {pp}", directory.where)
        swiglu = bool(args.get("swiglu"))
    else:
        swiglu = None
        findings.append(Finding("warning", "no args in the checkpoint: hyperparameters and the "
                                "SwiGLU piece order are unknown", f"{grid[(0, 0)]}/{BASENAME}"))
    merges: dict[str, Merge] = {}
    order: list[str] = []
    offset = 0
    for p in range(pp):
        stage = [(t, grid[(t, p)], files[(t, p)]) for t in range(tp)]
        local: dict[str, list[Piece]] = {}
        for t, rank, ck in stage:
            entries = _model_names(ck, f"{directory.where}/{rank}")
            seen = set()
            for e in entries:
                name = e.stored_name[len("model."):]
                seen.add(name)
                local.setdefault(name, []).append(Piece(ck, e, rank))
            if t and set(local) != seen:
                odd = sorted(set(local) ^ seen)[0]
                raise FormatError(f"{odd!r} is in one tensor-parallel rank of stage {p} and not "
                                  f"in {rank}", directory.where)
        for name, pieces in local.items():
            glob = _renumber(name, offset)
            if glob in merges:
                raise FormatError(f"{glob!r} is stored by two pipeline stages",
                                  directory.where)
            dim, parts, why = _rule(glob, swiglu)
            shape = _merge_shape(glob, pieces, dim, parts, directory.where)
            merges[glob] = Merge(pieces, dim, parts, shape, why)
            order.append(glob)
        offset += _stage_layers(list(local))
    tensors = []
    for glob in order:
        m = merges[glob]
        e0 = m.pieces[0].entry
        dtypes = {p.entry.dtype for p in m.pieces}
        if len(dtypes) > 1:
            raise FormatError(f"{glob!r} has pieces of dtypes {sorted(map(str, dtypes))}",
                              directory.where)
        numel = 1
        for s in m.shape:
            numel *= s
        nbytes = (e0.nbytes // e0.numel * numel) if e0.nbytes is not None and e0.numel else None
        extra: dict[str, Any] = {"tp_pieces": len(m.pieces) if m.dim is not None else 1}
        if m.dim is not None and len(m.pieces) > 1:
            extra["split_dim"] = m.dim
        tensors.append(TensorEntry(glob, glob, m.shape, e0.dtype, e0.role, nbytes=nbytes,
                                   extra=extra))
    rest = sum(1 for ck in files.values() for t in ck.tensors
               if not t.stored_name.startswith("model."))
    if rest:
        findings.append(Finding(
            "info", f"{rest:,} other tensors (optimizer state, RNG states) are kept per rank and "
            f"not merged: open mp_rank_*/{BASENAME} for them", directory.where))
    rows: list[dict[str, Any]] = []
    seen_rows: set[str] = set()
    seen_findings: set[str] = set()
    for key in sorted(files):
        ck = files[key]
        for row in ck.metadata.get("pickle_globals", ()):
            if row.get("name") not in seen_rows:
                seen_rows.add(row.get("name"))
                rows.append(row)
        for f in ck.findings:
            if f.message not in seen_findings:
                seen_findings.add(f.message)
                findings.append(f)
    metadata = {"layout": "torch", "tensor_parallel": tp, "pipeline_parallel": pp,
                "ranks": [grid[k] for k in sorted(grid, key=lambda k: (k[1], k[0]))],
                "pickle_globals": rows}
    paths = (directory.where, *(files[k].path for k in sorted(files, key=lambda k: (k[1], k[0]))))
    return Checkpoint(paths=paths, format=NAME, tensors=tensors, metadata=metadata,
                      hyperparameters=hyper, findings=findings, source=directory,
                      reader=_reader(merges, directory.where))


# ---------------------------------------------------------------------------------------------
# values of merged tensors


def _piece_file(piece: Piece, stack: ExitStack, where: str) -> Any:
    """The piece's elements in C order as a forward-read file object."""
    entry = piece.entry
    if piece.ckpt.reader is None:
        raise FormatError(f"{piece.rank}: no way to read {entry.stored_name!r}", where)
    loc = piece.ckpt.reader(entry)
    if isinstance(loc, ByteRange):
        if loc.big_endian or (loc.stride is not None and loc.stride != c_strides(entry.shape)):
            raise FormatError(f"{piece.rank}: {entry.stored_name!r} is stored as a strided or "
                              "big-endian view", where)
        nbytes = entry.nbytes or 0
        if loc.offset + nbytes > loc.source.size:
            raise FormatError(f"{piece.rank}: {entry.stored_name!r} runs past the end of its "
                              "file", where)
        f = stack.enter_context(loc.source.open())
        f.seek(loc.offset)
        return f
    if isinstance(loc, Stream) and not loc.big_endian and not loc.fortran:
        return loc.open(stack)
    raise FormatError(f"{piece.rank}: {entry.stored_name!r} is stored in a way not merged here",
                      where)


class _Merged(RunReader):
    """A merged tensor's bytes in C order, run by run from its pieces."""

    def __init__(self, merge: Merge, itemsize: int, stack: ExitStack, where: str) -> None:
        super().__init__(where, "a rank file")
        self._merge, self._stack = merge, stack
        self._files: dict[int, Any] = {}
        self._runs = merge.runs(itemsize)

    def next_run(self) -> tuple[Any, int] | None:
        try:
            i, n = next(self._runs)
        except StopIteration:
            return None
        f = self._files.get(i)
        if f is None:
            f = self._files[i] = _piece_file(self._merge.pieces[i], self._stack, self._where)
        return f, n


def _reader(merges: dict[str, Merge], where: str) -> Any:
    from .dtypes import BITS

    def locate(entry: TensorEntry) -> Stream:
        m = merges.get(entry.stored_name)
        if m is None:
            raise FormatError(f"{entry.stored_name!r} is not a tensor of this checkpoint", where)
        if m.why:
            raise FormatError(m.why, where)
        bits = BITS.get(entry.dtype or "")
        if not bits or bits % 8:
            raise FormatError(f"{entry.stored_name!r}: dtype {entry.dtype} is not merged", where)
        return Stream(lambda stack: _Merged(m, bits // 8, stack, where))

    return locate


# ---------------------------------------------------------------------------------------------
# torch_dist (Megatron-core dist_checkpointing)


def _common_state(hyper: dict[str, Any]) -> dict[str, Any] | None:
    """The ``common_state`` bytes item's state dict (``torch.save([state_dict])``)."""
    for key, value in hyper.items():
        if key.startswith("common_state/") or key == "common_state":
            if isinstance(value, list) and value and isinstance(value[0], dict):
                return value[0]
            if isinstance(value, dict):
                return value
    return None


def _open_torch_dist(directory: Source) -> Checkpoint:
    from .directory import read_json_object
    from .registry import load

    config = read_json_object(directory.child(CONFIG), CONFIG)
    backend = config.get("sharded_backend")
    if backend != "torch_dist":
        raise FormatError(f"{CONFIG}: sharded_backend {backend!r} is not supported (torch_dist "
                          "is)", directory.where)
    inner = load(directory, format="dcp")
    findings = list(inner.findings)
    rows = list(inner.metadata.get("pickle_globals", ()))
    paths = list(inner.paths)
    common = _common_state(inner.hyperparameters)
    hyper: dict[str, Any] = {}
    common_file = None
    try:
        common_file = directory.child(COMMON)
        has_common = common_file.is_file()
    except (InspectorError, OSError, RuntimeError):
        has_common = False
    if has_common and common_file is not None:
        ck = load(common_file)
        paths.append(ck.path)
        hyper.update(ck.hyperparameters)
        if isinstance(hyper.get("args"), dict):
            hyper["args"] = full_args(common_file, directory.where) or hyper["args"]
        known = {r.get("name") for r in rows}
        rows.extend(r for r in ck.metadata.get("pickle_globals", ()) if r.get("name") not in known)
        findings.extend(ck.findings)
    elif common is not None:
        hyper.update(common)
        item = next((b for b in inner.metadata.get("bytes", ())
                     if b["name"].startswith("common_state")), None)
        if item is not None and isinstance(hyper.get("args"), dict):
            blob = Window(directory.child(item["file"]), item["offset"], item["length"],
                          f"{item['offset']}+{item['length']}")
            hyper["args"] = full_args(blob, directory.where) or hyper["args"]
    else:
        findings.append(Finding("warning", f"no {COMMON} and no common_state item: args and "
                                "iteration are unknown", directory.where))
    tensors = []
    for t in inner.tensors:
        role = Role.OPTIMIZER if t.stored_name.startswith("optimizer.") else t.role
        tensors.append(t if role == t.role else TensorEntry(
            t.stored_name, t.name, t.shape, t.dtype, role, nbytes=t.nbytes, file=t.file,
            extra=t.extra))
    metadata = dict(inner.metadata)
    metadata.update({"layout": "torch_dist", "sharded_backend": backend,
                     "sharded_backend_version": config.get("sharded_backend_version"),
                     "pickle_globals": rows})
    return Checkpoint(paths=tuple(paths), format=NAME, tensors=tensors, metadata=metadata,
                      hyperparameters=hyper, findings=findings, source=inner.source,
                      reader=inner.reader)


# ---------------------------------------------------------------------------------------------
# opening


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    directory, tracked = source, None
    if variant == "tracker":
        directory, tracked = iteration_dir(source)
    elif variant not in ("torch_dist", "ranks"):
        raise FormatError(f"unsupported {NAME} variant {variant!r}", source.where)
    names = _names(directory)
    if _is_torch_dist(directory, names):
        ckpt = _open_torch_dist(directory)
    else:
        ckpt = _open_ranks(directory)
    ckpt.metadata["iteration_dir"] = directory.name
    if tracked is not None:
        ckpt.metadata["tracker"] = tracked
        ckpt.paths = (source.where, *ckpt.paths)
    return ckpt


ADAPTER = Adapter(
    name=NAME,
    description="Megatron-LM checkpoint directory (latest_checkpointed_iteration.txt, iter_*/"
    "mp_rank_*/model_optim_rng.pt merged across tensor/pipeline ranks, or torch_dist)",
    extensions=("<directory>",),
    sniff=sniff,
    open=open_checkpoint,
)
