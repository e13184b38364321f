"""``experiments.api``: the README's example runs and gives what ``capsim run`` gives; loading, overrides, tidy
results and figures drawn onto a caller's axes."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from experiments import api  # noqa: E402
from experiments.cli import main  # noqa: E402
from experiments.results.tables import policy_means  # noqa: E402
from experiments.scenario.sweep import Sweep  # noqa: E402
from sim.metrics import HEADLINE, METRICS  # noqa: E402
from sim.model import CapsimError  # noqa: E402

from .conftest import small_scenario, write_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"## From Python\n.*?```python\n(.*?)```", text, re.S)
    assert m, "README lost its Python example"
    return m.group(1)


def test_readme_example_gives_the_totals_of_capsim_run(tmp_path: Path, monkeypatch, capsys) -> None:
    pytest.importorskip("predictors.measured")
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    try:
        exec(compile(readme_example(), "README.md", "exec"), ns)
    finally:
        plt.close("all")
    runs, totals = ns["runs"], ns["totals"]
    assert list(totals["policy"]) == ["edf", "greedy"] and set(totals["seeds"]) == {2}
    assert (tmp_path / "results" / "notebook" / "manifest.json").is_file()
    assert len(ns["long"]) == len(runs.summary) * sum(m in runs.summary.columns for m in METRICS)
    assert ns["fig"].get_size_inches()[0] == pytest.approx(3.3)

    # the same experiment through the command line: a scenario file with the same field changed
    default = (ROOT / "experiments" / "scenario" / "default.yaml").read_text(encoding="utf-8")
    yaml_text = default.replace("  jobs: 50\n", "  jobs: 20\n")
    assert yaml_text != default
    scenario = tmp_path / "twenty.yaml"
    scenario.write_text(yaml_text, encoding="utf-8")
    capsys.readouterr()
    assert main(["run", str(scenario), "--policies", "edf,greedy", "--seeds", "0,1", "--out", str(tmp_path / "cli"),
                 "--workers", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert policy_means(runs.summary, ["edf", "greedy"]) in printed
    cli = api.read(tmp_path / "cli")
    assert sorted(cli.summary["run_id"]) == sorted(runs.summary["run_id"])
    expected = cli.summary.groupby("policy", sort=False)[list(HEADLINE)].mean()
    got = totals.set_index("policy")[list(HEADLINE)]
    pd.testing.assert_frame_equal(got, expected.loc[got.index], check_exact=True, check_names=False)


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("api")
    base = small_scenario()
    return write_yaml(d / "s.yaml", {"scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds")},
                                     "policies": base["policies"], "seeds": [0, 1],
                                     "grid": {"workload.mean_interarrival": [30, 90]}})


@pytest.fixture(scope="module")
def sweep_runs(sweep_file: Path) -> api.Runs:
    return api.run(sweep_file, overrides={"workload.jobs": 4})


def test_a_sweep_with_an_override(sweep_runs: api.Runs) -> None:
    s = sweep_runs.summary
    assert sweep_runs.fields == ["workload.mean_interarrival"] and sweep_runs.policies == ["fifo", "edf"]
    assert len(s) == 2 * 2 * 2 and set(s["jobs"]) == {4.0}
    assert set(sweep_runs.jobs.groupby("run_id").size()) == {4}
    for name in ("nodes", "decisions", "segments"):
        assert set(getattr(sweep_runs, name)["run_id"]) == set(s["run_id"])
    rep = sweep_runs.report(["total_cost"])
    assert list(rep.columns[:3]) == ["workload.mean_interarrival", "policy", "n"] and set(rep["n"]) == {2}
    assert len(sweep_runs.totals()) == 4


def test_load_tells_scenario_from_sweep_and_checks_overrides(sweep_file: Path, tmp_path: Path) -> None:
    assert isinstance(api.load(sweep_file), Sweep)
    sc = api.load(write_yaml(tmp_path / "sc.yaml", small_scenario()), {"cluster.nodes": 1})
    assert sc.cluster.node_count == 1 and sc.n_jobs == 6
    with pytest.raises(CapsimError, match="swept by the grid"):
        api.load(sweep_file, {"workload.mean_interarrival": 10})
    with pytest.raises(CapsimError, match="did you mean 'jobs'"):
        api.load(sweep_file, {"workload.jobz": 3})
    with pytest.raises(CapsimError, match=r"workload\.jobs: expected a number > 0"):
        api.load(tmp_path / "sc.yaml", {"workload.jobs": -1})
    with pytest.raises(CapsimError, match="unknown policy 'nope'"):
        api.run(tmp_path / "sc.yaml", policies=["nope"])


def test_run_into_a_folder_resumes_and_reads_back(tmp_path: Path) -> None:
    f = write_yaml(tmp_path / "sc.yaml", small_scenario())
    first = api.run(f, policies="edf", seeds="0-1", out=tmp_path / "out")
    stamps = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out" / "summary").iterdir()}
    again = api.run(f, policies=["edf"], seeds=[0, 1], out=tmp_path / "out")
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out" / "summary").iterdir()} == stamps
    pd.testing.assert_frame_equal(first.summary, again.summary)
    long = api.tidy(tmp_path / "out")
    one = long[(long["metric"] == "total_cost") & (long["seed"] == 1)]
    assert one["value"].iloc[0] == first.summary.set_index("seed").loc[1, "total_cost"]
    assert one["label"].iloc[0] == "total cost ($)"


def test_figures_whole_or_one_panel_on_given_axes(sweep_runs: api.Runs) -> None:
    fig = sweep_runs.plot("pareto", width="page")
    assert fig.get_size_inches()[0] == pytest.approx(6.9) and len(fig.axes) == 2
    _, ax = plt.subplots()
    try:
        assert sweep_runs.plot("pareto", ax=ax, where={"workload.mean_interarrival": 90}) is ax
        assert ax.get_title() == "mean inter-arrival = 90 s" and ax.get_xlabel() == "VM cost ($)"
        assert ax.collections and ax.get_legend() is not None
        ax.clear()
        sweep_runs.plot("cost_breakdown", ax=ax, where={"metric": "vm_cost"})
        assert ax.get_ylabel() == "VM cost ($)"
        ax.clear()
        sweep_runs.plot("timeline", ax=ax)
        assert ax.patches
        with pytest.raises(CapsimError, match="3 panels match"):
            sweep_runs.plot("cost_breakdown", ax=ax)
        with pytest.raises(CapsimError, match="no panel matches"):
            sweep_runs.plot("pareto", ax=ax, where={"workload.mean_interarrival": 7})
        with pytest.raises(CapsimError, match="unknown figure 'pie'"):
            sweep_runs.plot("pie")
    finally:
        plt.close("all")
    metric_fig = sweep_runs.plot("metric", metrics=["mean_wait"])
    assert metric_fig.axes[0].get_ylabel() == "mean wait (s)"
