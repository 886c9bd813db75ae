"""Python source shipped beside the weights, read with :mod:`ast` and never imported.

``from_pretrained(trust_remote_code=True)`` imports the modules ``auto_map`` names
(``modeling_*.py``, ``configuration_*.py``, ``tokenization_*.py``); TorchServe imports a
``.mar``'s ``handler.py``. Such a file is code that runs, so it is never ``safe``: it is
``foreign`` with the modules it would import, and ``dangerous`` when it calls a dangerous
callable. Calls are resolved through the file's own imports and simple aliases:
``import os; os.system(...)``, ``from subprocess import Popen as P; P(...)``,
``__import__("os").system(...)``, ``importlib.import_module("os").system(...)``,
``getattr(os, "system")(...)`` with string constants, ``x = os.system; x(...)``.

A call is dangerous when its dotted name is on picklescan's or modelscan's list of dangerous
callables (:data:`.verdicts.EXACT` / :data:`.verdicts.WHOLE`), except the ordinary library
calls of :data:`ORDINARY` (listed for
pickles, where they reach further, but in source they only do what source can do anyway: read
a path, copy a vocabulary file, build a ``functools.partial``); ``eval``, ``exec``, ``compile``,
``breakpoint`` and an import of a module named at run time are dangerous wherever they are
called.
"""

from __future__ import annotations

import ast

from ..ast_parse import parse
from . import verdicts as V
from .examination import DANGEROUS, ERROR, FOREIGN

SOURCE_LISTS = frozenset({"picklescan", "modelscan"})  # curated callables, not whole modules
MAX_SOURCE_BYTES = 4 << 20  # a modeling file is rarely past 300 KB
MAX_NODES = 2_000_000
# Built-ins that run code given as data.
CODE_BUILTINS = frozenset({"eval", "exec", "compile", "breakpoint", "execfile"})
IMPORTERS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
# Listed for pickles (they build callables or reach the outside world there); in source they
# are ordinary library calls (path handling, environment reads, file copies of tokenizers'
# save_vocabulary, partials): exact dotted names, or a prefix ending with ".".
ORDINARY = frozenset({
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.open",
    "builtins.vars", "builtins.globals", "builtins.locals", "builtins.input",
    "builtins.hasattr", "builtins.apply",
    "functools.partial", "operator.itemgetter", "operator.attrgetter",
    "operator.methodcaller", "logging.FileHandler",
    "os.path.", "os.environ.", "os.getenv", "os.getcwd", "os.listdir", "os.makedirs",
    "os.mkdir", "os.fspath", "os.cpu_count", "os.getpid", "os.scandir", "os.walk", "os.stat",
    "os.PathLike",
    "sys.stdout.", "sys.stderr.", "sys.exit", "sys.getsizeof", "sys.getrecursionlimit",
    "sys.setrecursionlimit", "sys.version_info.", "sys.getdefaultencoding", "sys.path.",
    "sys.getrefcount",
    "sys.modules.get", "sys.version.", "sys.platform.", "sys.argv.", "sys.byteorder.",
    "sys.maxsize", "sys.float_info.", "sys.executable.",
    "shutil.copyfile", "shutil.copy", "shutil.copy2",
    # writers: serialising the program's own objects loads nothing (the readers stay listed)
    "pickle.dump", "pickle.dumps", "_pickle.dump", "_pickle.dumps", "pickle.Pickler",
    "dill.dump", "dill.dumps", "cloudpickle.dump", "cloudpickle.dumps", "joblib.dump",
    "marshal.dump", "marshal.dumps",
})


