"""Give one file to a real loader under an audit hook that stops every payload effect first.

    python run_loader.py {pickle|torch|numpy|joblib|keras} FILE

The loader's library is imported, and one benign file of the kind loaded, before the hook is
installed. The hook raises on: starting a process; running code compiled from a string (the
``exec`` event of a code object that is not a module being imported: ``eval``, ``exec``,
``runpy``, ``timeit``, ...); opening a network connection or resolving a host name; opening a
file for writing; deleting or renaming a file; ``webbrowser``; ``ctypes``. ``SystemExit`` from
the loader counts too. The hook records the first effect and refuses it, so nothing is run.
Prints one JSON line: ``{"loader", "reached": [events], "outcome"}``. Run it in a scratch directory.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

EVENTS = {"os.system", "subprocess.Popen", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
          "os.forkpty", "pty.spawn", "socket.connect", "socket.getaddrinfo", "socket.gethostbyname",
          "socket.bind", "urllib.Request", "webbrowser.open", "shutil.rmtree", "os.remove",
          "os.rmdir", "os.rename", "os.kill", "os.truncate", "ctypes.dlopen", "ctypes.dlsym",
          "os.putenv", "os.chmod", "shutil.copyfile", "shutil.move", "builtins.input"}
reached: list[str] = []
armed = False


class Refused(Exception):
    pass


def hook(event: str, args: tuple) -> None:
    if not armed:
        return
    what = None
    if event in EVENTS:
        what = event
    elif event == "exec":
        fn = str(getattr(args[0], "co_filename", ""))
        if not fn.endswith(".py") and not fn.startswith("<frozen "):  # not a module import
            what = f"exec {fn}"
    elif event == "open" and len(args) > 1 and isinstance(args[1], str) and \
            any(c in args[1] for c in "wax+"):
        what = f"open for writing {args[0]!r}"
    if what:
        reached.append(what)
        raise Refused(what)


def warm_up(kind: str) -> None:
    """Load one benign file of the kind first, so the loader's own lazy set-up (imports,
    generated classes) is done before the hook is armed."""
    import pickle
    if kind == "torch":
        import torch
        torch.save({"w": torch.zeros(2)}, "warm.pt")
        torch.load("warm.pt", weights_only=False)
    elif kind == "numpy":
        import numpy as np
        np.save("warm.npy", np.array([{"a": 1}], dtype=object))
        np.load("warm.npy", allow_pickle=True)
        np.savez("warm.npz", a=np.zeros(2), b=np.array([{"a": 1}], dtype=object))
        with np.load("warm.npz", allow_pickle=True) as z:
            [z[n] for n in z.files]
    elif kind == "joblib":
        import joblib
        joblib.dump({"a": [1]}, "warm.joblib")
        joblib.load("warm.joblib")
    pickle.loads(pickle.dumps({"a": [1, 2.0, "x", b"y", (None,)]}))


def main() -> None:
    global armed
    kind, path = sys.argv[1], os.path.abspath(sys.argv[2])
    if kind == "pickle":
        import pickle
        load = lambda: pickle.load(open(path, "rb"))  # noqa: E731
    elif kind == "torch":
        import torch
        load = lambda: torch.load(path, weights_only=False)  # noqa: E731
    elif kind == "numpy":
        import numpy as np
        load = lambda: np.load(path, allow_pickle=True)  # noqa: E731
    elif kind == "joblib":
        import joblib
        load = lambda: joblib.load(path)  # noqa: E731
    elif kind == "keras":
        os.environ.setdefault("KERAS_BACKEND", "torch")
        import keras
        load = lambda: keras.saving.load_model(path, safe_mode=False, compile=False)  # noqa: E731
    else:
        raise SystemExit(f"unknown loader {kind}")
    os.chdir(tempfile.mkdtemp())
    warm_up(kind)
    sys.addaudithook(hook)
    armed = True
    try:
        obj = load()
        if kind == "numpy" and hasattr(obj, "files"):  # npz: members load on access
            for name in obj.files:
                obj[name]
        outcome = "loaded"
    except Refused as e:
        outcome = f"refused {e}"
    except SystemExit as e:
        reached.append(f"SystemExit({e.code!r})")
        outcome = "exit"
    except BaseException as e:  # noqa: BLE001 - any loader failure is an outcome
        outcome = f"failed: {type(e).__name__}: {str(e)[:160]}"
    armed = False
    print(json.dumps({"loader": kind, "reached": reached, "outcome": outcome}))


if __name__ == "__main__":
    main()
