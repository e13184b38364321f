"""Running tasks in parallel: here, in a process pool, or on Dask; every worker dies with the command that
started it, and SIGTERM or Ctrl-C stop the workers and keep every finished run."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from experiments.running import interrupts
from experiments.running.tasks import Outcome, Task, execute

__all__ = ["run_tasks", "die_with_parent"]


def _execute_single_thread(task: Task) -> Outcome:
    return execute(task, single_thread=True)


def _init_worker(parent: int | None = None) -> None:
    """Set up a worker process: one thread per numeric library, the default SIGTERM action, and death with the
    parent (``die_with_parent``)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except ValueError:  # not the main thread of the worker (a Dask worker runs this on its event loop)
        pass
    die_with_parent(parent)


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


def _stop_children() -> None:
    """Terminate this process's worker processes (an interrupted or terminated command leaves none running)."""
    import multiprocessing as mp

    for child in mp.active_children():
        child.terminate()


def run_tasks(
    tasks: list[Task],
    on_outcome: Callable[[Outcome], None],
    workers: int = 1,
    dask: str | None = None,
    dask_tmp: str | None = None,
) -> None:
    """Run ``tasks`` and hand each Outcome to ``on_outcome`` in the calling process as it arrives.

    ``workers == 1`` runs in this process; more uses a process pool (solver threads 1 each); ``dask`` is a scheduler
    address (``tcp://host:8786``) or ``local:N`` for a local Dask cluster of N single-threaded worker processes.
    """
    if not tasks:
        return
    if dask:
        _run_dask(tasks, on_outcome, dask, dask_tmp)
    elif workers <= 1:
        for t in tasks:
            interrupts.check()
            on_outcome(execute(t))
    else:
        import multiprocessing as mp

        method = os.environ.get("CAPSIM_START_METHOD") or ("fork" if sys.platform.startswith("linux") else "spawn")
        ctx = mp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(["experiments.running.pool", "sim.engine", "optim", "predictors"])
        parent = None if method == "forkserver" else os.getpid()  # a forkserver's children have it as parent
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                   initargs=(parent,))
        try:
            with interrupts.deferred():  # SIGTERM is raised here, between runs, not inside the pool's own code
                pending: set[Future] = set()
                queue = iter(tasks)
                for t in queue:
                    pending.add(pool.submit(_execute_single_thread, t))
                    if len(pending) >= 2 * workers:
                        break
                while pending:
                    interrupts.check()
                    done, pending = wait(pending, timeout=interrupts.POLL, return_when=FIRST_COMPLETED)
                    for f in done:
                        on_outcome(f.result())
                        interrupts.check()
                        nxt = next(queue, None)
                        if nxt is not None:
                            pending.add(pool.submit(_execute_single_thread, nxt))
        except BaseException:
            _stop_children()
            # One shutdown that waits: the pool's thread sees its workers gone, closes its pipes and ends now. A
            # first shutdown without waiting would forget the thread, which then closed its wake-up pipe while the
            # interpreter's exit was writing to it (a traceback after "capsim: terminated", about 1 run in 10).
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)


def _run_dask(tasks: list[Task], on_outcome: Callable[[Outcome], None], address: str, tmp: str | None) -> None:
    from sim.model import CapsimError

    try:
        import dask
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise CapsimError("--dask needs Dask's distributed scheduler: pip install 'capsim[dist]'") from None

    if tmp:
        os.environ["DASK_TEMPORARY_DIRECTORY"] = tmp
        dask.config.set({"temporary-directory": tmp})
    cluster = None
    if address.startswith("local:"):
        try:
            n = int(address.split(":", 1)[1])
        except ValueError:
            raise CapsimError(f"--dask {address!r}: expected local:N with N a number of workers") from None
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               local_directory=tmp)
        client = Client(cluster)
    else:
        try:
            client = Client(address, timeout=20)
        except (OSError, TimeoutError) as e:
            raise CapsimError(f"--dask {address!r}: cannot reach the Dask scheduler: {e}") from None
    try:
        client.run(_init_worker)  # a local cluster's workers are this process's children: they die with it
        futures = client.map(_execute_single_thread, tasks, pure=False)
        for fut in as_completed(futures):
            interrupts.check()
            on_outcome(fut.result())
            fut.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
