"""capsim from Python (a notebook, a script): load, run, read results as DataFrames, draw figures.

```python
from experiments import api

runs = api.run("experiments/scenario/default.yaml", policies=["edf", "greedy"], seeds=[0, 1],
               overrides={"workload.jobs": 20})
runs.totals()                  # per policy: seeds and mean of the headline metrics, as `capsim run` prints them
runs.summary                   # one row per run, every metric of sim/metrics.py
runs.jobs, runs.nodes, runs.decisions, runs.segments   # the per-run records, all runs in one frame each
runs.plot("cost_breakdown")    # a matplotlib Figure, 3.3 in wide (width="page": 6.9 in)
runs.plot("pareto", ax=ax)     # one panel onto your own axes

res = api.read("results/quickstart")     # a result folder written by capsim run or capsim sweep
long = api.tidy("results/quickstart")    # one row per run and metric
```

Runs go through the same tasks, store and reader as ``capsim run`` and ``capsim sweep`` (into a temporary folder
unless ``out`` is given), so a run here gives exactly the numbers the command line gives.
"""

from __future__ import annotations

import dataclasses
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.scenario import Scenario, load_scenario, parse_seeds, validate_scenario
from experiments.scenario.loading import read_yaml
from experiments.scenario.sweep import Sweep, load_sweep
from sim.model import CapsimError

__all__ = ["Runs", "load", "run", "read", "tidy", "FIGURES"]

FIGURES = ("cost_breakdown", "tardiness_late", "pareto", "cdf", "cost_vs", "decision_time", "timeline", "metric")
"""What ``Runs.plot`` draws (see ``experiments.plots``)."""

_SWEEP_KEYS = ("scenario", "grid", "zip", "extends")


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario | Sweep:
    """A scenario file as a validated ``Scenario``, a sweep file as a ``Sweep``; ``overrides`` set scenario fields
    by dotted path (``{"workload.jobs": 20}``) in the scenario, or in every grid point of the sweep."""
    src = read_yaml(path, "scenario or sweep file")
    is_sweep = isinstance(src.data, dict) and any(k in src.data for k in _SWEEP_KEYS)
    obj: Scenario | Sweep = load_sweep(path) if is_sweep else load_scenario(path)
    return _override(obj, overrides) if overrides else obj


def _override_scenario(sc: Scenario, overrides: Mapping[str, Any]) -> Scenario:
    from experiments.scenario.loading import raise_problems
    from experiments.scenario.sweep import _check_path, _set_path

    data = sc.model_dump(mode="python")
    for key, value in overrides.items():
        reason = _check_path(key)
        if reason:
            raise CapsimError(f"overrides: {key!r}: expected a dotted path to a scenario field; {reason}")
        _set_path(data, key, value)
    new, problems = validate_scenario(data, sc.file, sc.base_dir)
    raise_problems(sc.file, problems, f"{sc.file} with overrides {dict(overrides)}")
    assert new is not None
    return new


def _override(obj: Scenario | Sweep, overrides: Mapping[str, Any]) -> Scenario | Sweep:
    if isinstance(obj, Scenario):
        return _override_scenario(obj, overrides)
    swept = [k for k in overrides if k in obj.fields]
    if swept:
        raise CapsimError(f"overrides: {swept[0]!r} is swept by the grid of {obj.file}; change the grid instead")
    points = [dataclasses.replace(p, scenario=_override_scenario(p.scenario, overrides)) for p in obj.points]
    return dataclasses.replace(obj, points=points)


@dataclass
class Runs:
    """Finished runs: every stored table as one DataFrame (``summary``, ``jobs``, ``nodes``, ``decisions``,
    ``segments``, ``failures``), the grid fields and the policy order."""

    tables: dict[str, pd.DataFrame]
    fields: list[str] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)

    @property
    def summary(self) -> pd.DataFrame:
        return self.tables["summary"]

    @property
    def jobs(self) -> pd.DataFrame:
        return self.tables["jobs"]

    @property
    def nodes(self) -> pd.DataFrame:
        return self.tables["nodes"]

    @property
    def decisions(self) -> pd.DataFrame:
        return self.tables["decisions"]

    @property
    def segments(self) -> pd.DataFrame:
        return self.tables["segments"]

    @property
    def failures(self) -> pd.DataFrame:
        return self.tables.get("failures", pd.DataFrame())

    def totals(self) -> pd.DataFrame:
        """Per grid point and policy: the number of seeds and the mean over seeds of each headline metric (the
        numbers ``capsim run`` prints)."""
        from sim.metrics import HEADLINE

        keys = self.fields + ["policy"]
        cols = [m for m in HEADLINE if m in self.summary.columns]
        g = self.summary.groupby(keys, sort=False)
        out = g[cols].mean()
        out.insert(0, "seeds", g.size())
        return out.reset_index()

    def report(self, metrics: Sequence[str] | None = None, interval: str = "t") -> pd.DataFrame:
        """What ``capsim report`` tabulates: per grid point and policy, runs ``n`` and per metric the mean and its
        95% interval (``<metric>_mean``, ``_lo``, ``_hi``; ``interval``: ``t`` or ``bootstrap``)."""
        from experiments.results.report import aggregate
        from sim.metrics import HEADLINE

        return aggregate(self.summary, self.fields, list(metrics or HEADLINE), self.policies, method=interval)

    def tidy(self) -> pd.DataFrame:
        """One row per run and metric: run id, grid fields, policy, seed, ``metric``, ``value`` and its ``label``."""
        return tidy(self)

    def plot(self, figure: str, ax: Any = None, where: Mapping[str, Any] | None = None, width: str = "column",
             interval: str = "t", run_id: str | None = None, metrics: Sequence[str] = (), legend: bool = True) -> Any:
        """Figure ``figure`` of ``capsim plot`` (``FIGURES``; ``metric`` with ``metrics=[...]``, ``timeline`` of
        ``run_id``). Without ``ax``: a new Figure ``width`` wide (a list when it makes several, as ``cost_vs`` with
        two numeric grid fields). With ``ax``: the one panel ``where`` picks (a grid point's fields, or ``metric``),
        drawn onto it; returns ``ax``."""
        from experiments.plots import PlotData, draw, figures

        data = PlotData(self.tables, self.fields, self.policies, interval)
        if ax is not None:
            return draw(figure, data, ax, where, width, legend, run_id=run_id, metrics=metrics)
        figs = figures(figure, data, width, run_id=run_id, metrics=metrics)
        if not figs:
            raise CapsimError(f"figure {figure!r}: nothing to draw from these runs")
        return figs[0] if len(figs) == 1 else figs


