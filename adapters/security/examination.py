"""What examining one file found: the items behind its verdict and the globals its pickles name.

An adapter's ``examine(source, variant, result)`` hook (see :class:`~inspector.adapters.registry.
Adapter`) adds to a :class:`FileResult`; ``inspector scan`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SAFE, FOREIGN, DANGEROUS, ERROR = "safe", "foreign", "dangerous", "error"
LEVELS = (SAFE, FOREIGN, DANGEROUS, ERROR)


@dataclass
class Item:
    """One global or finding behind a verdict."""

    level: str
    text: str
    where: str | None = None


@dataclass
class FileResult:
    path: str
    kind: str = "unknown"
    items: list[Item] = field(default_factory=list)
    globals: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        levels = {i.level for i in self.items}
        if DANGEROUS in levels:
            return DANGEROUS
        if ERROR in levels:
            return ERROR
        return FOREIGN if FOREIGN in levels else SAFE

    def add(self, level: str, text: str, where: str | None = None) -> None:
        self.items.append(Item(level, text, where))

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "verdict": self.verdict,
            "findings": [
                {"level": i.level, "text": i.text, "where": i.where} for i in self.items
            ],
            "globals": self.globals,
        }
