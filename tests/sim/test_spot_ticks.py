"""The single-job spot mode's engine, by hand: progress, overheads, revocations at tick boundaries, billing."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sim.availability import AvailabilitySeries
from sim.model import CapsimError
from sim.spot_ticks import run_spot_job
from sim.spotjob import SpotJob, SpotStrategy, TickMarket, TickView, Use

N, S, D = Use.NONE, Use.SPOT, Use.ON_DEMAND
MARKET = TickMarket(600, 0.6, 3.6)  # $0.10 per spot tick, $0.60 per on-demand tick


class Script(SpotStrategy):
    """Plays ``uses`` tick by tick (then nothing), recording every view it is shown."""

    def __init__(self, uses: Sequence[Use] = ()):
        self.uses = uses

    def reset(self, job, market, future=None):  # type: ignore[no-untyped-def]
        self.views: list[TickView] = []

    def decide(self, view: TickView) -> Use:
        self.views.append(view)
        return self.uses[view.tick] if view.tick < len(self.uses) else N


def series(*bits: int) -> AvailabilitySeries:
    return AvailabilitySeries.ticks("z", [bool(b) for b in bits], 600)


def test_on_demand_with_an_overhead_pays_it_in_the_first_tick_and_bills_whole_ticks():
    job = SpotJob(1200, 3600, 180)
    r = run_spot_job(Script([D, D, D]), job, series(0, 0, 0, 0, 0), MARKET)
    # 420 s of work in tick 0, 600 in tick 1, 180 in tick 2: done at 1200 + 180 = 1380 s
    assert r.status == "ok" and r.finish == 1380 and r.deadline_met
    assert r.on_demand_seconds == 1800 and r.cost == pytest.approx(3 * 0.6)
    assert r.launches == 1 and r.on_demand_launches == 1 and r.post_finish_ticks == 0
    second = run_spot_job(Script([D, D, D]), job, series(0, 0, 0, 0, 0), MARKET, billing="second")
    assert second.cost == pytest.approx(1380 * 3.6 / 3600) and second.post_finish_ticks == 0


def test_a_tick_asked_for_at_the_completion_tick_is_billed_whole():
    job = SpotJob(1200, 3600, 0)
    late = run_spot_job(Script([D, D, D]), job, series(0, 0, 0, 0), MARKET)
    on_time = run_spot_job(Script([D, D]), job, series(0, 0, 0, 0), MARKET)
    assert late.finish == on_time.finish == 1200
    assert late.post_finish_ticks == 1 and late.cost == pytest.approx(on_time.cost + 0.6)


def test_a_spot_vm_is_revoked_at_the_boundary_keeping_its_whole_tick_and_the_relaunch_pays_the_overhead_again():
    job = SpotJob(1500, 7200, 60)
    s = Script([S, S, N, S, S, S])
    r = run_spot_job(s, job, series(1, 1, 0, 1, 1, 1, 1), MARKET)
    # ticks 0-1 spot: 540 + 600; revoked at 2 (idle); relaunch at 3: 540 -> 1680 >= 1500 done in tick 3
    assert [v.revoked for v in s.views[:4]] == [False, False, True, False]
    assert s.views[2].current is N and s.views[2].last is S and s.views[2].work_done == 1140
    assert r.revocations == 1 and r.spot_launches == 2
    assert r.finish == 3 * 600 + 60 + 360
    assert r.spot_seconds == 3 * 600 + 600  # ticks 0, 1, 3, and tick 4 asked for at completion
    assert list(r.uses) == [1, 1, 0, 1, 1]


def test_an_overhead_is_reset_by_a_switch_not_added_and_idling_keeps_what_is_left():
    job = SpotJob(3000, 36000, 720)
    s = Script([S, D, D, N, D, D, D, D, D, D])
    run_spot_job(s, job, series(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), MARKET)
    left = [v.overhead_left for v in s.views]
    done = [v.work_done for v in s.views]
    assert left[1] == 120 and done[1] == 0       # the spot launch's 720 s: 600 paid in tick 0
    assert left[2] == 120 and done[2] == 0       # the switch to on demand restarted it: 720 again, 600 paid
    assert done[3] == 480 and left[3] == 0
    assert done[4] == 480                         # idle: no work, nothing paid
    assert done[5] == 480 and left[5] == 120      # relaunch from idle: the overhead again


def test_asking_for_spot_when_there_is_none_or_for_something_else_is_an_error():
    with pytest.raises(CapsimError, match="asked for spot at tick 1"):
        run_spot_job(Script([S, S]), SpotJob(6000, 9000), series(1, 0, 1), MARKET)

    class Bad(Script):
        def decide(self, view):  # type: ignore[no-untyped-def]
            return "spot"

    with pytest.raises(CapsimError, match="expected a sim.Use"):
        run_spot_job(Bad(), SpotJob(600, 900), series(1, 1), MARKET)


def test_a_job_still_running_at_the_series_end_stops_there_without_a_verdict():
    r = run_spot_job(Script([S, S, S]), SpotJob(6000, 9000), series(1, 1, 1), MARKET)
    assert r.status == "trace_ended" and not r.deadline_met and r.finish != r.finish
    assert r.spot_seconds == 1800


def test_a_job_done_in_the_last_tick_of_the_series_finishes():
    r = run_spot_job(Script([S, S]), SpotJob(1200, 9000), series(1, 1), MARKET)
    assert r.status == "ok" and r.finish == 1200


def test_the_start_is_rounded_up_to_a_tick_and_the_deadline_counts_from_it():
    s = Script([S])
    r = run_spot_job(s, SpotJob(600, 600), series(0, 0, 1, 1), MARKET, start=601)
    assert r.start_tick == 2 and r.finish == 600 and r.deadline_met
    assert s.views[0].elapsed == 0 and s.views[0].spot_available


def test_past_the_deadline_is_a_miss_not_a_stop():
    r = run_spot_job(Script([N, D, D]), SpotJob(1200, 1200), series(0, 0, 0, 0), MARKET)
    assert r.finish == 1800 and not r.deadline_met and r.status == "ok"


def test_bad_arguments_are_named():
    with pytest.raises(CapsimError, match="billing"):
        run_spot_job(Script(), SpotJob(600, 600), series(1), MARKET, billing="hourly")
    with pytest.raises(CapsimError, match="start"):
        run_spot_job(Script(), SpotJob(600, 600), series(1), MARKET, start=-1)
    with pytest.raises(CapsimError, match="work"):
        SpotJob(0, 600)
    with pytest.raises(CapsimError, match="gap"):
        TickMarket(float("nan"), 1, 1)
