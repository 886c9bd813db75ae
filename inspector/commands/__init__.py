"""One module per ``inspector`` verb.

Each module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``;
:mod:`inspector.cli` imports the modules listed in ``MODULES`` lazily, so a verb's dependencies
load only when that verb runs.
"""

MODULES = (
    "show", "formats", "schemes", "check", "predict", "archs", "budget", "diff", "stats", "scan",
    "report", "lineage", "inventory",
)
