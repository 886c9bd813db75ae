"""A checkpoint carried inside another file's data, examined with the walk a loose file gets.

Keras 3's ``TorchModuleWrapper.get_config`` stores its module as ``torch.save`` bytes in
base64 in the model config, and ``from_config`` hands them to ``torch.load(weights_only=False)``
(``keras/src/utils/torch_utils.py``). Such bytes are held as a file in memory and examined as
``scan`` examines a file: the registry's claim, then that adapter's examine hook (the torch zip
and its pickles, the legacy stream); a pickle no adapter claims is examined as a pickle stream.
"""

from __future__ import annotations

from .examination import DANGEROUS, ERROR, FileResult, examine_pickles, one_line, parses_as_pickle

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..source_interface import Source

MAX_EMBEDDED_BYTES = 256 << 20


def examine_embedded(data: bytes, label: str, loader: str,
                     parent: Source | None = None) -> FileResult:
    """The examination of ``data`` as a file named ``label``, which ``loader`` would load."""
    import io

    from ..bytes_source import BytesSource
    from ..errors import InspectorError
    from ..registry import claim

    res = FileResult(label)
    if len(data) > MAX_EMBEDDED_BYTES:
        res.add(ERROR, f"{len(data):,} embedded bytes (limit {MAX_EMBEDDED_BYTES:,}): not "
                       "examined")
        return res
    source = BytesSource(data, label, parent)
    found = claim(source)
    try:
        if found is not None and found[0].examine is not None:
            adapter, variant = found
            res.kind = variant if variant != adapter.name else adapter.name
            adapter.examine(source, variant, res)
        elif parses_as_pickle(data[: 1 << 20]) or data[:1] == b"\x80":
            res.kind = "pickle"
            examine_pickles(res, io.BytesIO(data), len(data))
        else:
            res.add(ERROR, f"bytes that {loader} would load, in no format the tool reads: not "
                           "examined")
    except (InspectorError, OSError, ValueError, KeyError, IndexError, TypeError, EOFError,
            RuntimeError, MemoryError, RecursionError, NotImplementedError) as e:
        res.add(ERROR, one_line(e))
    return res


def embedded_items(data: bytes, label: str, loader: str) -> list[tuple[str, str]]:
    """``(level, text)`` of :func:`examine_embedded`, each text naming the loader; a file
    whose bytes hold something dangerous says so first."""
    res = examine_embedded(data, label, loader)
    out = [(i.level, f"{loader} would load {res.kind} bytes: {i.text}"
            + (f" [{i.where}]" if i.where else "")) for i in res.items]
    if res.verdict == DANGEROUS:
        out.insert(0, (DANGEROUS, f"{loader} would load {res.kind} bytes that a loader "
                                  "would run code from"))
    return out
