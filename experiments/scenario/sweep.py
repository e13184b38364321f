"""Sweep files: a base scenario, policies, seeds and a grid over scenario fields by dotted path.

```yaml
extends: base.yaml            # optional: a sweep or scenario file this one refines (deep merge, lists replaced;
                              # grid axes add up, `grid: {some.field: null}` drops an inherited axis)
name: arrival-rate
scenario: {cluster: {nodes: 5}, workload: {jobs: 50}}   # or a path to a scenario file
policies: [{kind: fifo}, {kind: edf}]
seeds: 0-4
grid:                         # cartesian product over these fields
  workload.mean_interarrival: [30, 45]
zip:                          # each group varies together (equal-length lists) and is one axis of the product
  - {cluster.nodes: [5, 10], workload.jobs: [50, 100]}
```

Loading validates everything up front (every grid value too) and raises one CapsimError listing all problems.
``Sweep.runs()`` expands the grid into runs with stable run ids (the hash of each fully resolved configuration).
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from experiments.scenario.checks import validate_scenario
from experiments.scenario.components import PolicySpec
from experiments.scenario.loading import (
    Problem,
    did_you_mean,
    free_mapping,
    inner_model,
    path_str,
    pydantic_problems,
    raise_problems,
    read_yaml,
)
from experiments.scenario.names import name_problem, slug
from experiments.scenario.spec import Scenario

__all__ = ["SweepFile", "Sweep", "SweepRun", "load_sweep", "grid_value_label"]

SWEEP_KEYS = ("extends", "name", "scenario", "policies", "seeds", "grid", "zip")
MAX_RUNS = 100_000
"""The most runs one sweep may expand to: a grid beyond it is a typo (a list of values where a range was meant)."""


class SweepFile(BaseModel):
    """The structure of a sweep file (scenario contents are validated by the Scenario model)."""

    model_config = ConfigDict(extra="forbid")
    extends: str | None = None
    name: str | None = None
    scenario: dict[str, Any] | str | None = None
    policies: list[dict[str, Any]] | None = None
    seeds: Any = None
    grid: dict[str, list[Any]] = {}
    zip: list[dict[str, list[Any]]] = []


def _merge(base: Any, over: Any) -> Any:
    """Deep merge of mappings (``over`` wins, a ``null`` in a grid removes that axis); anything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            if v is None and k in base and "." in str(k):
                del out[k]
            else:
                out[k] = _merge(base[k], v) if k in base else v
        return out
    return copy.deepcopy(over)


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    cur = data
    for p in parts[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[p] = nxt
        cur = nxt
    cur[parts[-1]] = copy.deepcopy(value)


def path_problem(path: str) -> str | None:
    """``None`` if ``path`` names a scenario field (or a key inside a free-form mapping field), else the reason."""
    parts = path.split(".")
    if parts[0] in ("policies", "seeds"):
        return f"{parts[0]!r} cannot be swept in the grid; list them under `{parts[0]}:` instead"
    model: Any = Scenario
    for i, p in enumerate(parts):
        fields = model.model_fields
        if p not in fields:
            if model.model_config.get("extra") == "allow":
                return None
            where = ".".join(parts[:i]) or "a scenario"
            return f"{where} has no field {p!r}{did_you_mean(p, fields)} (fields: {', '.join(fields)})"
        annotation = fields[p].annotation
        model = None if free_mapping(annotation) else inner_model(annotation)
        if model is None:
            return None
    return None


def grid_value_label(value: Any) -> Any:
    """A grid value as a table cell: scalars stay, lists and mappings become compact JSON text."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


class SweepRun(NamedTuple):
    """One run of a sweep: its run id, the grid point's scenario, the policy, the seed and the grid labels."""

    run_id: str
    scenario: Scenario
    policy: PolicySpec
    seed: int
    labels: list[tuple[str, Any]]


@dataclass
class Point:
    """One grid point: its field values and the validated scenario."""

    values: tuple[tuple[str, Any], ...]
    scenario: Scenario


@dataclass
class Sweep:
    """A validated sweep: its name, file, grid fields (in order), grid points and policies."""

    name: str
    file: str
    fields: list[str]
    points: list[Point]
    policies: list[PolicySpec]
    seeds: list[int]
    extra: dict[str, Any] = field(default_factory=dict)

    def runs(self, policies: list[PolicySpec] | None = None, seeds: list[int] | None = None) -> list[SweepRun]:
        """Every run (grid point × policy × seed, for the sweep's policies and seeds or those given), runs with the
        same resolved configuration (run id) once."""
        out: list[SweepRun] = []
        seen: set[str] = set()
        for pt in self.points:
            labels = [(k, grid_value_label(v)) for k, v in pt.values]
            for pol in self.policies if policies is None else policies:
                run_id = pt.scenario.run_ids(pol)
                for seed in self.seeds if seeds is None else seeds:
                    rid = run_id(seed)
                    if rid not in seen:
                        seen.add(rid)
                        out.append(SweepRun(rid, pt.scenario, pol, seed, labels))
        return out

    def grid_values(self) -> dict[str, list[Any]]:
        """Each grid field's values over the grid points, as table cells (``grid_value_label``)."""
        return {f: [grid_value_label(dict(pt.values)[f]) for pt in self.points] for f in self.fields}


def _read_chain(path: Path, stack: tuple[str, ...], problems: list[Problem]) -> tuple[dict, Path]:
    """The sweep data of ``path`` with its ``extends`` chain merged in, and the directory its scenario is relative
    to."""
    src = read_yaml(path, "sweep file")
    data = src.data
    if not isinstance(data, dict):
        problems.append(Problem((), f"expected a mapping of sweep fields ({', '.join(SWEEP_KEYS)}), "
                                f"found {type(data).__name__}"))
        return {}, path.parent
    if not any(k in data for k in ("scenario", "grid", "zip", "extends")):
        data = {"scenario": data}
    base_dir = path.parent
    if isinstance(data.get("scenario"), str):
        sp = (path.parent / data["scenario"]).resolve()
        ssrc = read_yaml(sp, "scenario file (from `scenario:`)")
        data = dict(data, scenario=ssrc.data if isinstance(ssrc.data, dict) else {})
        base_dir = sp.parent
    ext = data.pop("extends", None)
    if ext is None:
        return data, base_dir
    if not isinstance(ext, str):
        problems.append(Problem(("extends",), f"expected a file path, found {ext!r}"))
        return data, base_dir
    ep = (path.parent / ext).resolve()
    if str(ep) in stack:
        problems.append(Problem(("extends",), f"expected no cycle, found {' → '.join(stack + (str(ep),))}"))
        return data, base_dir
    base, base_base_dir = _read_chain(ep, stack + (str(ep),), problems)
    if "scenario" not in data:
        base_dir = base_base_dir
    return _merge(base, data), base_dir


def load_sweep(path: str | Path) -> Sweep:
    """Read, merge (``extends``), validate and expand a sweep file; one CapsimError lists every problem."""
    p = Path(path)
    src = read_yaml(p, "sweep file")
    problems: list[Problem] = []
    data, base_dir = _read_chain(p.resolve(), (str(p.resolve()),), problems)
    raise_problems(src, problems)
    try:
        sf = SweepFile.model_validate(data)
    except ValidationError as e:
        raise_problems(src, pydantic_problems(e, SweepFile))
        raise
    base = dict(sf.scenario) if isinstance(sf.scenario, dict) else {}  # _read_chain resolved a path
    top_level = [k for k in ("policies", "seeds") if getattr(sf, k) is not None]
    for k in top_level:
        base[k] = getattr(sf, k)
    name = sf.name or base.get("name") or slug(p.stem)
    if sf.name is not None and name_problem(sf.name):
        problems.append(Problem(("name",), str(name_problem(sf.name))))
        name = slug(sf.name)
    base.setdefault("name", name)

    def relocate(probs: list[Problem]) -> list[Problem]:
        for pr in probs:
            if not (pr.path and pr.path[0] in top_level):
                pr.path = ("scenario",) + tuple(pr.path)
        return probs

    base_sc, base_problems = validate_scenario(base, str(p), base_dir, runnable=not axes_given(sf))
    problems += relocate(base_problems)

    axes: list[list[tuple[tuple[str, Any], ...]]] = []
    fields: list[str] = []
    for key, values in sf.grid.items():
        if not _grid_key_ok(key, values, ("grid", key), fields, problems):
            continue
        fields.append(key)
        axes.append([((key, v),) for v in values])
    for gi, group in enumerate(sf.zip):
        lengths = {k: len(v) for k, v in group.items()}
        if not group:
            problems.append(Problem(("zip", gi), "expected a mapping of field → list of values, found an empty one"))
            continue
        if len(set(lengths.values())) > 1:
            problems.append(Problem(("zip", gi), f"expected lists of equal length, found lengths "
                                    f"{', '.join(f'{k}: {n}' for k, n in lengths.items())}"))
            continue
        ok = all(_grid_key_ok(k, v, ("zip", gi, k), fields, problems) for k, v in group.items())
        if ok:
            fields.extend(group)
            n = next(iter(lengths.values()))
            axes.append([tuple((k, group[k][i]) for k in group) for i in range(n)])

    # Every value on its own against the base scenario: mistakes name the grid entry that holds them.
    if base_sc is not None:
        for key, values in sf.grid.items():
            if key in fields:
                for i, v in enumerate(values):
                    problems += _value_problems(base, key, v, str(p), base_dir, ("grid", key, i))
        for gi, group in enumerate(sf.zip):
            for key, values in group.items():
                if key in fields:
                    for i, v in enumerate(values):
                        problems += _value_problems(base, key, v, str(p), base_dir, ("zip", gi, key, i))
    raise_problems(src, problems, f"sweep {p}")
    assert base_sc is not None
    n_runs = len(base_sc.policy_specs()) * len(base_sc.seeds)
    for axis in axes:
        n_runs *= len(axis)
    if n_runs > MAX_RUNS:
        sizes = " × ".join(str(len(a)) for a in axes)
        raise_problems(src, [Problem(("grid",), f"expected at most {MAX_RUNS:,} runs, found {n_runs:,} (grid "
                                     f"{sizes} × {len(base_sc.policy_specs())} policies × {len(base_sc.seeds)} "
                                     f"seeds); sweep fewer values")], f"sweep {p}")

    points: list[Point] = []
    for combo in itertools.product(*axes) if axes else [()]:
        pairs = tuple(kv for part in combo for kv in part)
        data_pt = copy.deepcopy(base)
        for k, v in pairs:
            set_path(data_pt, k, v)
        sc, probs = validate_scenario(data_pt, str(p), base_dir)
        if probs:
            where = ", ".join(f"{k}={v!r}" for k, v in pairs)
            problems += [Problem(("grid",), f"the grid point {where} is invalid: {path_str(pr.path)}: {pr.message}")
                         for pr in probs]
        else:
            assert sc is not None
            points.append(Point(pairs, sc))
    raise_problems(src, problems[:20], f"sweep {p}")
    return Sweep(name, str(p), fields, points, base_sc.policy_specs(), base_sc.seeds)


def axes_given(sf: SweepFile) -> bool:
    """Whether the sweep has a grid: then its base scenario need not be runnable on its own, only its points."""
    return bool(sf.grid or sf.zip)


def _grid_key_ok(key: str, values: list[Any], where: tuple, fields: list[str], problems: list[Problem]) -> bool:
    reason = path_problem(key)
    if reason:
        problems.append(Problem(where, f"expected a dotted path to a scenario field; {reason}"))
        return False
    if key in fields:
        problems.append(Problem(where, f"{key!r} is swept twice (in grid and zip, or in two zip groups)"))
        return False
    if not values:
        problems.append(Problem(where, "expected a non-empty list of values, found an empty list"))
        return False
    return True


def _value_problems(base: dict, key: str, value: Any, file: str, base_dir: Path, where: tuple) -> list[Problem]:
    data = copy.deepcopy(base)
    set_path(data, key, value)
    _, probs = validate_scenario(data, file, base_dir, runnable=False)
    out = []
    for pr in probs:  # the base scenario is valid, so every problem here comes from this value
        field = path_str(pr.path)
        out.append(Problem(where, pr.message if field.startswith(key) else f"makes {field} invalid: {pr.message}"))
    return out
