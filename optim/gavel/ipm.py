"""The answer ECOS gives to Gavel's linear programs, computed here: a primal-dual interior-point method on the
homogeneous self-dual embedding with Mehrotra's predictor-corrector, as ECOS runs it (Domahidi, Chu and Boyd,
"ECOS: An SOCP solver for embedded systems", ECC 2013) with ECOS's default settings. It is written for the one
family of LPs Gavel's policies solve, in matrix form, and solves each Newton system in O(jobs · types³).

Why: where an LP's optimum is not unique (a max-min problem's jobs off the bottleneck; every point of a feasibility
problem), the schedule depends on which optimal point the solver returns, and Gavel returns ECOS's: a point a few
damped Newton steps from ECOS's starting point, neither a vertex (a simplex) nor the analytic centre. Following
ECOS's steps reproduces that point (to ~1e-12 on Gavel's runs), so that a replay of Gavel agrees job by job.

The LP, over X[j, w] ≥ 0 (job j's share of type w) and, optionally, a scalar t:

    minimise  −t (if ``with_t``; else 0)
    subject to Σ_j sf[j,w]·X[j,w] ≤ gpus[w]          (capacity)
               Σ_w X[j,w] ≤ 1                        (each job's share)
               t − Σ_w a[j,w]·X[j,w] ≤ −d[j]          (each job's bound: t ≤ a·X for max-min; a·X ≥ d otherwise)

ECOS's steps, as followed here: the rows and columns of the constraint matrix are scaled three times by the square
root of their largest entry; the starting point solves two least-squares systems and moves slacks and duals into the
cone by 1 + their largest violation (or by 0.01); every iteration takes an affine step, a centring parameter
σ = (1 − α_aff)³ clipped to [1e-4, 1], and a combined step of 0.99 times the longest feasible one (clipped to
[1e-6, 0.999]); Newton systems carry ECOS's static regularisation (7e-8); the iteration stops when the primal and
dual residuals are below 1e-8 and the gap below 1e-8 (absolute or relative).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["GavelLP", "solve", "hsd_step", "hsd_solve"]

_REG = 7e-8
_TOL = 1e-8
_GAMMA = 0.99
_STEP_MIN, _STEP_MAX = 1e-6, 0.999
_SIGMA_MIN, _SIGMA_MAX = 1e-4, 1.0
_TINY = 1e-13
_EQUIL_PASSES = 3
_MAX_ITER = 100


class GavelLP:
    """The constraint matrix of the LP above, kept as its pieces (``a``, ``sf``, an optional column for t) with
    the row and column scalings of the equilibration; rows are ordered X ≥ 0 (n·m), capacity (m), shares (n),
    bounds (n)."""

    def __init__(self, a: np.ndarray, sf: np.ndarray, with_t: bool):
        self.n, self.m = a.shape
        self.a = np.asarray(a, dtype=float)
        self.sf = np.asarray(sf, dtype=float)
        self.with_t = with_t
        self.col = np.ones(self.n * self.m + 1)  # X's columns row-major, then t
        self.row = np.ones(self.n * self.m + self.m + 2 * self.n)

    # rows: [0, nm) X ≥ 0; [nm, nm+m) capacity; then n shares; then n bounds
    def _split(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        n, m = self.n, self.m
        nm = n * m
        return v[:nm].reshape(n, m), v[nm:nm + m], v[nm + m:nm + m + n], v[nm + m + n:]

    def equilibrate(self) -> None:
        """ECOS's equilibration: three passes dividing each row and column by the square root of its largest
        absolute entry (1 where that is below 1e-6)."""
        n, m = self.n, self.m
        for _ in range(_EQUIL_PASSES):
            cx = self.col[:-1].reshape(n, m)
            rn, rc, rs, rb = self._split(self.row)
            col_x = np.maximum.reduce([1.0 / rn, self.sf / rc[None, :], np.broadcast_to(1.0 / rs[:, None], (n, m)),
                                       self.a / rb[:, None]]) / cx
            col_t = float(np.max(1.0 / rb)) / self.col[-1] if self.with_t else 0.0
            row_n = 1.0 / (rn * cx)
            row_c = (self.sf / cx).max(axis=0) / rc
            row_s = (1.0 / cx).max(axis=1) / rs
            row_b = (self.a / cx).max(axis=1)
            if self.with_t:
                row_b = np.maximum(row_b, 1.0 / self.col[-1])
            row_b = row_b / rb
            col = np.concatenate([col_x.ravel(), [col_t]])
            row = np.concatenate([row_n.ravel(), row_c, row_s, row_b])
            col = np.where(np.abs(col) < 1e-6, 1.0, np.sqrt(col))
            row = np.where(np.abs(row) < 1e-6, 1.0, np.sqrt(row))
            self.col *= col
            self.row *= row

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
        """The scaled coefficients: of X in its own row (−1), in capacity rows (sf), in share rows (1), in bound
        rows (−a), and of t in bound rows (1)."""
        cx = self.col[:-1].reshape(self.n, self.m)
        rn, rc, rs, rb = self._split(self.row)
        return (-1.0 / (rn * cx), self.sf / (rc[None, :] * cx), 1.0 / (rs[:, None] * cx), -self.a / (rb[:, None] * cx),
                1.0 / self.col[-1] if self.with_t else 0.0)

    def mul(self, x: np.ndarray, coef: tuple) -> np.ndarray:
        """G @ x (scaled)."""
        e_n, e_c, e_s, e_b, e_t = coef
        X = x[:-1].reshape(self.n, self.m)
        rb = self.row[-self.n:]
        return np.concatenate([(e_n * X).ravel(), (e_c * X).sum(axis=0), (e_s * X).sum(axis=1),
                               (e_b * X).sum(axis=1) + e_t * x[-1] / rb])

    def tmul(self, z: np.ndarray, coef: tuple) -> np.ndarray:
        """G.T @ z (scaled)."""
        e_n, e_c, e_s, e_b, e_t = coef
        zn, zc, zs, zb = self._split(z)
        rb = self.row[-self.n:]
        gx = e_n * zn + e_c * zc[None, :] + e_s * zs[:, None] + e_b * zb[:, None]
        return np.concatenate([gx.ravel(), [float(e_t * (zb / rb).sum())]])

    def kkt(self, dd: np.ndarray, coef: tuple) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """A solver of [reg·I  G'; G  −diag(dd)] [dx; dz] = [rx; rz] for one Newton step (``dd``: W² + reg).

        By blocks, as an LDL factorisation would pivot: each X ≥ 0 row is eliminated into its column (a diagonal
        term); each job's own rows (its share and its bound) stay with its columns in a small quasi-definite
        system solved with pivoting; the capacity rows and t, which couple the jobs, are solved last through an
        (m+1)×(m+1) Schur complement. No row with a tiny dd is divided into a dense term, so the nearly active
        constraints near the optimum keep their accuracy."""
        n, m = self.n, self.m
        e_n, e_c, e_s, e_b, e_t = coef
        dn, dc, ds, db = self._split(dd)
        tt = e_t / self.row[-n:]
        k = m + 2
        local = np.zeros((n, k, k))
        idx = np.arange(m)
        local[:, idx, idx] = _REG + e_n * e_n / dn
        local[:, :m, m], local[:, m, :m] = e_s, e_s
        local[:, :m, m + 1], local[:, m + 1, :m] = e_b, e_b
        local[:, m, m], local[:, m + 1, m + 1] = -ds, -db
        couple = np.zeros((n, k, m + 1))  # local rows × globals (t, then the capacity duals)
        couple[:, m + 1, 0] = tt
        couple[:, idx, 1 + idx] = e_c
        lu_b = np.linalg.solve(local, couple)
        schur = np.diag(np.concatenate([[_REG], -dc])) - np.einsum("jka,jkb->ab", couple, lu_b)

        def step(rx: np.ndarray, rz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            zn, zc, zs, zb = self._split(rz)
            rloc = np.concatenate([rx[:-1].reshape(n, m) + e_n * zn / dn, zs[:, None], zb[:, None]], axis=1)
            lu_r = np.linalg.solve(local, rloc[:, :, None])[:, :, 0]
            rg = np.concatenate([[rx[-1]], zc]) - np.einsum("jka,jk->a", couple, lu_r)
            g = np.linalg.solve(schur, rg)
            y = lu_r - np.einsum("jka,a->jk", lu_b, g)
            dx = np.concatenate([y[:, :m].ravel(), [g[0]]])
            dz_n = (e_n * y[:, :m] - zn) / dn
            return dx, np.concatenate([dz_n.ravel(), g[1:], y[:, m], y[:, m + 1]])

        return step


def solve(a: np.ndarray, sf: np.ndarray, gpus: np.ndarray, d: np.ndarray, with_t: bool) -> tuple[np.ndarray, bool]:
    """Run ECOS's method on the LP of the module docstring. Returns (X clipped to [0, 1], whether it stopped
    optimal); an infeasible LP stops without the optimal flag."""
    lp = GavelLP(a, sf, with_t)
    lp.equilibrate()
    n, m = lp.n, lp.m
    coef = lp.entries()
    col = lp.col
    h_raw = np.concatenate([np.zeros(n * m), np.asarray(gpus, dtype=float), np.ones(n), -np.asarray(d, dtype=float)])
    h = h_raw / lp.row
    c = np.zeros(n * m + 1)
    if with_t:
        c[-1] = -1.0 / col[-1]
    x, tau, optimal = hsd_solve(lambda d: lp.kkt(d, coef), lambda v: lp.mul(v, coef), lambda v: lp.tmul(v, coef),
                                c, h, _norm)
    X = (x[:-1] / (tau * col[:-1])).reshape(n, m)
    return np.clip(X, 0.0, 1.0), optimal


def _norm(v: np.ndarray) -> float:
    """The Euclidean norm, as ``numpy.linalg.norm`` computes it for a vector (the same bits, without its checks)."""
    return math.sqrt(float(v.dot(v)))


def _line_search(lam: np.ndarray, ds: np.ndarray, dz: np.ndarray, tau: float, dtau: float, kap: float,
                 dkap: float) -> float:
    """The longest step keeping the scaled slacks, duals, τ and κ positive, clipped to [1e-6, 0.999]."""
    rho, sig = float((ds / lam).min()), float((dz / lam).min())
    if -sig > -rho:
        alpha = 1.0 / -sig if sig < 0 else 1.0 / _TINY
    else:
        alpha = 1.0 / -rho if rho < 0 else 1.0 / _TINY
    for v, dv in ((tau, dtau), (kap, dkap)):
        if dv != 0 and 0 < -v / dv < alpha:
            alpha = -v / dv
    return min(max(alpha, _STEP_MIN), _STEP_MAX)


def hsd_step(kkt: Callable[[np.ndarray], Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]],
             x: np.ndarray, z: np.ndarray, s: np.ndarray, kap: float, tau: float, c: np.ndarray, h: np.ndarray,
             rx: np.ndarray, rz: np.ndarray, rt: float, mu: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """One Mehrotra predictor-corrector step of ECOS's homogeneous self-dual method for an LP (nonnegative cone);
    ``kkt(d)`` factors the KKT system with scaling ``d`` and returns its solver. Returns the new x, z, s, κ, τ."""
    w2 = s / z
    w = np.sqrt(w2)
    lam = np.sqrt(s * z)
    step_kkt = kkt(w2 + _REG)
    dx1, dz1 = step_kkt(-c, h)
    dx2, dz2 = step_kkt(rx, s - rz)
    denom = kap / tau - float(c @ dx1) - float(h @ dz1)
    dtau_aff = (rt - kap + float(c @ dx2) + float(h @ dz2)) / denom
    wdz_aff = w * (dz2 + dtau_aff * dz1)
    ds_aff = -wdz_aff - lam
    dkap_aff = -kap - kap / tau * dtau_aff
    step_aff = _line_search(lam, ds_aff, wdz_aff, tau, dtau_aff, kap, dkap_aff)
    sigma = min(max((1.0 - step_aff) ** 3, _SIGMA_MIN), _SIGMA_MAX)
    bs = lam * lam + ds_aff * wdz_aff - sigma * mu
    lam_bs = bs / lam
    dx2, dz2 = step_kkt((1.0 - sigma) * rx, -(1.0 - sigma) * rz + w * lam_bs)
    bkap = kap * tau + dkap_aff * dtau_aff - sigma * mu
    dtau = ((1.0 - sigma) * rt - bkap / tau + float(c @ dx2) + float(h @ dz2)) / denom
    dx, dz = dx2 + dtau * dx1, dz2 + dtau * dz1
    wdz = w * dz
    ds_w = -lam_bs - wdz
    dkap = -(bkap + kap * dtau) / tau
    step = _line_search(lam, ds_w, wdz, tau, dtau, kap, dkap) * _GAMMA
    x, z, s = x + step * dx, z + step * dz, s + step * w * ds_w
    kap, tau = kap + step * dkap, tau + step * dtau
    return x, z, s, kap, tau


def hsd_solve(kkt: Callable[[np.ndarray], Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]],
              mul: Callable[[np.ndarray], np.ndarray], tmul: Callable[[np.ndarray], np.ndarray], c: np.ndarray,
              h: np.ndarray, norm: Callable[[np.ndarray], float]) -> tuple[np.ndarray, float, bool]:
    """ECOS's homogeneous self-dual method on min c·x s.t. G x ≤ h (scaled), from its start to its stop, for any
    representation of G: ``mul`` is G @ x, ``tmul`` G.T @ z, ``kkt`` as in ``hsd_step``, ``norm`` the caller's
    vector norm (each caller keeps the one its answers were computed with). Returns (x, τ, whether it stopped
    optimal); the answer is x / τ."""
    rows, cols = len(h), len(c)

    def into_cone(r: np.ndarray) -> np.ndarray:
        worst = max(-0.99, float((-r[r <= 0]).max()) if (r <= 0).any() else -0.99)
        return r + (worst + 1.0)

    start = kkt(np.ones(rows) + _REG)  # both least-squares starts solve with W = I
    x, z0 = start(np.zeros(cols), h)
    s = into_cone(-z0)
    _, zd = start(-c, np.zeros(rows))
    z = into_cone(zd)
    tau = kap = 1.0
    res_x0 = max(1.0, norm(c))
    res_z0 = max(1.0, norm(h))
    for _ in range(_MAX_ITER + 1):
        gtz = tmul(z)
        rx = -gtz - c * tau
        rz = s + mul(x) - h * tau
        cx, hz = float(c @ x), float(h @ z)
        rt = kap + cx + hz
        gap = float(s @ z)
        mu = (gap + kap * tau) / (rows + 1)
        pcost, dcost = cx / tau, -hz / tau
        relgap = gap / -pcost if pcost < 0 else (gap / dcost if dcost > 0 else np.nan)
        pres = norm(rz) / max(res_z0 + norm(x) + norm(s), 1.0)
        dres = norm(rx) / max(res_x0 + norm(z), 1.0)
        pres, dres = pres / tau, dres / tau
        if (-cx > 0 or -hz >= -_TOL) and pres < _TOL and dres < _TOL and (gap < _TOL or relgap < _TOL):
            return x, tau, True
        if hz < 0 and norm(gtz) / max(1.0, -hz) < _TOL:  # a certificate: infeasible
            break
        x, z, s, kap, tau = hsd_step(kkt, x, z, s, kap, tau, c, h, rx, rz, rt, mu)
    return x, tau, False
