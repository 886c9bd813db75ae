"""Classes a hostile pickle names: nothing on any known-dangerous list, no ``os.system``, and still
a loader runs them with the file's data. Each touches only the marker path its data names, so a
test can tell that a real loader ran it (``tests/test_vetted_attacks.py``)."""

from __future__ import annotations

import os


class Cleanup:
    """Deletes the path held in its state when it is collected (``__del__``)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __del__(self) -> None:
        if os.path.exists(self.path):
            os.remove(self.path)


class Expression:
    """A CapWords class called with one plain value, as an Enum member pickles: its constructor
    evaluates the string."""

    def __init__(self, text: str) -> None:
        self.value = eval(text)  # noqa: S307 - the attack under test

    def __reduce__(self) -> tuple:
        return (Expression, (self.text,))

    text = ""


class Restored:
    """``__setstate__`` writes the file its state names."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __setstate__(self, state: dict) -> None:
        with open(state["path"], "w") as f:
            f.write("setstate ran")


class Eager:
    """``__new__`` writes a file (named by the loading process's environment): a NEWOBJ with no
    state is enough."""

    def __new__(cls, *args: object) -> Eager:
        marker = os.environ.get("PAYLOAD_MARKER")
        if marker:
            with open(marker, "w") as f:
                f.write("__new__ ran")
        return super().__new__(cls)
