"""Options shared by several verbs."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    import argparse

ALLOW_HELP = (
    "read a pickle whose globals a loader would run (os.system, eval, ...) instead of refusing "
    "it; nothing from the file is run either way"
)


def add_allow_unsafe(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-unsafe", action="store_true", help=ALLOW_HELP)
