"""ElasticFlow's trace format on slices of the shipped traces: arrivals, GPU counts, iterations and deadlines as the
file gives them (checked by hand against the files), weights from the scenario, the elastic option, bad files."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml

from sim.catalogue import configurations, vm_types
from sim.contracts import Predictor
from sim.model import CapsimError, JobSpec, VMType
from sim.traces import read_trace
from sim.workload import trace_jobs

# three paper VM types, each also as a gang of up to 64 GPUs (a trace job runs only with the count it asks for)
CONFIGS = configurations(tuple(vm_types().values())[:3], {v.name: 64 for v in tuple(vm_types().values())[:3]})
SHIPPED = resources.files("sim").joinpath("data", "elasticflow")


def _file(name: str) -> Path:
    return Path(str(SHIPPED.joinpath(f"{name}.csv")))


class _AnyJob(Predictor):
    """A truth for any model: 10 ms per iteration over the GPU count."""

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return 0.01 * spec.iterations / gpus


def _jobs(name: str, seed: int = 0, weight_range: tuple[float, float] = (0.003, 0.015), **options):
    path = _file(name)
    return trace_jobs(read_trace(path, "elasticflow", **options), _AnyJob(), CONFIGS, seed, str(path),
                      weight_range=weight_range)


def test_a_slice_keeps_arrivals_gpu_counts_iterations_and_deadlines() -> None:
    jobs = _jobs("195job", limit=4)
    assert [j.id for j in jobs] == [0, 1, 2, 3]
    assert [j.submit_time for j in jobs] == [3715485.0, 3717550.0, 3721209.0, 3721260.0]
    assert [j.deadline for j in jobs] == [3716178.0, 3720405.0, 3729427.0, 3735194.0]
    assert [j.spec.gpus for j in jobs] == [1, 8, 1, 1]
    assert [j.spec.application for j in jobs] == ["deepspeech2", "inception3", "deepspeech2", "inception3"]
    assert [j.spec.iterations for j in jobs] == [3249, 48266, 24851, 75043]
    assert [j.spec.batch_size for j in jobs] == [32, 64, 64, 64]
    assert {j.spec.framework for j in jobs} == {"pytorch"}
    assert jobs[0].spec.name == "bdd640fb-0667-1ad1-1c80-317fa3b1799d"


def test_a_job_of_64_gpus_keeps_its_gang() -> None:
    (j,) = _jobs("cluster01", limit=1)
    assert (j.submit_time, j.deadline, j.spec.gpus, j.spec.application, j.spec.iterations, j.spec.batch_size) == \
        (1932025.0, 1933904.0, 64, "resnet50", 45775, 256)


def test_weights_come_from_the_scenario() -> None:
    assert {j.weight for j in _jobs("195job", limit=20, weight_range=(0.02, 0.02))} == {0.02}
    drawn = [j.weight for j in _jobs("195job", limit=20, weight_range=(0.01, 0.03))]
    assert all(0.01 <= w <= 0.03 for w in drawn) and len(set(drawn)) == 20
    assert drawn == [j.weight for j in _jobs("195job", limit=20, weight_range=(0.01, 0.03))], "same seed, same jobs"
    assert drawn != [j.weight for j in _jobs("195job", seed=1, limit=20, weight_range=(0.01, 0.03))]


def test_elastic_leaves_the_gpu_count_to_the_policy_and_keeps_the_request() -> None:
    table = read_trace(_file("195job"), "elasticflow", limit=2, elastic=True)
    assert list(table.requested_gpus) == [1, 8] and table.gpus.isna().all()
    assert [j.spec.gpus for j in _jobs("195job", limit=2, elastic=True)] == [None, None]
    fixed = read_trace(_file("195job"), "elasticflow", limit=2)
    assert list(fixed.gpus) == [1, 8] and list(fixed.duration) == [1075, 3604]


def test_the_shipped_traces_are_whole() -> None:
    for name, n in (("195job", 195), ("cluster01", 1595), ("cluster04", 15802)):
        t = read_trace(_file(name), "elasticflow")
        assert len(t) == n, name
        assert t.submit_time.is_monotonic_increasing and (t.deadline >= t.submit_time).all()
        assert set(t.gpus) <= {1, 2, 4, 8, 16, 32, 64} and t.gpus.max() == (16 if name == "195job" else 64)
    c4 = read_trace(_file("cluster04"), "elasticflow")
    assert ((c4.gpus == 1).sum(), (c4.gpus == 8).sum()) == (11924, 2779)  # as the data README counts them


def test_bad_files_and_options_are_clear_errors(tmp_path: Path) -> None:
    head = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
    bad = tmp_path / "bad.csv"
    bad.write_text(head + "a,10,100,bert,20,64,1,5\nb,11,100,bert,30,64,0,5\n")
    with pytest.raises(CapsimError, match=r"bad\.csv: row 2, column 'gpus': expected an integer >= 1, found 0"):
        trace_jobs(read_trace(bad, "elasticflow"), _AnyJob(), CONFIGS, 0, str(bad))
    early = tmp_path / "early.csv"
    early.write_text(head + "a,10,100,bert,5,64,1,5\n")
    with pytest.raises(CapsimError, match=r"early\.csv: row 1, column 'deadline': expected a finite number >= 10"):
        trace_jobs(read_trace(early, "elasticflow"), _AnyJob(), CONFIGS, 0, str(early))
    short = tmp_path / "short.csv"
    short.write_text("job_id,submission_time,num_iteration\na,1,2\n")
    with pytest.raises(CapsimError, match=r"short\.csv: missing column\(s\) \['model_name', 'batch_size', 'num_gpu', "
                                          r"'deadline'\]; an ElasticFlow trace has"):
        read_trace(short, "elasticflow")
    for opts, what in (({"limit": 0}, "limit must be a whole number >= 1"), ({"elastic": "yes"}, "elastic must be"),
                       ({"framework": "jax"}, "framework must be 'pytorch' or 'tensorflow'")):
        with pytest.raises(CapsimError, match=f"trace format 'elasticflow': {what}"):
            read_trace(bad, "elasticflow", **opts)


def test_a_scenario_replays_a_slice_with_a_fixed_weight(tmp_path: Path) -> None:
    from experiments.scenario import PolicySpec, validate_scenario
    from experiments.scenario.loading import read_yaml

    def load_scenario(path: Path):
        """The scenario, its trace checked; whether its jobs can run is not (no shipped predictor knows them yet)."""
        src = read_yaml(path)
        sc, problems = validate_scenario(src.data, str(path), path.parent, runnable=False)
        if problems:
            raise CapsimError("; ".join(f"{'.'.join(map(str, q.path))}: {q.message}" for q in problems))
        return sc

    trace = {"path": str(_file("195job")), "format": "elasticflow", "limit": 3}
    data = {"name": "ef", "cluster": {"nodes": 1, "vm_types": ["NC6"]},
            "workload": {"trace": trace, "weight_range": [0.05, 0.05]},
            "predictor": {"kind": "table", "table": {"J1/NC6/1": 100.0}}, "policies": [{"kind": "fifo"}]}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    sc = load_scenario(p)
    jobs = sc.build_jobs(0, _AnyJob(), CONFIGS)
    assert [(j.submit_time, j.deadline, j.spec.gpus, j.weight) for j in jobs] == \
        [(3715485.0, 3716178.0, 1, 0.05), (3717550.0, 3720405.0, 8, 0.05), (3721209.0, 3729427.0, 1, 0.05)]
    fifo = PolicySpec(kind="fifo")
    p.write_text(yaml.safe_dump({**data, "workload": {**data["workload"], "trace": {**trace, "limit": 4}}}))
    assert load_scenario(p).run_id(fifo, 0) != sc.run_id(fifo, 0), "the slice is part of the configuration"
    p.write_text(yaml.safe_dump({**data, "workload": {**data["workload"], "trace": {**trace, "limit": -1}}}))
    with pytest.raises(CapsimError, match=r"workload\.trace.*limit must be a whole number >= 1"):
        load_scenario(p)
