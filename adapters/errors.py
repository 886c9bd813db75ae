"""The one error hierarchy of the project.

Every problem with an input file is an :class:`InspectorError` (or a subclass) carrying the file,
where in it the problem is (byte offset or field) and what was expected. The CLI prints
``str(error)`` as one line and exits 2; nothing else escapes from an adapter. The subclasses are
also the built-in exceptions a caller expects: a missing file is a :class:`FileNotFoundError`, an
unreadable one a :class:`PermissionError`, a corrupt one (or a bad argument) a
:class:`ValueError`.
"""

from __future__ import annotations

# A name read from a file (a zip member, a pickle string) may hold line breaks or terminal
# escapes: the one-line message shows them as escapes.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def sanitize(text: str) -> str:
    """A string from a file made safe to print: control characters become visible escapes."""
    if type(text) is str and text.isprintable():  # no control character (all unprintable)
        return text
    return text.translate(_CONTROL)


class InspectorError(Exception):
    """Base of every error the tool raises on purpose."""

    def __init__(self, message: str, path: str | None = None, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.where = where

    def __str__(self) -> str:
        parts = [p for p in (self.path, self.where) if p]
        prefix = ": ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else str(self.message)
        return sanitize(text)


class FormatError(InspectorError, ValueError):
    """The file claims a format but breaks its rules (truncated, corrupt, inconsistent)."""


class NotFoundError(InspectorError, FileNotFoundError):
    """The file or directory does not exist."""


class PermissionDeniedError(InspectorError, PermissionError):
    """The file or directory cannot be read for lack of permission."""


class UnknownFormatError(InspectorError):
    """No adapter recognised the file."""


class UnsafeContentError(InspectorError):
    """The file asks for something the tool refuses to do (e.g. a pickle calling os.system)."""


class UsageError(InspectorError, ValueError):
    """A bad command line or API argument."""
