"""Every answer's source and expected error: the kinds each predictor gives, the figures the evaluation measures and
ships, what ``predict show`` and ``predict pareto`` state, ``noisy`` drawing each answer's error from its own."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pandas as pd
import pytest

from experiments.cli import main
from predictors import build
from predictors.evaluation import TRACE_PROTOCOL, Evaluation, crossgpu_errors, evaluate, expected_errors
from predictors.measurements import NO_DEPTH, runs
from predictors.protocols import splits
from predictors.uncertainty.provenance import KINDS, PROTOCOL_OF, expected_error, format_table, shipped_path
from sim.catalogue import configurations, gpu, job_types, select_vm_types, vm_types
from sim.contracts import PREDICTORS, Source
from sim.model import CapsimError, Config, JobSpec, VMType

SHIPPED_KINDS = ("measured", "regression", "analytical", "wave", "hybrid")


def _vm(name: str, n: int) -> VMType:
    return VMType(f"{name}x{n}", gpu(name), n, 0.0)


def test_interval_reads_the_error_back_to_the_actual_time() -> None:
    lo, hi = Source("batch", 0.25).interval(100.0)
    assert lo == pytest.approx(80.0) and hi == pytest.approx(100 / 0.75)
    # every time in the interval is within the error of the answer, relative to itself (the MAPE's definition)
    for t in (lo, hi):
        assert abs(100.0 - t) / t == pytest.approx(0.25)
    assert Source("scaled", 1.2).interval(10.0)[1] == math.inf
    assert all(math.isnan(x) for x in Source("measured").interval(5.0))


@pytest.mark.parametrize("kind", sorted(PREDICTORS.kinds(aliases=False)))
def test_every_predictor_names_a_known_source_and_unsupported_exactly_where_it_has_no_answer(kind: str) -> None:
    p = build(kind, **PREDICTORS.kinds()[kind].test_params)
    specs = list(job_types().values())
    configs = configurations(vm_types().values())
    table = p.runtimes(specs, configs)
    for i, s in enumerate(specs):
        for k, c in enumerate(configs):
            src = p.source(s, c.vm, c.gpus)
            assert src.kind in KINDS, f"{kind}: {src.kind!r}"
            assert (src.kind == "unsupported") == (not np.isfinite(table[i, k])), f"{kind} {s.name} {c.label}"
            assert math.isnan(src.error) or src.error >= 0


def test_measured_says_measured_or_interpolated() -> None:
    m = build("measured")
    spec = JobSpec("resnet50", "pytorch", 6000, 64)
    assert m.source(spec, _vm("M60", 2), 2).kind == "measured"
    assert m.source(dataclasses.replace(spec, batch_size=48), _vm("M60", 2), 2).kind == "interpolated"
    assert m.source(spec, _vm("GTX1080Ti", 8), 3).kind == "interpolated"  # 3 GPUs between the measured 2 and 4
    assert m.source(spec, _vm("H100", 1), 1).kind == "unsupported"


def test_hybrid_says_which_extrapolation_answers() -> None:
    h = build("hybrid")
    spec = JobSpec("resnet50", "pytorch", 6000, 64)
    assert h.source(spec, _vm("M60", 2), 2).kind == "measured"
    assert h.source(spec, _vm("H100", 1), 1).kind == "compute"
    assert h.source(JobSpec("alexnet", "pytorch", 100, 8), _vm("QuadroP600", 8), 8).kind == "gpus"
    assert h.source(JobSpec("resnet", "pytorch", 100, 64, depth=20), _vm("M60", 1), 1).kind == "depth"
    # the stated error is the shipped figure of the hybrid for that kind
    assert h.source(spec, _vm("H100", 1), 1).error == expected_error("hybrid", "compute") > 0.05


def test_cloud_states_its_scaling_error_and_none_for_measured_rates() -> None:
    c = build("cloud")
    spec = JobSpec("resnet50", "pytorch", 1000, 64)
    assert c.source(spec, _vm("V100", 1), 1) == Source("measured")  # Gavel measured ResNet-50 at batch 64 on V100
    scaled = c.source(spec, _vm("H100", 1), 1)
    assert scaled.kind == "scaled" and scaled.error == pytest.approx(crossgpu_errors()["error"])


def test_the_shipped_table_is_complete() -> None:
    table = pd.read_csv(shipped_path())
    for name in SHIPPED_KINDS:
        assert {"measured", "interpolated"} <= set(table[table.predictor == name].source) or name not in (
            "measured", "hybrid")
    regression = set(table[table.predictor == "regression"].source)
    assert {"measured", "interpolated", "batch", "batch_below", "gpus", "compute", "depth"} <= regression
    assert (table["error"] > 0).all() and (table["runs"] >= table["cells"]).all()
    # every kind measured by the protocol that asks it; the trace predictor's count scaling by its own series check
    assert all(PROTOCOL_OF[k] == p or (n.split("(")[0] == "trace" and (k, p) == ("gpus", TRACE_PROTOCOL))
               for n, k, p in zip(table.predictor, table.source, table.protocol))
    trace = table[table.protocol == TRACE_PROTOCOL]
    assert sorted(trace.predictor) == ["trace", "trace(scaling='linear')", "trace(scaling='measured')"]


def test_expected_errors_are_means_over_cells_by_hand() -> None:
    def run(app: str, gpus: int, measured: float, predicted: float, source: str, protocol: str = "batch") -> dict:
        return {"application": app, "framework": "pytorch", "gpu": "M60", "gpus": gpus, "batch_size": 8,
                "iterations": 10, "cpu_threads": 2, "depth": NO_DEPTH, "measured": measured, "protocol": protocol,
                "split": 0, "predictor": "regression", "predicted": predicted, "source": source}

    preds = pd.DataFrame([
        run("alexnet", 1, 100.0, 110.0, "batch"), run("alexnet", 1, 100.0, 130.0, "batch"),  # cell 20 %
        run("alexnet", 2, 100.0, 95.0, "batch"),                                               # cell 5 %
        run("alexnet", 2, 100.0, 300.0, "measured"),          # another kind: not in the batch figure
        run("vgg19", 1, 100.0, 50.0, "batch", protocol="gpus"),  # asked by another protocol: not counted
    ])
    ev = Evaluation(preds, pd.DataFrame(), pd.DataFrame())
    table = expected_errors(ev, crossgpu=False).set_index("source")
    assert table.loc["batch", "error"] == pytest.approx((0.20 + 0.05) / 2)
    assert table.loc["batch", "cells"] == 2 and table.loc["batch", "runs"] == 3
    assert "measured" not in table.index  # asked by the batch protocol, not by interpolation


def test_between_holds_out_configurations_with_measured_neighbours() -> None:
    df = runs().reset_index(drop=True)
    batch_split, count_split = list(splits(df, "between"))
    train = df.iloc[batch_split.train]
    for c in batch_split.cells[:40]:
        _, app, fw, g, n, _ = c.key
        held = df.iloc[c.rows].batch_size.unique()
        seen = train[(train.application == app) & (train.framework == fw) & (train.gpu == g) & (train.gpus == n)
                     & (train.depth == NO_DEPTH)].batch_size
        assert all(seen.min() < b < seen.max() and b not in set(seen) for b in held)
    train = df.iloc[count_split.train]
    for c in count_split.cells:
        _, app, fw, g, n, _ = c.key
        seen = train[(train.application == app) & (train.framework == fw) & (train.gpu == g)
                     & (train.depth == NO_DEPTH)].gpus
        assert seen.min() < n < seen.max() and n not in set(seen)


def _stated(text: str, name: str) -> float:
    line = next(x for x in text.splitlines() if x.strip().startswith(name))
    return float(re.search(r"error (\d+\.\d) %", line).group(1)) / 100


def test_the_evaluation_regenerates_the_figure_show_and_pareto_state(tmp_path, capsys) -> None:
    ev = evaluate(["interpolation"], ["measured"])
    table = expected_errors(ev, crossgpu=False).set_index(["predictor", "source"])
    again = table.loc[("measured", "measured"), "error"]
    shipped = pd.read_csv(shipped_path()).set_index(["predictor", "source"]).loc[("measured", "measured"), "error"]
    assert again == pytest.approx(shipped, rel=1e-9)
    assert main(["predict", "show", "resnet50_pt", "--gpu", "M60", "--gpus", "2", "--batch", "64",
                 "--iterations", "6000", "--predictors", "measured"]) == 0
    assert _stated(capsys.readouterr().out, "measured") == pytest.approx(again, abs=0.0005)
    assert main(["predict", "pareto", "resnet50_pt", "--batch", "64", "--iterations", "6000", "--predictor",
                 "measured", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = [x for x in out.splitlines() if re.match(r"^[* ] NV12\s+2\s", x)]
    assert rows and float(re.search(r"measured \((\d+\.\d) %\)", rows[0]).group(1)) / 100 == pytest.approx(
        again, abs=0.0005)


def test_noisy_draws_each_answer_from_its_expected_error() -> None:
    base = build("hybrid")
    noisy = build("noisy", base={"kind": "hybrid"}, mape="expected", seed=3)
    specs = [JobSpec("resnet50", "pytorch", 1000 + i, 64) for i in range(4000)]
    configs = [Config(_vm("H100", 1), 1), Config(_vm("M60", 2), 2)]
    f = noisy.runtimes(specs, configs) / base.runtimes(specs, configs)
    for k, c in enumerate(configs):
        want = base.source(specs[0], c.vm, c.gpus).error
        assert np.mean(np.abs(f[:, k] - 1)) == pytest.approx(want, rel=0.06), c.label
        assert noisy.source(specs[0], c.vm, c.gpus) == base.source(specs[0], c.vm, c.gpus)
    # where the base states no error (a measured throughput), the answer is left exact
    exact = build("noisy", base={"kind": "cloud"}, mape="expected")
    v100 = _vm("V100", 1)
    spec = JobSpec("resnet50", "pytorch", 1000, 64)
    assert exact.runtime(spec, v100, 1) == build("cloud").runtime(spec, v100, 1)
    with pytest.raises(CapsimError, match="mape must be a finite number .*or .expected."):
        build("noisy", base={"kind": "measured"}, mape="typical")


def test_a_runs_job_records_keep_the_estimators_source(tmp_path) -> None:
    from optim.baselines import FIFO
    from sim.cluster import Cluster, NodeSlot
    from sim.engine import Simulation
    from sim.model import Job

    types = select_vm_types(provider="aws", gpu=["V100", "T4"])
    spec = JobSpec("resnet50", "pytorch", 2000, 64, name="r")
    jobs = [Job(i, spec, 10.0 * i, 1e6, 0.01) for i in range(3)]
    est = build("hybrid")
    res = Simulation(Cluster(types, (NodeSlot(), NodeSlot())), jobs, FIFO(), est).run()
    for r in res.jobs.itertuples():
        vm = next(v for v in types if v.name == r.vm_type)
        src = est.source(spec, vm, r.gpus)
        assert (r.est_source, r.est_error) == (src.kind, src.error) and r.est_source == "compute"


def test_docs_state_the_shipped_figures() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "predictors.md").read_text(encoding="utf-8")
    assert format_table(pd.read_csv(shipped_path())) in text
