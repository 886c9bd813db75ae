"""The user block in front of an HDF5 file: bytes libhdf5 skips (the superblock may sit at
512, 1024, 2048, ... bytes) and that ``torch.load`` and ``pickle.load`` read first.

``torch.load`` of a file that does not start like a zip reads torch's legacy stream, whose
first step is ``pickle_module.load(f)`` at offset 0: a pickle in the user block runs before the
loader finds the magic number wrong, while h5py and Keras read the HDF5 file behind it. So a
user block that starts a pickle is examined as one (every pickle of the stream).
"""

from __future__ import annotations

import io

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .examination import FileResult

WHERE = "user block"


def examine_user_block(read: Callable[[int, int], bytes], offset: int | None, res: FileResult,
                       where: str | None = None) -> None:
    """Add to ``res`` the findings and globals of a pickle in the user block in front of the
    superblock at ``offset`` (:func:`inspector.adapters.keras.superblock_offset`), if any."""
    from .examination import (
        ERROR,
        MAX_PICKLE_BYTES,
        SAMPLE,
        FileResult,
        could_start_pickle,
        examine_pickles,
    )

    if not offset or not could_start_pickle(read(0, min(offset, SAMPLE))):
        return
    label = f"{where}: {WHERE}" if where else WHERE
    lead = "the HDF5 user block starts a pickle (torch.load and pickle.load read it first)"
    if offset > MAX_PICKLE_BYTES:
        res.add(ERROR, f"{lead}: {offset:,} bytes, not examined", label)
        return
    inner = FileResult(res.path)
    examine_pickles(inner, io.BytesIO(read(0, offset)), offset)
    for item in inner.items:
        res.add(item.level, f"{lead}: {item.text}", label)
    res.globals += inner.globals
