"""Availability series: SkyPilot's files and the CSV format read as documented, outage statistics by hand, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from sim.availability import AvailabilitySeries, read_availability
from sim.model import CapsimError

DEV = Path(__file__).resolve().parents[2] / "experiments" / "spot" / "traces"


def skypilot(tmp_path: Path, data: list, gap: float = 600, name: str = "z") -> Path:
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps({"metadata": {"gap_seconds": gap}, "data": data}))
    return p


def test_skypilot_values_count_available_instances_and_preempted_encoding_reads_inverted_copies(tmp_path):
    p = skypilot(tmp_path, [1, 0, 0, 2, 1])
    s = read_availability(p)["z"]
    assert s.gap == 600 and s.end == 3000
    assert s.available.tolist() == [True, False, False, True, True]
    inv = read_availability(p, encoding="preempted")["z"]
    assert inv.available.tolist() == [False, True, True, False, False]
    assert read_availability(p, min_count=2)["z"].available.tolist() == [False, False, False, True, False]


def test_outage_statistics_by_hand():
    s = AvailabilitySeries.ticks("z", [1, 1, 0, 1, 0, 0, 1, 1, 1, 1], 600)
    st = s.stats()
    # available runs 2, 1, 4 ticks; outages 1, 2 ticks; two available -> unavailable changes over 7 available ticks
    assert st.available_share == pytest.approx(0.7)
    assert st.mean_available == pytest.approx(600 * 7 / 3)
    assert st.mean_outage == pytest.approx(600 * 1.5)
    assert st.revocations == 2 and st.revocations_per_hour == pytest.approx(2 / (7 * 600 / 3600))


def test_change_times_and_sampling_of_an_irregular_series(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("time,market,available\n0,a,1\n250,b,0\n0,b,1\n100,a,0\n400,a,1\n")
    found = read_availability(p, "csv", end=1000)
    a, b = found["a"], found["b"]
    assert a.times.tolist() == [0, 100, 400] and a.available.tolist() == [True, False, True] and a.gap is None
    assert b.times.tolist() == [0, 250] and b.end == 1000
    assert a.available_at([0, 99.9, 100, 399, 400, 999]).tolist() == [True, True, False, False, True, True]
    assert a.tick_values(300).tolist() == [True, False, True]  # at 0, 300, 600 (900 + 300 passes the end)
    assert a.next_change(0) == 100 and a.next_change(100) == 400 and math.isinf(a.next_change(500))
    with pytest.raises(CapsimError, match="outside the recorded"):
        a.available_at(1000)


def test_a_directory_is_one_market_per_file_named_by_its_stem():
    found = read_availability(DEV / "aws-02-15-2023")
    assert len(found) == 9 and "us-east-1a_v100_1" in found
    s = found["us-west-2b_v100_1"]
    assert s.gap == 195 and len(s.available) == 20158


def test_the_development_traces_match_the_published_statistics():
    # the reference's trace_stats.json: 127 available runs of mean 4.051 h, 79.26 % available
    s = read_availability(DEV / "aws-10-26-2022" / "us-west-2a_v100_1.json")["us-west-2a_v100_1"]
    state, length = s.runs()
    assert int(state.sum()) == 127 and float(length[state].mean()) / 3600 == pytest.approx(4.051, abs=1e-3)
    assert s.stats().available_share == pytest.approx(0.7926, abs=1e-4)


@pytest.mark.parametrize("doc, match", [
    ("not json", "cannot read"),
    ('{"data": [1]}', "gap_seconds"),
    ('{"metadata": {"gap_seconds": 0}, "data": [1]}', "gap_seconds"),
    ('{"metadata": {"gap_seconds": 600}, "data": []}', "empty"),
    ('{"metadata": {"gap_seconds": 600}, "data": [1, -1]}', r"data\[1\]"),
    ('{"metadata": {"gap_seconds": 600}, "data": [1, true]}', r"data\[1\]"),
    ("[1, 0]", "expected a JSON object"),
])
def test_bad_skypilot_files_name_the_file_and_the_field(tmp_path, doc, match):
    p = tmp_path / "bad.json"
    p.write_text(doc)
    with pytest.raises(CapsimError, match=match) as e:
        read_availability(p)
    assert "bad.json" in str(e.value)


@pytest.mark.parametrize("text, match", [
    ("time,zone,available\n0,a,1\n", "missing column"),
    ("time,market,available\n", "no rows"),
    ("time,market,available\n0,a,1\nx,a,0\n", "row 2, column time"),
    ("time,market,available\n0,a,1\n5,a,-1\n", "row 2, column available"),
    ("time,market,available\n0,a,1\n5,a,0\n5,a,1\n", "two rows at time 5"),
    ("time,market,available\n3,a,1\n", "every market needs a row at time 0"),
])
def test_bad_csv_files_name_the_row_and_column(tmp_path, text, match):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(CapsimError, match=match):
        read_availability(p, "csv")


def test_bad_arguments_are_named(tmp_path):
    p = skypilot(tmp_path, [1])
    with pytest.raises(CapsimError, match="unknown format 'skypilt'"):
        read_availability(p, "skypilt")
    with pytest.raises(CapsimError, match="min_count"):
        read_availability(p, min_count=0)
    with pytest.raises(CapsimError, match="no such"):
        read_availability(tmp_path / "missing.json")
    with pytest.raises(CapsimError, match="also in"):
        read_availability([p, p])
    with pytest.raises(CapsimError, match="no skypilot availability files"):
        (tmp_path / "empty").mkdir()
        read_availability(tmp_path / "empty")


def test_series_are_read_only():
    s = AvailabilitySeries.ticks("z", np.array([1, 0]), 60)
    with pytest.raises(ValueError):
        s.available[0] = False
