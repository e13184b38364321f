"""A local Dask cluster (``--dask local:N``) whose worker processes follow the pool's rules: they ignore Ctrl-C, die
with the command however it ends, are never started again once the command stops, and nothing waits without a
bound.

The cluster runs in the command: its scheduler and one nanny per worker on Dask's event-loop thread, each worker a
process the nanny starts from the command's fork server (``pool.start_server``, which has imported Dask and capsim
once, so a worker starts in a moment and is bound to die with the command from the moment it is forked; spawned
where there is no fork server). Every worker sets itself up (``experiments.running.pool.init_worker``) as Dask
builds it, through this module as a worker preload (``dask_setup``), so a worker a nanny starts again after a crash
follows the same rules. Once the command stops, no nanny starts a worker again: a nanny that sees its worker die
while "running" starts a new one (one stop in a hundred left such workers behind for seconds).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from experiments.running import interrupts
from experiments.running.pool import init_worker, quiet_resource_tracker, sigint_blocked, start_server
from sim.model import CapsimError

__all__ = ["parse_local", "start_local", "connect", "on_workers", "close", "kill_workers", "LOCAL_QUIET", "LOG_LENGTH",
           "START_TIMEOUT", "CALL_TIMEOUT", "dask_setup"]

LOG_LENGTH = 20
"""Entries each of Dask's developer logs keeps in a local cluster (``LOCAL_QUIET``)."""
LOCAL_QUIET = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
               "distributed.worker.memory.monitor-interval": "1s", "distributed.admin.system-monitor.interval": "5s",
               "distributed.admin.low-level-log-length": LOG_LENGTH}
"""Dask settings of a ``local:N`` cluster: no statistical profiler (it feeds the dashboard, which is off), and its
event-loop, memory and system monitors every second or five instead of every 20-500 ms. An idle ``local:2`` cluster
burnt 57-60 ms of CPU per second with Dask's defaults, 9.7 with these (``benchmarks/sweep_scale.py`` counts that
CPU as overhead per run, large when a loaded machine runs few runs per second). Dask's developer logs (the last
messages of each stream, transitions, events) keep ``LOG_LENGTH`` entries, not 1,000: the scheduler and client
live in the command, and their logs held every recent task's pickled runs, memory that grew with the sweep until
about 2,000 Dask tasks (17-19 MB traced at 1,000-4,000 tiny tasks, 5 MB with 20 entries)."""
START_TIMEOUT = 300.0
"""Seconds a local worker may take to start and reach the scheduler before the command gives up with an error
(Dask's ``death_timeout``): an idle machine takes 1-2 s, one loaded twenty times past its cores up to a minute."""
CALL_TIMEOUT = 300.0
"""Seconds the command waits for every worker to answer a set-up call (``on_workers``) before it gives up."""
ABANDON_WAIT = 1.0
"""Seconds a stopped cluster start is given, at most, to see its killed workers die (``_abandon``)."""
COMMAND_ENV = "CAPSIM_DASK_COMMAND"
"""Environment variable giving a local cluster's workers the command's process id."""

_stopping = threading.Event()
_starting: set[int] = set()
"""Nannies starting a worker process (until it has reached the scheduler, or died)."""


def parse_local(address: str) -> tuple[int, str | None]:
    """``local:N`` -> (N, None); ``local:N:PORT`` -> (N, ":PORT"), a cluster with Dask's dashboard on that port
    (which needs ``bokeh``). A local cluster has no dashboard unless asked."""
    parts = address.split(":")
    try:
        if len(parts) not in (2, 3) or int(parts[1]) < 1 or (len(parts) == 3 and not 0 <= int(parts[2]) < 65536):
            raise ValueError
    except ValueError:
        raise CapsimError(f"--dask {address!r}: expected local:N (N workers, N >= 1) or local:N:PORT (with Dask's "
                          "dashboard on PORT)") from None
    return int(parts[1]), (f":{parts[2]}" if len(parts) == 3 else None)


@cache
def _nanny_class() -> type:
    from distributed import Nanny
    from distributed.core import Status

    class LocalNanny(Nanny):
        """A nanny that starts no worker process once the command stops (a dead worker is normally restarted)."""

        async def instantiate(self) -> Status:
            if _stopping.is_set():  # the nanny stays as it was: closing the cluster closes it as usual
                return Status.failed
            _starting.add(id(self))
            try:
                return await super().instantiate()
            finally:
                _starting.discard(id(self))

    return LocalNanny


