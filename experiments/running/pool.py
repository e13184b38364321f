"""The one process pool for everything capsim runs in parallel (simulations, ``predict evaluate``, the API).

Workers are started from a fork server (``forkserver``, Linux) that has imported what they need once, so a worker
starts in milliseconds and never inherits a lock held by a thread of the command (the command itself is never
forked); elsewhere, or with ``CAPSIM_START_METHOD=spawn``, they are spawned. The command talks to each worker over
its own pipe and has no thread of its own. The rules, the same everywhere:

- a worker dies with the command, however it ends (SIGKILL included: the kernel's parent-death signal, and the fork
  server ends when the command does);
- workers ignore Ctrl-C and leave SIGTERM to its default: the command alone decides, and on SIGINT or SIGTERM it
  kills its workers and unwinds (``experiments.running.interrupts``) within ``interrupts.GRACE`` seconds;
- a worker that dies (out of memory, a crash) loses only the item it held, reported through ``on_lost``; another
  worker takes its place.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any

from experiments.running import interrupts
from experiments.scenario.components import register_extras, registered_extras
from predictors.base import adopt_fits, shared_fits

__all__ = ["run_parallel", "die_with_parent", "init_worker", "start_method", "start_server", "quiet_resource_tracker",
           "end_helpers", "sigint_blocked", "PRELOAD"]

PRELOAD = ["experiments.running.server", "experiments.running.tasks", "sim.engine", "optim", "predictors"]
"""Modules the fork server imports once, so every worker starts with them loaded (``server`` first: see there)."""
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def start_method() -> str:
    """``forkserver`` on Linux, ``spawn`` elsewhere; ``CAPSIM_START_METHOD`` overrides (never ``fork``: a command
    with threads must not be forked)."""
    method = os.environ.get("CAPSIM_START_METHOD") or ("forkserver" if sys.platform.startswith("linux") else "spawn")
    if method not in ("forkserver", "spawn"):
        from sim.model import CapsimError

        raise CapsimError(f"CAPSIM_START_METHOD: expected forkserver or spawn, found {method!r}")
    return method


def init_worker(command: int | None = None) -> None:
    """Set up a worker process: one thread per numeric library, Ctrl-C ignored (the command decides), SIGTERM's
    default action, and death with its parent (``die_with_parent``); ``command`` is the command's pid: a worker
    whose command is gone exits at once."""
    for var in _THREAD_VARS:
        os.environ[var] = "1"
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except ValueError:  # not the main thread of the worker (a Dask worker runs this on its event loop)
        pass
    else:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a spawned worker starts with it blocked
    die_with_parent()
    if command is not None and not interrupts.pid_alive(command):
        os._exit(1)


def die_with_parent(parent: int | None = None) -> None:
    """End this process when its parent process ends, however it ends (SIGKILL included), so no worker outlives the
    command that started it: on Linux the kernel sends SIGKILL (``PR_SET_PDEATHSIG``); elsewhere a thread polls the
    parent's pid. ``parent`` is the expected parent (a worker whose parent already died exits at once)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            ok = libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            ok = False
        if ok:
            if parent is not None and os.getppid() != parent:
                os._exit(1)
            return
    import threading

    first = parent if parent is not None else os.getppid()

    def watch() -> None:
        while os.getppid() == first:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="capsim-parent-watch", daemon=True).start()


def _worker(fn: Callable[[Any], Any], conn: Connection, command: int, extras: list[Any], fits: dict[tuple, Any]
            ) -> None:
    """A worker's loop: receive (index, item), send back (index, fn(item)); stop on None or when the command's end
    of the pipe closes. ``extras``: components the command registered from outside the packages; ``fits``: the
    predictors' fits the command made (``predictors.base.shared_fits``), so no worker fits them again."""
    init_worker(command)
    register_extras(extras)
    adopt_fits(fits)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg is None:
            break
        i, item = msg
        result = fn(item)
        try:
            conn.send((i, result))
        except (BrokenPipeError, OSError):
            break
    os._exit(0)  # nothing of the worker's to flush: skip the interpreter's teardown


class _Worker:
    def __init__(self, ctx: Any, fn: Callable[[Any], Any], fits: dict[tuple, Any]):
        ours, theirs = ctx.Pipe(duplex=True)
        self.conn: Connection = ours
        self.process = ctx.Process(target=_worker, args=(fn, theirs, os.getpid(), registered_extras(), fits),
                                   daemon=True, name="capsim-worker")
        if ctx.get_start_method() == "spawn":  # a new interpreter: Ctrl-C blocked until it ignores it
            with sigint_blocked():
                self.process.start()
        else:  # forked by the server, which ignores Ctrl-C; a start waits on the server: a signal raises here
            self.process.start()
        theirs.close()
        self.job: int | None = None

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.conn.close()


_CONTEXT: Any = None


def _context(extra: Sequence[str] = ()) -> Any:
    """The multiprocessing context of every pool (its fork server started once per command process, importing
    ``PRELOAD`` and the modules ``extra``)."""
    global _CONTEXT
    if _CONTEXT is None:
        import multiprocessing as mp

        method = start_method()
        ctx = mp.get_context(method)
        quiet_resource_tracker()  # started with Ctrl-C blocked by multiprocessing itself
        if method == "forkserver":
            from multiprocessing import forkserver

            ctx.set_forkserver_preload([*PRELOAD, *extra])
            with sigint_blocked():
                forkserver.ensure_running()
        _CONTEXT = ctx
    return _CONTEXT


