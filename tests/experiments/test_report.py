"""``capsim report``: honest intervals (method named, clipped to the metric's domain, seeded bootstrap), the runs
behind every cell, a warning when they are few, readable grid headers, late jobs with their denominator, and the
four output formats."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments.cli import main
from experiments.results.intervals import FEW_RUNS, interval
from experiments.results.labels import field_equals, field_label, field_value
from experiments.results.reading import read_results
from experiments.results.report import aggregate, notes, render

from .conftest import small_scenario, write_yaml


def summary(n: int = 3, jobs: tuple[int, ...] = (24, 24), field: str = "workload.mean_interarrival") -> pd.DataFrame:
    """A hand-made summary: two grid points × two policies × ``n`` seeds, costs that cannot be negative."""
    rng = np.random.default_rng(1)
    rows = []
    for point, n_jobs in zip((30, 60), jobs):
        for policy in ("fifo", "milp"):
            for seed in range(n):
                late = float(rng.integers(0, n_jobs))
                rows.append({"run_id": f"{point}{policy}{seed}", field: point, "policy": policy, "seed": seed,
                             "total_cost": float(rng.exponential(20)), "late_jobs": late, "jobs": float(n_jobs),
                             "gpu_utilisation": float(rng.uniform(0.9, 1.0))})
    return pd.DataFrame(rows)


# ----- intervals --------------------------------------------------------------------------------------------------


def test_t_interval_by_hand_and_clipped_to_the_domain() -> None:
    lo, hi = interval([1.0, 2.0, 3.0], "t")
    half = stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert (lo, hi) == pytest.approx((2 - half, 2 + half))
    assert lo < 0
    assert interval([1.0, 2.0, 3.0], "t", lower=0.0) == pytest.approx((0.0, 2 + half))
    assert interval([0.97, 0.99, 1.0], "t", 0.0, 1.0)[1] == 1.0


def test_bootstrap_is_seeded_and_inside_the_data() -> None:
    v = [3.0, 10.0, 4.0, 8.0, 1.0, 7.0]
    a, b = interval(v, "bootstrap"), interval(v, "bootstrap")
    assert a == b
    assert min(v) <= a[0] < np.mean(v) < a[1] <= max(v)
    assert a[1] - a[0] < np.subtract(*interval(v, "t")[::-1])  # narrower than t with few runs: why we warn


def test_no_interval_from_one_run_and_unknown_method() -> None:
    assert all(math.isnan(x) for x in interval([5.0], "t"))
    assert all(math.isnan(x) for x in interval([5.0, float("nan")], "bootstrap"))
    with pytest.raises(ValueError, match="unknown interval method"):
        interval([1.0, 2.0], "wald")


def test_aggregate_counts_runs_per_cell_and_clips() -> None:
    s = summary()
    s.loc[0, "total_cost"] = float("nan")
    agg = aggregate(s, ["workload.mean_interarrival"], ["total_cost", "gpu_utilisation"], ["milp", "fifo"])
    assert list(agg["policy"][:2]) == ["milp", "fifo"] and set(agg["n"]) == {3}
    first = agg[(agg["policy"] == "fifo") & (agg["workload.mean_interarrival"] == 30)].iloc[0]
    assert first["total_cost_n"] == 2 and first["gpu_utilisation_n"] == 3
    assert (agg["total_cost_lo"] >= 0).all() and (agg["gpu_utilisation_hi"] <= 1).all()
    g = s[(s["policy"] == "milp") & (s["workload.mean_interarrival"] == 60)]["total_cost"]
    row = agg[(agg["policy"] == "milp") & (agg["workload.mean_interarrival"] == 60)].iloc[0]
    half = stats.t.ppf(0.975, 2) * g.std(ddof=1) / math.sqrt(3)
    assert row["total_cost_hi"] == pytest.approx(g.mean() + half)
    assert row["total_cost_lo"] == pytest.approx(max(0.0, g.mean() - half))


# ----- rendering --------------------------------------------------------------------------------------------------


def test_table_names_method_runs_and_warns_when_few() -> None:
    fields = ["workload.mean_interarrival"]
    few = render(aggregate(summary(3), fields, ["total_cost", "late_jobs"]), fields, ["total_cost", "late_jobs"])
    head = few.splitlines()[0]
    assert head.split()[:5] == ["mean", "inter-arrival", "(s)", "policy", "runs"]
    assert "late jobs (of 24)" in head
    assert "95% t-interval" in few and "clipped" in few
    assert "warning: only 3 runs behind some cells" in few
    enough = aggregate(summary(FEW_RUNS), fields, ["total_cost"], method="bootstrap")
    text = render(enough, fields, ["total_cost"])
    assert "warning" not in text and "bootstrap" in text
    cell = text.splitlines()[2].split()
    assert cell[0] == "30" and cell[2] == str(FEW_RUNS) and cell[4].startswith("[")  # 30 · fifo · 5 · mean [lo, hi]


def test_rows_whose_runs_a_wall_clock_limit_stopped_are_named() -> None:
    s = summary(n=3)
    s["deterministic"] = 1.0
    s.loc[(s["workload.mean_interarrival"] == 60) & (s["policy"] == "milp") & (s["seed"] == 1), "deterministic"] = 0.0
    s.loc[(s["workload.mean_interarrival"] == 30) & (s["policy"] == "fifo"), "deterministic"] = 0.0
    agg = aggregate(s, ["workload.mean_interarrival"], ["total_cost"])
    told = [t for t in notes(agg, ["total_cost"]) if "wall-clock" in t]
    assert len(told) == 1
    assert "60, milp (1 of 3 runs mixed with deterministic ones)" in told[0]
    assert "30, fifo (3 of 3 runs)" in told[0]
    assert "30, milp" not in told[0] and "60, fifo" not in told[0]
    assert told[0] in render(agg, ["workload.mean_interarrival"], ["total_cost"], "table")
    s["deterministic"] = 1.0
    agg = aggregate(s, ["workload.mean_interarrival"], ["total_cost"])
    assert not [t for t in notes(agg, ["total_cost"]) if "wall-clock" in t]


def test_late_jobs_denominator_varies_by_row() -> None:
    fields = ["workload.mean_interarrival"]
    agg = aggregate(summary(3, jobs=(20, 50)), fields, ["late_jobs"])
    text = render(agg, fields, ["late_jobs"])
    head = text.splitlines()[0]
    assert "late jobs (of N)" in head and " N " in head and "N: jobs per run" in text
    rows = text.splitlines()[2:6]
    assert [r.split()[3] for r in rows] == ["20", "20", "50", "50"]


def test_a_cell_with_fewer_runs_says_how_many() -> None:
    s = summary(3)
    s.loc[0, "total_cost"] = float("nan")
    agg = aggregate(s, ["workload.mean_interarrival"], ["total_cost"])
    assert render(agg, ["workload.mean_interarrival"], ["total_cost"]).count("(n=2)") == 1
    assert "warning: only 2 runs" in "\n".join(notes(agg, ["total_cost"]))
    pooled = aggregate(s, [], ["total_cost"])  # 6 runs per policy, one without a value: 5 are enough
    assert not any(n.startswith("warning") for n in notes(pooled, ["total_cost"]))


def test_latex_names_its_packages_and_escapes() -> None:
    fields = ["workload.mean_interarrival"]
    text = render(aggregate(summary(), fields, ["total_cost"]), fields, ["total_cost"], "latex")
    lines = text.splitlines()
    assert lines[0].startswith("%") and r"\usepackage{booktabs}" in lines[0]
    assert any(line.startswith("% warning") for line in lines)
    body = lines[lines.index(r"\toprule"):]
    assert r"total cost (\$)" in body[1] and body[-1] == r"\end{tabular}" and r"\bottomrule" in body
    assert all(not line.startswith("%") for line in body)


def test_markdown_and_csv() -> None:
    fields = ["workload.mean_interarrival"]
    agg = aggregate(summary(), fields, ["total_cost"], method="bootstrap")
    md = render(agg, fields, ["total_cost"], "markdown").splitlines()
    assert md[1] == "|---|---|---:|---:|" and "bootstrap" in md[-2]
    df = pd.read_csv(io.StringIO(render(agg, fields, ["total_cost"], "csv")))
    assert list(df.columns) == fields + ["policy", "n", "jobs", "total_cost_mean", "total_cost_lo", "total_cost_hi",
                                         "interval"]
    assert set(df["interval"]) == {"bootstrap"} and (df["total_cost_lo"] <= df["total_cost_mean"]).all()


def test_grid_field_labels() -> None:
    assert field_label("workload.mean_interarrival") == "mean inter-arrival (s)"
    assert field_label("cluster.nodes") == "node slots"
    assert field_label("workload.something_new") == "workload.something_new"
    assert field_value("workload.mean_interarrival", 30.0) == "30 s"
    assert field_value("workload.mean_interarrival", 30.0, unit=False) == "30"
    assert field_value("workload.deadline_factor", "[1,3]") == "1–3"
    assert field_value("estimator.mape", 0.25) == "0.25"
    assert field_equals("cluster.nodes", 5) == "node slots = 5"


# ----- the command ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep_out(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("report")
    base = small_scenario()
    f = write_yaml(d / "s.yaml", {"scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds")},
                                  "policies": base["policies"], "seeds": [0, 1],
                                  "grid": {"workload.mean_interarrival": [30, 90]}})
    assert main(["sweep", str(f), "--out", str(d / "out"), "--workers", "1", "--quiet"]) == 0
    return d / "out"


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown", "latex"])
def test_report_formats(sweep_out: Path, capsys, fmt: str) -> None:
    capsys.readouterr()
    assert main(["report", str(sweep_out), "--format", fmt]) == 0
    out, err = capsys.readouterr()
    assert "fifo" in out and "edf" in out
    if fmt == "csv":
        df = pd.read_csv(io.StringIO(out))
        assert len(df) == 4 and {"total_cost_mean", "total_cost_lo", "total_cost_hi", "n"} <= set(df.columns)
        s = read_results(sweep_out).tables["summary"]
        g = s[(s.policy == "fifo") & (s["workload.mean_interarrival"] == 30)].total_cost
        row = df[(df.policy == "fifo") & (df["workload.mean_interarrival"] == 30)].iloc[0]
        half = stats.t.ppf(0.975, 1) * g.std(ddof=1) / 2 ** 0.5
        assert row.total_cost_mean == pytest.approx(g.mean(), rel=1e-5)
        assert row.total_cost_hi == pytest.approx(g.mean() + half, rel=1e-5)
        assert row.total_cost_lo == pytest.approx(max(0.0, g.mean() - half), rel=1e-5, abs=1e-9)
        assert "warning: only 2 runs" in err  # CSV stays machine-readable; the warning goes to stderr
    else:
        assert "only 2 runs" in out and "t-interval" in out and "mean inter-arrival (s)" in out
    if fmt == "latex":
        assert out.startswith("% capsim report: needs \\usepackage{booktabs}") and r"\bottomrule" in out


def test_report_bootstrap_to_a_file(sweep_out: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "t.tex"
    assert main(["report", str(sweep_out), "--interval", "bootstrap", "--format", "latex", "-o", str(target)]) == 0
    text = target.read_text()
    assert "bootstrap" in text and text.endswith("\\end{tabular}\n")
