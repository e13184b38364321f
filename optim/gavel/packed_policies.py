"""Gavel's packing policies under Gavel's names, on the packing round mechanism (``optim.gavel.packed``):
``fifo_packed``, ``gandiva``, and the LP policies ``max_min_fairness_packed``, ``finish_time_fairness_packed`` and
``min_total_duration_packed`` (``docs/gavel.md``, "Packing")."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from optim.base import register
from optim.gavel.ecos_cone import ecos_outcome
from optim.gavel.fairness import SLACK, FinishTimeState, horizon, isolated, least_root, newton_root
from optim.gavel.jobs import JobTable
from optim.gavel.packed import Packed, PairTable
from optim.gavel.packed_alloc import GandivaPairs, fifo_packed, normalized_pair_rate
from optim.gavel.packed_lp import (
    Combos,
    LeastPackedShare,
    LPFailed,
    centre_packed,
    ecos_finish_time,
    ecos_packed,
    max_min_packed,
    mixed_scale_refusal,
)

__all__ = ["FifoPacked", "Gandiva", "MaxMinFairnessPacked", "MaxMinFairnessPackedMixed", "MinTotalDurationPacked",
           "MinTotalDurationPackedMixed", "FinishTimeFairnessPacked", "FinishTimeFairnessPackedMixed"]


def _members(table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's members as positions in ``rows``."""
    pos = np.full(max(table.size, 1), -1, dtype=np.int64)
    pos[rows] = np.arange(len(rows))
    row = table.row
    return (pos[[row[int(a)] for a in pairs.a[prow]]].astype(np.int64),
            pos[[row[int(b)] for b in pairs.b[prow]]].astype(np.int64))


@register("fifo_packed")
class FifoPacked(Packed):
    """Gavel's ``fifo_packed``: ``fifo_perf``'s pass, then the queue packed onto the placed jobs while a pair's
    normalised throughput exceeds ``threshold`` (``optim.gavel.packed_alloc.fifo_packed``, with Gavel's dropped
    queue head); a job runs only in what it is allocated."""

    fifo: ClassVar[bool] = True

    def __init__(self, recompute_interval: float = 1920.0, type_order: list[str] | None = None, seed: int = 0,
                 threshold: float = 1.5):
        """``threshold``: the least normalised throughput of a pair (Gavel's ``packing_threshold``)."""
        self.threshold = threshold
        super().__init__(recompute_interval, type_order, seed)
        self.check_param("threshold", float, low=0.0)

    def allocate_pairs(self, table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray,
                       gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pa, pb = _members(table, rows, pairs, prow)
        return fifo_packed(table.speed[rows], table.sf[rows], gpus, self._by_name, pa, pb, pairs.speed_a[prow],
                           pairs.speed_b[prow], self.threshold)


@register("gandiva")
class Gandiva(Packed):
    """Gavel's ``gandiva``: jobs alone share the cluster equally while they fit; when they do not, jobs of equal GPU
    counts are paired at random (from the run's seed) and packed, and a pair whose normalised throughput over all
    types is below 1 is split at the next recompute (``optim.gavel.packed_alloc.GandivaPairs``)."""

    _pairing: GandivaPairs

    def allocate_pairs(self, table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray,
                       gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pa, pb = _members(table, rows, pairs, prow)
        score = normalized_pair_rate(table.speed[rows], pa, pb, pairs.speed_a[prow], pairs.speed_b[prow])
        index = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(pairs.a[prow], pairs.b[prow]))}
        return self._pairing.allocate(table.ids[rows].tolist(), table.sf[rows].astype(float), gpus, index,
                                      lambda a, b: float(score[index[(a, b)]]) if (a, b) in index else 0.0,
                                      len(prow))

    def forget(self, jobs: list[int]) -> None:
        self._pairing.forget(jobs)

    def _restart(self) -> None:
        super()._restart()
        self._pairing = GandivaPairs(self.seed)


