"""Running simulations: one task = one scenario × policy × seed, executed here, in worker processes or on Dask.

A ``Task`` carries plain data only (the scenario as validated data, the policy spec, the seed), so it pickles to any
worker; the worker rebuilds the objects, runs the engine and sends back plain DataFrames. Only the caller writes files.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from experiments import interrupts
from experiments.scenario import PolicySpec, Scenario

__all__ = ["Task", "Outcome", "execute", "run_tasks", "Progress", "TABLES"]

TABLES = ("jobs", "nodes", "decisions", "segments")
"""The per-run record tables of ``sim.engine.RunResult`` that are stored (one row per job, node interval, decision,
run segment of a job on a node)."""


@dataclass(frozen=True)
class Task:
    """One simulation to run. ``labels`` are the leading columns of its rows (run id, grid values, policy, seed)."""

    run_id: str
    scenario: dict[str, Any]
    base_dir: str
    policy: dict[str, Any]
    seed: int
    labels: tuple[tuple[str, Any], ...] = ()
    scenario_id: str = ""
    """The hash of the resolved scenario without policy and seed: runs of one scenario share it (reports group by
    it, never pooling different scenarios)."""

    @staticmethod
    def make(sc: Scenario, policy: PolicySpec, seed: int, labels: Iterable[tuple[str, Any]] = ()) -> Task:
        data = sc.model_dump(mode="python", exclude={"policies", "seeds"}, exclude_unset=False)
        return Task(sc.run_id(policy, seed), data, str(sc.base_dir), policy.model_dump(), seed, tuple(labels),
                    sc.scenario_id())

    def scenario_obj(self) -> Scenario:
        sc = Scenario.model_validate(self.scenario)
        sc._base_dir = Path(self.base_dir)
        return sc

    def config_json(self) -> str:
        """The run's configuration (scenario, policy, seed) as JSON text, to record next to its results."""
        import json

        return json.dumps({"scenario": self.scenario, "policy": self.policy, "seed": self.seed}, sort_keys=True,
                          default=str)

    @property
    def policy_label(self) -> str:
        return self.policy.get("name") or self.policy["kind"]


@dataclass
class Outcome:
    """What a task produced: its tables and summary row, or the error text when it failed."""

    task: Task
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    error: str | None = None
    wall: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def _label(df: pd.DataFrame, labels: list[tuple[str, Any]]) -> pd.DataFrame:
    df = df.reset_index(drop=True).copy()
    for i, (k, v) in enumerate(labels):
        if k in df.columns:
            df = df.drop(columns=k)
        df.insert(i, k, [v] * len(df))
    return df


def execute(task: Task, single_thread: bool = False) -> Outcome:
    """Run one task to completion; never raises (a failure comes back as ``Outcome.error`` with the traceback)."""
    from sim.engine import Simulation

    t0 = time.perf_counter()
    try:
        sc = task.scenario_obj()
        spec = PolicySpec.model_validate(task.policy)
        estimator, truth = sc.predictors()
        cluster = sc.build_cluster()
        jobs = sc.build_jobs(task.seed, truth, cluster.configs)
        policy = sc.build_policy(spec, single_thread=single_thread)
        if "seed" in policy.param_names() and "seed" not in spec.params:  # seeded policies draw from the run's seed
            policy = type(policy)(**{**policy.get_params(), "seed": task.seed})
        result = Simulation(cluster, jobs, policy, estimator, truth, seed=task.seed).run()
        bound = _lower_bound(jobs, cluster, truth)
    except BaseException as e:  # noqa: BLE001 (recorded and reported by the caller; the sweep goes on)
        if not isinstance(e, Exception):  # Ctrl-C, SIGTERM, exit: stop, do not record a failed run
            raise
        return Outcome(task, error="".join(traceback.format_exception(e)), wall=time.perf_counter() - t0)
    labels = [("run_id", task.run_id), *task.labels, ("policy", task.policy_label), ("seed", task.seed)]
    tables = {name: _label(getattr(result, name), labels) for name in TABLES}
    summary = {k: v for k, v in labels}
    summary.update({k: (v.item() if hasattr(v, "item") else v) for k, v in result.summary.items()})
    summary.update(lower_bound=bound, bound_ratio=summary["total_cost"] / bound if bound > 0 else float("nan"))
    return Outcome(task, tables, summary, wall=time.perf_counter() - t0)


BOUND_MAX_JOBS = 5000
"""Runs with more jobs get no lower bound (NaN): its LP grows with jobs × time intervals × configurations."""


def _lower_bound(jobs: list[Any], cluster: Any, truth: Any) -> float:
    """The clairvoyant lower bound of ``optim.bound`` on this instance's cost, or NaN where it does not apply (fixed
    servers rent nothing; more than ``BOUND_MAX_JOBS`` jobs) or fails: a bound never costs a finished run."""
    import math

    import numpy as np

    from optim.bound import instance_bound

    if not jobs or len(jobs) > BOUND_MAX_JOBS or any(getattr(s, "fixed", False) for s in cluster.slots):
        return math.nan
    try:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return float(instance_bound(jobs, cluster.configs, truth, [s.allowed for s in cluster.slots]))
    except Exception:  # noqa: BLE001 (the run's own results stand without it)
        return math.nan


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


class Progress:
    """A one-line progress bar on stderr: done/total, failures, elapsed time and ETA. Silent when ``quiet``."""

    def __init__(self, total: int, quiet: bool = False, stream: Any = None, width: int = 28):
        self.total, self.quiet, self.width = total, quiet, width
        self.stream = stream or sys.stderr
        self.done = self.failed = 0
        self.t0 = time.monotonic()
        self._last = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    @staticmethod
    def _clock(s: float) -> str:
        s = int(round(s))
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"

    def line(self) -> str:
        n = self.done + self.failed
        frac = n / self.total if self.total else 1.0
        bar = "#" * int(frac * self.width) + "." * (self.width - int(frac * self.width))
        elapsed = time.monotonic() - self.t0
        eta = "--:--" if n == 0 else self._clock(elapsed / n * (self.total - n))
        fail = f", {self.failed} failed" if self.failed else ""
        return f"[{bar}] {n}/{self.total} runs{fail}  {self._clock(elapsed)} elapsed, ETA {eta}"

    def update(self, ok: bool) -> None:
        if ok:
            self.done += 1
        else:
            self.failed += 1
        if self.quiet:
            return
        now = time.monotonic()
        last = self.done + self.failed == self.total
        if self._tty:
            if last or now - self._last > 0.2:
                self.stream.write("\r" + self.line() + ("\n" if last else ""))
                self.stream.flush()
                self._last = now
        elif last or now - self._last > 5.0:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last = now


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
            ctx.set_forkserver_preload(["experiments.runner", "sim.engine", "optim", "predictors"])
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
