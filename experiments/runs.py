"""The one run path of ``capsim run``, ``capsim sweep`` and ``experiments.api``: a scenario or sweep becomes a
``Plan`` (its tasks and what the command covers), and ``run_plan`` runs what the result folder lacks.

``run_plan`` holds the folder's lock, checks every finished run of the plan against its recorded checksums (a
damaged run is named and run again), skips the intact ones unless ``force``, runs the rest here, on a process pool or
on Dask, and stores each outcome as it arrives. Headers and progress go to ``log`` and stderr, never stdout.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.results.files import DASK_TMP
from experiments.results.store import ResultStore, new_manifest
from experiments.running import interrupts
from experiments.running.dispatch import run_tasks
from experiments.running.progress import Progress
from experiments.running.records import label_type
from experiments.running.tasks import Outcome, Task, memory_problem
from experiments.scenario import Scenario, parse_seeds, select_policies
from experiments.scenario.sweep import Sweep
from sim.model import CapsimError

__all__ = ["Plan", "Ran", "plan", "run_plan", "stderr_log"]


@dataclass
class Plan:
    """The runs of one command and what it covers: ``kind`` (run or sweep), name, file, grid fields, policy order,
    seeds, the tasks (one per run id), the Arrow type of each grid field and a one-line description."""

    kind: str
    name: str
    file: str
    fields: list[str]
    policies: list[str]
    seeds: list[int]
    tasks: list[Task]
    label_types: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    notes: list[str] = field(default_factory=list)
    """What the traces' readers did with the rows they could not use, one report per distinct trace; what in the
    scenarios is valid but likely not meant (``Scenario.notes``)."""

    def manifest(self) -> dict[str, Any]:
        """The folder's manifest of this command, with the versions of the key packages it ran with."""
        from experiments.running.versions import package_versions

        return {**new_manifest(self.kind, self.name, self.file, self.fields, self.policies, self.seeds,
                               [t.run_id for t in self.tasks]), "versions": package_versions()}


def _seeds(seeds: Sequence[int] | str | None, option: str) -> list[int] | None:
    if seeds is None:
        return None
    try:
        return parse_seeds(seeds if isinstance(seeds, str) else list(seeds))
    except ValueError as e:
        raise CapsimError(f"{option}: {e}") from None


def plan(what: Scenario | Sweep, policies: str | Sequence[str] | None = None,
         seeds: Sequence[int] | str | None = None, flags: bool = False) -> Plan:
    """The plan of a scenario (every policy × seed) or a sweep (grid point × policy × seed), for its own policies
    and seeds or those given (names of the file's policies or registered kinds; seeds as a list or ``"0-4"``).
    ``flags``: mistakes name the command-line options (``--policies``) rather than the keywords."""
    dash = "--" if flags else ""
    seed_list = _seeds(seeds, f"{dash}seeds")
    for where, sc in [("", what)] if isinstance(what, Scenario) else [
            (" at the grid point " + ", ".join(f"{k}={v!r}" for k, v in pt.values), pt.scenario) for pt in what.points]:
        _check_memory(sc, what.file, where)
    if isinstance(what, Scenario):
        specs = select_policies(what.policy_specs(), policies, f"{dash}policies")
        seed_list = seed_list or what.seeds
        shared: dict[int, Any] = {}
        tasks = [Task.make(what, p, s, shared=shared) for p in specs for s in seed_list]
        text = (f"{what.name}: {len(specs)} policies × {len(seed_list)} seeds, {what.n_jobs} jobs on "
                f"{what.node_count} nodes (scenario {what.file})")
        return Plan("run", what.name, what.file, [], [p.label for p in specs], seed_list, tasks, {}, text,
                    _reports([what]))
    specs = select_policies(what.policies, policies, f"{dash}policies")
    seed_list = seed_list or what.seeds
    runs = what.runs(specs, seed_list)
    types = {f: label_type(values) for f, values in what.grid_values().items()}
    named = tuple((f, str(t)) for f, t in types.items())
    shared = {}
    tasks = [Task.make(r.scenario, r.policy, r.seed, r.labels, r.run_id, named, shared) for r in runs]
    text = (f"sweep {what.name}: {len(what.points)} grid points × {len(specs)} policies × {len(seed_list)} seeds = "
            f"{len(tasks)} runs")
    return Plan("sweep", what.name, what.file, list(what.fields), [p.label for p in specs], seed_list, tasks, types,
                text, _reports([pt.scenario for pt in what.points]))


