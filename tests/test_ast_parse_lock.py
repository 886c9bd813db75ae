"""Every parse of Python text goes through :mod:`adapters.ast_parse`'s lock: CPython 3.11's AST
constructor keeps its recursion depth in interpreter-wide state, and two threads parsing at once
(``scan`` examines files on a thread pool: a ``.npy`` header's ``literal_eval`` beside a
script's parse) failed with ``SystemError: AST constructor recursion depth mismatch``."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from adapters.ast_parse import literal_eval, parse

ROOT = Path(__file__).resolve().parent.parent


def _text_parses(path: Path) -> list[str]:
    """``ast.parse(...)`` calls, and ``ast.literal_eval(...)`` of anything but a node."""
    found = []
    for call in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "ast"):
            continue
        arg = call.args[0] if call.args else None
        if call.func.attr == "parse" or (
                call.func.attr == "literal_eval"
                and not (isinstance(arg, ast.Name) and arg.id == "node")):
            found.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    return found


def test_no_module_parses_python_text_outside_the_lock():
    files = [p for d in ("adapters", "inspector") for p in (ROOT / d).rglob("*.py")
             if p.name != "ast_parse.py"]
    assert files
    assert [hit for p in files for hit in _text_parses(p)] == []


def test_parses_from_many_threads_at_once():
    source = "\n".join(f"def f{i}(x):\n    return [(x, {{'k': [x, (x,)]}})]" for i in range(200))
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(60):
                if k % 2:
                    parse(source)
                else:
                    assert literal_eval(header)["shape"] == (3, 4)
        except BaseException as e:  # noqa: BLE001 - any failure is the finding
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
