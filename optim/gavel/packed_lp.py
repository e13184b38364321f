"""The LPs of Gavel's packing policies, in matrix form for HiGHS (PACKING.md §3 of the Gavel notes; ``docs/gavel.md``,
"Packing").

Variables X[c, w]: the share of time combination c (a job alone, or a pair) runs on type w; combinations are the n
jobs, then the pairs. Gavel's base constraints: X ≥ 0 (and ≤ 1, its clip); Σ_c sf_c·X[c,w] ≤ gpus[w], a pair counted
once; Σ_{c ∋ j} Σ_w X[c,w] ≤ 1 for every job j. A job's rate under X is Σ_{c ∋ j, w} rate[j, c, w]·X[c,w], its rate
alone or its own rate in the pair. The matrix has one column per (combination, type) and a few entries per column,
so a cluster with hundreds of active jobs (tens of thousands of pairs) is still a sparse LP that HiGHS solves in
well under a second.

Where the optimum is not unique the schedule depends on which optimal point the solver returns. ``ecos_packed`` gives
the point Gavel's ECOS returns (``optim.gavel.ecos_lp``, ECOS's iterations on the sparse matrix); ``max_min_packed``
gives HiGHS's interior-point answer (no crossover, no presolve: a point inside the optimal face, not ECOS's) or,
where only the optimal value matters, a vertex; ``centre_packed`` the analytic centre of a feasibility set, the
point ECOS approaches on finish-time fairness's cone program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from optim.gavel.ecos_cone import ecos_cone
from optim.gavel.ecos_lp import ecos_lp
from optim.gavel.lp import damped_step, limit
from optim.highs import new_highs
from sim.model import CapsimError

__all__ = ["Combos", "LPFailed", "LeastPackedShare", "max_min_packed", "ecos_packed", "centre_packed",
           "mixed_scale_refusal", "finish_time_cone", "ecos_finish_time"]


class LPFailed(RuntimeError):
    """A solver gave no usable answer to a packed LP (the policy falls back and records it)."""


@dataclass(frozen=True)
class Combos:
    """The combinations of one allocation: ``rate`` (n × m) the jobs' rates alone, ``sf`` (n × m) their GPUs; the
    pairs' members ``pa``, ``pb`` (positions among the n jobs) and their rates in the pair ``tpa``, ``tpb``
    (pairs × m)."""

    rate: np.ndarray
    sf: np.ndarray
    pa: np.ndarray
    pb: np.ndarray
    tpa: np.ndarray
    tpb: np.ndarray

    @property
    def n(self) -> int:
        return self.rate.shape[0]

    @property
    def m(self) -> int:
        return self.rate.shape[1]

    @property
    def size(self) -> int:
        return self.n + len(self.pa)

    def members(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(job, combination, rates on the types) of every membership: each job in its own combination, each pair's
        two members in the pair's."""
        n, q = self.n, len(self.pa)
        job = np.concatenate([np.arange(n), self.pa, self.pb])
        combo = np.concatenate([np.arange(n), n + np.arange(q), n + np.arange(q)])
        rate = np.concatenate([self.rate, self.tpa, self.tpb]) if q else self.rate
        return job.astype(np.int64), combo.astype(np.int64), rate

    def combo_sf(self) -> np.ndarray:
        """GPUs of each combination on each type (a pair takes its members' GPUs once)."""
        return np.concatenate([self.sf, self.sf[self.pa]]).astype(float) if len(self.pa) else self.sf.astype(float)


def mixed_scale_refusal(policy: str, corrected: str, sf: np.ndarray) -> None:
    """Gavel's LP packing policies assume every job is in as many combinations (one alone, one per active job of its
    GPU count); with jobs of different GPU counts active they crash (cvxpy's reshape) or, when the numbers happen to
    divide, attach the per-job constraints and objective terms to the wrong jobs. Refuse as Gavel fails."""
    if not len(sf):
        return
    count = sf.max(axis=1)
    kinds, sizes = np.unique(count, return_counts=True)
    if len(kinds) > 1 and len(set(sizes.tolist())) > 1:
        mix = ", ".join(f"{int(s)} of {int(k)} GPU{'s' if k > 1 else ''}" for k, s in zip(kinds, sizes))
        raise CapsimError(f"policy {policy!r}: jobs of different GPU counts are active together ({mix}). Gavel's "
                          f"{policy} assumes every job is in as many pairs, which is false then: Gavel's simulator "
                          f"crashes (cvxpy 'Invalid reshape dimensions'), or, where the sizes divide, attaches each "
                          f"job's constraints to other jobs. Use {corrected!r}, the corrected model, which keeps each "
                          f"job's constraints and rate on its own combinations")


