"""``capsim predict pareto``: every configuration's time and cost with their intervals, billed by the provider's
rule, the deadline verdicts and the time/cost Pareto front."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from experiments.cli import main
from experiments.cli.predict_pareto import Job, pareto_table
from predictors.table import TablePredictor
from sim.catalogue import gpu
from sim.contracts import Source
from sim.model import Billing, JobSpec, VMType

SPEC = JobSpec("resnet50", "pytorch", 1000, 64, name="R")
K80 = gpu("K80")
MINUTE = Billing(increment=60.0, minimum=60.0)
ONE = VMType("one", K80, 1, 1.8, boot_time=30.0, billing=MINUTE)      # $0.0005 per second
TWO = VMType("two", K80, 2, 7.2)                                      # $0.002 per second, billed exactly
TIMES = {"R/one/1": 1000.0, "R/two/1": 1200.0, "R/two/2": 500.0}


class WithError(TablePredictor):
    """The table's runtimes, stated with a 25 % expected error (a hand-checkable interval)."""

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        return Source("measured", 0.25)


def _by_label(df: pd.DataFrame) -> dict[str, dict]:
    return {f"{r['vm_type']}/{r['gpus']}": r for r in df.to_dict("records")}


def test_time_cost_intervals_and_front_by_hand() -> None:
    df = pareto_table(Job(SPEC, deadline=1100.0), [ONE, TWO], WithError(TIMES))
    rows = _by_label(df)
    one, two1, two2 = rows["one/1"], rows["two/1"], rows["two/2"]
    # time = boot + runtime; cost = that time billed by the type's rule (whole minutes for "one")
    assert one["time_s"] == 1030.0 and one["cost"] == pytest.approx(1080 * 0.0005)
    assert two2["time_s"] == 500.0 and two2["cost"] == pytest.approx(500 * 0.002)
    # the interval: runtimes within 25 % of the answer, relative to themselves: 1000/1.25 .. 1000/0.75
    assert one["time_lo_s"] == pytest.approx(30 + 800.0) and one["time_hi_s"] == pytest.approx(30 + 1000 / 0.75)
    assert one["cost_hi"] == pytest.approx(math.ceil((30 + 1000 / 0.75) / 60) * 60 * 0.0005)
    # two/2 is the fastest, one/1 the cheapest ($0.54 against $1.00); two/1 is slower and dearer than both
    assert two2["pareto"] and one["pareto"] and not two1["pareto"]
    # deadline 1100 s: two/2 even at its slow end (500/0.75 = 667 s); one/1 by its estimate only; two/1 misses
    assert (two2["deadline_met"], one["deadline_met"], two1["deadline_met"]) == ("yes", "at risk", "no")
    assert list(df["time_s"]) == sorted(df["time_s"])


def test_the_front_is_exactly_the_undominated_configurations() -> None:
    from predictors import build
    from sim.catalogue import select_vm_types

    df = pareto_table(Job(SPEC), select_vm_types(provider="gcp"), build("cloud"))
    pts = df[["time_s", "cost"]].to_numpy()
    for i, on in enumerate(df["pareto"]):
        dominated = ((pts[:, 0] <= pts[i, 0]) & (pts[:, 1] <= pts[i, 1]) & (pts != pts[i]).any(axis=1)).any()
        assert on != dominated, df.iloc[i].to_dict()
    assert (df["deadline_met"] == "").all()


def test_unsupported_configurations_are_left_out_and_none_is_an_error() -> None:
    df = pareto_table(Job(SPEC), [ONE, TWO], TablePredictor({"R/two/2": 500.0}))
    assert list(df["vm_type"] + "/" + df["gpus"].astype(str)) == ["two/2"]
    with pytest.raises(Exception, match="answers none of the 2 VM types"):
        pareto_table(Job(SPEC), [ONE, TWO], TablePredictor({}))


def test_pareto_command_prints_the_table_and_writes_the_figure(tmp_path, capsys) -> None:
    code = main(["predict", "pareto", "resnet50_pt", "--batch", "64", "--iterations", "20000", "--provider", "aws",
                 "--predictor", "cloud", "--deadline", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    table = pd.read_csv(tmp_path / "pareto.csv")
    assert (tmp_path / "pareto.png").stat().st_size > 0
    assert table["pareto"].any() and set(table["provider"]) == {"aws"}
    assert set(table["deadline_met"]) <= {"yes", "at risk", "no"}
    starred = [x for x in out.splitlines() if x.startswith("* ")]
    assert len(starred) == int(table["pareto"].sum())
    assert "scaled (73" in out or "scaled (" in out


def test_pareto_command_errors(tmp_path, capsys) -> None:
    base = ["predict", "pareto", "resnet50_pt", "--batch", "64", "--iterations", "100", "--out", str(tmp_path)]
    assert main(base + ["--provider", "ibm"]) == 2
    assert "unknown cloud provider 'ibm'" in capsys.readouterr().err
    assert main(base + ["--deadline", "-1"]) == 2
    assert main(base + ["--catalogue", "paper", "--gpu", "H100"]) == 2
    assert main(base + ["--predictor", "oracle"]) == 2
    assert "unknown predictor 'oracle'" in capsys.readouterr().err
