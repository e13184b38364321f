"""The event list of ElasticFlow's simulator: one event per instant, holding the jobs that arrive and the jobs
planned to end then, and the rule that keeps decisions at least one slot apart.

``merge(now, slot)``: when the next event falls within ``slot`` seconds of ``now`` and another event follows, it
moves to ``now + slot`` and absorbs every later event up to that time (their arrivals and completions). The last event
is never moved: it may come sooner. A job's end event is found by the time the job was
planned to end, so a job whose event was moved by a merge is no longer found there (ElasticFlow keys events by time).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any

__all__ = ["Event", "Events"]


class Event:
    """The jobs arriving (``starts``) and planned to end (``ends``) at one instant."""

    __slots__ = ("time", "starts", "ends")

    def __init__(self, time: float):
        self.time = time
        self.starts: list[Any] = []
        self.ends: list[Any] = []


class Events:
    """Events by time, in time order."""

    def __init__(self) -> None:
        self._at: dict[float, Event] = {}
        self._times: list[float] = []

    def __len__(self) -> int:
        return len(self._times)

    def at(self, t: float) -> Event | None:
        return self._at.get(t)

    def get(self, t: float) -> Event:
        """The event at ``t``, created if there is none."""
        ev = self._at.get(t)
        if ev is None:
            ev = self._at[t] = Event(t)
            insort(self._times, t)
        return ev

    def first(self) -> Event:
        return self._at[self._times[0]]

    def remove(self, ev: Event) -> None:
        del self._at[ev.time]
        del self._times[bisect_left(self._times, ev.time)]

    def add_end(self, job: Any, t: float) -> None:
        ev = self.get(t)
        if job not in ev.ends:
            ev.ends.append(job)

    def change_end(self, job: Any, old: float, new: float) -> None:
        """Move ``job``'s planned end from ``old`` to ``new`` (ElasticFlow's ``change_job_end_event``)."""
        if old == new:
            return
        ev = self._at.get(old)
        if ev is not None:
            if job in ev.ends:
                ev.ends.remove(job)
            if not ev.ends and not ev.starts:
                self.remove(ev)
        self.add_end(job, new)

    def merge(self, now: float, slot: float) -> float:
        """Apply the minimum spacing after a decision at ``now``; returns the time of the next event.

        As ElasticFlow compares: the first event is moved when ``int(t - now) <= slot`` (a gap of 60.5 s counts as
        60) and absorbs the later events with ``t - now <= slot``."""
        times = self._times
        if int(times[0] - now) <= slot and len(times) > 1:
            first = self._at[times[0]]
            while len(times) > 1 and times[1] - now <= slot:
                second = self._at[times[1]]
                first.starts.extend(second.starts)
                first.ends.extend(second.ends)
                self.remove(second)
            if first.time != now + slot:
                self.remove(first)
                first.time = now + slot
                self._at[first.time] = first
                insort(times, first.time)
        return times[0]
