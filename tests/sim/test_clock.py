"""The SimPy adapter: calls fire at exactly the time asked, in priority then FIFO order within an instant."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.clock import LAST, NORMAL, URGENT, Clock


def recorder(clock: Clock, log: list):
    return lambda call: log.append((clock.now, call.time, call.value))


def test_fires_at_exactly_the_time_asked_even_where_now_plus_delay_misses_it():
    now, t = 1.0 + 2.0 ** -52, 3.0 + 2.0 ** -51
    assert now + (t - now) != t  # a plain delay would fire one ulp early (round-half-even tie)
    clock, log = Clock(now), []
    clock.at(t, recorder(clock, log), "x")
    clock.at(2.5, recorder(clock, log), "y")
    clock.run()
    assert log == [(2.5, 2.5, "y"), (t, t, "x")]
    assert type(log[1][0]) is float


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 1e12), st.floats(0.0, 1e12), st.floats(0.0, 1e12))
def test_any_time_not_before_now_is_hit_exactly(start, a, b):
    now, t = sorted((start + a, start + b))
    clock, log = Clock(start), []
    clock.at(now, lambda call: clock.at(t, recorder(clock, log), "t"))
    clock.run()
    assert log == [(t, t, "t")]


def test_priority_order_within_an_instant_then_fifo():
    clock, log = Clock(), []
    rec = recorder(clock, log)
    clock.at(5.0, rec, "last-1", LAST)
    clock.at(5.0, rec, "normal-1")
    clock.at(5.0, rec, "urgent", URGENT)
    clock.at(5.0, rec, "normal-2", NORMAL)
    clock.at(5.0, rec, "last-2", LAST)
    clock.at(4.0, rec, "earlier", LAST)
    clock.run()
    assert [v for _, _, v in log] == ["earlier", "urgent", "normal-1", "normal-2", "last-1", "last-2"]


def test_calls_scheduled_during_an_instant_run_in_it_by_priority_and_order():
    clock, log = Clock(), []
    rec = recorder(clock, log)

    def spawn(call):
        log.append((clock.now, call.time, call.value))
        clock.at(clock.now, rec, "spawned-normal")
        clock.at(clock.now, rec, "spawned-urgent", URGENT)
        clock.at(clock.now, rec, "spawned-last", LAST)
    clock.at(2.0, spawn, "first")
    clock.at(2.0, rec, "queued-normal")
    clock.at(2.0, rec, "queued-last", LAST)
    clock.at(3.0, rec, "later", URGENT)
    clock.run()
    assert [v for _, _, v in log] == ["first", "spawned-urgent", "queued-normal", "spawned-normal", "queued-last",
                                      "spawned-last", "later"]
    assert [t for t, _, _ in log] == [2.0] * 6 + [3.0]


def test_a_cancelled_call_does_nothing_and_others_still_run():
    clock, log = Clock(), []
    rec = recorder(clock, log)
    doomed = clock.at(1.0, rec, "cancelled")
    clock.at(1.0, rec, "kept")
    clock.at(0.5, lambda call: clock.cancel(doomed))
    clock.run()
    assert [v for _, _, v in log] == ["kept"]


def test_scheduling_in_the_past_is_refused():
    clock = Clock(10.0)
    with pytest.raises(ValueError, match="before now"):
        clock.at(9.0, lambda call: None)
    with pytest.raises(ValueError, match="before now"):
        clock.at(float("nan"), lambda call: None)


def test_the_clock_uses_only_simpys_public_api():
    """No private attribute (``_name``) of any object is read or written in sim/clock.py: SimPy is used through its
    public API only (its own ``Environment.schedule`` overridden, as ``simpy.rt`` overrides ``step``)."""
    import ast
    from pathlib import Path

    import sim.clock

    tree = ast.parse(Path(sim.clock.__file__).read_text(encoding="utf-8"))
    private = sorted({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                      and n.attr.startswith("_") and not n.attr.startswith("__")})
    assert private == [], f"sim/clock.py touches private attributes {private}"


def test_a_call_is_a_triggered_simpy_event_carrying_its_value():
    clock, seen = Clock(), []
    call = clock.at(3.0, seen.append, {"x": 1})
    assert call.triggered and call.ok and call.value == {"x": 1} and call.env is clock.env
    clock.run()
    assert seen == [call] and call.processed and clock.now == 3.0


def test_soon_runs_at_once_when_nothing_else_is_due_now_else_after_what_is():
    clock, log = Clock(), []

    def first(call):
        log.append(("first", clock.now))
        clock.at(5.0, lambda c: log.append(("later", clock.now)))
        clock.soon(lambda now: log.append(("soon-alone", now)), LAST)  # nothing else due at 1: at once
        log.append(("after-soon", clock.now))

    def second(call):
        clock.at(2.0, lambda c: log.append(("same-instant", clock.now)))
        clock.soon(lambda now: log.append(("soon-after", now)), LAST)  # waits for the call due at 2

    clock.at(1.0, first)
    clock.at(2.0, second)
    clock.run()
    assert log == [("first", 1.0), ("soon-alone", 1.0), ("after-soon", 1.0), ("same-instant", 2.0),
                   ("soon-after", 2.0), ("later", 5.0)]
    assert clock.calls == 6  # the call run at once is counted as a call
