"""The waiting queue kept across decisions gives, after any sequence of snapshots, exactly what sorting that
snapshot's waiting jobs gives; so do the sort columns gathered per job."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from optim import queue
from optim.queue import JobColumns, WaitingQueue, order
from sim.catalogue import job_types
from sim.model import Job, JobView

SPEC = next(iter(job_types().values()))
EST = np.array([10.0, 5.0])


def view(i: int, submit: float, deadline: float) -> JobView:
    return JobView(Job(i, SPEC, submit, deadline, 0.01), EST)


def fifo(jv: JobView) -> tuple:
    return (jv.job.submit_time, jv.job.id)


def edf(jv: JobView) -> tuple:
    return (jv.job.deadline, jv.job.submit_time, jv.job.id)


@st.composite
def histories(draw):
    """Successive waiting tuples as the engine makes them: the jobs a plan started leave (the head of the queue,
    or any, to exercise the fallback), new jobs are appended; times drawn from a few values, so ties happen."""
    times = st.sampled_from([0.0, 1.0, 2.5, 7.0])
    steps, waiting, next_id = [], (), 0
    for _ in range(draw(st.integers(1, 8))):
        new = []
        for _ in range(draw(st.integers(0, 5))):
            new.append(view(next_id, draw(times), draw(times) + 10))
            next_id += 1
        waiting = waiting + tuple(new)
        head = draw(st.integers(0, 3))
        anywhere = draw(st.booleans())
        steps.append((waiting, head, anywhere))
        if waiting:
            if anywhere:
                drop = set(draw(st.lists(st.integers(0, len(waiting) - 1), max_size=3)))
                waiting = tuple(jv for i, jv in enumerate(waiting) if i not in drop)
            else:
                first = {id(jv) for jv in sorted(waiting, key=edf)[:head]}
                waiting = tuple(jv for jv in waiting if id(jv) not in first)
    return steps


@settings(max_examples=200, deadline=None)
@given(histories())
def test_the_kept_queue_is_the_sorted_queue(steps) -> None:
    for small in (0, 3, queue._SMALL):  # every queue followed; short ones sorted afresh, long ones followed
        with patch.object(queue, "_SMALL", small):
            q = WaitingQueue(edf)
            for waiting, head, anywhere in steps:
                assert q.jobs(waiting) == sorted(waiting, key=edf)
                q.started(0 if anywhere else min(head, len(waiting)))
            q2 = WaitingQueue(fifo)
            for waiting, _, _ in steps:
                assert q2.jobs(waiting) == sorted(waiting, key=fifo)


@settings(max_examples=100, deadline=None)
@given(histories())
def test_sort_columns_order_as_sorted_does(steps) -> None:
    cols = JobColumns(edf)
    for waiting, _, _ in steps:
        c = cols.of(waiting)
        assert [waiting[i] for i in order([c[:, k] for k in range(c.shape[1])])] == sorted(waiting, key=edf) \
            if waiting else c.shape[0] == 0