def max_min_packed(c: Combos, gpus: np.ndarray, coef: np.ndarray, need: np.ndarray | None = None,
                   ipm: bool = True, feasible: bool = False) -> tuple[np.ndarray, float]:
    """max s  s.t.  Σ_{c ∋ j, w} coef_j·rate[j,c,w]·X[c,w] ≥ s·need_j for every job j (need 1 by default), the base
    constraints. Returns (X of all combinations clipped to [0, 1], s). ``coef`` scales each job's rates (its
    normalisation); with ``ipm`` the point is HiGHS's interior-point answer, else a vertex (only s matters). With
    ``feasible`` s is fixed at 1 and nothing is maximised: Gavel's feasibility problems (``Maximize(1)``), whose
    interior-point answer is a point near the centre of the feasible set."""
    h = new_highs()
    h.setOptionValue("random_seed", 0)
    if ipm:
        for option, value in (("solver", "ipm"), ("run_crossover", "off"), ("presolve", "off")):
            h.setOptionValue(option, value)
    h.passModel(_max_min_model(c, gpus, coef, np.ones(c.n) if need is None else need, feasible))
    h.run()
    nx = c.size * c.m
    sol = _solution(h, nx + 1)
    return np.clip(sol[:nx].reshape(c.size, c.m), 0.0, 1.0), float(sol[nx])


class LeastPackedShare:
    """``max_min_packed``'s s (a vertex, coef 1) for one set of combinations and many ``need``: one HiGHS model whose
    s column takes each ``need`` in turn and is solved again from its last basis, a few simplex iterations where a
    new model takes hundreds (finish-time fairness's root finding solves it 20-60 times a recompute)."""

    def __init__(self, c: Combos, gpus: np.ndarray):
        self.c, self.gpus = c, gpus
        self._h: Any = None
        self._s = math.nan

    def value(self, need: np.ndarray) -> float:
        c = self.c
        n, nx = c.n, c.size * c.m
        h = self._h
        if h is None:
            h = self._h = new_highs()
            h.setOptionValue("random_seed", 0)
            h.passModel(_max_min_model(c, self.gpus, np.ones(n), need, False))
        else:
            for j, v in enumerate(need.tolist()):  # the job rows follow the n share rows and the m capacity rows
                h.changeCoeff(n + c.m + j, nx, v)
        h.run()
        self._s = float(_solution(h, nx + 1)[nx])
        return self._s

    def gradient(self) -> np.ndarray:
        """∂s/∂need_j at the last ``value``: −y_j·s, y_j the dual of job j's row (HiGHS's row dual, ≥ 0 here)."""
        c = self.c
        return -np.asarray(self._h.getSolution().row_dual, dtype=float)[c.n + c.m:] * self._s


def _max_min_model(c: Combos, gpus: np.ndarray, coef: np.ndarray, need: np.ndarray, feasible: bool) -> Any:
    """``max_min_packed``'s LP for HiGHS: columns X[c, w] at c·m + w, then s; rows: each job's share ≤ 1, each type's
    capacity, each job's bound s·need − rate·X ≤ 0."""
    import highspy

    n, m, size = c.n, c.m, c.size
    nx = size * m
    share, cap, gain = _rows(c, coef)
    s_col = sp.coo_matrix((need, (np.arange(n), np.zeros(n, dtype=int))), shape=(n, 1))
    a = sp.bmat([[share, None], [cap, None], [-gain, s_col]], format="csc")
    a.eliminate_zeros()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = nx + 1, 2 * n + m
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_ = np.concatenate([np.zeros(nx), [0.0 if feasible else 1.0]])
    lp.col_lower_ = np.concatenate([np.zeros(nx), [1.0 if feasible else 0.0]])
    lp.col_upper_ = np.concatenate([np.ones(nx), [1.0 if feasible else highspy.kHighsInf]])
    lp.row_lower_ = np.full(2 * n + m, -highspy.kHighsInf)
    lp.row_upper_ = np.concatenate([np.ones(n), gpus.astype(float), np.zeros(n)])
    mat = lp.a_matrix_
    mat.format_ = highspy.MatrixFormat.kColwise
    mat.start_ = a.indptr.astype(np.int32)
    mat.index_ = a.indices.astype(np.int32)
    mat.value_ = a.data.astype(float)
    return lp


def _solution(h: Any, size: int) -> np.ndarray:
    sol = np.asarray(h.getSolution().col_value, dtype=float)
    if len(sol) != size or not np.isfinite(sol).all():
        raise LPFailed(f"HiGHS returned no solution ({h.modelStatusToString(h.getModelStatus())})")
    return sol