def start_server(extra: Sequence[str] = ()) -> str:
    """Start this command's fork server now (unless running already, or workers are spawned here), importing
    ``extra`` too; return the start method (``start_method``)."""
    return str(_context(extra).get_start_method())


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Start a helper process with Ctrl-C blocked (``pthread_sigmask``), which it keeps across its start until it
    has set Ctrl-C to be ignored (``running.server``, ``init_worker``): a Ctrl-C at the terminal reaches the whole
    process group, and only the command should act on it (a server interrupted while importing printed a
    traceback). Blocked, not ignored, in the command: a Ctrl-C that arrives meanwhile waits, then is handled as
    usual (ignoring it here for that moment lost it, and the command ran on as if never interrupted)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (once per command) with its stderr on /dev/null. A command stopped
    by a signal exits without the interpreter's teardown (``experiments.cli.console``): the tracker then removes the
    semaphores Dask's workers left, as it should, but also warned about each of them on the user's terminal."""
    from multiprocessing import resource_tracker

    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def end_helpers(tracker: bool = True) -> None:
    """Kill the fork server this command started (its workers die with it), and the resource tracker unless
    ``tracker`` is False (it has semaphores to remove after Dask): for a command that exits at once after a
    signal, while a helper may still be starting up (importing for seconds under load) and would outlive it."""
    import multiprocessing.forkserver as fs
    from multiprocessing import resource_tracker

    pids = [getattr(fs._forkserver, "_forkserver_pid", None)]
    if tracker:
        pids.append(getattr(resource_tracker._resource_tracker, "_pid", None))
    for pid in pids:
        if isinstance(pid, int) and pid > 0:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


class _Feed:
    """The items still to give out, in order, with one looked at ahead."""

    def __init__(self, items: Iterable[Any]):
        self._it = iter(enumerate(items))
        self._next = next(self._it, None)

    def more(self) -> bool:
        return self._next is not None

    def take(self) -> tuple[int, Any] | None:
        pair, self._next = self._next, next(self._it, None) if self._next is not None else None
        return pair

    def put_back(self, pair: tuple[int, Any]) -> None:
        self._it = _chain([pair] + ([self._next] if self._next is not None else []), self._it)
        self._next = next(self._it, None)


def _chain(first: list[Any], rest: Iterable[Any]) -> Any:
    yield from first
    yield from rest


def run_parallel(fn: Callable[[Any], Any], items: Iterable[Any], on_result: Callable[[int, Any], None],
                 workers: int, on_lost: Callable[[int, Any, int | None], Any] | None = None) -> None:
    """Compute ``fn(item)`` for every item on ``workers`` processes and hand each result to ``on_result(index,
    result)`` in this process as it arrives (in any order). ``fn`` is a module-level function. A worker that dies
    holding an item yields ``on_lost(index, item, exit code)`` as that item's result (the default raises).

    SIGINT and SIGTERM are recorded while this runs and raised between results and at least every
    ``interrupts.POLL`` seconds; then (or on any error) every worker is killed at once and the exception goes on.
    """
    feed = _Feed(items)
    ctx = _context()
    fits = shared_fits()
    pool: list[_Worker] = []
    held: dict[int, Any] = {}
    try:
        while feed.more() and len(pool) < max(1, workers):  # a start waits on the fork server: a signal raises here
            pool.append(_Worker(ctx, fn, fits))
        with interrupts.deferred():
            while feed.more() or any(w.job is not None for w in pool):
                interrupts.check()
                pool = [w for w in pool if w.job is not None or w.process.is_alive()]
                while feed.more() and len(pool) < max(1, workers):
                    pool.append(_Worker(ctx, fn, fits))
                for w in pool:
                    if w.job is None and feed.more():
                        _give(w, feed, held)
                busy = [w for w in pool if w.job is not None]
                ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=interrupts.POLL))
                for w in busy:
                    if w.conn in ready or w.process.sentinel in ready:
                        _collect(w, held, on_result, on_lost)
                        interrupts.check()
        _stop(pool)
    except BaseException:
        for w in pool:  # SIGKILL, not waited for: the kernel ends them, and their parent (the server) reaps them
            w.kill()
        raise


def _give(w: _Worker, feed: _Feed, held: dict[int, Any]) -> None:
    pair = feed.take()
    if pair is None:
        return
    try:
        w.conn.send(pair)
    except (BrokenPipeError, OSError):  # the worker died idle: another takes the item
        feed.put_back(pair)
        w.kill()
        return
    held[pair[0]] = pair[1]
    w.job = pair[0]


def _collect(w: _Worker, held: dict[int, Any], on_result: Callable[[int, Any], None],
             on_lost: Callable[[int, Any, int | None], Any] | None) -> None:
    """Take a worker's result, or, if it died holding an item, that item's ``on_lost`` result."""
    assert w.job is not None
    try:
        if not w.conn.poll():
            raise EOFError
        i, result = w.conn.recv()
    except (EOFError, OSError):
        w.process.join(timeout=1.0)
        i, code = w.job, w.process.exitcode
        if on_lost is None:
            raise RuntimeError(f"a worker process died (exit code {code}) while computing item {i}") from None
        result = on_lost(i, held[i], code)
        w.kill()
    held.pop(i, None)
    w.job = None
    on_result(i, result)


def _stop(pool: list[_Worker]) -> None:
    """End idle workers: ask each to stop, then kill what is still there a moment later."""
    for w in pool:
        try:
            w.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
    deadline = time.monotonic() + 1.0
    for w in pool:
        w.process.join(timeout=max(0.0, deadline - time.monotonic()))
        w.kill()
