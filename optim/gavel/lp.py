"""The linear programs of Gavel's policies, built in matrix form and solved by HiGHS (``highspy``), and the central
points an interior-point solver returns where an optimum is not unique (``docs/gavel.md``, "Solving the LPs").

Every problem here is over X[j, w] (the share of time job j spends on server type w) with Gavel's base constraints:
X ≥ 0, Σ_w X[j,w] ≤ 1 and Σ_j sf[j,w]·X[j,w] ≤ gpus[w]. Gavel solves them with cvxpy and ECOS, an interior-point
solver: where the optimum is a whole face, ECOS returns a point near the centre of that face, and which point it is
changes the schedule (a simplex returns a vertex, which puts each job's share on one type).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from optim.highs import new_highs

if TYPE_CHECKING:
    import highspy

__all__ = ["max_min", "LeastShare", "LeastHorizon", "centre", "limit", "damped_step"]

_STALL = 2.0 ** -20
"""Near the centre (Newton decrement below 1e-6) a step that must be cut below this length is lost in the rounding
of the barrier's value: the iterate is as close as the floating-point barrier can tell, and ``centre`` stops there
rather than take steps of 1e-10 (each one costs some 35 barrier evaluations and moves no digit that matters)."""



def _base(n: int, m: int, sf: np.ndarray, gpus: np.ndarray, extra: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise entries of the base constraints, X[j, w] at column j*m + w: row j is job j's share (≤ 1), row
    n + w type w's GPUs (≤ gpus[w]), and ``extra`` rows before them (indices 0..extra-1 are left to the caller)."""
    nx = n * m
    jj = np.repeat(np.arange(n), m)
    ww = np.tile(np.arange(m), n)
    index = np.stack([extra + jj, extra + n + ww], axis=1)
    value = np.stack([np.ones(nx), sf.ravel().astype(float)], axis=1)
    return index, value, jj


def _solve(lp: highspy.HighsLp, ipm: bool) -> np.ndarray:
    h = new_highs()  # silent, one thread, no banner on stdout
    options: tuple[tuple[str, bool | int | str], ...] = (("random_seed", 0),)
    if ipm:
        options += (("solver", "ipm"), ("run_crossover", "off"), ("presolve", "off"))
    for option, value in options:
        h.setOptionValue(option, value)
    h.passModel(lp)
    h.run()
    return np.asarray(h.getSolution().col_value, dtype=float)


def _max_min_lp(coef: np.ndarray, sf: np.ndarray, gpus: np.ndarray, allowed: np.ndarray | None) -> highspy.HighsLp:
    """The LP of ``max_min`` in HiGHS's column-wise form: X[j, w] at column j*m + w, s last; rows: the n bounds
    s − Σ_w coef[j,w]·X[j,w] ≤ 0, the n shares, the m capacities."""
    import highspy

    n, m = coef.shape
    nx = n * m
    index, value, jj = _base(n, m, sf, gpus, n)
    rows = np.concatenate([jj[:, None], index], axis=1)
    vals = np.concatenate([-coef.ravel()[:, None], value], axis=1)
    lp = highspy.HighsLp()
    lp.num_col_ = nx + 1
    lp.num_row_ = 2 * n + m
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_ = np.concatenate([np.zeros(nx), [1.0]])
    lp.col_lower_ = np.zeros(nx + 1)
    upper = np.ones(nx) if allowed is None else np.where(allowed.ravel(), 1.0, 0.0)
    lp.col_upper_ = np.concatenate([upper, [highspy.kHighsInf]])
    lp.row_lower_ = np.full(2 * n + m, -highspy.kHighsInf)
    lp.row_upper_ = np.concatenate([np.zeros(n), np.ones(n), gpus.astype(float)])
    a = lp.a_matrix_
    a.format_ = highspy.MatrixFormat.kColwise
    a.start_ = np.concatenate([np.arange(0, 3 * nx + 1, 3), [3 * nx + n]]).astype(np.int32)
    a.index_ = np.concatenate([rows.ravel(), np.arange(n)]).astype(np.int32)
    a.value_ = np.concatenate([vals.ravel(), np.ones(n)])
    return lp


