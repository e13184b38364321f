"""Uniform Progress for many jobs: which market (spot, on demand, or both) each waiting job may be started on.

Can't Be Late's Uniform Progress keeps one job's progress at the pace work / deadline: ahead of the pace it runs
only on spot (waiting when there is none), behind it it may use on demand, and its Safety Net goes on demand once
the slack no longer covers the work plus the overheads. For a cluster's jobs, at a decision at time t each waiting
job j (submitted at s, due at D, a fraction ``done`` of its work done) is given:

- **on demand only** when starting now on its fastest on-demand configuration, boot and restart included, would
  leave less slack before D than a revocation could cost: the work since the last checkpoint (at most a checkpoint
  interval, the whole run without checkpoints) plus ``margin`` times the restart overhead and the spot VM's boot
  (the paper's two overheads): the Safety Net, so a job that would otherwise be late is not risked on spot;
- **spot only** when it is on or ahead of the uniform pace, done ≥ (t − s) / (D − s): it can afford to wait for
  spot (a job without a deadline is always ahead), also while its spot market has no VM to give
  (``Snapshot.unavailable``): it is judged again at the next decision, at the latest when the market is back;
- **both** when it is behind the pace: it must run now, on whichever market its policy finds cheaper.

A job with no usable configuration on one of the markets keeps the other. The rule only narrows the configurations a
policy may choose, by setting the forbidden ones' estimates to inf (``uniform_progress_snapshot``); running jobs are
left as they are. Policies apply it with ``spot_rule: uniform_progress``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from optim.common import ConfigTable, config_table
from sim.catalogue import SPOT_SUFFIX
from sim.model import CapsimError, ClusterRules, JobView, Snapshot

__all__ = ["SPOT_RULES", "check_spot_rule", "markets", "uniform_progress_snapshot"]

SPOT_RULES = ("uniform_progress",)
"""The values of a policy's ``spot_rule`` parameter (``None``: no rule)."""


def check_spot_rule(policy: str, rule: str | None) -> None:
    """A clear error for an unknown ``spot_rule``."""
    if rule is not None and rule not in SPOT_RULES:
        raise CapsimError(f"policy {policy!r}: spot_rule must be one of {', '.join(SPOT_RULES)} or null, got {rule!r}")


_TWINS: dict[int, tuple[ConfigTable, np.ndarray]] = {}


def _twins(table: ConfigTable) -> np.ndarray:
    """Per configuration, the index of its on-demand twin (same VM type without the spot suffix, same GPUs) if it is
    a spot one with a twin, else -1 (cached per table)."""
    hit = _TWINS.get(id(table))
    if hit is not None and hit[0] is table:
        return hit[1]
    twin = np.full(len(table.configs), -1, dtype=int)
    for k, c in enumerate(table.configs):
        if c.vm.spot:
            twin[k] = table.index.get((c.vm.name.removesuffix(SPOT_SUFFIX), c.gpus), -1)
    if len(_TWINS) > 16:
        _TWINS.clear()
    _TWINS[id(table)] = (table, twin)
    return twin


def markets(jv: JobView, now: float, table: ConfigTable, rules: ClusterRules, margin: float = 2.0,
            unavailable: np.ndarray | None = None) -> str:
    """``"on_demand"``, ``"spot"`` or ``"both"``: the markets waiting job ``jv`` may start on at ``now`` (see the
    module docstring). ``unavailable`` marks the spot configurations whose market has no VM now (their estimates are
    inf for this decision); the job counts on them at its on-demand twin's runtime, so a job ahead of its pace waits
    for spot to come back, as Uniform Progress waits."""
    left = (1.0 - jv.done) * jv.estimates
    if unavailable is not None and unavailable.any():
        twin = _twins(table)
        back = unavailable & (twin >= 0)
        left = left.copy()
        left[back] = (1.0 - jv.done) * jv.estimates[twin[back]]
    ok = np.isfinite(left)
    od, spot = ok & ~table.spot, ok & table.spot
    if not od.any() or not spot.any():
        return "both"
    job = jv.job
    restart = rules.restart_overhead
    resume = restart if jv.done > 0 else 0.0
    finish_od = now + float(np.min(left[od] + table.boot[od])) + resume
    lost = min(rules.checkpoint_interval, float(np.max(left[spot])))
    if job.deadline - finish_od < lost + margin * (restart + float(np.max(table.boot[spot]))):
        return "on_demand"
    span = job.deadline - job.submit_time
    pace = 0.0 if not math.isfinite(span) or span <= 0 else min(1.0, max(0.0, (now - job.submit_time) / span))
    return "spot" if jv.done >= pace else "both"


def uniform_progress_snapshot(snapshot: Snapshot, margin: float = 2.0) -> Snapshot:
    """``snapshot`` with each waiting job's estimates set to inf on the market ``markets`` forbids it."""
    table = config_table(snapshot.configs)
    if not table.any_spot or table.spot.all():
        return snapshot
    masked: dict[tuple[int, str], np.ndarray] = {}
    out = (np.array([vm in snapshot.unavailable for vm in table.vm_of], dtype=bool) if snapshot.unavailable
           else None)

    def view(jv: JobView) -> JobView:
        which = markets(jv, snapshot.time, table, snapshot.rules, margin, out)
        if which == "both":
            return jv
        key = (id(jv.estimates), which)
        est = masked.get(key)
        if est is None:
            est = np.where(table.spot if which == "on_demand" else ~table.spot, np.inf, jv.estimates)
            est.setflags(write=False)
            masked[key] = est
        return replace(jv, estimates=est)

    return replace(snapshot, waiting=tuple(map(view, snapshot.waiting)))
