"""Verbs that take one checkpoint, run over many files: what a pre-commit hook needs
(``.pre-commit-hooks.yaml``: ``python -m inspector.hooks check [OPTION...] FILE...``).

Options (words starting with ``-`` and the value after an option that takes one) apply to every
file; each file is checked on its own, and the exit code is the worst: 2 (an error) over 1 (a
mismatch or an unsafe pickle) over 0. An ``incomplete`` check (3) passes unless ``--strict``
(then it is 1), so a hook does not block a file whose architecture is not modelled.
"""

from __future__ import annotations

import sys

VERBS = ("check",)
VALUE_OPTIONS = ("--arch", "--set", "--scheme", "--input-format", "--format", "--color")


def main(argv: list[str]) -> int:
    from inspector.cli import main as cli_main

    if not argv or argv[0] not in VERBS:
        sys.stderr.write(f"usage: python -m inspector.hooks {{{','.join(VERBS)}}} "
                         "[OPTION...] FILE...\n")
        return 2
    verb, options, files = argv[0], [], []
    words = iter(argv[1:])
    for word in words:
        if word.startswith("-"):
            options.append(word)
            if word in VALUE_OPTIONS:
                options.append(next(words, ""))
        else:
            files.append(word)
    worst = 0
    for path in files:
        code = cli_main([verb, path, *options])
        code = 0 if code == 3 else code  # incomplete: passes (--strict made it 1)
        worst = max(worst, code)
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