def max_min(coef: np.ndarray, sf: np.ndarray, gpus: np.ndarray, allowed: np.ndarray | None = None,
            ipm: bool = True) -> tuple[np.ndarray, float]:
    """max s  s.t.  s ≤ Σ_w coef[j,w]·X[j,w] for every job j, the base constraints, X = 0 where not ``allowed``.

    Returns (X clipped to [0, 1], s). With ``ipm`` HiGHS's interior-point method runs without crossover and
    presolve, so that X is a point inside the optimal face, as ECOS returns; otherwise the dual simplex gives a
    vertex (faster; used where only s matters)."""
    n, m = coef.shape
    sol = _solve(_max_min_lp(coef, sf, gpus, allowed), ipm)
    return np.clip(sol[:n * m].reshape(n, m), 0.0, 1.0), float(sol[n * m])


class LeastShare:
    """The values s(need) = max_X min_j Σ_w rate[j,w]·X[j,w] / need[j] under the base constraints, for a series of
    ``need`` vectors (a root finding over them): the LP max s s.t. need[j]·s ≤ Σ_w rate[j,w]·X[j,w] is built once,
    and each value changes only the n coefficients of s, then runs HiGHS's dual simplex from the previous optimal
    basis (a few pivots where a cold start takes hundreds). The optimal value is unique, so the warm start changes
    only its last bits."""

    def __init__(self, rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray):
        self.n = rate.shape[0]
        self.col = rate.size
        self.h = new_highs()
        self.h.setOptionValue("random_seed", 0)
        self.h.passModel(_max_min_lp(rate, sf, gpus, None))

    def value(self, need: np.ndarray) -> float:
        """s for these needs (each > 0)."""
        h, col = self.h, self.col
        for j, v in enumerate(need.tolist()):
            h.changeCoeff(j, col, v)
        h.run()
        return float(h.getInfo().objective_function_value)

    def gradient(self, need: np.ndarray) -> np.ndarray:
        """∂s/∂need[j] at the last ``value(need)``: −y_j·s, y the duals of the rows need[j]·s ≤ rate_j·X_j scaled so
        that Σ_j y_j·need[j] = 1 (the LP's optimality condition for s; the sign HiGHS reports is not used)."""
        y = np.abs(np.asarray(self.h.getSolution().row_dual[: self.n], dtype=float))
        total = float(y @ need)
        s = float(self.h.getInfo().objective_function_value)
        return -y * (s / total) if total > 0 else np.zeros(self.n)

    def optimum(self, need: np.ndarray) -> tuple[np.ndarray, float]:
        """(X clipped to [0, 1], s) for these needs: a vertex of the optimal face, as ``max_min(rate / need)`` gives
        (the same LP with its rows scaled), warm-started from the last basis."""
        s = self.value(need)
        x = np.asarray(self.h.getSolution().col_value[: self.col], dtype=float)
        return np.clip(x.reshape(self.n, -1), 0.0, 1.0), s


