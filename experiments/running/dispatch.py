"""Where tasks run: here (one worker), on the process pool (``experiments.running.pool``), or on Dask."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from itertools import islice
from typing import Any

from experiments.running import dask_local, interrupts
from experiments.running.pool import init_worker, run_parallel
from experiments.running.tasks import Outcome, Task, run_task
from predictors.base import adopt_fits, shared_fits

__all__ = ["run_tasks"]

IN_FLIGHT = 4
"""Tasks handed to Dask per worker at a time: enough to keep workers busy, few enough that the scheduler's state
does not grow with the sweep."""
CHUNK_SECONDS = 0.25
"""On Dask, runs go to a worker in chunks of about this many CPU seconds of work (estimated from the runs finished
so far; the first go alone): Dask's own cost per task, about 20 ms of CPU across client, scheduler and worker, is
then paid once per chunk of tiny runs, and a run longer than this goes alone. CPU, not wall time, so that a loaded
machine (where a tiny run's wall time is ten times its CPU) does not shrink chunks to one run. A chunk's runs come
back together, so a SIGKILL of the command loses at most about this much of a worker's finished work."""
MAX_CHUNK = 64
"""Runs in one Dask task at most."""



def _run_single_thread(task: Task) -> tuple[str | None, float, bytes | None]:
    """A run in a worker: what goes back is its error, wall time and record (the command has the task already)."""
    o = run_task(task, single_thread=True)
    return o.error, o.wall, o.record


def _run_chunk(tasks: list[Task]) -> tuple[list[tuple[str | None, float, bytes | None]], float]:
    """Runs of one Dask task, in a worker, and the CPU seconds they took."""
    cpu = time.process_time()
    return [_run_single_thread(t) for t in tasks], time.process_time() - cpu


def _outcome(task: Task, done: tuple[str | None, float, bytes | None]) -> Outcome:
    return Outcome(task, error=done[0], wall=done[1], record=done[2])


def _lost(i: int, task: Task, code: int | None) -> Outcome:
    why = " (killed: out of memory?)" if code == -signal.SIGKILL else ""
    return Outcome(task, error=f"the worker process running this task died with exit code {code}{why}")


def run_tasks(
    tasks: list[Task],
    on_outcome: Callable[[Outcome], None],
    workers: int = 1,
    dask: str | None = None,
    dask_tmp: str | None = None,
) -> None:
    """Run ``tasks`` and hand each Outcome to ``on_outcome`` in the calling process as it arrives.

    ``workers == 1`` runs in this process; more uses the process pool (solver threads 1 each); ``dask`` is a
    scheduler address (``tcp://host:8786``) or ``local:N[:PORT]`` for a local Dask cluster of N single-threaded worker
    processes. Each outcome comes with its record built where it ran (``Outcome.record``).
    """
    if not tasks:
        return
    if dask:
        _run_dask(tasks, on_outcome, dask, dask_tmp)
    elif workers <= 1:
        for t in tasks:
            interrupts.check()
            on_outcome(run_task(t))
        interrupts.check()
    else:
        run_parallel(_run_single_thread, tasks, lambda i, d: on_outcome(d if isinstance(d, Outcome) else
                                                                      _outcome(tasks[i], d)), workers, on_lost=_lost)


def _run_dask(tasks: list[Task], on_outcome: Callable[[Outcome], None], address: str, tmp: str | None) -> None:
    """Run on a Dask cluster: an existing one at ``address``, or ``local:N`` started here (``running.dask_local``:
    its workers follow the pool's rules and are killed as soon as the runs are over or the command is stopped)."""
    from sim.model import CapsimError

    try:
        import dask
        from distributed import as_completed
    except ImportError:
        raise CapsimError("--dask needs Dask's distributed scheduler: pip install 'capsim[dist]'") from None

    if tmp:
        os.environ["DASK_TEMPORARY_DIRECTORY"] = tmp
        dask.config.set({"temporary-directory": tmp})
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")  # workers: no warnings of cancelled tasks at the end
    cluster = None
    if address.startswith("local:"):
        n, dashboard = dask_local.parse_local(address)
        cluster, client = dask_local.start_local(n, dashboard, tmp)
    else:
        client = dask_local.connect(address)
    try:
        if cluster is None:  # a local cluster's workers set themselves up as Dask builds them
            dask_local.on_workers(client, init_worker, what="setting up the workers")
        dask_local.on_workers(client, adopt_fits, shared_fits(), what="giving the workers the predictors' fits")
        width = IN_FLIGHT * max(1, len(client.scheduler_info().get("workers", {})))
        queue = iter(tasks)
        owner: dict[Any, list[Task]] = {}
        cost = [0.0, 0]  # CPU seconds of the runs finished, how many

        def submit(chunk: list[Task]) -> Any:
            fut = client.submit(_run_chunk, chunk, pure=False)
            owner[fut.key] = chunk
            return fut

        running = as_completed([submit([t]) for t in islice(queue, width)])
        for fut in running:
            interrupts.check()
            chunk = owner.pop(fut.key)
            results, cpu = fut.result()
            cost[0] += cpu
            cost[1] += len(chunk)
            for t, done in zip(chunk, results):
                on_outcome(_outcome(t, done))
            fut.release()
            size = max(1, min(MAX_CHUNK, int(CHUNK_SECONDS * cost[1] / max(cost[0], 1e-6))))
            more = list(islice(queue, size))
            if more:
                running.add(submit(more))
    finally:
        dask_local.close(client, cluster)

