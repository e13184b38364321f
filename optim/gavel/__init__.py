"""Gavel's heterogeneity-aware time-sliced policies (``fifo_perf``, ``max_min_fairness_perf``, ``gavel_fifo``): the
allocations (``allocation``), the round mechanism they share (``mechanism``) and the policies (``policies``)."""

from optim.gavel import policies  # noqa: F401  (registers fifo_perf, max_min_fairness_perf, gavel_fifo)
