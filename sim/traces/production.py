"""What the readers of production traces share: reading a (compressed) CSV file in one of a format's column
layouts, times as seconds, the shared options, and the trace table of jobs known by a measured run.

A production trace records that a job ran D seconds on G GPUs (of a GPU model the trace may name); it rarely says
what the job was. Its readers therefore give each job a measured run (``duration``, ``measured_gpus``,
``measured_gpu``) that a runtime model for trace jobs (``predictors.trace``) turns into a runtime on every
configuration. ``elastic`` False keeps the job's GPU count as its request (a gang of that many GPUs, started and
stopped together, as the trace ran it); True lets the policy choose the count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.model import CapsimError
from sim.traces.base import TraceReader
from sim.traces.report import Cleaning, check_common

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ProductionTrace", "read_csv", "pick_layout", "epoch_seconds", "numbers", "demand", "check_quantile",
           "beside"]


class ProductionTrace(TraceReader):
    """A reader of a production trace with the shared options (set by ``_common`` from the subclass's ``__init__``):

    ``start``/``end``: keep the jobs submitted in [start, end) seconds after the trace's first arrival;
    ``sample``: keep N jobs drawn uniformly (``seed``); ``failed``: ``keep`` or ``drop`` jobs that failed or were
    killed (formats that record it); ``elastic``: see the module docstring.
    """

    def _common(self, start: float | None, end: float | None, sample: int | None, seed: int, failed: str,
                elastic: bool) -> None:
        check_common(self.name, start, end, sample, seed, failed)
        if not isinstance(elastic, bool):
            raise CapsimError(f"trace format {self.name!r}: elastic must be true or false, got {elastic!r}")
        self.start, self.end, self.sample, self.seed, self.failed, self.elastic = \
            start, end, sample, seed, failed, elastic

    def _select(self, c: Cleaning) -> None:
        """The shared selections, in order: sort by arrival, the time window, the sample."""
        c.sort("submit_time")
        c.window(self.start, self.end)
        c.sample(self.sample, self.seed)

    def _done(self, c: Cleaning, columns: Mapping[str, Any], gpus: Any) -> pd.DataFrame:
        """The trace table of ``columns`` plus the GPU columns (the measured count, and the request: empty when
        ``elastic``), with the cleaning's report."""
        import pandas as pd

        out = pd.DataFrame(dict(columns))
        out["measured_gpus"] = gpus
        out["gpus"] = None if self.elastic else gpus
        c.table = out
        return c.finish()

    @staticmethod
    def _whole(c: Cleaning, demand: np.ndarray, rule: str) -> tuple[np.ndarray, np.ndarray]:
        """Whole GPUs for a demand of possibly fractional GPUs (rounded up), and the share of each GPU a non-whole
        demand uses (NaN where it is whole), the jobs with a share counted under ``rule``."""
        whole = np.ceil(demand - 1e-9)
        share = np.where(demand < whole, demand / whole, np.nan)
        c.note(int(np.isfinite(share).sum()), rule, "kept with their share of each GPU (gpu_share)")
        return whole.astype(int), share


def read_csv(path: Path, kind: str, *, header: bool = True, names: Sequence[str] | None = None,
             dtype: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """A CSV file (gzip, bz2, zip, xz or a one-file tar archive by its suffix), or a ``CapsimError`` naming it."""
    import pandas as pd

    compression: Any = "infer"
    if path.name.endswith((".tar.gz", ".tgz", ".tar")):
        compression = "tar"
    try:
        return pd.read_csv(path, header=0 if header else None, names=None if names is None else list(names),
                           dtype=dtype, compression=compression,
                           low_memory=False)
    except FileNotFoundError:
        raise CapsimError(f"{path}: no such file (expected {kind})") from None
    except Exception as e:  # noqa: BLE001 (any parsing failure is the user's file)
        raise CapsimError(f"{path}: cannot read {kind}: {type(e).__name__}: {e}") from None


def pick_layout(path: Path, columns: Sequence[str], layouts: Mapping[str, Sequence[str]]) -> str:
    """The first layout whose columns the file has, or a ``CapsimError`` naming each layout's columns."""
    have = set(columns)
    for name, needed in layouts.items():
        if set(needed) <= have:
            return name
    expected = "; ".join(f"{name}: {', '.join(cols)}" for name, cols in layouts.items())
    raise CapsimError(f"{path}: header {list(columns)[:12]} matches no known layout of this trace (expected the "
                      f"columns of one of them: {expected})")


def epoch_seconds(values: Any) -> np.ndarray:
    """Seconds of date-time texts (``YYYY-MM-DD HH:MM:SS``, with or without a zone; zones are honoured, naive times
    taken as given), NaN where a cell is empty or not a date."""
    import pandas as pd

    s = pd.Series(values, dtype=object)
    parsed = pd.to_datetime(s, errors="coerce", utc=True, format="ISO8601")
    return (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)


def numbers(values: Any) -> np.ndarray:
    """A column as floats, NaN where a cell is empty or not a number."""
    import pandas as pd

    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)


def demand(arrival: np.ndarray, duration: np.ndarray, gpus: np.ndarray, quantile: float = 1.0) -> float:
    """The GPUs in use at once if every job ran from its arrival for its duration (the demand the trace records,
    before any queueing; ends before starts at a tie): its peak for ``quantile`` 1, else the level the demand stays
    at or below for that fraction of the time between the first arrival and the last end."""
    if len(arrival) == 0:
        return 0.0
    times = np.concatenate([arrival, arrival + duration])
    delta = np.concatenate([gpus, -gpus]).astype(float)
    order = np.lexsort((delta, times))
    level = np.cumsum(delta[order])
    if quantile >= 1:
        return float(level.max())
    held = np.diff(times[order])
    by_level = np.argsort(level[:-1], kind="stable")
    share = np.cumsum(held[by_level]) / max(held.sum(), 1e-300)
    return float(level[:-1][by_level][min(int(np.searchsorted(share, quantile)), len(share) - 1)])


def check_quantile(fmt: str, quantile: Any) -> None:
    """The ``quantile`` option of a reader whose hardware is sized from its jobs' demand."""
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 < quantile <= 1:
        raise CapsimError(f"trace format {fmt!r}: quantile must be a fraction of the time in (0, 1] (1: the peak "
                          f"demand), got {quantile!r}")


def beside(path: Path, name: str | None, default: str | None) -> Path | None:
    """A companion file named by a reader option: absolute, or relative to the trace file's folder; ``default`` (or
    its gzip-compressed ``.gz``) when the option is not given, None when neither exists."""
    if name is None:
        if default is None:
            return None
        return next((p for p in (path.parent / default, path.parent / f"{default}.gz") if p.exists()), None)
    p = Path(name)
    return p if p.is_absolute() else path.parent / p


def whole(x: float) -> int:
    """A GPU count as a whole number (a count read as a float)."""
    return int(math.floor(x + 0.5))
