"""Bytes held in memory as a :class:`~inspector.adapters.source_interface.Source`: a member
decompressed from an archive, a checkpoint embedded in another file's data."""

from __future__ import annotations

import io
from contextlib import contextmanager

from .errors import FormatError
from .source_interface import OneFile, Source

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import BinaryIO


class BytesSource(OneFile):
    """``data`` named ``where``; its folder is ``parent``'s (None: it has none)."""

    def __init__(self, data: bytes, where: str, parent: Source | None) -> None:
        self._data, self._where, self._parent = data, where, parent

    @property
    def where(self) -> str:
        return self._where

    @property
    def size(self) -> int:
        return len(self._data)

    def read(self, offset: int, n: int) -> bytes:
        return self._data[offset:offset + max(0, n)]

    def open(self, mode: str = "rb") -> BinaryIO:
        return io.BytesIO(self._data)

    @contextmanager
    def view(self) -> Iterator[bytes]:
        yield self._data

    def child(self, name: str) -> Source:
        raise FormatError("bytes held in memory have no children", self.where)

    def parent_dir(self) -> Source:
        if self._parent is None:
            raise FormatError("bytes held in memory have no folder", self.where)
        return self._parent.parent_dir()

    def list(self) -> list[str]:
        return []
