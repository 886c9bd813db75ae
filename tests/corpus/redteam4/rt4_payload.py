"""A module a hostile file names, standing for any installed package's function or class: on no
known-dangerous list, never vetted, and it runs with whatever the loader hands it. Each one writes
``rt4_marker`` in the loader's working directory, so the generator can tell that a real loader ran
it. Only the producer's loader imports this module (``make_redteam4.py`` puts it on the path);
``inspector`` never does."""

from __future__ import annotations


def touch(*args: object, **kwargs: object) -> int:
    """Called by the loader: leaves the marker."""
    with open("rt4_marker", "w") as f:
        f.write("ran")
    return 0


class Keyed:
    """A class with a ``keys`` classmethod: ``dict(Keyed)`` and ``OrderedDict(Keyed)`` call it
    (and ``Keyed[key]``), as they do for any mapping-like argument."""

    @classmethod
    def keys(cls) -> list[str]:
        touch()
        return ["k"]

    def __class_getitem__(cls, key: object) -> int:
        return 0