def start_local(n: int, dashboard: str | None, tmp: str | None) -> tuple[Any, Any]:
    """Start a local cluster of ``n`` single-threaded worker processes and a client of it.

    Dask starts it from a thread of its own that has Ctrl-C blocked, which Dask's threads and through them the
    worker processes inherit (they then ignore it: ``dask_setup``), while this thread waits for it with Ctrl-C
    open: blocked here, a Ctrl-C went to another thread and the stop waited for the watchdog, which ended the
    command with the workers still starting up (no longer its children, they lived on for seconds). A signal while
    the cluster starts kills the workers started so far, and any started in the next moment, then goes on."""
    import dask
    from distributed import Client, LocalCluster

    _stopping.clear()
    quiet_resource_tracker()
    method = start_server(("distributed", __name__))
    dask.config.set({**LOCAL_QUIET, "distributed.worker.multiprocessing-method": method})  # given to the workers
    preload = [__name__, *dask.config.get("distributed.worker.preload", [])]
    # The scheduler's HTTP server (health, metrics; also the dashboard's) listens on a free port of this machine
    # unless a dashboard was asked for: Dask's default port 8787 warned when two commands ran at once.
    http = dashboard if dashboard is not None else "127.0.0.1:0"
    made: dict[str, Any] = {}

    def build() -> None:
        try:
            made["cluster"] = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=dashboard,
                scheduler_kwargs={"dashboard_address": http}, local_directory=tmp, worker_class=_nanny_class(),
                preload=preload, death_timeout=START_TIMEOUT, env={COMMAND_ENV: str(os.getpid())})
            made["client"] = Client(made["cluster"], timeout=START_TIMEOUT)
        except BaseException as e:  # noqa: BLE001 - handed to the command's thread
            made["error"] = e

    with sigint_blocked():
        starter = threading.Thread(target=build, name="capsim-dask-start", daemon=True)
        starter.start()
    try:
        while starter.is_alive():
            starter.join(interrupts.POLL)
            interrupts.check()
    except BaseException:
        _abandon()
        raise
    if "error" in made:
        _abandon()
        e = made["error"]
        if isinstance(e, (OSError, TimeoutError)):
            raise CapsimError(f"--dask local:{n}: the local Dask cluster did not start: {e}") from None
        raise e
    return made["cluster"], made["client"]


def connect(address: str) -> Any:
    """A client of the Dask scheduler at ``address`` (an existing cluster). It keeps ``LOG_LENGTH`` of the messages it
    sent, as a local cluster does (Dask's default, the last 1,000 under 1 MB each, held every recent chunk of runs in
    the command); Dask's settings are otherwise left as they were."""
    import dask
    from distributed import Client

    try:
        with dask.config.set({"distributed.admin.low-level-log-length": LOG_LENGTH}):
            return Client(address, timeout=20)
    except (OSError, TimeoutError) as e:
        raise CapsimError(f"--dask {address!r}: cannot reach the Dask scheduler: {e}") from None


def _abandon() -> None:
    """A cluster whose start was stopped: kill its workers until no nanny is starting one any more (at most
    ``ABANDON_WAIT`` seconds). A worker being spawned as the command stopped is not yet among this process's
    children; left alone, it found its parent gone and printed a traceback. The command ends next; what Dask says
    meanwhile is not shown."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    deadline = time.monotonic() + ABANDON_WAIT
    while True:
        kill_workers()
        if not _starting or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in each worker of a local cluster as Dask builds it: the pool's worker set-up (Ctrl-C
    ignored, death with its parent, the fork server or the command, and exit if the command is gone), before the
    worker takes any task."""
    command = os.environ.get(COMMAND_ENV)
    init_worker(int(command) if command else None)


def on_workers(client: Any, fn: Callable[..., Any], *args: Any, what: str) -> None:
    """``fn(*args)`` in every worker of the cluster, waiting at most ``CALL_TIMEOUT`` seconds for the answers."""
    try:
        client.run(fn, *args, callback_timeout=CALL_TIMEOUT)
    except TimeoutError:
        raise CapsimError(f"--dask: the Dask workers did not answer within {CALL_TIMEOUT:g} s while {what} (a "
                          "worker that cannot start, or a scheduler out of reach); no run was started") from None


@contextmanager
def _quiet() -> Iterator[None]:
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def kill_workers() -> None:
    """Kill a local cluster's worker processes (this process's multiprocessing children), not waiting for them;
    from now on no nanny starts one again (``LocalNanny``). Telling the nannies instead (``close_gracefully``) left
    one, under load, in a state ``cluster.close`` refused (an AssertionError at the end of a sweep)."""
    import multiprocessing as mp

    _stopping.set()
    for p in mp.active_children():
        p.kill()


def close(client: Any, cluster: Any) -> None:
    """Close the client, and a local cluster by killing its worker processes first (quiet and fast). After a signal
    only the kill is waited for: closing the client and the cluster took over a second under load, and the command
    ends next anyway (in a process that goes on, they close in the background)."""
    def shut() -> None:
        with _quiet():
            if cluster is not None:
                kill_workers()
            client.close(timeout=2)
            if cluster is not None:
                cluster.close(timeout=2)

    if interrupts.exit_code() is None:
        shut()
        return
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # until the background close is over
    if cluster is not None:
        kill_workers()

    def shut_quietly() -> None:
        try:
            shut()
        finally:
            logger.setLevel(level)

    threading.Thread(target=shut_quietly, name="capsim-dask-close", daemon=True).start()
