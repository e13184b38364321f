"""Gavel's trace format: the reader on Gavel's own traces, its errors, and the generator that writes them again."""

from __future__ import annotations

from pathlib import Path

import pytest

from predictors.throughput import gavel_table
from sim.model import CapsimError
from sim.traces import read_trace
from sim.traces.gavel import TEMPLATES, generate, job_type_name, split_job_type

GAVEL = Path(__file__).resolve().parents[2] / "experiments" / "gavel"


def test_the_reader_maps_gavels_fields_onto_the_trace_table():
    t = read_trace(GAVEL / "e.trace", "gavel")
    assert len(t) == 80 and list(t.submit_time[:3]) == [0, 248, 435]
    first = t.iloc[2]  # Transformer (batch size 128)  ...  204113  4  1  -1.000000  435
    assert (first.application, first.batch_size, first.iterations, first.gpus, first.priority) == \
        ("Transformer", 128, 204113, 4, 1)
    assert first["name"] == "Transformer (batch size 128)" and first.framework == "pytorch"
    assert sorted(t.gpus.value_counts().items()) == [(1, 62), (2, 4), (4, 14)]
    assert read_trace(GAVEL / "d.trace", "gavel", framework="tensorflow").framework.unique().tolist() == ["tensorflow"]


def test_job_types_with_and_without_a_batch_size():
    assert split_job_type("LM (batch size 20)") == ("LM", 20)
    assert split_job_type("CycleGAN") == ("CycleGAN", 1)
    known = {"A3C": 1, "LM (batch size 20)": 1}
    assert job_type_name("A3C", 1, known) == "A3C" and job_type_name("LM", 20, known) == "LM (batch size 20)"


def test_a_line_without_ten_fields_names_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.trace"
    bad.write_text((GAVEL / "d.trace").read_text().splitlines()[0] + "\nA3C\tcmd\t0\n")
    with pytest.raises(CapsimError, match="bad.trace: line 2: expected Gavel's 10 tab-separated fields.*found 3"):
        read_trace(bad, "gavel")
    with pytest.raises(CapsimError, match="cannot read the Gavel trace"):
        read_trace(tmp_path / "missing.trace", "gavel")


@pytest.mark.parametrize("name, args", [("d.trace", dict(num_jobs=40, lam=600, seed=7)),
                                        ("e.trace", dict(num_jobs=80, lam=400, seed=8, multi_gpu=True))])
def test_the_generator_writes_gavels_traces_byte_for_byte(name, args):
    text = generate(**args, v100_throughputs=gavel_table().by_gpu("V100"))
    assert text == (GAVEL / name).read_text()


def test_the_generator_follows_gavels_distributions():
    text = generate(2000, 100.0, 3, gavel_table().by_gpu("V100"), multi_gpu=True)
    rows = [line.split("\t") for line in text.splitlines()]
    assert len(rows) == 2000 and {r[0] for r in rows} == {t[0] for t in TEMPLATES}
    arrivals = [int(r[9]) for r in rows]
    assert arrivals[0] == 0 and arrivals == sorted(arrivals)
    assert 80 < arrivals[-1] / 1999 < 120, "mean inter-arrival about lam"
    scales = [int(r[6]) for r in rows]
    assert set(scales) == {1, 2, 4}
    assert all(s == 1 for r, s in zip(rows, scales) if r[0].startswith(("Recommendation", "A3C", "CycleGAN")))
    durations = {round(int(r[5]) / gavel_table().rate("V100", r[0], int(r[6])) / 3600) for r in rows}
    assert durations == {1, 2, 3, 4}
    with pytest.raises(CapsimError, match="expected num_jobs >= 0"):
        generate(-1, 1.0, 0, {})
    with pytest.raises(CapsimError, match="no V100 throughput"):
        generate(3, 1.0, 0, {})