def _rows(c: Combos, coef: np.ndarray) -> tuple[sp.coo_matrix, sp.coo_matrix, sp.coo_matrix]:
    """Each job's share, each type's GPUs, each job's rate (coef_j times its rates), over X[c, w] at column c·m + w."""
    n, m, size = c.n, c.m, c.size
    nx = size * m
    job, combo, rate = c.members()
    k = len(job)
    col = (combo[:, None] * m + np.arange(m)[None, :]).ravel()
    share = sp.coo_matrix((np.ones(k * m), (np.repeat(job, m), col)), shape=(n, nx))
    cap = sp.coo_matrix((c.combo_sf().ravel(), (np.tile(np.arange(m), size), np.arange(nx))), shape=(m, nx))
    gain = sp.coo_matrix(((coef[job][:, None] * rate).ravel(), (np.repeat(job, m), col)), shape=(n, nx))
    return share, cap, gain


def ecos_packed(c: Combos, gpus: np.ndarray, coef: np.ndarray, need: np.ndarray | None) -> np.ndarray:
    """ECOS's answer, as Gavel's cvxpy passes the problem to it, to: with ``need`` None, max t s.t. t ≤ each job's
    rate (coef_j times its rates, over its combinations), the base constraints (Gavel's max-min fairness); else the
    feasibility problem each job's rate ≥ need_j, the base constraints (Gavel's ``Maximize(1)``). X of all
    combinations, clipped to [0, 1] as Gavel clips it."""
    n, m, size = c.n, c.m, c.size
    nx = size * m
    share, cap, gain = _rows(c, coef)
    with_t = need is None
    blocks = [[-sp.eye(nx)], [cap], [share], [-gain]]
    if with_t:
        blocks = [[b[0], sp.coo_matrix((b[0].shape[0], 1))] for b in blocks[:3]]
        blocks.append([-gain, sp.coo_matrix((np.ones(n), (np.arange(n), np.zeros(n, dtype=int))), shape=(n, 1))])
    g = sp.bmat(blocks, format="csr")
    h = np.concatenate([np.zeros(nx), gpus.astype(float), np.ones(n), np.zeros(n) if need is None else -need])
    cost = np.zeros(g.shape[1])
    if with_t:
        cost[-1] = -1.0
    x, _ = ecos_lp(g, h, cost)  # an inaccurate answer is used, as Gavel uses it
    if not np.isfinite(x).all():
        raise LPFailed("the interior-point method diverged")
    return np.clip(x[:nx].reshape(size, m), 0.0, 1.0)


def centre_packed(c: Combos, gpus: np.ndarray, need: np.ndarray) -> np.ndarray:
    """The analytic centre of {X : the base constraints, each job's rate u_j ≥ need_j}, each job's rate row weighed
    2·log(u − need) − log(u), as ECOS sees a bound on a time R/u written with cvxpy's ``inv_pos`` (the weighting of
    ``optim.gavel.lp.centre(curved=True)``): the point ECOS approaches on Gavel's finish-time cone program when
    ``need`` is taken just above the least ratio, where the set is a thin slab around the optimal face. Damped Newton
    steps on the barrier, each solving the (2n + m)-row system A·D·Aᵀ + W⁻¹ (D = diag(X²), W the rows' curvature)
    densely. Where the set has no interior (the needs take all there is) the max-min LP's vertex."""
    n, m, size = c.n, c.m, c.size
    if n == 0:
        return np.zeros((size, m))
    cap = gpus.astype(float)
    share, cap_rows, gain = _rows(c, np.ones(n))
    a = sp.vstack([share, cap_rows, gain], format="csr")
    at = a.T.tocsr()
    x_mm, s = max_min_packed(c, gpus, np.ones(n), need, ipm=False)
    if not s > 1.0 + 1e-9:
        return x_mm
    # a strictly feasible start: the vertex, which meets s·need, moved towards a small even X that fills half of
    # every job's share and of every type
    counts = np.asarray(share.sum(axis=1)).ravel()
    per_type = np.asarray(cap_rows.sum(axis=1)).ravel()
    even = 0.5 * min(1.0 / counts.max(), float((cap / np.maximum(per_type, 1e-300)).min()))
    theta = 0.5 * (1.0 - 1.0 / s)
    x = (1.0 - theta) * x_mm.ravel() + theta * even
    top = np.concatenate([np.ones(n), cap])

    def slacks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ax = a @ x
        return top - ax[: n + m], ax[n + m:] - need

    def barrier(x: np.ndarray) -> float:
        room, dem = slacks(x)
        if (x <= 0).any() or (room <= 0).any() or (dem <= 0).any():
            return np.inf
        return -float(np.log(x).sum() + np.log(room).sum() + 2.0 * np.log(dem).sum() - np.log(dem + need).sum())

    f = barrier(x)
    for _ in range(100):
        room, dem = slacks(x)
        u = dem + need
        grad = -1.0 / x + at @ np.concatenate([1.0 / room, -(2.0 / dem - 1.0 / u)])
        curvature = np.concatenate([1.0 / room ** 2, 2.0 / dem ** 2 - 1.0 / u ** 2])
        d = x * x
        k = (a.multiply(d[None, :]) @ at).toarray() + np.diag(1.0 / curvature)
        dg = d * grad
        step = dg - d * (at @ np.linalg.solve(k, a @ dg))
        decrement = float(grad @ step)
        if decrement < 1e-12:
            break
        a_step = a @ step
        with np.errstate(divide="ignore", invalid="ignore"):
            t_max = min(limit(x, step), limit(room, -a_step[: n + m]), limit(dem, a_step[n + m:]))
        moved = damped_step(x, step, f, decrement, barrier, t_max)
        if moved is None:
            break
        x, f = moved
    return np.clip(x, 0.0, 1.0).reshape(size, m)


