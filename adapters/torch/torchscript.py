"""TorchScript archives (``torch.jit.save`` of ``torch.jit.script`` / ``torch.jit.trace``).

The same zip container as ``torch.save`` (``torch/csrc/jit/serialization/export_module.cpp``):
``<root>/data.pkl`` pickles the module tree, each module an instance of its compiled class
``__torch__.<qualified name>`` whose BUILD state is the dict of its attributes (submodules,
tensors, plain values); ``<root>/code/__torch__/<module path>.py`` holds each class's source as
TorchScript prints it, starting with its declarations::

    class Linear(Module):
      __parameters__ = ["weight", "bias", ]
      __buffers__ = []

Those two lists are how torch itself tells parameters from buffers when it loads the archive
(``torch/csrc/jit/serialization/import_source.cpp``); a tensor attribute in neither is a plain
attribute (role ``other``). ``constants.pkl`` (tensors folded into the code by tracing) and
``traced_inputs.pkl`` are not module state and are not listed. The ``__torch__.*`` classes and
``torch.jit._pickle.*`` helpers are TorchScript's own: read as inert placeholders, as every
unknown global is, but not reported as foreign globals.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import FormatError
from ..model import Checkpoint, Finding, Role, TensorEntry
from ..registry import Adapter
from ..security.examination import FileResult
from ..security.restricted_pickle import Placeholder, gc_paused
from ..source import Source
from .constants import MAX_DEPTH, ZIP_LOCAL_MAGIC
from .examine import examine
from .rebuild import StorageRef, TensorRecord
from .walk import ObjectWalk, key_text, tensor_entry
from .zip_archive import central_directory, find_data_pkl, read_zip

NAME = "torchscript"
CODE_PREFIX = "code/__torch__"
# Globals that belong to TorchScript's own serialization, never foreign.
OWN_GLOBALS = ("__torch__.", "torch.jit._pickle.")
_CLASS = re.compile(r"^class (\w+)\(Module\):\s*$", re.M)
_DECL = re.compile(r"^  (__parameters__|__buffers__) = \[(.*?)\]\s*$", re.M)
_QUOTED = re.compile(r'"([^"]*)"')
MAX_CODE_BYTES = 64 << 20


def sniff(head: bytes, source: Source) -> str | None:
    """'archive' for a zip holding ``<root>/data.pkl`` and ``<root>/code/__torch__*``."""
    if source.is_dir() or not head.startswith(ZIP_LOCAL_MAGIC) or len(head) < 30:
        return None
    nlen = int.from_bytes(head[26:28], "little")
    if head[30 : 30 + nlen].endswith(b"data.pkl"):
        return None  # torch.save writes data.pkl first; torch.jit.save writes data/ records first
    try:
        with source.view() as mm:
            d = central_directory(mm, len(mm), source.where)
    except (FormatError, OSError, ValueError):
        return None
    found = find_data_pkl(d)
    if found is None:
        return None
    root = found[0]
    return "archive" if any(n.startswith(root + CODE_PREFIX) for n in d.names()) else None


def declarations(code: dict[str, bytes]) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Qualified class name -> (parameter names, buffer names) from the ``code/`` sources."""
    out: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for member, raw in code.items():
        if not member.endswith(".py"):
            continue
        module = member[len("code/") : -len(".py")].replace("/", ".")
        text = raw.decode("utf-8", "replace")
        starts = [(m.start(), m.group(1)) for m in _CLASS.finditer(text)]
        for i, (start, cls) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
            decl = {m.group(1): frozenset(_QUOTED.findall(m.group(2)))
                    for m in _DECL.finditer(text, start, end)}
            out[f"{module}.{cls}"] = (decl.get("__parameters__", frozenset()),
                                      decl.get("__buffers__", frozenset()))
    return out


class _ScriptWalk:
    """Module tree -> (stored name, record, role); roles from the class declarations."""

    def __init__(self, decls: dict[str, tuple[frozenset[str], frozenset[str]]],
                 budget: int, where: str) -> None:
        self.decls = decls
        self.rows: list[tuple[str, Any, Role]] = []
        self.undeclared: set[str] = set()
        self.generic = ObjectWalk(budget, where)
        self.where = where

    def module(self, obj: Placeholder, prefix: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise FormatError(f"modules nest deeper than {MAX_DEPTH} levels at {prefix!r}",
                              self.where)
        cls = type(obj).global_name
        decl = self.decls.get(cls)
        if decl is None:
            self.undeclared.add(cls)
        params, buffers = decl or (frozenset(), frozenset())
        state = obj.state if isinstance(obj.state, dict) else {}
        dot = prefix + "." if prefix else ""
        for k, v in state.items():
            name = dot + key_text(k)
            if type(v) is TensorRecord or type(v) is StorageRef:
                role = (Role.PARAMETER if k in params else Role.BUFFER if k in buffers
                        else Role.OTHER)
                self.rows.append((name, v, role))
            elif isinstance(v, Placeholder) and type(v).global_name.startswith("__torch__."):
                self.module(v, name, depth + 1)
            else:  # containers of tensors as plain attributes
                start = len(self.generic.found)
                self.generic.walk(v, name, depth + 1)
                self.rows.extend((n, r, Role.OTHER) for n, r, _ in self.generic.found[start:])
                del self.generic.found[start:]


def open_checkpoint(source: Source, variant: str) -> Checkpoint:
    where = source.where
    with gc_paused():
        z = read_zip(source, want=lambda n: n.startswith(CODE_PREFIX) and n.endswith(".py"))
    decls = declarations({n: b for n, b in z.extra.items()})
    w = _ScriptWalk(decls, max(100_000, 4 * z.pickle_bytes), where)
    if isinstance(z.obj, Placeholder) and type(z.obj).global_name.startswith("__torch__."):
        w.module(z.obj, "", 0)
    else:
        raise FormatError("data.pkl of the TorchScript archive does not hold a scripted module",
                          where, z.pkl_name)
    tensors: list[TensorEntry] = [tensor_entry(n, n, rec, role, where) for n, rec, role in w.rows]
    findings = [
        Finding(g.severity or "warning",
                f"pickle global {g.name} is not vetted; read as an inert placeholder",
                z.pkl_name, g.name)
        for g in z.globals.values()
        if not g.allowed and not g.resolved.startswith(OWN_GLOBALS)
    ]
    findings += [Finding("info", f"TorchScript class {c} has no code/ declaration: its tensors "
                         "are listed with role other", z.pkl_name, c)
                 for c in sorted(w.undeclared)]
    meta = dict(z.meta)
    meta["container"] = "module"
    meta["pickle_globals"] = [{"name": g.name, "allowed": g.allowed or g.resolved.startswith(
        OWN_GLOBALS)} for g in z.globals.values()]
    meta["module_classes"] = sorted({c for c in decls})
    return Checkpoint(paths=(where,), format=NAME, tensors=tensors, metadata=meta,
                      findings=findings)


def examine_archive(source: Source, variant: str, res: FileResult) -> None:
    """``scan``: the archive as torch's zip walk reads it (``torch.load`` hands it to
    ``torch.jit.load``), its ``__torch__`` classes vetted by the archive's own code."""
    examine(source, "zip", res)


ADAPTER = Adapter(
    name=NAME,
    description="TorchScript archive (torch.jit.save: data.pkl + code/)",
    extensions=(".pt", ".pth", ".jit", ".ptl"),
    sniff=sniff,
    open=open_checkpoint,
    examine=examine_archive,
    default_variant="archive",
)
