"""The module graph of ``adapters/`` and ``inspector/``: no import circles (module-level imports
and imports inside functions alike) and no private name (``_x``) crossing a module boundary.

Read with :mod:`ast`, nothing imported. An edge ``A -> B`` is any ``import B`` / ``from B import
x`` in A (``from P import m``, m a submodule of package P, is an edge to ``P.m``); an
``if TYPE_CHECKING:`` block is not run and makes no edge. Importing ``a.b.c`` also runs the
``__init__`` of ``a.b`` and ``a``: those are edges too, except to a package that contains A
(Python is already running that ``__init__`` when A is imported from it).

Run as a script to print the circles and crossings: ``python tests/test_import_graph.py``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# source directory -> the import name it installs as
TOPS = ((ROOT / "inspector", "inspector"), (ROOT / "adapters", "inspector.adapters"))


def modules() -> dict[str, Path]:
    """import name -> file, for every module of ours (a package is its ``__init__.py``)."""
    out: dict[str, Path] = {}
    for top, name in TOPS:
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(top).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((name, *parts))] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module name an ``ImportFrom`` names (its level resolved)."""
    if not node.level:
        return node.module or ""
    package = module if _is_package(path) else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs (inside functions too), TYPE_CHECKING blocks skipped."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _lazy_imports(tree: ast.AST) -> Iterator[str]:
    """Modules named in ``import_module("...")`` calls (string literal arguments)."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def graph() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """(module -> the modules of ours it imports, [(importer, imported module, private name)])."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    private: list[tuple[str, str, str]] = []
    for module, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        targets: set[str] = set(_lazy_imports(tree))
        bound: dict[str, str] = {}  # local name -> module of ours it is bound to
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                bound.update((a.asname, a.name) for a in node.names if a.asname)
                continue
            base = _resolve(module, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in mods:
                    targets.add(sub)
                    bound[alias.asname or alias.name] = sub
                    continue
                targets.add(base)
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    if base in mods and base != module:
                        private.append((module, base, alias.name))
        private.extend((module, bound[n.value.id], n.attr) for n in ast.walk(tree)
                       if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                       and n.value.id in bound and bound[n.value.id] in mods
                       and bound[n.value.id] != module
                       and n.attr.startswith("_") and not n.attr.startswith("__"))
        own = set(_ancestors(module)) | ({module} if _is_package(path) else set())
        for target in targets:
            for name in (*_ancestors(target), target):
                if name in mods and name != module and not (name in own and name != target):
                    edges[module].add(name)
    return edges, private


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_circles():
    edges, _ = graph()
    assert cycles(edges) == []


def test_no_private_name_crosses_a_module():
    _, private = graph()
    assert private == []


def test_adapters_import_nothing_else_of_inspector():
    edges, _ = graph()
    wrong = {
        (m, t)
        for m, ts in edges.items()
        if m.startswith("inspector.adapters")
        for t in ts
        if not t.startswith("inspector.adapters") and t != "inspector"
    }
    assert wrong == set()


def test_no_verb_imports_another_verb():
    # shared options live in commands/options.py; the rest is library code under inspector/
    edges, _ = graph()
    shared = {"inspector.commands", "inspector.commands.options"}
    wrong = {
        (m, t)
        for m, ts in edges.items()
        if m.startswith("inspector.commands.") and m not in shared
        for t in ts
        if t.startswith("inspector.commands.") and t not in shared
    }
    assert wrong == set()


def test_the_checker_sees_a_circle_and_a_crossing():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    tree = ast.parse("from .values import _refuse\n")
    node = next(_imports(tree))
    assert _resolve("inspector.arrays", Path("arrays.py"), node) == "inspector.values"


if __name__ == "__main__":
    found_edges, found_private = graph()
    for component in cycles(found_edges):
        print("circle:", " ".join(component))
        for m in component:
            print("   ", m, "->", " ".join(sorted(t for t in found_edges[m] if t in component)))
    for importer, imported, name in found_private:
        print(f"private: {importer} imports {imported}.{name}")
    sys.exit(1 if found_private or cycles(found_edges) else 0)
