"""mkdocs hook: the package tree as installed, for the API reference.

The repository keeps ``adapters/`` beside ``inspector/`` and installs it as
``inspector.adapters``. mkdocstrings reads the source statically (nothing is imported), so it is
given ``build/api-tree/inspector``: links to every entry of ``inspector/`` plus ``adapters``, the
layout an installed package has.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "api-tree" / "inspector"


def make_tree() -> Path:
    TREE.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in (ROOT / "inspector").iterdir() if p.name != "__pycache__"}
    wanted["adapters"] = ROOT / "adapters"
    for link in TREE.iterdir():
        if link.name not in wanted or not link.is_symlink():
            link.unlink()
    for name, target in wanted.items():
        link = TREE / name
        if not link.is_symlink():
            os.symlink(target, link)
    return TREE


def on_config(config: Any) -> Any:
    make_tree()
    return config


# mkdocs imports its hooks while it reads mkdocs.yml, before mkdocstrings drops search paths that
# do not exist: the tree is made then, so a fresh clone builds the reference on its first run
make_tree()
