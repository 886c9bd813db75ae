"""How the ``inspector`` command ends its process."""

import sys


def leave(code: int) -> None:
    """End the process with ``code``, its output already flushed: without tearing down its
    objects one by one (a 50,000-tensor report is some 300,000 of them: 25 ms of freeing memory
    the OS takes back at once) when nothing is left to run at exit (no atexit callback, no
    other thread); otherwise, and where CPython's counter is missing, a normal exit."""
    import atexit
    import os

    pending = getattr(atexit, "_ncallbacks", None)
    threading = sys.modules.get("threading")
    if pending is not None and pending() == 0 and (
            threading is None or threading.active_count() == 1):
        os._exit(code)
    sys.exit(code)