def read(folder: str | Path, all_runs: bool = False, recompute: bool = False) -> Runs:
    """A result folder (``capsim run`` / ``capsim sweep`` / ``run(..., out=...)``) as ``Runs``: the latest
    command's finished runs, or every run there with ``all_runs``; ``recompute`` recomputes the metrics from the
    stored tables (for a metric declared after the runs)."""
    from experiments.results.reading import open_results

    res = open_results(folder, all_runs, recompute_metrics=recompute)
    return Runs(res.tables, list(res.fields), list(res.policies))


def tidy(runs: Runs | str | Path) -> pd.DataFrame:
    """The runs' metrics in long form, one row per run and metric (``run_id``, grid fields, ``policy``, ``seed``,
    ``metric``, ``value``, ``label``), for seaborn-style plotting and group-bys; a folder path is read first."""
    from experiments.results.tables import metric_label
    from sim.metrics import METRICS

    r = runs if isinstance(runs, Runs) else read(runs)
    s = r.summary
    ids = ["run_id", *r.fields, "policy", "seed"]
    metrics = [m for m in METRICS if m in s.columns]
    long = s[ids + metrics].melt(id_vars=ids, value_vars=metrics, var_name="metric", value_name="value")
    long["label"] = long["metric"].map(metric_label)
    return long


def _policies(specs: list[Any], wanted: Sequence[str] | str | None) -> list[Any]:
    from experiments.scenario import PolicySpec

    if wanted is None:
        return specs
    names = [w.strip() for w in (wanted.split(",") if isinstance(wanted, str) else wanted) if w.strip()]
    by_label = {s.label: s for s in specs}
    out = []
    for n in names:
        if n in by_label:
            out.append(by_label[n])
        else:
            import optim

            if n not in optim.registry():
                raise CapsimError(f"policies: unknown policy {n!r}; the file has {', '.join(by_label)} and the "
                                  f"registered kinds are {', '.join(sorted(optim.registry()))}")
            out.append(PolicySpec(kind=n))
    return out


def run(what: str | Path | Scenario | Sweep, overrides: Mapping[str, Any] | None = None,
        policies: Sequence[str] | str | None = None, seeds: Sequence[int] | str | None = None, workers: int = 1,
        out: str | Path | None = None) -> Runs:
    """Run a scenario or sweep (a file path, or what ``load`` returned) for its policies and seeds, or those given
    (policy names of the file or registered kinds; seeds as a list or ``"0-4"``), with ``overrides`` by dotted
    path, on ``workers`` processes; results are stored in ``out`` (a temporary folder if None) and returned."""
    from experiments.results.store import ResultStore, new_manifest, sweep_manifest
    from experiments.running.pool import run_tasks
    from experiments.running.tasks import Task, sweep_tasks

    obj = load(what, overrides) if isinstance(what, (str, Path)) else (_override(what, overrides) if overrides
                                                                       else what)
    try:
        seed_list = parse_seeds(seeds) if isinstance(seeds, str) else (list(seeds) if seeds is not None else None)
    except ValueError as e:
        raise CapsimError(f"seeds: {e}") from None
    if isinstance(obj, Scenario):
        specs = _policies(obj.policy_specs(), policies)
        seed_list = seed_list or obj.seeds
        tasks = [Task.make(obj, p, s) for p in specs for s in seed_list]
        manifest = new_manifest("run", obj.name, obj.file, [], [p.label for p in specs], seed_list,
                                [t.run_id for t in tasks])
    else:
        obj = dataclasses.replace(obj, policies=_policies(obj.policies, policies), seeds=seed_list or obj.seeds)
        tasks = sweep_tasks(obj)
        manifest = sweep_manifest(obj, tasks)
    with tempfile.TemporaryDirectory(prefix="capsim-") as tmp:
        store = ResultStore(out if out is not None else tmp)
        failed: list[str] = []

        def collect(o: Any) -> None:
            store.write(o)
            if not o.ok:
                failed.append(f"{o.task.policy_label}, seed {o.task.seed}: "
                              f"{(o.error or '?').strip().splitlines()[-1]}")

        with store.writing(manifest):
            done = store.finished() if out is not None else set()
            run_tasks([t for t in tasks if t.run_id not in done], collect, workers=max(1, workers))
        if failed and len(failed) == len(tasks):
            raise CapsimError(f"every run failed; the first: {failed[0]}")
        if failed:
            warnings.warn(f"{len(failed)} of {len(tasks)} runs failed (see Runs.failures); the first: {failed[0]}",
                          stacklevel=2)
        return read(store.root)
