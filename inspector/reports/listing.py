"""The shape listing: a checkpoint turned into the stable, documented report of ``inspector show``.

The report is a plain dict (JSON-ready); renderers in :mod:`inspector.reports.render` turn it
into text.
Schema (``"schema": "inspector.listing/1"``), fields never change meaning, later versions only add:

- ``format``, ``path``, ``paths``: the adapter's format name, the path given, every file read.
- ``metadata``: format facts (framework version, header metadata, pickle globals, ...).
- ``hyperparameters``: what was found inside or beside the file (``{}`` if nothing).
- ``tensors``: in stored order (or ``sort``), each ``name`` (canonical), ``stored_name`` (as the
  file stores it), ``shape`` (list), ``dtype``, ``role`` (parameter|buffer|optimizer|other),
  ``numel``, ``nbytes`` (null if unknown), ``offset`` (absolute byte offset or null), ``file``
  (shard, or null), and on tied tensors only: ``tied_to`` (the first stored name of the tie
  group: the group's id, the name every alias points to), ``tie_size`` (names in the group) and
  ``shared_with`` (the other stored names, at most 16; ``shared_with_omitted`` counts the rest,
  so the report stays linear when one tensor is stored under 100,000 names).
- ``totals``: element counts ``parameters``, ``buffers``, ``optimizer``, ``other``, ``all``
  (every stored tensor, a tensor tied under several names counted once; logical sizes, also for
  sparse arrays), ``stored_elements`` (only when sparse arrays store fewer), plus ``tensors``
  (entries listed), ``tied_aliases`` (entries not counted because they repeat another),
  ``bytes`` (of the tensors whose size is known) and ``bytes_unknown_tensors`` (only when some
  tensors' size is unknown, e.g. an unreadable dtype).
- ``bytes_by_dtype``: stored bytes per dtype, tied tensors once.
- ``findings``: ``{"severity", "message", "where", "subject"}`` records (e.g. foreign pickle
  globals; ``subject`` is the global's dotted name).
- ``quantization`` (quantized Hugging Face checkpoints only: the directory's config.json, or
  the one beside a lone safetensors file, has a ``quantization_config``): the method as read
  (``bitsandbytes nf4``, ``gptq 4-bit group 32 (gptq)``, ...), with "(not modelled: ...)" when
  it is not; else ``totals.model_parameters`` is the original model's parameter count (each
  packed weight unpacked to out*in values, quantization state such as scales and zero points
  left out), while ``totals.parameters`` stays the stored floating-point elements.
- ``filter``: the ``match`` regex and how many of how many tensors it kept, when one was given.

Added by the grouping schemes (:mod:`inspector.grouping`):

- ``scheme``: ``name``, ``description``, ``source`` ("built-in" or the file), ``auto`` (chosen by
  detection) and ``parameters`` (e.g. ``{"depth": 1}`` for ``prefix``).
- each tensor: ``group``, and ``layer`` (plus ``direction``/``block``) where the scheme captures
  them.
- ``groups``: in scheme order, each ``name``, ``tensors``, ``parameters``, ``elements``,
  ``bytes`` (tied tensors once: the groups sum to ``totals``), ``share`` (of all parameters),
  ``tied_aliases``, ``embedding`` (bool), and where layers are captured ``layers`` (per
  ``block``/``layer``/``direction`` subtotals) and ``repeats`` (identical layers collapsed:
  ``label`` ``layers.#``, ``layers``, ``count``, numbers per layer).
- ``totals.embedding_parameters`` and ``totals.non_embedding_parameters`` when the scheme flags
  embedding groups.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import chain, repeat

from inspector.adapters.errors import UsageError
from inspector.adapters.model import Checkpoint, Role, TensorEntry

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

    from inspector.grouping import Assignment

SCHEMA = "inspector.listing/1"
SORTS = ("stored", "name", "size")
TOTAL_KEYS = {
    Role.PARAMETER: "parameters",
    Role.BUFFER: "buffers",
    Role.OPTIMIZER: "optimizer",
    Role.OTHER: "other",
}


def select(ckpt: Checkpoint, match: str | None = None, sort: str = "stored") -> list[TensorEntry]:
    """The entries to list: filtered by a regex over canonical or stored name, then sorted."""
    entries = list(ckpt.tensors)
    if match:
        try:
            rx = re.compile(match)
        except re.error as e:
            raise UsageError(f"--match {match!r} is not a valid regex ({e})") from None
        entries = [t for t in entries if rx.search(t.name) or rx.search(t.stored_name)]
    if sort == "name":
        entries.sort(key=lambda t: t.name)
    elif sort == "size":
        entries.sort(key=lambda t: (-t.numel, t.name))
    elif sort != "stored":
        raise UsageError(f"unknown sort {sort!r}; choose from {', '.join(SORTS)}")
    return entries


def totals(entries: list[TensorEntry], unique: list[TensorEntry]) -> dict[str, int]:
    """Counts by role over ``entries``; ``unique`` is them with tied aliases removed."""
    out = {key: 0 for key in TOTAL_KEYS.values()}
    roles, numels, nbytes, sparse = zip(*map(_TOTAL_FIELDS, unique), strict=True) if unique \
        else ((), (), (), ())
    kinds = set(roles)
    if len(kinds) == 1:  # one role (every tensor a parameter): one sum
        out[TOTAL_KEYS[roles[0]]] = sum(numels)
    else:
        for role, n in zip(roles, numels, strict=True):
            out[TOTAL_KEYS[role]] += n
    out["all"] = sum(out[k] for k in TOTAL_KEYS.values())
    stored = out["all"] if sparse.count(None) == len(sparse) else sum(
        n if s is None else s for n, s in zip(numels, sparse, strict=True))
    if stored != out["all"]:
        out["stored_elements"] = stored
    out["tensors"] = len(entries)
    out["tied_aliases"] = len(entries) - len(unique)
    unknown = nbytes.count(None)
    out["bytes"] = sum(filter(None, nbytes)) if unknown else sum(nbytes)
    if unknown:  # e.g. an orbax OCDBT checkpoint's arrays: their dtype is not readable
        out["bytes_unknown_tensors"] = unknown
    return out


_TOTAL_FIELDS = operator.attrgetter("role", "numel", "nbytes", "stored_numel")


def listing(
    ckpt: Checkpoint,
    match: str | None = None,
    sort: str = "stored",
    scheme: str | None = "auto",
    scheme_params: Mapping[str, int] | None = None,
    lazy_rows: bool = False,
    per_layer: bool = True,
) -> dict[str, Any]:
    """The JSON-ready report of ``inspector show`` (schema in this module's docstring).

    ``scheme`` is a built-in scheme name, a scheme file or ``auto`` (detected from all the
    checkpoint's names, not only those ``match`` keeps); ``scheme_params`` set its parameters
    (``{"depth": 2}`` for ``prefix``). With ``lazy_rows``, ``tensors`` is a :class:`TensorRows`
    (the same rows, made on demand, and their JSON text made without them) instead of a list:
    for :func:`inspector.reports.render.json_chunks`, not for ``json.dumps``. Without
    ``per_layer`` the groups carry no ``layers`` and ``repeats`` (for views that show neither).
    """
    from inspector import grouping
    from inspector.adapters.quant_config import is_quantized
    from inspector.compare import choose_scheme

    entries = select(ckpt, match, sort)
    ties = ckpt.tie_groups()
    unique = ckpt.unique(entries)
    chosen = choose_scheme(scheme, [t.name for t in ckpt.tensors], ckpt.format,
                           params=scheme_params)
    placed = chosen.assign_all([t.name for t in entries])
    groups = grouping.summarize(chosen, entries, unique, per_layer, placed)
    sums = totals(entries, unique)
    quant = _quantization(ckpt, unique) if is_quantized(ckpt) else {}  # HF quantization_config
    if "model_parameters" in quant:
        sums["model_parameters"] = quant["model_parameters"]
    split = grouping.embedding_split(groups)
    if split is not None:
        sums["embedding_parameters"] = split["embedding"]
        sums["non_embedding_parameters"] = split["non_embedding"]
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "format": ckpt.format,
        "path": ckpt.path,
        "paths": list(ckpt.paths),
        "metadata": ckpt.metadata,
        "hyperparameters": ckpt.hyperparameters,
        "scheme": {
            "name": chosen.name,
            "description": chosen.description,
            "source": chosen.source,
            "auto": scheme in (None, grouping.AUTO),
            "parameters": dict(chosen.parameters),
        },
        "tensors": TensorRows(entries, ties, placed) if lazy_rows else
                   [_tensor(t, ties.get(t.stored_name), a)
                    for t, a in zip(entries, placed, strict=True)],
        "totals": sums,
        "groups": groups,
        "bytes_by_dtype": ckpt.bytes_by_dtype(unique),
        "findings": [
            {"severity": f.severity, "message": f.message, "where": f.where, "subject": f.subject}
            for f in ckpt.findings
        ],
    }
    if quant:
        report["quantization"] = quant["quantization"]
    if match:
        report["filter"] = {"match": match, "kept": len(entries), "of": len(ckpt.tensors)}
    return report


SHARED_WITH_LIMIT = 16
_ROLE_TEXT = {r: r.value for r in Role}  # Role.value goes through enum's descriptor: per tensor


def tie_fields(name: str, group: list[str]) -> dict[str, Any]:
    """``tied_to`` (the group's first stored name), ``tie_size`` and ``shared_with`` (the other
    names, at most :data:`SHARED_WITH_LIMIT`, with ``shared_with_omitted`` counting the rest):
    linear output however many names share one tensor."""
    others: list[str] = []
    for x in group:
        if x != name:
            if len(others) == SHARED_WITH_LIMIT:
                break
            others.append(x)
    out: dict[str, Any] = {"tied_to": group[0], "tie_size": len(group), "shared_with": others}
    if len(group) - 1 > len(others):
        out["shared_with_omitted"] = len(group) - 1 - len(others)
    return out


def _tensor(t: TensorEntry, group: list[str] | None, where: Assignment) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": t.name,
        "stored_name": t.stored_name,
        "shape": list(t.shape),
        "dtype": t.dtype,
        "role": _ROLE_TEXT[t.role],
        "numel": t.numel,
        "nbytes": t.nbytes,
        "offset": t.offset,
        "file": t.file,
    }
    if t.stored_numel is not None:
        row["stored_numel"] = t.stored_numel
    if group:
        row.update(tie_fields(t.stored_name, group))
    row["group"] = where.group
    for key in ("layer", "direction", "block"):
        if getattr(where, key) is not None:
            row[key] = getattr(where, key)
    return row


class TensorRows:
    """The ``tensors`` rows of a report, each made when asked for (a sequence of the dicts
    :func:`listing` lists), and :meth:`json_text`: their JSON lines written straight from the
    entries, the bytes the C encoder gives for the dicts, without making them."""

    __slots__ = ("entries", "ties", "placed", "_plain")

    def __init__(self, entries: list[TensorEntry], ties: Mapping[str, list[str]],
                 placed: list[Assignment]) -> None:
        self.entries = entries
        self.ties = ties
        self.placed = placed  # each entry's assignment, in order
        self._plain: bool | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def row(self, i: int) -> dict[str, Any]:
        t = self.entries[i]
        return _tensor(t, self.ties.get(t.stored_name), self.placed[i])

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self.row(j) for j in range(*i.indices(len(self.entries)))]
        return self.row(range(len(self.entries))[i])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self.row(i) for i in range(len(self.entries)))

    def plain(self) -> bool:
        """Whether every entry holds only plain values (:func:`_plain`), so that rows may be
        written from the entries' fields directly (the table's rows)."""
        if self._plain is None:
            columns = list(zip(*map(_ROW_FIELDS, self.entries), strict=True))
            del columns[5:6]  # numel: follows from the shape
            self._plain = not self.entries or _plain(*columns)
        return self._plain

    def json_text(self, start: int, stop: int, encode_row: Callable[[Any], str]) -> str:
        """Rows ``start:stop`` as ``"    " + encode_row(row)`` lines joined by ``",\\n"``.

        When the rows' entries hold only plain values (exact ``str``, ``int``, ``None``,
        tuples of ``int`` as shapes, no sparse count: checked column by column, at C speed), a
        row without ties is written from its fields' texts: what the encoder makes of each
        value (``encode_basestring`` for strings, ``int.__repr__`` for integers), repeated
        dtype, shape, role, group and layer texts made once. Tied rows and anything else: the
        dict through ``encode_row``."""
        entries = self.entries[start:stop]
        placed = self.placed[start:stop]
        names, stored, shapes, dtypes, roles, numels, nbytes, offsets, files, sparse = zip(
            *map(_ROW_FIELDS, entries), strict=True)
        if not _plain(names, stored, shapes, dtypes, roles, nbytes, offsets, files, sparse):
            return ",\n".join("    " + encode_row(self.row(i)) for i in range(start, stop))
        enc = _string_encoder()
        name_texts = list(map(enc, names))
        columns = [name_texts, name_texts if stored == names else list(map(enc, stored)),
                   _texts(shapes, _shape_text), _texts(dtypes, enc),
                   _texts(roles, lambda r: enc(_ROLE_TEXT[r])), numels,
                   ["null" if v is None else v for v in nbytes] if None in nbytes else nbytes,
                   ["null" if v is None else v for v in offsets] if None in offsets else offsets,
                   _texts(files, enc)]
        groups, *captures = zip(*placed, strict=True)
        odd = set(map(type, groups)) != {str}  # such rows are made below
        columns.append(_texts(groups, (lambda g: enc(g) if type(g) is str else "") if odd
                              else enc))
        tails = []
        for key, values in zip(("layer", "direction", "block"), captures, strict=False):
            if values.count(None) != len(values):
                head = ', "' + key + '": '
                tails.append(_texts(values, lambda v, head=head: head + enc(v), ""))
        columns.append(list(map("".join, zip(*tails, strict=True))) if len(tails) > 1
                       else tails[0] if tails else repeat("", len(names)))
        # An f-string per row: fewer instructions than a "%" template or one join of the
        # pieces over all the rows.
        out = [f'    {{"name": {n}, "stored_name": {s}, "shape": {shape}, "dtype": {dtype}, '
               f'"role": {role}, "numel": {numel}, "nbytes": {size}, "offset": {offset}, '
               f'"file": {file}, "group": {group}{tail}}}'
               for n, s, shape, dtype, role, numel, size, offset, file, group, tail
               in zip(*columns, strict=True)]
        # Tied rows (their tie fields) and rows whose group is not a string: the dict, encoded.
        ties = self.ties
        if ties or odd:
            for i, (t, a) in enumerate(zip(entries, placed, strict=True)):
                if ties and t.stored_name in ties or type(a.group) is not str:
                    out[i] = "    " + encode_row(_tensor(t, ties.get(t.stored_name), a))
        return ",\n".join(out)


_ROW_FIELDS = operator.attrgetter("name", "stored_name", "shape", "dtype", "role", "numel",
                                  "nbytes", "offset", "file", "stored_numel")


def _texts(values: Iterable[Any], text: Callable[[Any], str], none: str = "null") -> list[str]:
    """``text(v)`` of each value (``none`` for None), made once per distinct value: the
    repeated dtypes, shapes, roles, groups and layers of a checkpoint's rows."""
    values = list(values)
    made = {v: none if v is None else text(v) for v in set(values)}
    return list(map(made.__getitem__, values))


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(int.__repr__, shape)) + "]"


