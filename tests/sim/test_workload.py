"""Workload generation: reproducible, independent streams, deadlines in range, clear errors on bad traces."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from predictors.table import TablePredictor
from sim.catalogue import configurations, job_types, vm_types
from sim.model import CapsimError
from sim.streams import streams
from sim.workload import WorkloadSpec, poisson_jobs, trace_jobs

VTS = tuple(vm_types().values())
CONFIGS = configurations(VTS)
PRED = TablePredictor({f"J{i}/{v.name}/{g}": 100.0 * i / g for i in range(1, 7) for v in VTS
                       for g in range(1, v.gpus + 1)})
T_MIN = {f"J{i}": 100.0 * i / 8 for i in range(1, 7)}


def test_same_seed_same_jobs_and_other_seed_differs():
    spec = WorkloadSpec(50, 30.0)
    assert poisson_jobs(spec, PRED, CONFIGS, 3) == poisson_jobs(spec, PRED, CONFIGS, 3)
    assert poisson_jobs(spec, PRED, CONFIGS, 3) != poisson_jobs(spec, PRED, CONFIGS, 4)


def test_streams_are_independent_of_the_mix():
    jt = job_types()
    a = poisson_jobs(WorkloadSpec(40, 30.0), PRED, CONFIGS, 1)
    b = poisson_jobs(WorkloadSpec(40, 30.0, mix=((jt["J1"], 1.0), (jt["J4"], 3.0))), PRED, CONFIGS, 1)
    assert [j.submit_time for j in a] == [j.submit_time for j in b]
    assert [j.weight for j in a] == [j.weight for j in b]
    assert {j.spec.name for j in b} == {"J1", "J4"}
    assert set(streams(0)) == {"arrivals", "mix", "deadlines", "weights", "noise", "spot"}


def test_deadlines_weights_and_arrivals_in_range():
    jobs = poisson_jobs(WorkloadSpec(500, 30.0, start_time=100.0), PRED, CONFIGS, 0)
    assert [j.id for j in jobs] == list(range(500))
    submit = np.array([j.submit_time for j in jobs])
    assert (np.diff(submit) >= 0).all() and submit[0] > 100.0
    assert np.mean(np.diff(submit)) == pytest.approx(30.0, rel=0.15)
    for j in jobs:
        t = T_MIN[j.spec.name]
        assert j.submit_time + t <= j.deadline <= j.submit_time + 3 * t
        assert 0.003 <= j.weight <= 0.015


def test_spec_with_no_feasible_config_is_named():
    bad = TablePredictor({k: v for k, v in PRED.table.items() if not k.startswith("J2/")})
    with pytest.raises(CapsimError, match="job spec 'J2'.*no feasible configuration"):
        poisson_jobs(WorkloadSpec(10, 30.0), bad, CONFIGS, 0)


def test_bad_workload_parameters():
    with pytest.raises(CapsimError, match="mean_interarrival"):
        WorkloadSpec(10, 0.0)
    with pytest.raises(CapsimError, match="deadline_factor"):
        WorkloadSpec(10, 1.0, deadline_factor=(3.0, 1.0))


def trace(**cols):
    base = {"submit_time": [5.0, 0.0], "application": ["alexnet", "vgg19"], "framework": ["pytorch", "pytorch"],
            "iterations": [6094, 4063], "batch_size": [256, 32], "name": ["J4", "J2"]}
    base.update(cols)
    return pd.DataFrame(base)


def test_trace_sorted_given_and_drawn_deadlines():
    jobs = trace_jobs(trace(deadline=[500.0, None], weight=[0.5, None]), PRED, CONFIGS, 0, "t.csv")
    assert [(j.id, j.spec.name, j.submit_time) for j in jobs] == [(0, "J2", 0.0), (1, "J4", 5.0)]
    assert (jobs[1].deadline, jobs[1].weight) == (500.0, 0.5)
    assert T_MIN["J2"] <= jobs[0].deadline <= 3 * T_MIN["J2"] and 0.003 <= jobs[0].weight <= 0.015
    assert jobs == trace_jobs(trace(deadline=[500.0, None], weight=[0.5, None]), PRED, CONFIGS, 0, "t.csv")


@pytest.mark.parametrize("cols, where", [
    ({"iterations": [6094, "many"]}, "row 2, column 'iterations'"),
    ({"batch_size": [256, -1]}, "row 2, column 'batch_size'"),
    ({"submit_time": [math.nan, 0.0]}, "row 1, column 'submit_time'"),
    ({"framework": ["jax", "pytorch"]}, "row 1, column 'framework'"),
    ({"deadline": [1.0, None]}, "row 1, column 'deadline'"),
    ({"weight": [None, -0.1]}, "row 2, column 'weight'"),
])
def test_trace_mistakes_name_file_row_column(cols, where):
    with pytest.raises(CapsimError, match=f"jobs.csv: {where}"):
        trace_jobs(trace(**cols), PRED, CONFIGS, 0, "jobs.csv")


def test_trace_missing_column_and_unknown_spec():
    with pytest.raises(CapsimError, match="jobs.csv: missing column.*batch_size"):
        trace_jobs(trace().drop(columns="batch_size"), PRED, CONFIGS, 0, "jobs.csv")
    with pytest.raises(CapsimError, match="jobs.csv: job spec 'J9'"):
        trace_jobs(trace(name=["J4", "J9"]), PRED, CONFIGS, 0, "jobs.csv")


def test_trace_draws_missing_deadlines_and_weights_with_the_given_ranges():
    jobs = trace_jobs(trace(), PRED, CONFIGS, 0, "t.csv", deadline_factor=(2.0, 2.0), weight_range=(0.1, 0.1))
    for j in jobs:
        assert j.deadline == pytest.approx(j.submit_time + 2.0 * T_MIN[j.spec.name])
        assert j.weight == pytest.approx(0.1)


def test_trace_gpus_and_priority_columns():
    rows = pd.DataFrame({"submit_time": [0, 5, 9], "application": ["alexnet"] * 3, "framework": ["pytorch"] * 3,
                         "iterations": [100] * 3, "batch_size": [32] * 3, "name": ["J1", "J2", "J3"],
                         "gpus": [2, None, 4], "priority": [5, None, 1.5]})
    jobs = trace_jobs(rows, PRED, CONFIGS, 0, "t.csv")
    assert [j.spec.gpus for j in jobs] == [2, None, 4]
    assert [j.priority for j in jobs] == [5.0, 1.0, 1.5]
    # a job that asks for 4 GPUs has its deadline from its fastest 4-GPU configuration (J3: 300 s / 4)
    assert jobs[2].deadline - jobs[2].submit_time <= 3.0 * 300.0 / 4 + 1e-9
    for column, value, expected in (("gpus", 0, "an integer >= 1"), ("gpus", 1.5, "an integer >= 1"),
                                    ("priority", 0, "a finite number > 0"), ("priority", "x", "a finite number")):
        bad = rows.copy()
        bad[column] = bad[column].astype(object)
        bad.loc[1, column] = value
        with pytest.raises(CapsimError, match=f"t.csv: row 2, column '{column}': expected {expected}"):
            trace_jobs(bad, PRED, CONFIGS, 0, "t.csv")
    too_many = rows.assign(gpus=[2, None, 16])
    with pytest.raises(CapsimError, match="'J3'.*16 GPUs\\) has no feasible configuration"):
        trace_jobs(too_many, PRED, CONFIGS, 0, "t.csv")