def finish_time_cone(c: Combos, gpus: np.ndarray, remaining: np.ndarray, age: np.ndarray, denom: np.ndarray
                     ) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray, int, list[int]]:
    """Gavel's finish-time fairness with packing as cvxpy hands it to ECOS: minimise t subject to
    (age_j + R_j·v_j)/E_j ≤ t for every job (the ``maximum``; with one job its ratio is the objective and there is no
    t), v_j ≥ 1/u_j written as the cone ‖(u_j − v_j, 2)‖ ≤ u_j + v_j (cvxpy's ``inv_pos``), u_j the job's rate under X,
    and the base constraints. Columns: t, X[c, w] at c·m + w, v; rows: the n bounds on t, X ≥ 0, capacity, shares
    (the linear rows), then three rows per job's cone. Returns (c, G, h, linear rows, cone sizes): the same rows and
    columns as cvxpy's, in an order of its own."""
    n, m, size = c.n, c.m, c.size
    nx = size * m
    share, cap, gain = _rows(c, np.ones(n))
    ratio = remaining / denom
    gain = gain.tocsr()
    vcol = sp.eye(n, format="csr")
    # each job's cone: rows −u − v, −u + v, 0 with h (0, 0, 2), the jobs' cones one after another
    at = np.arange(3 * n).reshape(3, n).T.ravel()  # job j's three rows are rows j, n + j, 2n + j of the stacks
    cone = sp.hstack([sp.vstack([-gain, -gain, sp.csr_matrix((n, nx))]),
                      sp.vstack([-vcol, vcol, sp.csr_matrix((n, n))])], format="csr")[at]
    g = sp.vstack([sp.hstack([-sp.eye(nx), sp.csr_matrix((nx, n))]), sp.hstack([cap, sp.csr_matrix((m, n))]),
                   sp.hstack([share, sp.csr_matrix((n, n))]), cone], format="csr")
    h = np.concatenate([np.zeros(nx), gpus.astype(float), np.ones(n), np.tile([0.0, 0.0, 2.0], n)])
    cost = np.zeros(nx + n)
    if n > 1:
        bound = sp.hstack([sp.csr_matrix((n, nx)), sp.diags(ratio)])
        g = sp.vstack([bound, g], format="csr")
        t = np.zeros((g.shape[0], 1))
        t[:n, 0] = -1.0
        g = sp.hstack([sp.csr_matrix(t), g], format="csr")
        h = np.concatenate([-age / denom, h])
        cost = np.concatenate([[1.0], cost])
    else:
        cost[-1] = float(ratio[0])
    g.eliminate_zeros()
    return cost, g, h, g.shape[0] - 3 * n, [3] * n


def ecos_finish_time(c: Combos, gpus: np.ndarray, remaining: np.ndarray, age: np.ndarray, denom: np.ndarray,
                     sparse: bool = False) -> tuple[np.ndarray, int]:
    """ECOS's answer to ``finish_time_cone`` (``optim.gavel.ecos_cone``): (X of all combinations clipped to [0, 1],
    ECOS's exit code). A code other than 0 (optimal) or 10 (close to optimal) is a failure: cvxpy raises there, and
    Gavel's simulator stops; X is then ECOS's best iterate (NaN where it has none). ``sparse``: ``ecos_cone``'s
    sparse Newton systems (for jobs alone, no pairs)."""
    cost, g, h, linear, cones = finish_time_cone(c, gpus, remaining, age, denom)
    answer = ecos_cone(cost, g, h, linear, cones, sparse=sparse)
    start = 1 if c.n > 1 else 0
    x = answer.x[start: start + c.size * c.m]
    if not np.isfinite(x).all():
        return np.full((c.size, c.m), np.nan), answer.exit
    return np.clip(x.reshape(c.size, c.m), 0.0, 1.0), answer.exit
