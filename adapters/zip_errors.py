"""What :mod:`zipfile` raises on a damaged archive, for the adapters that read zips.

Kept apart from :mod:`inspector.adapters.errors` so that importing the error types (every command,
``--help`` included) does not import zipfile.
"""

from __future__ import annotations

import struct
import zipfile
import zlib

# What zipfile raises on a damaged archive besides BadZipFile: lying sizes (EOFError), undecodable
# names (UnicodeDecodeError, a ValueError), unsupported versions, methods or encryption
# (NotImplementedError, RuntimeError), bad deflate data (zlib.error), short headers.
ZIP_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
    struct.error,
)
