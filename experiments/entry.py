"""The ``capsim`` program's entry point: Ctrl-C and SIGTERM are one line and an exit code from its first moment.

Python's own SIGINT handler prints a traceback; until ``experiments.cli`` is imported and the command's handlers are
installed (``running.interrupts``), which takes a while on a loaded machine, a signal here ends the process at once:
nothing has started yet, so there is nothing to unwind. Imports only what Python has loaded already and the
signal module's compiled core (``signal`` itself builds enums: tens of ms under load, a window for a traceback).
"""

import _signal  # type: ignore[import-not-found]  # the compiled core of signal, loaded at start-up (no stub)
import os
import sys

__all__ = ["console", "handle_early"]

_EARLY = {_signal.SIGINT: (130, "capsim: interrupted\n"), _signal.SIGTERM: (143, "capsim: terminated\n")}


def _early_stop(signum: int, frame: object) -> None:
    """A signal before the command handles signals itself (or after it has put them back): one line, its exit
    code, output written so far kept."""
    code, line = _EARLY[signum]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, RuntimeError):  # RuntimeError: a flush the signal interrupted
            pass
    try:
        os.write(2, line.encode())
    finally:
        os._exit(code)


def handle_early() -> None:
    """Install the early handlers: from now until the process ends, a signal outside a command's own handling is
    one line and its exit code (130, 143)."""
    for signum in _EARLY:
        _signal.signal(signum, _early_stop)


def console() -> None:
    """``capsim``: the early handlers first, then the command line (``experiments.cli.console``, which exits)."""
    handle_early()
    from experiments.cli import console as run

    run()