def _reports(scenarios: Sequence[Scenario]) -> list[str]:
    """The trace reports of the scenarios (``Scenario.trace_report``) and their notes (``Scenario.notes``), each
    distinct one once."""
    texts = [r.text() for r in (sc.trace_report() for sc in scenarios) if r is not None]
    return list(dict.fromkeys(texts + [n for sc in scenarios for n in sc.notes()]))


def _check_memory(sc: Scenario, file: str, where: str) -> None:
    """Refuse, before anything runs, a workload whose runs would not fit in this machine's memory."""
    why = memory_problem(sc.n_jobs)
    if why:
        field = "workload.trace" if sc.workload.trace is not None else "workload.jobs"
        raise CapsimError(f"{file}: {field}{where}: {why}")


@dataclass
class Ran:
    """What ``run_plan`` did: the folder, how many runs the plan has, were already done, ran and finished; the
    failed outcomes; the damaged runs it ran again (run id -> why); wall-clock seconds."""

    out: Path
    total: int
    already: int
    finished: int
    failures: list[Outcome]
    damaged: dict[str, str]
    wall: float

    @property
    def attempted(self) -> int:
        return self.total - self.already


def stderr_log(line: str) -> None:
    """A command's header and notes: one line on stderr."""
    print(line, file=sys.stderr, flush=True)


def run_plan(p: Plan, out: str | Path, workers: int = 1, dask: str | None = None, force: bool = False,
             quiet: bool = False, log: Callable[[str], None] | None = stderr_log) -> Ran:
    """Run the runs of ``p`` that the result folder ``out`` lacks (every run with ``force``), storing each as it
    finishes; ``workers`` processes (1: here) or a Dask cluster (``dask``: ``tcp://host:8786`` or ``local:N``).
    ``log`` gets the header and notes (None: silent); ``quiet`` drops the header and the progress line."""
    say = log or (lambda line: None)
    note = say
    if quiet:
        say = lambda line: None  # noqa: E731 (a no-op with the log's signature)
    t0 = time.perf_counter()
    failures: list[Outcome] = []
    store = ResultStore(out, label_types=p.label_types)
    with store.writing(p.manifest(), log=lambda line: note(f"capsim: {line}")):
        done, damaged = store.verify({t.run_id: t for t in p.tasks})
        if force:
            done = set()
        for rid, why in sorted(damaged.items())[:5]:
            note(f"capsim: run {rid} will run again: {why}")
        if len(damaged) > 5:
            note(f"capsim: ... and {len(damaged) - 5} more damaged runs will run again")
        todo = [t for t in p.tasks if t.run_id not in done]
        redo = " (--force: every run again)" if force else f"; {len(p.tasks) - len(todo)} already done"
        say(f"{p.description}{redo}, {len(todo)} to run")
        for text in p.notes:
            note(text)
        progress = Progress(len(todo), quiet=quiet or log is None)
        store.expect([t.run_id for t in todo])

        def on_outcome(o: Outcome) -> None:
            store.write(o)
            if not o.ok:
                failures.append(o)
            progress.update(o.ok)

        dask_tmp = str(store.root / f"{DASK_TMP}-{os.getpid()}") if dask else None
        if dask_tmp:
            os.environ.setdefault("DASK_TEMPORARY_DIRECTORY", dask_tmp)
        try:
            interrupts.check()  # a signal whose exception was swallowed while the plan was made
            run_tasks(todo, on_outcome, workers=max(1, min(workers, len(todo))), dask=dask, dask_tmp=dask_tmp)
        finally:
            if dask_tmp:
                shutil.rmtree(dask_tmp, ignore_errors=True)
    ran = len(todo)
    return Ran(store.root, len(p.tasks), len(p.tasks) - ran, ran - len(failures), failures, damaged,
               time.perf_counter() - t0)
