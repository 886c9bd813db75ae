"""The API reference page documents every public name: each name of ``inspector.__all__`` has a
``::: module.name`` entry in docs/reference.md, naming the module that defines it."""

from __future__ import annotations

import re
from pathlib import Path

import inspector

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"


def test_every_public_name_is_in_the_reference() -> None:
    entries = re.findall(r"^::: ([\w.]+)$", REFERENCE.read_text(encoding="utf-8"), re.M)
    documented = {e.rsplit(".", 1)[1]: e.rsplit(".", 1)[0] for e in entries}
    missing = [n for n in inspector.__all__ if n not in documented]
    assert not missing, f"add to docs/reference.md: {missing}"
    for name, module in documented.items():
        if name in inspector.__all__:
            assert getattr(inspector, name).__module__ == module, name
