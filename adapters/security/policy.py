"""One policy for every verb that opens a checkpoint and for ``inspector.load``: whatever
``inspector scan`` calls dangerous is refused.

A checkpoint with a finding of severity ``danger`` (a pickle global with the verdict
``dangerous`` from :mod:`inspector.adapters.security.verdicts`, in any pickle the format's
walk reaches: every copy of a duplicated member, every pickle of a stream, object arrays of any
dtype form) is refused with :class:`UnsafeContentError` (exit 2) and one line naming the global
and how a loader would use it. The check is applied in one place,
:func:`inspector.adapters.registry.load` (``allow_unsafe``): every verb and the API go through
it. ``--allow-unsafe`` lists it anyway (nothing from the file runs either way); ``check`` never
reports such a file as verified.
"""

from __future__ import annotations

from inspector.adapters.errors import UnsafeContentError

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from inspector.adapters.model import Checkpoint


def dangerous(ckpt: Checkpoint) -> list[str]:
    """``"os.system (would be called: on the picklescan list)"`` per dangerous global."""
    rows = {g["name"]: g for g in ckpt.metadata.get("pickle_globals") or ()}
    out = []
    for f in ckpt.findings:
        if f.severity != "danger":
            continue
        g = rows.get(f.subject or "")
        if g and g.get("use"):
            out.append(f"{f.subject} (would be {g['use']}: {g['why']})")
        else:
            out.append(f.subject or f.message)
    return sorted(set(out))


def refuse_if_unsafe(ckpt: Checkpoint, allow_unsafe: bool) -> None:
    """Raise :class:`UnsafeContentError` when the checkpoint's pickle is dangerous."""
    found = dangerous(ckpt)
    if found and not allow_unsafe:
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        lead = "the pickle references " if ckpt.metadata.get("pickle_globals") else ""
        raise UnsafeContentError(
            f"refused: {lead}{'; '.join(found[:3])}{more}; nothing was run "
            "(--allow-unsafe lists it anyway)",
            ckpt.path,
        )