def _string_encoder() -> Callable[[str], str]:
    """The function that writes a ``str`` as the JSON encoder does with ``ensure_ascii=False``
    (the C one when it exists)."""
    import json

    return json.encoder.encode_basestring  # type: ignore[attr-defined]


def _plain(names: tuple, stored: tuple, shapes: tuple, dtypes: tuple, roles: tuple,
           nbytes: tuple, offsets: tuple, files: tuple, sparse: tuple) -> bool:
    """Whether these columns of entries' fields hold only values of types
    :meth:`TensorRows.json_text` writes exactly as the JSON encoder does (names ``str``; shape
    a tuple of ``int``, so numel is an ``int``; dtype and file ``str`` or None; nbytes and
    offset ``int`` or None; no sparse count; a :class:`Role`): one pass per column over the
    types seen."""
    none = type(None)
    return (
        set(map(type, names)) <= {str}
        and set(map(type, stored)) <= {str}
        and set(map(type, shapes)) <= {tuple}
        and set(map(type, chain.from_iterable(shapes))) <= {int}
        and set(map(type, dtypes)) <= {str, none}
        and set(map(type, files)) <= {str, none}
        and set(map(type, nbytes)) <= {int, none}
        and set(map(type, offsets)) <= {int, none}
        and set(map(type, sparse)) == {none}
        and set(map(type, roles)) <= {Role}
    )


def _quantization(ckpt: Checkpoint, unique: list[TensorEntry]) -> dict[str, Any]:
    """:func:`inspector.adapters.quantized.summary` (imported for a quantized checkpoint only)."""
    from inspector.adapters.quantized import summary

    return summary(ckpt, unique)
