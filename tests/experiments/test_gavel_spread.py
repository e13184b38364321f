"""The perturbed-draw check of a chaotic Gavel replay (studies/gavel_spread.py): the perturbation touches only the
steps, by one, reproducibly; draw 0 is the replay itself; two simulators' draws compare by their means."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from studies.gavel_replay import replay, write_trace
from studies.gavel_spread import compare, draw_path, main, perturb, read_other, spread

LINE = ("ResNet-18 (batch size 16)\tpython3 main.py\timage_classification/cifar10\t--num_steps\t1\t{steps}\t1\t1"
        "\t-1.000000\t{t}\n")


def test_a_draw_moves_every_jobs_steps_by_one_and_touches_nothing_else():
    text = LINE.format(steps=1, t=0) + LINE.format(steps=5000, t=30) + "\n" + LINE.format(steps=70, t=90)
    assert perturb(text, 0) == text
    for k in (1, 2, 3):
        out = perturb(text, k)
        assert out == perturb(text, k)
        before, after = [ln.split("\t") for ln in text.splitlines()], [ln.split("\t") for ln in out.splitlines()]
        assert len(before) == len(after)
        for a, b in zip(before, after):
            if a == [""]:
                assert b == [""]
                continue
            assert a[:5] + a[6:] == b[:5] + b[6:]
            assert int(b[5]) - int(a[5]) in ((-1, 1) if int(a[5]) > 1 else (0, 1))  # never below one step
    assert len({perturb(text, k) for k in range(1, 9)}) > 1


def test_draw_zero_is_the_replay_itself_and_the_draws_are_written_for_the_other_simulator(tmp_path):
    trace = write_trace(tmp_path / "t.trace", 8, 600.0, 3)
    ours = spread(trace, "fifo_packed", "1:1:1", 2, write=tmp_path / "draws")
    assert list(ours.draw) == [0, 1, 2] and (ours.dropped == 0).all()
    s = replay(trace, "fifo_packed", 0, servers="1:1:1").summary
    assert ours.avg_jct[0] == s["gavel_mean_jct"] and ours.makespan[0] == s["gavel_makespan"]
    for k in range(3):
        assert draw_path(tmp_path / "draws", trace, k).read_text() == perturb(trace.read_text(), k)


def test_two_sets_of_draws_compare_by_their_means(tmp_path, capsys):
    other = tmp_path / "other.txt"
    other.write_text("WARNING: not optimal\n"
                     "t.k0.trace,p,4:4:4,100.0,1000.0,0.5,8,8,1.0\n"
                     "t.k2.trace,p,4:4:4,crashed\n"
                     "t.k1.trace,p,4:4:4,100.0,1100.0,0.5,8,8,1.0\n")
    theirs = read_other(other)
    assert list(theirs.draw) == [0, 1, 2] and math.isnan(theirs.avg_jct[2])
    ours = pd.DataFrame({"draw": [0, 1], "avg_jct": [100.0, 110.0], "makespan": [1050.0, 1050.0]})
    c = compare(ours, theirs)
    assert c["avg_jct"]["gap"] == pytest.approx(0.05) and not c["avg_jct"]["within"]
    assert c["avg_jct"]["other_n"] == 2 and c["avg_jct"]["t"] == pytest.approx(1.0)  # 5 / sqrt(50 / 2 + 0)
    assert c["makespan"]["gap"] == pytest.approx(0.0) and c["makespan"]["within"]
    assert c["makespan"]["t"] == pytest.approx(0.0)


def test_the_command_prints_each_draw_and_the_gap_of_the_means(tmp_path, capsys):
    trace = write_trace(tmp_path / "t.trace", 6, 600.0, 5)
    other = tmp_path / "other.txt"
    other.write_text("t.k0.trace,fifo_packed,1:1:1,1.0,1.0\nt.k1.trace,fifo_packed,1:1:1,crashed\n")
    main([str(trace), "fifo_packed", "--servers", "1:1:1", "--draws", "1", "--other", str(other)])
    out = capsys.readouterr().out
    assert "draw 0:" in out and "draw 1:" in out and "1 runs, 1 failed" not in out
    assert "2 runs, 1 failed" in out and "NOT within 2%" in out
