"""The ``capsim`` command line: one sub-command per module of this package (``COMMANDS``).

Building the parser imports only the standard library: each command module keeps its heavy imports (pandas, pyarrow,
matplotlib, scipy, the solvers) inside the functions that run it, so ``capsim --help`` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from experiments.running import interrupts

# sub-command name -> its module, exposing ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``
COMMANDS = {
    "run": "experiments.cli.run",
    "sweep": "experiments.cli.sweep",
    "report": "experiments.cli.report",
    "plot": "experiments.cli.plot",
    "predict": "experiments.cli.predict",
    "spot": "experiments.cli.spot",
}


class _Version(argparse.Action):
    """``--version``: the installed package's version, read from its metadata only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print capsim's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("capsim")
        except PackageNotFoundError:
            text = "unknown (not installed; run `pip install -e .`)"
        print(f"capsim {text}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capsim",
        description="Simulate online capacity planning and scheduling of deep-learning training jobs on GPU VMs.",
        epilog="examples:\n  capsim run                      the default experiment\n"
               "  capsim run my.yaml --out DIR    a scenario file\n"
               "  capsim sweep experiments/quickstart.yaml --out results/qs\n"
               "  capsim report results/qs --format markdown\n"
               "  capsim plot results/qs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name == module_name:
                continue
            raise
        p = sub.add_parser(name, help=module.HELP.replace("%", "%%"), description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


EXIT_FAILED_RUNS, EXIT_USER_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_TERMINATED = 1, 2, 3, 130, 143
"""Exit codes: some runs failed (their tracebacks are stored), a mistake in the input (the message says what to
fix), a defect in capsim (the traceback is written to a log file), Ctrl-C, SIGTERM."""




def _crash_report(e: BaseException, argv: Sequence[str]) -> str:
    """Write the traceback of an unexpected exception to a log file; return one line saying what failed and where
    the traceback is."""
    import os
    import tempfile
    import time
    import traceback

    text = "".join(traceback.format_exception(e))
    frames = traceback.extract_tb(e.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    what = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")
    try:
        fd, log = tempfile.mkstemp(prefix=f"capsim-crash-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"capsim {' '.join(argv)}\n\n{text}")
        saved = f"the full traceback is in {log}"
    except OSError:
        saved = "the traceback could not be saved"
    return f"capsim: internal error (a defect in capsim, not in your input): {what}{where}; {saved}; please report it"


def console(argv: list[str] | None = None, setup: Callable[[], object] | None = None) -> NoReturn:
    """The ``capsim`` program: ``main``, then exit. A command stopped by Ctrl-C or SIGTERM exits at once, without the
    interpreter's teardown (every result is on disk and the journal synced by then; the teardown of a process that
    loaded pandas, Arrow and the solvers took over a second under load, past the 2 s a stop may take; what Dask
    leaves, multiprocessing's resource tracker removes: ``running.pool.quiet_resource_tracker``)."""
    code = main(argv, setup)
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        if "multiprocessing.forkserver" in sys.modules:
            from experiments.running.pool import end_helpers

            end_helpers(tracker="distributed" not in sys.modules)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None, setup: Callable[[], object] | None = None) -> int:
    """Run one command line; ``setup``: called before the command, once Ctrl-C and SIGTERM are handled (a program
    that adds components imports them there, so a signal while it imports stops it like any command)."""
    try:
        with interrupts.install():  # before the parser: a signal while a loaded machine starts capsim is one line too
            line = list(sys.argv[1:] if argv is None else argv)
            try:
                args = _parser().parse_args(argv)
            except Exception as e:  # noqa: BLE001 (the parser imports the commands' modules: see _internal)
                return _internal(e, line)
            return _run(args, line, setup)
    except KeyboardInterrupt:  # a signal Python handled only as the command's handlers were being put back
        print("capsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except interrupts.Terminated:
        print("capsim: terminated", file=sys.stderr)
        return EXIT_TERMINATED


def _run(args: argparse.Namespace, argv: list[str], setup: Callable[[], object] | None = None) -> int:
    """Run the command (``setup`` first); every way it can end becomes one line on stderr and an exit code
    (``EXIT_*``)."""
    from sim.model import CapsimError

    try:
        if setup is not None:
            setup()
        return int(args._run(args) or 0)
    except CapsimError as e:
        print(f"capsim: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        if e.filename is None:
            return _internal(e, argv)
        target = f"{e.filename} -> {e.filename2}" if e.filename2 else str(e.filename)
        print(f"capsim: error: {target}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (KeyboardInterrupt, interrupts.Terminated) as e:
        return _run_stop(e)
    except Exception as e:  # noqa: BLE001 (the one place an unexpected error becomes one line, not a traceback)
        return _internal(e, argv)


def _internal(e: BaseException, argv: list[str]) -> int:
    """An unexpected error: a stop if a signal caused it (``_stopped_by``), else capsim's defect, reported."""
    stop = _stopped_by(e)
    if stop is not None:
        return _run_stop(stop)
    print(_crash_report(e, argv), file=sys.stderr)
    return EXIT_INTERNAL


def _stopped_by(e: BaseException) -> BaseException | None:
    """The Ctrl-C or SIGTERM that ``e`` comes from, if a library turned it into an error of its own (a signal while
    a compiled module initialises surfaces as ``ImportError: initialization failed``; numpy's, as an ImportError that
    no longer names it: then the signal the handler recorded)."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, (KeyboardInterrupt, interrupts.Terminated)):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    code = interrupts.exit_code()
    return None if code is None else KeyboardInterrupt() if code == EXIT_INTERRUPTED else interrupts.Terminated()


def _run_stop(stop: BaseException) -> int:
    if isinstance(stop, KeyboardInterrupt):
        print("capsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    print("capsim: terminated", file=sys.stderr)
    return EXIT_TERMINATED