class LeastHorizon:
    """The least horizon's LP of min_total_duration, kept across recomputes: max s s.t. s·R_j ≤ Σ_w rate[j,w]·X[j,w]
    under the base constraints (s = 1 / the least horizon, R_j the work a job has left).

    One HiGHS model lives for the whole run: at each recompute the jobs that left lose their rows and columns, those
    that arrived are appended, every job's R_j is updated (the coefficients of s, scaled by the largest R so that s
    is of order 1 and HiGHS's tolerances are relative to it), and the dual simplex restarts from the last optimal
    basis. The model is rebuilt when the server types or a kept job's rates or GPUs change. Layout: column 0 is s,
    then each job's m columns; rows 0..m−1 the capacities, then per job its bound and its share."""

    def __init__(self) -> None:
        self.h: highspy.Highs | None = None
        self.ids: list[int] = []
        self.rate = np.zeros((0, 0))
        self.sf = np.zeros((0, 0))
        self.gpus = np.zeros(0)

    def value(self, ids: list[int], rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, left: np.ndarray) -> float:
        """max_X min_j Σ_w rate[j,w]·X[j,w] / left[j] for the jobs ``ids`` (in admission order), rows as given."""
        n, m = rate.shape
        if self.h is None or self.gpus.shape != gpus.shape or (self.gpus != gpus).any():
            self._build(m, gpus)
        h = self.h
        assert h is not None
        keep = set(ids)
        gone = [k for k, j in enumerate(self.ids) if j not in keep]
        if gone:
            g = np.array(gone)
            h.deleteRows(2 * len(g), (m + 2 * g[:, None] + np.arange(2)).ravel().astype(np.int32))
            h.deleteCols(m * len(g), (1 + m * g[:, None] + np.arange(m)).ravel().astype(np.int32))
            alive = np.ones(len(self.ids), dtype=bool)
            alive[g] = False
            self.ids = [j for j in self.ids if j in keep]
            self.rate, self.sf = self.rate[alive], self.sf[alive]
        old = len(self.ids)
        if self.ids != ids[:old] or not (np.array_equal(self.rate, rate[:old]) and np.array_equal(self.sf, sf[:old])):
            self._build(m, gpus)  # a kept job changed, or arrivals are not at the end: start afresh
            h, old = self._build(m, gpus), 0
        if old < n:
            self._add(rate[old:], sf[old:])
            self.ids = list(ids)
            self.rate, self.sf = rate.copy(), sf.copy()
        scale = float(left.max())
        for k, v in enumerate((left / scale).tolist()):
            h.changeCoeff(m + 2 * k, 0, v)
        h.run()
        return float(h.getInfo().objective_function_value) / scale

    def _build(self, m: int, gpus: np.ndarray) -> highspy.Highs:
        import highspy

        h = self.h = new_highs()
        h.setOptionValue("random_seed", 0)
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        h.addCol(1.0, 0.0, highspy.kHighsInf, 0, np.zeros(0, dtype=np.int32), np.zeros(0))
        h.addRows(m, np.full(m, -highspy.kHighsInf), gpus.astype(float), 0, np.zeros(m, dtype=np.int32),
                  np.zeros(0, dtype=np.int32), np.zeros(0))
        self.gpus = gpus.copy()
        self.ids, self.rate, self.sf = [], np.zeros((0, m)), np.zeros((0, m))
        return h

    def _add(self, rate: np.ndarray, sf: np.ndarray) -> None:
        """Append jobs: their columns (each in its type's capacity row), then their bound and share rows (the bound's
        coefficient of s is set by ``value``)."""
        import highspy

        h = self.h
        assert h is not None
        k, m = rate.shape
        first = h.getNumCol()
        h.addCols(k * m, np.zeros(k * m), np.zeros(k * m), np.ones(k * m), k * m,
                  np.arange(k * m, dtype=np.int32), np.tile(np.arange(m, dtype=np.int32), k),
                  sf.astype(float).ravel())
        cols = first + np.arange(k * m, dtype=np.int32).reshape(k, m)
        index = np.concatenate([np.concatenate([np.zeros((k, 1), dtype=np.int32), cols], axis=1), cols],
                               axis=1).ravel()
        value = np.concatenate([np.concatenate([np.ones((k, 1)), -rate], axis=1), np.ones((k, m))], axis=1).ravel()
        starts = np.empty(2 * k, dtype=np.int32)
        starts[0::2] = np.arange(k) * (2 * m + 1)
        starts[1::2] = starts[0::2] + m + 1
        upper = np.zeros(2 * k)
        upper[1::2] = 1.0
        h.addRows(2 * k, np.full(2 * k, -highspy.kHighsInf), upper, len(index), starts, index.astype(np.int32),
                  value)


