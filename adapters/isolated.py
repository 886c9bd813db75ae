"""Run a call on hostile input in a forked child with a processor-time budget.

Some libraries trust the file more than they should: libhdf5 can loop forever in C on a corrupt
global heap, holding the GIL, where no signal handler runs. The call goes to a child process
whose processor time is capped (``RLIMIT_CPU`` at ``seconds``): a file on which the library
loops burns it and is stopped, and a sound file is never stopped because other work slowed the
machine. A wall-clock limit of :data:`WALL_FACTOR` times the budget backs it up (a child that
blocks without computing). Either way a hang becomes one
:class:`~inspector.adapters.errors.FormatError`. Only plain JSON crosses back (never a pickle):
the child's answer is data made by our own code, but it read hostile bytes.

Calls made at once from several threads (``scan --jobs N``) are independent: each has its own
child, budget and pipe. A child must hold no other call's pipe: the parent reads its answer
until end of file, and a write end kept open in a hanging sibling would make a finished call
wait out its budget (one hostile file turning its neighbours' verdicts into time-outs). So a
pipe is made, the child forked and the parent's write end closed under one lock, and each
child closes the ends of every other call in flight.
"""

from __future__ import annotations

import json
import math
import os
import resource
import select
import signal
import threading
import time
from collections.abc import Callable

from .errors import FormatError

TYPE_CHECKING = False  # typing is not imported at run time (startup cost)
if TYPE_CHECKING:
    from typing import Any

MAX_ANSWER_BYTES = 1 << 30
WALL_FACTOR = 6
_FORKING = threading.Lock()
_IN_FLIGHT: set[int] = set()  # the read ends of calls whose child is still running


def budget_seconds(base: float, size: int, bytes_per_second: int) -> float:
    """One file's time budget: ``base`` (or the environment's ``INSPECTOR_HDF5_SECONDS``) plus
    a second per ``bytes_per_second`` of the file."""
    try:
        base = float(os.environ.get("INSPECTOR_HDF5_SECONDS", base))
    except ValueError:
        pass
    return max(0.1, base) + size / bytes_per_second


def call_isolated(fn: Callable[[], Any], seconds: float, where: str, what: str) -> Any:
    """``fn()`` (which returns JSON-ready data or raises FormatError) in a forked child; its
    value, or its FormatError re-raised here. Without ``os.fork`` it runs in this process."""
    if not hasattr(os, "fork"):
        return fn()
    with _FORKING:
        r, w = os.pipe()
        pid = os.fork()
        if pid != 0:
            os.close(w)
            _IN_FLIGHT.add(r)
    if pid == 0:  # the child: answer, then leave without running the parent's exit handlers
        status = 0
        try:
            for fd in (r, *_IN_FLIGHT):
                _close_quietly(fd)
            _limit_cpu(seconds)
            try:
                parts = _encoded({"value": fn()})
            except FormatError as e:
                parts = _encoded({"error": [e.message, e.path, e.where]})
            except BaseException as e:  # noqa: BLE001 - reported to the parent as one line
                parts = _encoded({"error": [f"{type(e).__name__}: {e}", where, None]})
            with os.fdopen(w, "wb") as out:
                out.writelines(parts)
        except BaseException:  # noqa: BLE001
            status = 1
        finally:
            os._exit(status)
    status = 0
    try:
        data = _read_until(r, time.monotonic() + seconds * WALL_FACTOR, where)
    except TimeoutError:
        raise FormatError(
            f"{what} did not finish within {seconds * WALL_FACTOR:.0f} s (it stopped "
            "computing: a corrupt file can make it wait forever); stopped",
            where,
        ) from None
    finally:
        with _FORKING:
            _IN_FLIGHT.discard(r)
            os.close(r)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        status = os.waitpid(pid, 0)[1]
    if not data:
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
            raise FormatError(
                f"{what} did not finish within {seconds:.0f} s of processor time (a corrupt "
                "file can make it loop); stopped",
                where,
            )
        raise FormatError(f"{what} ended without an answer (the process crashed)", where)
    answer = json.loads(data)
    if "error" in answer:
        message, path, at = answer["error"]
        raise FormatError(message, path or where, at)
    return answer["value"]


def _limit_cpu(seconds: float) -> None:
    """The child's processor-time budget: SIGXCPU at ``seconds``, SIGKILL a second later."""
    soft = max(1, math.ceil(seconds))
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
    except (ValueError, OSError):
        pass  # a lower hard limit already applies


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _encoded(answer: dict[str, Any]) -> list[bytes]:
    """``answer`` as JSON bytes, a dict value one key at a time: a walk's long columns are
    never all held as one str and its bytes copy at once."""
    value = answer.get("value")
    if not isinstance(value, dict) or not value or not all(isinstance(k, str) for k in value):
        return [json.dumps(answer, default=repr).encode()]
    parts = [b'{"value": {']
    for i, (key, column) in enumerate(value.items()):
        item = f"{json.dumps(key)}: {json.dumps(column, default=repr)}"
        parts.append((", " + item if i else item).encode())
    parts.append(b"}}")
    return parts


def _read_until(fd: int, deadline: float, where: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise TimeoutError
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_ANSWER_BYTES:
            raise FormatError("the isolated reader's answer is too large", where)
        chunks.append(chunk)
