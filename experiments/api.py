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

Runs go through the one run path and the one reader of ``capsim run`` and ``capsim sweep`` (``experiments.runs``,
``experiments.results.reading``; into a temporary folder unless ``out`` is given), so a run here gives exactly the
numbers the command line gives.
"""

from __future__ import annotations

import dataclasses
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.results.reading import Results, read_results
from experiments.runs import plan, run_plan
from experiments.scenario import Scenario, load_scenario, validate_scenario
from experiments.scenario.loading import read_yaml
from experiments.scenario.sweep import Sweep, load_sweep
from sim.model import CapsimError

__all__ = ["Runs", "load", "run", "read", "tidy"]

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
    from experiments.scenario.sweep import path_problem, set_path

    data = sc.model_dump(mode="python")
    for key, value in overrides.items():
        reason = path_problem(key)
        if reason:
            raise CapsimError(f"overrides: {key!r}: expected a dotted path to a scenario field; {reason}")
        set_path(data, key, value)
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


class Runs(Results):
    """Finished runs (``experiments.results.reading.Results``: every table as one DataFrame, totals, report, tidy)
    with figures drawn from them."""

    def plot(self, figure: str, ax: Any = None, where: Mapping[str, Any] | None = None, width: str = "column",
             interval: str = "t", run_id: str | None = None, metrics: Sequence[str] = (), legend: bool = True) -> Any:
        """Figure ``figure`` of ``capsim plot`` (``experiments.plots.FIGURES``; ``metric`` with ``metrics=[...]``,
        ``timeline`` of ``run_id``). Without ``ax``: a new Figure ``width`` wide (a list when it makes several, as
        ``cost_vs`` with two numeric grid fields). With ``ax``: the one panel ``where`` picks (a grid point's
        fields, or ``metric``), drawn onto it; returns ``ax``."""
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
    res = read_results(folder, all_runs, recompute=recompute)
    return Runs(**{f.name: getattr(res, f.name) for f in dataclasses.fields(res)})


def tidy(runs: Results | str | Path) -> pd.DataFrame:
    """The runs' metrics in long form (``Results.tidy``), a folder path read first."""
    return (runs if isinstance(runs, Results) else read(runs)).tidy()


def run(what: str | Path | Scenario | Sweep, overrides: Mapping[str, Any] | None = None,
        policies: Sequence[str] | str | None = None, seeds: Sequence[int] | str | None = None, workers: int = 1,
        out: str | Path | None = None, force: bool = False) -> Runs:
    """Run a scenario or sweep (a file path, or what ``load`` returned) for its policies and seeds, or those given
    (policy names of the file or registered kinds; seeds as a list or ``"0-4"``), with ``overrides`` by dotted
    path, on ``workers`` processes, through the path ``capsim run`` and ``capsim sweep`` take
    (``experiments.runs``): results are stored in ``out`` (a temporary folder if None), finished runs there are
    kept unless ``force``, and the runs of this call are returned."""
    obj = load(what, overrides) if isinstance(what, (str, Path)) else (_override(what, overrides) if overrides
                                                                       else what)
    p = plan(obj, policies, seeds)
    with tempfile.TemporaryDirectory(prefix="capsim-") as tmp:
        ran = run_plan(p, out if out is not None else tmp, workers=max(1, workers), force=force, log=None)
        failed = [f"{o.task.policy_label}, seed {o.task.seed}: {(o.error or '?').strip().splitlines()[-1]}"
                  for o in ran.failures]
        if failed and len(failed) == ran.attempted and not ran.already:
            raise CapsimError(f"every run failed; the first: {failed[0]}")
        if failed:
            warnings.warn(f"{len(failed)} of {ran.attempted} runs failed (see Runs.failures); the first: {failed[0]}",
                          stacklevel=2)
        return read(ran.out)