def centre(rate: np.ndarray, sf: np.ndarray, gpus: np.ndarray, demand: np.ndarray,
           inside: np.ndarray | None = None, curved: bool = False,
           vertex: tuple[np.ndarray, float] | None = None) -> np.ndarray:
    """The analytic centre of {X : the base constraints, Σ_w rate[j,w]·X[j,w] ≥ demand[j] for every j}: the point
    maximising the sum of the logarithms of every constraint's slack, which an interior-point solver such as ECOS
    approaches when every point of the set is optimal (Gavel's feasibility problems, ``Maximize(1)``).

    Damped Newton steps on the log barrier. The Hessian is block-diagonal per job (its X ≥ 0, share and demand rows)
    plus a rank-m term from the m capacity rows, so each step costs a batch of m×m solves and one m×m solve
    (Woodbury). ``inside`` is a strictly feasible starting point; by default one is built from the max-min LP
    (``max_min``), or from ``vertex``, that LP's answer (X, s) where the caller has it. If the set has no interior (the
    demands take all there is), the max-min LP's answer is returned.

    ``curved``: each job's demand row weighs 2·log(u − d) − log(u), u = Σ_w rate·X, instead of log(u − d): the
    barrier ECOS sees for a bound on a job's time R/u written with cvxpy's ``inv_pos`` (a second-order cone u·v ≥ 1
    and a linear bound on v, with v at its own centre), as in Gavel's finish-time fairness."""
    n, m = rate.shape
    if n == 0:
        return np.zeros(rate.shape)
    demand = np.asarray(demand, dtype=float)
    sf = sf.astype(float)
    cap = gpus.astype(float)
    if inside is None:
        x_mm, s = vertex if vertex is not None else max_min(rate / demand[:, None], sf, cap, ipm=False)
        if not s > 1.0 + 1e-9:
            return x_mm
        theta = 0.5 * (1.0 - 1.0 / s)
        even = (cap[None, :] / n) / sf
        even = 0.5 * even / np.maximum(1.0, even.sum(axis=1))[:, None]
        x = (1.0 - theta) * x_mm + theta * even
    else:
        x = inside.astype(float).copy()

    def slacks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return 1.0 - x.sum(axis=1), cap - (sf * x).sum(axis=0), (rate * x).sum(axis=1) - demand

    weight, bend = (2.0, 1.0) if curved else (1.0, 0.0)

    def barrier(x: np.ndarray) -> float:
        row, col, dem = slacks(x)
        if (x <= 0).any() or (row <= 0).any() or (col <= 0).any() or (dem <= 0).any():
            return np.inf
        u = dem + demand
        return -float(np.log(x).sum() + np.log(row).sum() + np.log(col).sum() + weight * np.log(dem).sum()
                      - bend * np.log(u).sum())

    f = barrier(x)
    eye = np.eye(m)
    for _ in range(100):
        row, col, dem = slacks(x)
        u = dem + demand
        grad = -1.0 / x + (1.0 / row)[:, None] - rate * (weight / dem - bend / u)[:, None] + sf / col[None, :]
        blocks = (eye[None] / (x * x)[:, :, None] + (1.0 / row ** 2)[:, None, None]
                  + (rate[:, :, None] * rate[:, None, :]) * (weight / dem ** 2 - bend / u ** 2)[:, None, None])
        inv = np.linalg.inv(blocks)
        # U[(j, w), v] = sf[j, w]·[w = v]; C = diag(1 / col²)
        bg = np.einsum("jab,jb->ja", inv, grad)
        bu = inv * sf[:, None, :]  # B⁻¹U, per job: (m × m)
        small = np.diag(col ** 2) + np.einsum("ja,jab->ab", sf, bu)
        step = bg - np.einsum("jab,b->ja", bu, np.linalg.solve(small, np.einsum("ja,ja->a", sf, bg)))
        decrement = float((grad * step).sum())
        if decrement < 1e-12:
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            t_max = min(limit(x, step), limit(row, -step.sum(axis=1)), limit(col, -(sf * step).sum(axis=0)),
                        limit(dem, (rate * step).sum(axis=1)))
        moved = damped_step(x, step, f, decrement, barrier, t_max)
        if moved is None:
            return np.clip(x, 0.0, 1.0)
        x, f = moved
    return np.clip(x, 0.0, 1.0)


def limit(slack: np.ndarray, rate: np.ndarray) -> float:
    """The least t at which a slack falling at ``rate`` per unit of t (slack − t·rate) reaches 0; inf if none falls."""
    falling = rate > 0
    return float((slack[falling] / rate[falling]).min()) if falling.any() else np.inf


def damped_step(x: np.ndarray, step: np.ndarray, f: float, decrement: float, barrier: Callable[[np.ndarray], float],
                t_max: float) -> tuple[np.ndarray, float] | None:
    """A damped Newton step x − t·step on a log barrier (value ``f`` at x): t halved from 1 until the barrier falls by
    a quarter of t·``decrement``, or None where the line search is lost in the barrier's rounding. Every constraint
    is linear, so ``t_max``, the largest step keeping all slacks positive, is known in advance, and the halvings at
    twice it or more (a trial outside the domain, infinite barrier) are skipped unevaluated."""
    t = 1.0
    while t >= 2.0 * t_max:
        t *= 0.5
        if t < 1e-12:
            return None
    while True:
        trial = x - t * step
        ft = barrier(trial)
        if ft <= f - 0.25 * t * decrement:
            return trial, ft
        t *= 0.5
        if t < 1e-12 or (t < _STALL and decrement < 1e-6):
            return None
