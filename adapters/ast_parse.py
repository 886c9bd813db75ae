"""``ast.parse`` (and ``ast.literal_eval`` of a text, which parses it) behind one lock.
CPython 3.11's AST constructor keeps its recursion depth in interpreter-wide state, so two
threads parsing at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(seen under ``scan --jobs``: a ``.npy`` header's ``literal_eval`` beside a script's parse);
parsing is fast, so the tool's parses take turns."""

from __future__ import annotations

import ast
import os
import threading
from typing import Any

_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # a lock held by another thread at fork time is never released


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """:func:`ast.parse`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def literal_eval(text: str) -> Any:
    """:func:`ast.literal_eval` of a text (it parses it: the same lock as :func:`parse`)."""
    with _LOCK:
        return ast.literal_eval(text)
