"""Flags are as good as files (issue 20): a misspelt policy, predictor, protocol, figure or metric name in any
command's flags gets a did-you-mean on stderr and nothing on stdout; a bad MILP fallback names `fallback` and its
line; a trace missing a column names the file as the scenario gives it and every optional column."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cli import main
from experiments.scenario import load_scenario
from sim.model import CapsimError
from sim.traces import COLUMNS, REQUIRED

from .conftest import small_scenario, write_yaml


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("flags")
    sc = small_scenario(policies=[{"kind": "edf"}], seeds=[0])
    assert main(["run", str(write_yaml(d / "s.yaml", sc)), "--out", str(d / "out"), "--quiet", "--workers", "1"]) == 0
    return d / "out"


def _refused(argv: list[str], capsys) -> str:
    """Run the command line; it must exit 2 with nothing on stdout; return stderr."""
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "", f"an error must leave stdout empty, found {captured.out!r}"
    return captured.err


SHOW = ["predict", "show", "resnet50_pt", "--gpu", "V100", "--batch", "32", "--iterations", "100"]


@pytest.mark.parametrize("argv, hint", [
    (SHOW + ["--predictors", "clould"], "--predictors: unknown predictor 'clould'; did you mean 'cloud'?"),
    (SHOW + ["--predictors", "measured,clould"], "did you mean 'cloud'?"),
    (["predict", "evaluate", "--predictors", "regresion"], "unknown predictor 'regresion'; did you mean 'regression'?"),
    (["predict", "evaluate", "--protocols", "interpolaton"],
     "--protocols: unknown protocol 'interpolaton'; did you mean 'interpolation'?"),
])
def test_predict_flags_suggest_on_stderr_only(argv: list[str], hint: str, capsys, tmp_path: Path) -> None:
    if argv[1] == "evaluate":
        argv = argv + ["--out", str(tmp_path / "p")]
    assert hint in _refused(argv, capsys)


@pytest.mark.parametrize("name, hint", [("insertoin", "insertion"), ("elasticflw", "elasticflow"),
                                        ("tiresas", "tiresias")])
def test_run_policies_suggest(tiny: Path, name: str, hint: str, capsys) -> None:
    assert f"unknown policy {name!r}; did you mean {hint!r}?" in _refused(["run", str(tiny), "--policies", name],
                                                                          capsys)


@pytest.mark.parametrize("flags, hint", [
    (["--only", "pareot"], "--only: unknown figure 'pareot'; did you mean 'pareto'?"),
    (["--only", "cdf_jct_lateness"], "--only: unknown figure 'cdf_jct_lateness'; did you mean 'cdf'?"),
    (["--metrics", "total_cots"], "--metrics: unknown metric 'total_cots'; did you mean 'total_cost'?"),
    (["--metrics", "vm_cots,mean_jtc"], "'vm_cots'; did you mean 'vm_cost'?, 'mean_jtc'; did you mean 'mean_jct'?"),
])
def test_plot_flags_suggest(run_dir: Path, flags: list[str], hint: str, capsys) -> None:
    assert hint in _refused(["plot", str(run_dir), *flags], capsys)


def test_report_metrics_suggest_for_every_unknown_name(run_dir: Path, capsys) -> None:
    err = _refused(["report", str(run_dir), "--metrics", "total_cost,late_jbos"], capsys)
    assert "unknown metric 'late_jbos'; did you mean 'late_jobs'?" in err and "total_cost'" not in err


def test_the_api_names_unknown_figures_and_metrics(run_dir: Path) -> None:
    from experiments import api

    runs = api.read(run_dir)
    with pytest.raises(CapsimError, match="unknown figure 'pareot'; did you mean 'pareto'"):
        runs.plot("pareot")
    with pytest.raises(CapsimError, match="unknown metric 'total_cots'; did you mean 'total_cost'"):
        runs.report(["total_cots"])
    with pytest.raises(CapsimError, match="unknown metric 'total_cots'; did you mean 'total_cost'"):
        runs.plot("metric", metrics=["total_cots"])


@pytest.mark.parametrize("fallback, hint", [
    ("none", "fallback 'none' is not a policy"),
    ("edff", "fallback 'edff' is not a policy; did you mean 'edf'?"),
])
def test_a_bad_milp_fallback_names_fallback_and_its_line(tmp_path: Path, fallback: str, hint: str) -> None:
    path = tmp_path / "fb.yaml"
    sc = small_scenario(policies=[{"kind": "edf"}, {"kind": "milp", "node_limit": 30, "fallback": fallback}])
    write_yaml(path, sc)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith("fallback:"))
    with pytest.raises(CapsimError) as e:
        load_scenario(path)
    msg = str(e.value)
    assert f"fb.yaml:{line}: policies[1].fallback: " in msg and hint in msg
    assert "unknown policy 'none'" not in msg


def test_a_missing_trace_column_names_the_file_as_written_and_every_optional_column(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("submit_time,application,framework,iterations\n0,resnet50,pytorch,100\n")
    path = write_yaml(tmp_path / "tr.yaml", small_scenario(workload={"trace": "t.csv"}))
    with pytest.raises(CapsimError) as e:
        load_scenario(path)
    msg = str(e.value)
    assert "workload.trace: t.csv: missing column(s) batch_size" in msg
    assert str(tmp_path / "t.csv") not in msg, "the trace is named as the scenario names it, not by an absolute path"
    optional = [c for c in COLUMNS if c not in REQUIRED]
    assert {"gpus", "priority"} <= set(optional)
    assert f"may add {', '.join(optional)}" in msg
