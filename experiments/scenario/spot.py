"""Single-job spot scenarios: one job replayed on a spot availability trace under several strategies.

```yaml
name: cantbelate
trace: traces/aws-10-26-2022/us-west-2a_v100_1.json   # or {path: ..., format: skypilot|csv, market: NAME, ...}
task_hours: 48                 # C0: the job's work
deadline_hours: 52             # R0: from the job's start
restart_overhead_hours: 0.2    # d: paid on every launch and switch
start_hours: 0                 # the job starts this far into the trace (rounded up to a tick)
strategies: [on_demand, spot_greedy, {kind: spot_greedy, variant: strawman}, uniform_progress, time_sliced, omniscient]
grid: {start_hours: [0, 48, 96]}   # optional: the cartesian product over any of the fields above (and billing)
reference: reference/cantbelate_dev.csv   # optional: Can't Be Late's runs to compare with
```

Paths are relative to the scenario file. Loading checks everything up front (every grid value too) and raises one
``CapsimError`` listing every problem with its line.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from experiments.scenario.fields import NonNeg, PositiveFloat, StrictModel
from experiments.scenario.loading import Problem, did_you_mean, pydantic_problems, raise_problems, read_yaml
from experiments.scenario.names import name_problem
from experiments.scenario.vms import AvailabilityTrace, AvailabilityTraceSpec
from sim.availability import ENCODINGS, FORMATS, AvailabilitySeries, read_availability
from sim.model import CapsimError
from sim.spot_ticks import BILLING
from sim.spotjob import SpotJob, SpotStrategy, TickMarket

__all__ = ["SpotScenario", "Case", "load_spot_scenario", "GRID_FIELDS", "DEFAULT_STRATEGIES"]

DEFAULT_STRATEGIES = ("on_demand", "only_spot", "spot_greedy", {"kind": "spot_greedy", "variant": "strawman"},
                      "uniform_progress", "time_sliced", "omniscient")
"""What a scenario without ``strategies`` runs: every strategy, and the simulator's greedy as well as the paper's."""


class SpotScenario(StrictModel):
    """One single-job spot experiment (the fields in hours are the reference's units; inside, seconds)."""

    name: str = "spot"
    trace: AvailabilityTrace
    task_hours: PositiveFloat
    deadline_hours: PositiveFloat
    restart_overhead_hours: NonNeg = 0.0
    start_hours: NonNeg = 0.0
    tick_seconds: PositiveFloat | None = None
    spot_price: NonNeg = 0.9731
    on_demand_price: NonNeg = 3.06
    billing: Literal["tick", "second"] = "tick"
    strategies: Annotated[list[str | dict[str, Any]], Field(min_length=1)] = list(DEFAULT_STRATEGIES)
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = {}
    reference: str | None = None


GRID_FIELDS = ("trace", "task_hours", "deadline_hours", "restart_overhead_hours", "start_hours", "tick_seconds",
               "spot_price", "on_demand_price", "billing")
"""The fields a scenario's ``grid`` may vary."""
assert set(GRID_FIELDS) <= set(SpotScenario.model_fields) and set(FORMATS) == {"skypilot", "csv"}
assert set(ENCODINGS) == {"available", "preempted"} and set(BILLING) == {"tick", "second"}


@dataclass(frozen=True)
class Case:
    """One point of the grid: the job, the market and where it starts in which series."""

    series: AvailabilitySeries
    job: SpotJob
    market: TickMarket
    start: float
    billing: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class StrategySpec:
    kind: str
    params: dict[str, Any]
    name: str | None = None
    index: int = 0

    def build(self) -> SpotStrategy:
        from optim.spot import build

        return build(self.kind, **self.params)

    @property
    def label(self) -> str:
        return self.name or self.build().describe()


@dataclass(frozen=True)
class LoadedSpotScenario:
    """A validated scenario: its cases (the grid expanded), its strategies and where it came from."""

    spec: SpotScenario
    file: Path
    cases: list[Case]
    strategies: list[StrategySpec]

    @property
    def reference(self) -> Path | None:
        return None if self.spec.reference is None else _path(self.file.parent, self.spec.reference)


def _path(base: Path, p: str) -> Path:
    q = Path(p)
    return q if q.is_absolute() else base / q


def _strategy_specs(raw: list[str | dict[str, Any]], problems: list[Problem]) -> list[StrategySpec]:
    from optim.spot import registry

    kinds = registry()
    out: list[StrategySpec] = []
    for i, entry in enumerate(raw):
        d = {"kind": entry} if isinstance(entry, str) else dict(entry)
        kind, name = d.pop("kind", None), d.pop("name", None)
        if not isinstance(kind, str) or kind not in kinds:
            problems.append(Problem(("strategies", i, "kind"), f"unknown spot strategy {kind!r}"
                                    f"{did_you_mean(str(kind), kinds)} (known: {', '.join(kinds)})"))
            continue
        known = kinds[kind].param_names()  # type: ignore[attr-defined]
        bad = [k for k in d if k not in known]
        if bad:
            problems.append(Problem(("strategies", i, bad[0]), f"unknown parameter {bad[0]!r} of {kind}"
                                    f"{did_you_mean(bad[0], known)} (known: {', '.join(known) or 'none'})"))
            continue
        spec = StrategySpec(kind, d, name if isinstance(name, str) else None, i)
        try:
            spec.build()
        except CapsimError as e:
            problems.append(Problem(("strategies", i), str(e)))
            continue
        if any(s.label == spec.label for s in out):
            problems.append(Problem(("strategies", i), f"{spec.label!r} is listed twice; give each strategy once "
                                    f"(or a distinct `name`)"))
            continue
        out.append(spec)
    return out


def _series(trace: str | AvailabilityTraceSpec, base: Path, cache: dict[Any, AvailabilitySeries]) -> AvailabilitySeries:
    t = AvailabilityTraceSpec(path=trace) if isinstance(trace, str) else trace
    key = t.model_dump_json()
    if key not in cache:
        found = read_availability(t.path, t.format, encoding=t.encoding, min_count=t.min_count, base=base)
        if t.market is not None:
            if t.market not in found:
                raise CapsimError(f"trace {t.path}: no market {t.market!r}{did_you_mean(t.market, found)} "
                                  f"(markets: {', '.join(found)})")
            cache[key] = found[t.market]
        elif len(found) > 1:
            raise CapsimError(f"trace {t.path}: holds {len(found)} markets ({', '.join(list(found)[:5])}, ...); "
                              f"choose one with `market:`, or list the files in a grid over `trace`")
        else:
            cache[key] = next(iter(found.values()))
    return cache[key]


def _cases(sc: SpotScenario, base: Path, problems: list[Problem]) -> list[Case]:
    axes = list(sc.grid.items())
    for key, _ in axes:
        if key not in GRID_FIELDS:
            problems.append(Problem(("grid", key), f"cannot vary {key!r}{did_you_mean(key, GRID_FIELDS)} (a grid "
                                    f"varies {', '.join(GRID_FIELDS)})"))
    if problems:
        return []
    base_fields = sc.model_dump(include=set(GRID_FIELDS))
    cache: dict[Any, AvailabilitySeries] = {}
    out: list[Case] = []
    for values in itertools.product(*(v for _, v in axes)):
        fields = dict(base_fields, **dict(zip((k for k, _ in axes), values)))
        try:
            point = SpotScenario.model_validate({**sc.model_dump(exclude={"grid"}), **fields})
        except ValidationError as e:
            problems.extend(Problem(("grid",) + p.path, p.message) for p in pydantic_problems(e, SpotScenario))
            return []
        where = ("grid",) if axes else ("trace",)
        try:
            series = _series(point.trace, base, cache)
            gap = point.tick_seconds or series.gap
            if gap is None:
                raise CapsimError(f"trace {series.source}: a series read from change times has no tick; give "
                                  f"`tick_seconds`")
            job = SpotJob(point.task_hours * 3600, point.deadline_hours * 3600, point.restart_overhead_hours * 3600)
            market = TickMarket(gap, point.spot_price, point.on_demand_price)
        except CapsimError as e:
            problems.append(Problem(where, str(e)))
            return []
        first = math.ceil(point.start_hours * 3600 / gap - 1e-9) * gap
        if first >= series.end:
            problems.append(Problem(where, f"start_hours {point.start_hours:g} is past the end of trace "
                                    f"{series.name!r} ({series.end / 3600:g} h)"))
            return []
        shown = {k: (series.name if k == "trace" else v) for k, v in fields.items()}
        out.append(Case(series, job, market, point.start_hours * 3600, point.billing, shown))
    return out


def load_spot_scenario(path: str | Path) -> LoadedSpotScenario:
    """Read and validate a single-job spot scenario; one ``CapsimError`` lists every problem."""
    p = Path(path)
    src = read_yaml(p, "spot scenario file")
    if not isinstance(src.data, dict):
        raise CapsimError(f"{p}: expected a mapping of fields (trace, task_hours, deadline_hours, ...), found "
                          f"{type(src.data).__name__}")
    try:
        sc = SpotScenario.model_validate(src.data)
    except ValidationError as e:
        raise_problems(src, pydantic_problems(e, SpotScenario))
        raise AssertionError("unreachable") from None
    problems: list[Problem] = []
    why = name_problem(sc.name)
    if why:
        problems.append(Problem(("name",), why))
    strategies = _strategy_specs(sc.strategies, problems)
    cases = _cases(sc, p.resolve().parent, problems)
    for spec in strategies:
        for case in cases:
            s = spec.build()
            try:  # parameters that only a job and a market can check (a slice in whole ticks, a variant's name)
                s.reset(case.job, case.market, [True] if s.clairvoyant else None)
            except CapsimError as e:
                problems.append(Problem(("strategies", spec.index), str(e)))
                break
    raise_problems(src, problems)
    return LoadedSpotScenario(sc, p, cases, strategies)
