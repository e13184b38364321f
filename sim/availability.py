"""Spot availability series: when a spot VM of one market (a zone, a VM type) could run, read from a recorded trace.

A series is a step function of time from the series' start: segment ``i`` covers ``[times[i], times[i+1])`` (the
last one up to ``end``) and is available or not. Two file formats:

- ``skypilot``: SkyPilot's spot traces (github.com/skypilot-org/spot-traces), one JSON file per zone and instance,
  ``{"metadata": {"gap_seconds": G}, "data": [v0, v1, ...]}`` with one value per tick of G seconds. In those files
  a value is the number of spot instances that could be launched: ``v >= min_count`` (1) is available. Can't Be
  Late's simulator reads the opposite encoding (1 = preempted); ``encoding: preempted`` reads such inverted copies.
  A directory (or a list of files) is one market per file, named by the file's stem (``us-east-1a_v100_1``).
- ``csv``: columns ``time`` (s from the series' start), ``market`` and ``available`` (0/1 or a count, available when
  ``>= min_count``): the state of that market from that time on; rows may come in any order, markets interleaved.
  The series ends at ``end`` (an option; default: one median step after the last row).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.model import CapsimError

__all__ = ["AvailabilitySeries", "OutageStats", "read_availability", "FORMATS", "ENCODINGS"]

FORMATS = ("skypilot", "csv")
ENCODINGS = ("available", "preempted")


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class OutageStats:
    """What a series says about its market: the share of time available, the mean lengths of its available runs
    and outages (s), and revocations per hour of available time (available → unavailable changes)."""

    available_share: float
    mean_available: float
    mean_outage: float
    revocations_per_hour: float
    revocations: int


@dataclass(frozen=True, eq=False)
class AvailabilitySeries:
    """The recorded availability of one spot market (``name``), as a step function of time from 0 to ``end``.

    ``gap`` is the tick of a regularly sampled series (SkyPilot's), ``None`` for one read from change times.
    """

    name: str
    times: np.ndarray
    available: np.ndarray
    end: float
    gap: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        t = np.asarray(self.times, dtype=float)
        a = np.asarray(self.available, dtype=bool)
        where = self.source or self.name
        if t.ndim != 1 or t.shape != a.shape or len(t) == 0:
            raise CapsimError(f"{where}: an availability series needs one state per time and at least one")
        if t[0] != 0 or np.any(np.diff(t) <= 0) or not (math.isfinite(self.end) and self.end > t[-1]):
            raise CapsimError(f"{where}: availability times must start at 0, increase, and end before the series' "
                              f"end ({self.end})")
        object.__setattr__(self, "times", _readonly(t))
        object.__setattr__(self, "available", _readonly(a))

    @classmethod
    def ticks(cls, name: str, values: Sequence[bool] | np.ndarray, gap: float, source: str = "") -> AvailabilitySeries:
        """A series sampled every ``gap`` seconds (``values[i]``: available during ``[i*gap, (i+1)*gap)``)."""
        v = np.asarray(values, dtype=bool)
        return cls(name, np.arange(len(v)) * float(gap), v, len(v) * float(gap), float(gap), source)

    def available_at(self, t: float | np.ndarray) -> np.ndarray:
        """Whether the market is available at time(s) ``t`` (from the series' start); a time outside
        ``[0, end)`` is an error naming the series."""
        q = np.atleast_1d(np.asarray(t, dtype=float))
        if np.any(q < 0) or np.any(q >= self.end):
            bad = float(q[(q < 0) | (q >= self.end)][0])
            raise CapsimError(f"availability series {self.name!r}: time {bad:g} s is outside the recorded "
                              f"{self.end / 3600:g} h ({self.source or 'no file'}); start earlier or use a longer "
                              f"series")
        return self.available[np.searchsorted(self.times, q, side="right") - 1]

    def tick_values(self, gap: float, start: float = 0.0) -> np.ndarray:
        """Availability at the start of every whole tick of ``gap`` seconds from ``start`` that lies in the series."""
        n = int(math.floor((self.end - start) / gap + 1e-9))
        if n <= 0:
            return np.zeros(0, dtype=bool)
        if self.gap is not None and gap == self.gap and float(start / gap).is_integer():
            first = int(start / gap)
            return self.available[first:first + n].copy()
        return self.available_at(start + np.arange(n) * float(gap))

    def next_change(self, t: float) -> float:
        """The first time after ``t`` at which the state changes (``inf`` when it never does before the end)."""
        i = int(np.searchsorted(self.times, t, side="right") - 1)
        state = self.available[max(i, 0)]
        later = np.flatnonzero(self.available[i + 1:] != state)
        return float(self.times[i + 1 + later[0]]) if len(later) else math.inf

    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """The series as maximal runs: (state of each run, its length in s)."""
        change = np.flatnonzero(np.diff(self.available.astype(np.int8))) + 1
        starts = np.concatenate([[0], change])
        t0 = self.times[starts]
        t1 = np.concatenate([t0[1:], [self.end]])
        return self.available[starts], t1 - t0

    def stats(self) -> OutageStats:
        """Outage statistics of the whole series."""
        state, length = self.runs()
        up, down = length[state], length[~state]
        revocations = int(np.sum(state[:-1] & ~state[1:]))
        up_time = float(up.sum())
        return OutageStats(
            available_share=up_time / self.end,
            mean_available=float(up.mean()) if len(up) else 0.0,
            mean_outage=float(down.mean()) if len(down) else 0.0,
            revocations_per_hour=revocations / (up_time / 3600) if up_time > 0 else math.inf,
            revocations=revocations,
        )


def _count(path: Path, where: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise CapsimError(f"{path}: {where}: expected a count >= 0 (0/1 for single-instance traces), found {v!r}")
    return float(v)


def _skypilot_file(path: Path, encoding: str, min_count: float) -> AvailabilitySeries:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CapsimError(f"{path}: cannot read the SkyPilot availability JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise CapsimError(f"{path}: expected a JSON object with 'metadata' and a 'data' list (SkyPilot's format), "
                          f"found {type(doc).__name__}{' without a data list' if isinstance(doc, dict) else ''}")
    meta = doc.get("metadata")
    gap = meta.get("gap_seconds") if isinstance(meta, dict) else None
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not (math.isfinite(gap) and gap > 0):
        raise CapsimError(f"{path}: metadata.gap_seconds: expected the tick length in seconds (> 0), found {gap!r}")
    data = doc["data"]
    if not data:
        raise CapsimError(f"{path}: data: the series is empty; expected one value per tick")
    counts = np.array([_count(path, f"data[{i}]", v) for i, v in enumerate(data)])
    ok = counts >= min_count
    return AvailabilitySeries.ticks(path.stem, ok if encoding == "available" else ~ok, float(gap), str(path))


def _csv_file(path: Path, min_count: float, end: float | None) -> dict[str, AvailabilitySeries]:
    import pandas as pd

    try:
        df = pd.read_csv(path)
    except Exception as e:  # noqa: BLE001 (any parsing failure is the user's file)
        raise CapsimError(f"{path}: cannot read the availability CSV: {e}") from None
    missing = [c for c in ("time", "market", "available") if c not in df.columns]
    if missing:
        raise CapsimError(f"{path}: missing column(s) {missing}; expected time, market, available "
                          f"(found {', '.join(map(str, df.columns))})")
    if df.empty:
        raise CapsimError(f"{path}: no rows; expected one row per change of a market's availability")
    for col in ("time", "available"):
        v = pd.to_numeric(df[col], errors="coerce")
        bad = ~np.isfinite(v.to_numpy(dtype=float)) | (v < 0).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise CapsimError(f"{path}: row {row + 1}, column {col}: expected a number >= 0, found "
                              f"{df[col].iloc[row]!r}")
        df[col] = v
    out = {}
    step = float(np.median(np.diff(np.unique(df["time"])))) if df["time"].nunique() > 1 else 1.0
    stop = float(df["time"].max()) + step if end is None else float(end)
    for market, g in df.groupby("market", sort=False):
        g = g.sort_values("time", kind="stable")
        if g["time"].duplicated().any():
            t = g["time"][g["time"].duplicated()].iloc[0]
            raise CapsimError(f"{path}: market {market!r} has two rows at time {t:g}; give one state per time")
        t = g["time"].to_numpy(dtype=float)
        if t[0] != 0:
            raise CapsimError(f"{path}: market {market!r} starts at time {t[0]:g}; every market needs a row at time 0")
        if stop <= t[-1]:
            raise CapsimError(f"{path}: end {stop:g} s is not after market {market!r}'s last row ({t[-1]:g} s)")
        out[str(market)] = AvailabilitySeries(str(market), t, g["available"].to_numpy() >= min_count, stop,
                                              source=str(path))
    return out


def read_availability(path: str | Path | Sequence[str | Path], format: str = "skypilot", *,
                      encoding: str = "available", min_count: float = 1, end: float | None = None,
                      base: Path | None = None) -> Mapping[str, AvailabilitySeries]:
    """Every market's series in ``path`` (a file, a directory of SkyPilot files, or a list of files), by name.

    Relative paths are taken from ``base`` (a scenario's folder). ``encoding`` and ``min_count`` say what a value
    means (see the module docstring); ``end`` closes a CSV series.
    """
    if format not in FORMATS:
        raise CapsimError(f"availability trace: unknown format {format!r}; known formats: {', '.join(FORMATS)}")
    if encoding not in ENCODINGS:
        raise CapsimError(f"availability trace: unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}")
    if isinstance(min_count, bool) or not isinstance(min_count, (int, float)) or not min_count > 0:
        raise CapsimError(f"availability trace: min_count: expected a count > 0, found {min_count!r}")
    if format == "csv" and encoding != "available":
        raise CapsimError("availability trace: encoding: a CSV's 'available' column says when a market is available; "
                          f"encoding {encoding!r} applies only to the skypilot format")
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    files: list[Path] = []
    for p in paths:
        q = Path(p)
        q = q if q.is_absolute() or base is None else base / q
        if q.is_dir():
            found = sorted(q.glob("*.json" if format == "skypilot" else "*.csv"))
            if not found:
                raise CapsimError(f"{q}: no {format} availability files in this directory")
            files.extend(found)
        elif q.is_file():
            files.append(q)
        else:
            raise CapsimError(f"{q}: no such availability trace file or directory")
    out: dict[str, AvailabilitySeries] = {}
    for f in files:
        got = {f.stem: _skypilot_file(f, encoding, min_count)} if format == "skypilot" else _csv_file(f, min_count, end)
        for name, s in got.items():
            if name in out:
                raise CapsimError(f"{f}: market {name!r} is also in {out[name].source}; name each market once")
            out[name] = s
    return out
