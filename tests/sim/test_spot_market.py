"""Spot markets from availability series: which series governs which type, zone failover, revocation times."""

from __future__ import annotations

import math

import pytest

from sim.availability import AvailabilitySeries
from sim.catalogue import gpu, spot_variant
from sim.model import CapsimError, VMType

K80 = gpu("K80")
V100 = gpu("V100")
SMALL = spot_variant(VMType("small", K80, 1, 3.6, spot_price_per_hour=1.2), 0.0)
BIG = spot_variant(VMType("big", V100, 4, 12.0, spot_price_per_hour=4.0), 0.0)
ON_DEMAND = VMType("od", K80, 1, 3.6)


def zone(name: str, *bits: int, gap: float = 100) -> AvailabilitySeries:
    return AvailabilitySeries.ticks(name, [bool(b) for b in bits], gap)


def markets(*series: AvailabilitySeries, offset: float = 0.0):
    from sim.spot_market import RecordedMarkets

    return RecordedMarkets.build([SMALL, BIG, ON_DEMAND], {s.name: s for s in series}, offset)


def test_zones_are_shared_and_a_series_named_after_a_type_or_gpu_governs_it_alone():
    m = markets(zone("a", 1, 1), zone("b", 0, 1))
    assert [s.name for s in m.zones["small-spot"]] == ["a", "b"] and [s.name for s in m.zones["big-spot"]] == ["a", "b"]
    m = markets(zone("a", 1, 1), zone("V100", 0, 1))
    assert [s.name for s in m.zones["big-spot"]] == ["V100"] and [s.name for s in m.zones["small-spot"]] == ["a"]
    m = markets(zone("V100", 1, 1), zone("big", 0, 1), zone("small-spot", 1, 0))
    assert [s.name for s in m.zones["big-spot"]] == ["big"]
    assert [s.name for s in m.zones["small-spot"]] == ["small-spot"]
    assert set(m.names()) == {"small-spot", "big-spot"}


def test_a_spot_type_left_without_a_series_is_an_error():
    with pytest.raises(CapsimError, match="'small-spot' has no availability series"):
        markets(zone("V100", 1, 1))
    with pytest.raises(CapsimError, match="no availability series given"):
        markets()


def test_a_vm_fails_over_to_the_first_available_zone_and_is_revoked_when_that_zone_ends():
    m = markets(zone("a", 0, 0, 1, 1, 1, 0, 0, 0), zone("b", 0, 1, 1, 1, 0, 0, 0, 1))
    assert m.zone_at("small-spot", 0) is None and not m.available("small-spot", 50)
    assert m.next_available("small-spot", 0) == 100
    assert m.zone_at("small-spot", 150) == 1 and m.revoked_at("small-spot", 1, 150) == 400
    assert m.zone_at("small-spot", 200) == 0 and m.revoked_at("small-spot", 0, 200) == 500
    assert m.next_available("small-spot", 500) == 700 and m.available("small-spot", 700)


def test_the_offset_shifts_the_run_into_the_series_and_the_end_is_an_error_naming_the_series():
    m = markets(zone("a", 0, 0, 1, 1), offset=150)
    assert m.available("small-spot", 50) and not m.available("small-spot", 0)
    assert math.isinf(m.revoked_at("small-spot", 0, 60))
    with pytest.raises(CapsimError, match="series 'a'.*reached day"):
        m.available("small-spot", 250)
    with pytest.raises(CapsimError, match="past the end"):
        markets(zone("a", 1, 1), offset=200)


def test_the_rate_a_policy_is_told_is_revocations_per_available_hour_over_the_zones():
    m = markets(zone("a", 1, 0, 1, 0, gap=1800), zone("b", 1, 1, 1, 1, gap=1800))
    # zone a turns unavailable twice in its 1 available hour, zone b never in its 2 hours
    assert m.revocation_rate("small-spot") == pytest.approx(2 / 3.0)
