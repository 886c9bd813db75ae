"""The ``inspector`` command's entry point: ``inspector --version`` answered here, before the
command line module (:mod:`inspector.cli`) and what it imports are loaded; everything else is
:func:`inspector.cli.console_main`."""

import sys


def console_main() -> None:
    if sys.argv[1:] != ["--version"]:
        from inspector.cli import console_main as run

        run()
        return
    import os

    from inspector import __version__

    try:
        sys.stdout.write(f"inspector {__version__}\n")  # what argparse's version action prints
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left (| head -0): nothing more to say
        os._exit(0)
    except OSError as e:  # a full disk under stdout: one line, as every other error
        sys.stderr.write(f"inspector: {e.strerror or e} (errno {e.errno})\n")
        sys.stderr.flush()
        os._exit(2)
    from inspector.process_exit import leave

    leave(0)
