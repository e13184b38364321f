"""Confidence intervals of a mean over runs, honest about what few runs can say.

Two methods, each named wherever an interval is shown:

- ``t``: the Student-t 95% interval of the mean, clipped to the metric's domain (a cost is never below 0, a
  utilisation never above 1), so ``16.43 ± 27.81`` becomes ``16.43 [0.00, 44.24]``.
- ``bootstrap``: the 95% percentile bootstrap interval of the mean, from a fixed number of resamples drawn with a
  fixed seed, so the same runs always give the same interval.

With fewer than ``FEW_RUNS`` runs behind a mean the interval says little (the t-interval is very wide; the bootstrap
one is too narrow, it cannot see variation the few runs missed): ``few_runs_warning`` says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["METHODS", "FEW_RUNS", "interval", "method_note", "few_runs_warning", "metric_domain"]

METHODS = {
    "t": "95% t-interval of the mean over runs, clipped to the metric's domain",
    "bootstrap": "95% percentile bootstrap interval of the mean over runs (10,000 resamples, seed 0)",
}
"""Interval methods by name, with the sentence that names them in reports and figures."""

SHORT = {"t": "95% t-interval", "bootstrap": "95% bootstrap interval"}
"""The method's name in a figure legend."""

FEW_RUNS = 5
"""Below this many runs behind a mean, reports warn that its interval says little."""

RESAMPLES = 10_000
SEED = 0


def metric_domain(name: str) -> tuple[float | None, float | None]:
    """The range a metric's values can take, from its declaration in ``sim.metrics`` (unbounded if undeclared)."""
    from sim.metrics import METRICS

    m = METRICS.get(name)
    return (None, None) if m is None else (m.lower, m.upper)


def interval(values: Sequence[float] | np.ndarray, method: str = "t", lower: float | None = None,
             upper: float | None = None) -> tuple[float, float]:
    """The 95% interval ``(low, high)`` of the mean of ``values`` (NaNs ignored) by ``method``, clipped to
    ``[lower, upper]``; ``(nan, nan)`` with fewer than two values."""
    if method not in METHODS:
        raise ValueError(f"unknown interval method {method!r}; known: {', '.join(METHODS)}")
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    n = len(v)
    if n < 2:
        return math.nan, math.nan
    mean = float(v.mean())
    if method == "t":
        from scipy.special import stdtrit  # Student's t quantile (what scipy.stats.t.ppf computes), light to import

        half = float(stdtrit(n - 1, 0.975) * np.std(v, ddof=1) / math.sqrt(n))
        lo, hi = mean - half, mean + half
    else:
        rng = np.random.default_rng(SEED)
        means = v[rng.integers(0, n, size=(RESAMPLES, n))].mean(axis=1)
        lo, hi = (float(x) for x in np.percentile(means, [2.5, 97.5]))
    if lower is not None:
        lo, hi = max(lo, lower), max(hi, lower)
    if upper is not None:
        lo, hi = min(lo, upper), min(hi, upper)
    return lo, hi


def method_note(method: str) -> str:
    """One sentence naming what a cell shows."""
    return f"cells: mean [{METHODS[method]}]; runs: the runs behind each row"


def few_runs_warning(n_min: int, method: str) -> str | None:
    """A warning when the fewest runs behind any cell (``n_min``) is too few for its interval to say much."""
    if n_min >= FEW_RUNS:
        return None
    if n_min <= 1:
        return "only one run behind some cells: they have no interval; run more seeds (e.g. seeds: 0-9)"
    why = "t-intervals from so few runs are very wide" if method == "t" else \
        "bootstrap intervals from so few runs are too narrow (they cannot see variation the runs missed)"
    return (f"only {n_min} runs behind some cells: {why}; differences the intervals do not separate are not "
            f"established. Run more seeds (e.g. seeds: 0-9)")