def examine_source(data: bytes, label: str) -> list[tuple[str, str]]:
    """``(level, text)`` for one Python file: an error when it cannot be parsed or is too
    large, else what it would import (foreign) and each dangerous call (dangerous)."""
    if len(data) > MAX_SOURCE_BYTES:
        return [(ERROR, f"Python source of {len(data):,} bytes (limit {MAX_SOURCE_BYTES:,}): "
                        "not parsed")]
    try:
        tree = parse(data, filename=label)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        line = getattr(e, "lineno", None)
        at = f" (line {line})" if line else ""
        return [(ERROR, f"not parsable as Python{at}: {getattr(e, 'msg', None) or e}")]
    walk = _Walk()
    try:
        walk.run(tree)
    except RecursionError:
        return [(ERROR, "Python source nested too deeply to examine")]
    out: list[tuple[str, str]] = []
    for line, name, why in walk.dangerous:
        out.append((DANGEROUS, f"line {line}: calls {name} ({why}); the code runs when "
                               "imported (trust_remote_code) or served"))
    mods = sorted(walk.modules)
    shown = ", ".join(mods[:20]) + (f" and {len(mods) - 20} more" if len(mods) > 20 else "")
    out.append((FOREIGN, "Python source: runs when imported (from_pretrained with "
                         "trust_remote_code, a model server's handler); imports "
                         f"{shown or 'nothing'}"))
    if walk.truncated:
        out.append((ERROR, f"more than {MAX_NODES:,} syntax nodes: the rest not examined"))
    return out


def ordinary(name: str) -> bool:
    return name in ORDINARY or any(
        p.endswith(".") and name.startswith(p) for p in ORDINARY)


class _Walk:
    """One pass over the tree: imports and aliases first (module level and in functions, in
    source order), calls resolved through them."""

    def __init__(self) -> None:
        self.alias: dict[str, str] = {}
        self.modules: set[str] = set()
        self.dangerous: list[tuple[int, str, str]] = []
        self.truncated = False
        self.defined: set[str] = set()

    def run(self, tree: ast.AST) -> None:
        nodes = list(ast.walk(tree))
        if len(nodes) > MAX_NODES:
            nodes, self.truncated = nodes[:MAX_NODES], True
        for node in nodes:  # names the file defines shadow built-ins
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defined.add(node.name)
        ordered = sorted((n for n in nodes if hasattr(n, "lineno")),
                         key=lambda n: (n.lineno, n.col_offset))
        for node in ordered:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.modules.add(a.name)
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        top = a.name.split(".", 1)[0]
                        self.alias[top] = top
            elif isinstance(node, ast.ImportFrom):
                mod = "." * node.level + (node.module or "")
                self.modules.add(mod)
                for a in node.names:
                    if a.name != "*":
                        self.alias[a.asname or a.name] = f"{mod}.{a.name}"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name):
                name = self.resolve(node.value)
                if name is not None:
                    self.alias[node.targets[0].id] = name
                else:
                    self.alias.pop(node.targets[0].id, None)
            elif isinstance(node, ast.Call):
                self.call(node)

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for, when the file says."""
        if isinstance(node, ast.Name):
            if node.id in self.alias:
                return self.alias[node.id]
            import builtins

            if node.id not in self.defined and hasattr(builtins, node.id):
                return f"builtins.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            arg = node.args[0] if node.args else None
            const = arg.value if isinstance(arg, ast.Constant) else None
            if func in IMPORTERS and isinstance(const, str):
                return const
            if func == "builtins.getattr" and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                attr = node.args[1]
                if base and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                    return f"{base}.{attr.value}"
        return None

    def call(self, node: ast.Call) -> None:
        name = self.resolve(node.func)
        if name is None:
            return
        line = node.lineno
        if name in IMPORTERS:
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                self.modules.add(arg.value)
            else:
                self.dangerous.append((line, name, "imports a module named at run time"))
            return
        short = name.removeprefix("builtins.")
        if name.startswith("builtins.") and short in CODE_BUILTINS:
            self.dangerous.append((line, short, "runs code given as data"))
            return
        if ordinary(name):
            return
        why = source_listed(name)
        if why:
            self.dangerous.append((line, name, why))


def source_listed(name: str) -> str | None:
    """Why a call in source is dangerous: the dotted name (or a prefix of it) is on one of
    :data:`SOURCE_LISTS`; fickling's whole-module entries (``inspect``, ``platform``,
    ``tempfile``) flag any import from a pickle, not a call in source."""
    parts = name.split(".")
    found: set[str] = set()
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        found |= V.EXACT.get(prefix, set()) & SOURCE_LISTS
        found |= V.WHOLE.get(prefix, set()) & SOURCE_LISTS
    if not found:
        return None
    return "on the " + ", ".join(sorted(found)) + " list" + "s" * (len(found) > 1)