class _PackedLP(Packed):
    """What Gavel's LP packing policies share: the combinations as ``Combos``, Gavel's refusal of a mix of GPU
    counts (``mixed`` lifts it: the corrected model, registered under the name with ``_mixed``) and Gavel's pairs."""

    def __init__(self, recompute_interval: float = 1920.0, type_order: list[str] | None = None, seed: int = 0,
                 idle_pairs: bool = True):
        """``idle_pairs``: keep in the LP, as Gavel does, every pair of active jobs of the same GPU count, also the
        pairs that may share no type (rate 0 everywhere: they never run). The LP's answer gives them some share
        (an interior point does), which their members then spend idle; ``false`` leaves them out (docs/gavel.md,
        "Packing")."""
        self.idle_pairs = idle_pairs
        super().__init__(recompute_interval, type_order, seed)
        self.check_param("idle_pairs", bool)

    def keeps_idle_pairs(self) -> bool:
        return self.idle_pairs

    mixed: ClassVar[bool] = False
    single_gpu_only: ClassVar[bool] = True
    """It refuses a mix of GPU counts, as Gavel fails on one (the conformance worlds give it single-GPU jobs); the
    ``_mixed`` models do not."""

    def combos(self, table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray) -> Combos:
        pa, pb = _members(table, rows, pairs, prow)
        speed = self.steps_rate(rows)
        return Combos(speed, table.sf[rows], pa, pb, pairs.speed_a[prow], pairs.speed_b[prow])

    def allocate_pairs(self, table: JobTable, rows: np.ndarray, pairs: PairTable, prow: np.ndarray,
                       gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(rows)
        if n == 0:
            return np.zeros((0, len(gpus))), np.zeros((len(prow), len(gpus)))
        if not self.mixed:
            mixed_scale_refusal(self.name, f"{self.name}_mixed", table.sf[rows])
        try:
            x = self.solve(table, rows, self.combos(table, rows, pairs, prow), gpus)
        except (LPFailed, np.linalg.LinAlgError) as e:  # no job is lost: jobs alone, equal shares, until the next
            self.fall_back("isolated", f"{type(e).__name__}: {e}")
            return isolated(table.sf[rows].astype(float), gpus), np.zeros((len(prow), len(gpus)))
        return x[:n], x[n:]

    def solve(self, table: JobTable, rows: np.ndarray, c: Combos, gpus: np.ndarray) -> np.ndarray:
        """X of every combination (jobs, then pairs)."""
        raise NotImplementedError(self)


@register("max_min_fairness_packed")
class MaxMinFairnessPacked(_PackedLP):
    """Gavel's ``max_min_fairness_packed``: maximise the smallest job's rate under X, over jobs alone and pairs, times
    its GPUs, divided by its priority weight and by its rate under an equal split of every type (alone); HiGHS's
    interior-point answer (``optim.gavel.packed_lp``). Gavel refuses (crashes on) a mix of GPU counts:
    ``max_min_fairness_packed_mixed`` does not."""

    def solve(self, table: JobTable, rows: np.ndarray, c: Combos, gpus: np.ndarray) -> np.ndarray:
        weight = table.weight[rows].astype(np.float32)[:, None]
        single = (c.rate.astype(np.float32) / weight).astype(float)
        tpa = (c.tpa.astype(np.float32) / weight[c.pa]).astype(float)
        tpb = (c.tpb.astype(np.float32) / weight[c.pb]).astype(float)
        by_name = self._by_name
        share = gpus[by_name].astype(float) / len(rows)
        prop = np.sum(c.rate[:, by_name] * (share / share.sum())[None, :], axis=1)  # Gavel's proportional policy
        sf = c.sf.astype(float)
        scaled = Combos(single * sf, c.sf, c.pa, c.pb, tpa * sf[c.pa], tpb * sf[c.pb])
        return ecos_packed(scaled, gpus, 1.0 / prop, None)


@register("max_min_fairness_packed_mixed")
class MaxMinFairnessPackedMixed(MaxMinFairnessPacked):
    """``max_min_fairness_packed`` corrected: jobs of different GPU counts may be active together (each job's
    constraint and rate over its own combinations)."""

    mixed: ClassVar[bool] = True
    single_gpu_only: ClassVar[bool] = False


@register("min_total_duration_packed")
class MinTotalDurationPacked(_PackedLP):
    """Gavel's ``min_total_duration_packed``: the least horizon T by which every active job can finish (each needs
    a rate of R_j/T, alone or in pairs), as Gavel's bisection settles on it (``optim.gavel.fairness.horizon``, from
    the least horizon one HiGHS LP gives), and X the interior-point answer to Gavel's feasibility problem at T."""

    def solve(self, table: JobTable, rows: np.ndarray, c: Combos, gpus: np.ndarray) -> np.ndarray:
        rate32 = c.rate.astype(np.float32).astype(float)
        c = Combos(rate32, c.sf, c.pa, c.pb, c.tpa.astype(np.float32).astype(float),
                   c.tpb.astype(np.float32).astype(float))
        remaining = np.maximum(self.remaining(rows), 1.0)
        best = max_min_packed(c, gpus, np.ones(c.n), remaining, ipm=False)[1]
        t = horizon(1.0 / best)
        return ecos_packed(c, gpus, np.ones(c.n), remaining / t)


@register("min_total_duration_packed_mixed")
class MinTotalDurationPackedMixed(MinTotalDurationPacked):
    """``min_total_duration_packed`` corrected: jobs of different GPU counts may be active together."""

    mixed: ClassVar[bool] = True
    single_gpu_only: ClassVar[bool] = False


@register("finish_time_fairness_packed")
class FinishTimeFairnessPacked(_PackedLP):
    """Gavel's ``finish_time_fairness_packed`` (Themis with pairs): minimise the largest ratio of a job's expected
    finish time under X (its rate over jobs alone and pairs) to that under ``isolated`` (counting the isolated time
    it has used up). By default Gavel's cone program solved as ECOS solves it (``point``); otherwise the least ratio
    by root finding on HiGHS LPs and X a point of the feasibility problem just above it."""

    _state: FinishTimeState

    def __init__(self, recompute_interval: float = 1920.0, type_order: list[str] | None = None, seed: int = 0,
                 idle_pairs: bool = True, warm: bool = False, point: str = "ecos"):
        """``point``: how X is found. ``ecos``: Gavel's cone program itself (``finish_time_cone``: cvxpy's
        ``inv_pos`` and ``maximum`` as cvxpy hands them to ECOS) solved by following ECOS's iterations
        (``optim.gavel.ecos_cone``), the least ratio and the point together as Gavel gets them. Where the iterations
        end without an answer (Gavel's simulator crashes there) their best iterate, or, without one, the
        ``interior`` answer, recorded as a fallback in the round's plan. ``interior``: the least ratio by root
        finding on HiGHS LPs, then HiGHS's interior-point answer to the feasibility problem just above it;
        ``centre``: the same ratio, then that problem's analytic centre with ECOS's cone weighting
        (``centre_packed``). Both pick another point of the optimal set than ECOS's, and the schedule follows the
        point (docs/gavel.md, "Held-out check of the LP packing policies").

        ``warm`` (``interior`` and ``centre`` only): find the least ratio on one LP re-solved from its last basis at
        each trial (a few simplex iterations instead of a new solve), by Newton steps whose slope comes from the
        LP's duals (``newton_root``, as the unpacked policy; fewer trials than regula falsi). The ratio is the same
        to 1e-10, but the shares follow its last bits, so runs differ within the policy's noise."""
        self.warm = warm
        self.point = point
        super().__init__(recompute_interval, type_order, seed, idle_pairs)
        self.check_param("warm", bool)
        self.check_param("point", str, choices=("interior", "centre", "ecos"))

    def solve(self, table: JobTable, rows: np.ndarray, c: Combos, gpus: np.ndarray) -> np.ndarray:
        c = Combos(c.rate.astype(np.float32).astype(float), c.sf, c.pa, c.pb,
                   c.tpa.astype(np.float32).astype(float), c.tpb.astype(np.float32).astype(float))
        sf = table.sf[rows].astype(float)
        remaining = np.maximum(self.remaining(rows), 1.0)
        age = self.ages(rows)
        iso = (self.steps_rate(rows) * isolated(sf, gpus)).sum(axis=1)
        used = self._state.update(table.ids[rows].tolist(), remaining, iso)
        denom = used + remaining / iso

        def need(rho: float) -> np.ndarray:
            return remaining / np.maximum(rho * denom - age, 1e-300)

        if self.point == "ecos":
            x, code = ecos_finish_time(c, gpus, remaining, age, denom)
            use, fell = ecos_outcome(code, x, ("interior", "HiGHS's interior point used"))
            if fell is not None:
                self.fall_back(*fell)
            if use:
                return x
        lo = float(np.max(age / denom))
        hi = float(np.max((age + remaining / np.maximum(iso, 1e-300)) / denom))
        if self.warm:
            share = LeastPackedShare(c, gpus)

            def value(rho: float) -> tuple[float, float]:
                room = rho * denom - age
                if (room <= 0).any():  # a job past its fair finish time at rho: no allocation meets it
                    return 0.0, 0.0
                s = share.value(remaining / room)
                return s, -float(share.gradient() @ (remaining * denom / room ** 2))  # d need_j / d rho

            rho = newton_root(value, lo, hi)
        else:
            rho = least_root(lambda r: max_min_packed(c, gpus, np.ones(c.n), need(r), ipm=False)[1], lo, hi)
        if self.point == "centre":
            return centre_packed(c, gpus, need(rho * (1.0 + SLACK)))
        return max_min_packed(c, gpus, np.ones(c.n), need(rho * (1.0 + SLACK)), feasible=True)[0]

    def _restart(self) -> None:
        super()._restart()
        self._state = FinishTimeState()


@register("finish_time_fairness_packed_mixed")
class FinishTimeFairnessPackedMixed(FinishTimeFairnessPacked):
    """``finish_time_fairness_packed`` corrected: jobs of different GPU counts may be active together."""

    mixed: ClassVar[bool] = True
    single_gpu_only: ClassVar[bool] = False
