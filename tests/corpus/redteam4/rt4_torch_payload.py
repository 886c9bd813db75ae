"""A tensor subclass a hostile torch file names (standing for any installed package's class: on no
list, never vetted). An instance leaves ``rt4_marker`` in the working directory when it is
collected. Only the producer's loader imports this module; ``inspector`` never does."""

from __future__ import annotations

import torch


class Tracked(torch.nn.Parameter):
    """What a loader turns a vetted parameter into when the file's state sets ``__class__``."""

    def __del__(self) -> None:
        with open("rt4_marker", "w") as f:
            f.write("__del__ ran")
