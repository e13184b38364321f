"""ECOS's answer to a second-order cone program, computed here: ECOS 2.0's interior-point method (Domahidi, Chu and
Boyd, "ECOS: An SOCP solver for embedded systems", ECC 2013) followed step by step with its default settings, for

    minimise c·x  subject to  A x = b,  h − G x ∈ K,

K the nonnegative orthant (the first ``nl`` rows) times second-order cones of the sizes in ``q`` (each cone's first
row bounds the norm of its others), the data as cvxpy passes it to ECOS (``get_problem_data``).

Why: Gavel's finish-time fairness with packing is such a program (cvxpy writes each ``inv_pos`` as a 3-row cone and
the ``maximum`` as linear rows); its optimum is not unique, and Gavel's schedule follows the point ECOS returns.
``optim.gavel.ipm`` and ``ecos_lp`` follow ECOS on linear programs; this module adds the cones.

What is followed: the Ruiz equilibration (three passes, a cone's rows scaled alike by the sum of their largest
entries); the start (two least-squares solves with W = I, then each cone shifted inside by 1 + its largest
violation); at each iteration the Nesterov-Todd scaling of every cone, ECOS's affine and combined directions with
the Jordan-product correction, σ = (1 − α_aff)³ in [1e-4, 1], the conic step length times 0.99 in [1e-6, 0.999];
the Newton systems with ECOS's static regularisation (7e-8) as it factors them, refined towards the system its
refinement targets with its rules (at most 9 steps, stop below 1e-14 relative or when a step gains less than 6x);
the stops: optimal at 1e-8 (feasibility, absolute and relative gap), "close to optimal" at 1e-4 / 5e-5 after a
safeguard (residual up 500x, negative gap, a step at its least, leaving the cone, 100 iterations), with the best
iterate kept as ECOS keeps it. Each Newton system is solved exactly (rows of one entry folded into their column,
the rest by a dense Cholesky factorisation of their Schur complement) where ECOS uses a sparse LDL factorisation,
so answers agree to the accuracy of the solves, not to the last bit.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgWarning, lu_factor, lu_solve
from scipy.sparse.linalg import splu

from optim.gavel.cones import Cones as _Cones
from optim.gavel.cones import Scaling as _Scaling
from optim.gavel.ecos_lp import _blas, _equilibrate
from optim.gavel.ipm import (
    _GAMMA,
    _MAX_ITER,
    _REG,
    _SIGMA_MAX,
    _SIGMA_MIN,
    _STEP_MAX,
    _STEP_MIN,
    _TINY,
)

__all__ = ["ConeAnswer", "ecos_cone", "EXITS", "OPTIMAL", "CLOSE_TO_OPTIMAL", "PINF", "DINF", "MAXIT", "NUMERICS",
           "OUTCONE", "ecos_outcome"]

OPTIMAL, CLOSE_TO_OPTIMAL = 0, 10
PINF, DINF, MAXIT, NUMERICS, OUTCONE = 1, 2, -1, -2, -3
EXITS = {OPTIMAL: "optimal", CLOSE_TO_OPTIMAL: "close to optimal", PINF: "infeasible", DINF: "unbounded",
         PINF + 10: "close to infeasible", DINF + 10: "close to unbounded", MAXIT: "out of iterations",
         NUMERICS: "numerical problems", OUTCONE: "left the cone"}
"""ECOS's exit codes and what they mean."""


def ecos_outcome(code: int, x: np.ndarray, otherwise: tuple[str, str]) -> tuple[bool, tuple[str, str] | None]:
    """How Gavel's cvxpy call ends on ECOS's exit ``code``: whether ECOS's ``x`` is the allocation, and the fallback
    (kind, reason) to record, if any. An answer (optimal, close to optimal) or, out of iterations, a finite iterate
    (cvxpy's ``user_limit``) is used as Gavel uses it, unrecorded; numerical problems or leaving the cone (cvxpy
    raises, Gavel crashes) with a finite best iterate: that iterate, recorded; anything else: the caller's other
    point, ``otherwise`` = (its kind, what the reason says of it)."""
    finite = bool(np.isfinite(x).all())
    if code in (OPTIMAL, CLOSE_TO_OPTIMAL) or (code == MAXIT and finite):
        return True, None
    why = f"ECOS's iterations end without an answer ({EXITS.get(code, 'unknown')}, exit code {code}; cvxpy raises)"
    if code in (NUMERICS, OUTCONE) and finite:
        return True, ("ecos_best_iterate", f"{why}; its best iterate used")
    return False, (otherwise[0], f"{why}; {otherwise[1]}")


_INACC = 10
_STATIC = _REG
_EPS = _TINY
_SAFEGUARD = 500.0
_NITREF = 9
_LINSYSACC = 1e-14
_IRERRFACT = 6.0
_TOL = (1e-8, 1e-8, 1e-8)  # feastol, abstol, reltol
_TOL_INACC = (1e-4, 5e-5, 5e-5)


@dataclass(frozen=True)
class ConeAnswer:
    """ECOS's answer: x, y (equalities), z and s (cone rows), its exit code (0 optimal, 10 close to optimal, 1 / 11
    infeasible, 2 / 12 unbounded, −1 out of iterations, −2 numerical problems, −3 left the cone) and the number of
    iterations it took."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    s: np.ndarray
    exit: int
    iterations: int

    @property
    def usable(self) -> bool:
        """Whether cvxpy hands the answer back (``optimal`` or ``optimal_inaccurate``); other exits raise there."""
        return self.exit in (OPTIMAL, CLOSE_TO_OPTIMAL)


class _Kkt:
    """The Newton systems [δI R'; R −V] [dx; dz] = [rx; rz] over the rows R = [A; G] (V: δ on the equality rows, the
    scaling blocks on the cone rows), factored once per iteration; rows of G with one entry in the linear part are
    folded into their column, the other rows solved through their dense Schur complement."""

    def __init__(self, r: sp.csr_matrix, p: int, k: _Cones):
        self.r, self.rt, self.p, self.k = r, sp.csr_matrix(r.T), p, k
        rows, cols = r.shape
        count = np.diff(r.indptr)
        lone = np.zeros(rows, dtype=bool)
        lone[p: p + k.nl] = count[p: p + k.nl] == 1
        self.lone = np.flatnonzero(lone)
        self.rest = np.flatnonzero(~lone)
        self.lone_val = r.data[r.indptr[self.lone]]
        self.lone_col = r.indices[r.indptr[self.lone]]
        has = np.zeros(cols, dtype=bool)
        has[self.lone_col] = True
        self.e, self.kept = np.flatnonzero(has), np.flatnonzero(~has)
        rr = sp.csr_matrix(r[self.rest])
        self.r_e = sp.csr_matrix(rr[:, self.e])
        self.r_et = sp.csr_matrix(self.r_e.T)
        self.r_k = rr[:, self.kept].toarray()
        # each rest row's place in the dense corner; the cone rows' blocks are contiguous there
        where = np.full(rows, -1)
        where[self.rest] = np.arange(len(self.rest))
        self.cone_at = where[p + k.head] if len(k.q) else np.zeros(0, int)
        self.lin_rest = where[np.concatenate([np.arange(p), p + np.arange(k.nl)])]
        self.lin_rest_rows = np.flatnonzero(self.lin_rest >= 0)

    def corner(self, lin: np.ndarray, blocks: list[np.ndarray]) -> np.ndarray:
        """The dense V over the rest rows."""
        nr = len(self.rest)
        v = np.zeros((nr, nr))
        at = self.lin_rest[self.lin_rest_rows]
        v[at, at] = lin[self.lin_rest_rows]
        for start, blk in zip(self.cone_at.tolist(), blocks):
            p = blk.shape[0]
            v[start: start + p, start: start + p] = blk
        return v

    def factor(self, lin: np.ndarray, blocks: list[np.ndarray]) -> None:
        """Factor for V given by ``lin`` (the equality and linear rows' diagonal, length p + nl) and the cones'
        ``blocks``."""
        cols = self.r.shape[1]
        d = np.full(cols, _STATIC)
        lin_lone = lin[self.lone]
        np.add.at(d, self.lone_col, self.lone_val ** 2 / lin_lone)
        self.d, self.lin_lone = d, lin_lone
        inv_e = 1.0 / d[self.e]
        sk = self.factor_s(lin, blocks, inv_e)
        t = np.diag(d[self.kept]) + self.r_k.T @ sk
        self.chol_t = lu_factor(t, check_finite=False) if len(self.kept) else None
        self.inv_e = inv_e

    def factor_s(self, lin: np.ndarray, blocks: list[np.ndarray], inv_e: np.ndarray) -> np.ndarray:
        """Factor the Schur complement S over the rest rows; S⁻¹ times the kept columns."""
        scaled = self.r_e.multiply(inv_e[None, :]).tocsr()
        s = (scaled @ self.r_et).toarray() + self.corner(lin, blocks)
        self.chol_s = lu_factor(s, check_finite=False)
        return lu_solve(self.chol_s, self.r_k, check_finite=False)

    def s_solve(self, v: np.ndarray) -> np.ndarray:
        """S⁻¹ v, S the factored Schur complement over the rest rows."""
        return lu_solve(self.chol_s, v, check_finite=False)

    def times_blocks(self, blocks: list[np.ndarray], dz: np.ndarray, out: np.ndarray) -> None:
        """out's cone rows: each cone's block times its rows of dz."""
        for start, blk in zip((self.p + self.k.head).tolist(), blocks):
            n = blk.shape[0]
            out[start: start + n] = blk @ dz[start: start + n]

    def solve(self, rx: np.ndarray, rz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r1 = rx.copy()
        np.add.at(r1, self.lone_col, self.lone_val * rz[self.lone] / self.lin_lone)
        qv = rz[self.rest] - self.r_e @ (self.inv_e * r1[self.e])
        dx = np.empty(len(rx))
        if self.chol_t is not None:
            rhs = r1[self.kept] + self.r_k.T @ self.s_solve(qv)
            dx_k = lu_solve(self.chol_t, rhs, check_finite=False)
            dz_r = self.s_solve(self.r_k @ dx_k - qv)
            dx[self.kept] = dx_k
        else:
            dz_r = self.s_solve(-qv)
        dx[self.e] = self.inv_e * (r1[self.e] - self.r_et @ dz_r)
        dz = np.empty(len(rz))
        dz[self.rest] = dz_r
        dz[self.lone] = (self.lone_val * dx[self.lone_col] - rz[self.lone]) / self.lin_lone
        return dx, dz


class _SparseKkt(_Kkt):
    """``_Kkt`` with the Schur complement kept sparse and factored by SuperLU: for programs whose rows couple few
    columns (finish-time fairness without pairs: each job's share and cone rows meet only its own X, the capacity
    rows border them), where the dense LU's cube of 5n rows is the whole cost. The same system, solved exactly
    (pivoted LU), so answers differ from the dense path's in the last bits only."""

    def __init__(self, r: sp.csr_matrix, p: int, k: _Cones):
        super().__init__(r, p, k)
        self.r_k = sp.csr_matrix(self.r_k)
        at = self.lin_rest[self.lin_rest_rows]
        self.lin_at = at
        self.block_rows = [np.repeat(np.arange(start, start + n), n) for start, n in zip(self.cone_at.tolist(),
                                                                                         k.q.tolist())]
        self.block_cols = [np.tile(np.arange(start, start + n), n) for start, n in zip(self.cone_at.tolist(),
                                                                                       k.q.tolist())]

    def factor_s(self, lin: np.ndarray, blocks: list[np.ndarray], inv_e: np.ndarray) -> np.ndarray:
        nr = len(self.rest)
        rr = np.concatenate([self.lin_at, *self.block_rows])
        cc = np.concatenate([self.lin_at, *self.block_cols])
        vv = np.concatenate([lin[self.lin_rest_rows], *(blk.ravel() for blk in blocks)])
        corner = sp.csr_matrix((vv, (rr, cc)), shape=(nr, nr))
        s = self.r_e.multiply(inv_e[None, :]).tocsr() @ self.r_et + corner
        try:
            self.lu: Any = splu(sp.csc_matrix(s))
        except RuntimeError:  # exactly singular: the solves give NaN, as the dense LU's zero pivot does
            self.lu = None
        return self.s_solve(self.r_k.toarray())

    def s_solve(self, v: np.ndarray) -> np.ndarray:
        return np.full(v.shape, np.nan) if self.lu is None else self.lu.solve(v)

    def times_blocks(self, blocks: list[np.ndarray], dz: np.ndarray, out: np.ndarray) -> None:
        q = self.k.q
        if not len(q) or not (q == q[0]).all():
            super().times_blocks(blocks, dz, out)
            return
        first = self.p + self.k.nl
        out[first:] = np.einsum("ijk,ik->ij", np.stack(blocks), dz[first:].reshape(len(q), int(q[0]))).ravel()


def _refined(kkt: _Kkt, target_lin: np.ndarray, target_blocks: list[np.ndarray], k: _Cones, p: int,
             bx: np.ndarray, bz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ECOS's kkt_solve: a solve with the factored system, then iterative refinement against the target system."""
    bnorm = 1.0 + max(float(np.abs(bx).max(initial=0.0)), float(np.abs(bz).max(initial=0.0)))
    threshold = bnorm * _LINSYSACC
    dx, dz = kkt.solve(bx, bz)
    nerr_prev = math.nan
    ddx = ddz = None
    for it in range(_NITREF + 1):
        ex = bx - _STATIC * dx - kkt.rt @ dz
        vz = np.empty(len(dz))
        vz[: p + k.nl] = target_lin * dz[: p + k.nl]
        kkt.times_blocks(target_blocks, dz, vz)
        ez = bz - kkt.r @ dx + vz
        nerr = max(float(np.abs(ex).max(initial=0.0)), float(np.abs(ez).max(initial=0.0)))
        if it > 0 and nerr > nerr_prev:
            assert ddx is not None and ddz is not None
            dx, dz = dx - ddx, dz - ddz
            break
        if it == _NITREF or nerr < threshold or (it > 0 and nerr_prev < _IRERRFACT * nerr):
            break
        nerr_prev = nerr
        ddx, ddz = kkt.solve(ex, ez)
        dx, dz = dx + ddx, dz + ddz
    return dx, dz


def _collapse(p: int, k: _Cones) -> Callable[[np.ndarray], np.ndarray]:
    """ECOS's Ruiz equilibration scales a cone's rows alike, by the sum of their largest entries."""
    def collapse(row_max: np.ndarray) -> np.ndarray:
        if len(k.q):
            total = np.add.reduceat(row_max[p + k.nl:], k.head - k.nl)
            row_max[p + k.nl:] = np.repeat(total, k.q)
        return row_max
    return collapse


def ecos_cone(c: np.ndarray, g: sp.spmatrix, h: np.ndarray, nl: int, q: list[int],
              a: sp.spmatrix | None = None, b: np.ndarray | None = None, sparse: bool = False) -> ConeAnswer:
    """Run ECOS's method on min c·x s.t. A x = b, h − G x in the cones (``nl`` linear rows, then cones of sizes
    ``q``). BLAS on one thread (as ``ecos_lp``: small dense factorisations, the same bits on every machine). A
    singular Newton system ends in NaN, which the exits handle as ECOS does; its warnings are not shown. ``sparse``:
    factor the Newton systems' Schur complement sparse (``_SparseKkt``), for programs whose rows couple few columns."""
    with _blas().limit(limits=1, user_api="blas"), warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", LinAlgWarning)
        return _solve(c, g, h, nl, q, a, b, _SparseKkt if sparse else _Kkt)


def _solve(c: np.ndarray, g: sp.spmatrix, h: np.ndarray, nl: int, q: list[int], a: sp.spmatrix | None,
           b: np.ndarray | None, system: type[_Kkt]) -> ConeAnswer:
    k = _Cones(nl, q)
    g = sp.csr_matrix(g, dtype=float)
    cols = g.shape[1]
    p = 0 if a is None else a.shape[0]
    if g.shape[0] != k.m:
        raise ValueError(f"G has {g.shape[0]} rows, the cones {k.m}")
    r_raw = sp.vstack([sp.csr_matrix(a, dtype=float), g], format="csc") if p else sp.csc_matrix(g)
    row, col = _equilibrate(r_raw, _collapse(p, k))
    r = sp.csr_matrix(sp.diags(1.0 / row) @ r_raw @ sp.diags(1.0 / col))
    bb = (np.asarray(b, dtype=float) if p else np.zeros(0)) / row[:p]
    hh = np.asarray(h, dtype=float) / row[p:]
    cc = np.asarray(c, dtype=float) / col
    kkt = system(r, p, k)
    big = np.concatenate([bb, hh])
    a_rows, g_rows = r[:p], r[p:]

    def mul_g(x: np.ndarray) -> np.ndarray:
        return g_rows @ x

    # the start: W = I; the factored system has −1 on the cone rows, the refinement targets −(1 ± δ)
    ones_lin = np.concatenate([np.full(p, _STATIC), np.ones(nl)])
    kkt.factor(ones_lin, [np.eye(n) for n in k.q.tolist()])
    t_lin = np.concatenate([np.full(p, _STATIC), np.full(nl, 1.0 + _STATIC)])
    t_blocks = [np.eye(n) + _STATIC * np.diag(k.sign[hd: hd + n]) for hd, n in zip(k.head.tolist(), k.q.tolist())]
    x, dz1 = _refined(kkt, t_lin, t_blocks, k, p, np.zeros(cols), big)
    s = k.into(-dz1[p:])
    _, dz2 = _refined(kkt, t_lin, t_blocks, k, p, -cc, np.zeros(p + k.m))
    y, z = dz2[:p].copy(), k.into(dz2[p:])
    tau = kap = 1.0
    resx0 = max(1.0, _norm(cc))
    resy0 = max(1.0, _norm(bb))
    resz0 = max(1.0, _norm(hh))
    best: tuple[tuple, dict] | None = None
    step = 0.0
    pres_prev = math.nan
    exit_code = NUMERICS
    it = 0
    for it in range(_MAX_ITER + 1):
        hrx = -(a_rows.T @ y) - g_rows.T @ z if p else -(g_rows.T @ z)
        rx = hrx - cc * tau
        ry = a_rows @ x - bb * tau if p else np.zeros(0)
        hrz = s + mul_g(x)
        rz = hrz - hh * tau
        cx, by, hz = float(cc @ x), float(bb @ y) if p else 0.0, float(hh @ z)
        rt = kap + cx + by + hz
        nx, ny, ns, nz = _norm(x), _norm(y), _norm(s), _norm(z)
        gap = float(s @ z)
        mu = (gap + kap * tau) / (k.degree + 1)
        pcost, dcost = cx / tau, -(hz + by) / tau
        relgap = gap / -pcost if pcost < 0 else (gap / dcost if dcost > 0 else math.nan)
        nry = _norm(ry) / max(resy0 + nx, 1.0) if p else 0.0
        nrz = _norm(rz) / max(resz0 + nx + ns, 1.0)
        pres = max(nry, nrz) / tau
        dres = _norm(rx) / max(resx0 + ny + nz, 1.0) / tau
        pinfres = _norm(hrx) / max(ny + nz, 1.0) if (hz + by) / max(ny + nz, 1.0) < -_TOL[2] else math.nan
        dinfres = (max(_norm(ry + bb * tau) / max(nx, 1.0), _norm(hrz) / max(nx + ns, 1.0))
                   if cx / max(nx, 1.0) < -_TOL[2] else math.nan)
        info = dict(gap=gap, mu=mu, kapovert=kap / tau, pres=pres, dres=dres, pinfres=pinfres, dinfres=dinfres,
                    relgap=relgap, cx=cx, by=by, hz=hz, tau=tau, kap=kap)
        state = (x, y, z, s, kap, tau)
        if it > 0 and (pres > _SAFEGUARD * pres_prev or gap < 0):
            assert best is not None
            (x, y, z, s, kap, tau), info = best
            found = _check(info, _INACC)
            exit_code = NUMERICS if found is None else found
            break
        pres_prev = pres
        found = _check(info, 0)
        if found is not None:
            exit_code = found
            break
        if it > 0 and step == _STEP_MIN * _GAMMA:
            assert best is not None
            (x, y, z, s, kap, tau), info = best
            found = _check(info, _INACC)
            exit_code = NUMERICS if found is None else found
            break
        if it == _MAX_ITER or math.isnan(pcost):
            assert best is not None
            if not _better(info, best[1]):
                (x, y, z, s, kap, tau), info = best
            found = _check(info, _INACC)
            exit_code = (MAXIT if it == _MAX_ITER else NUMERICS) if found is None else found
            break
        if best is None or _better(info, best[1]):
            best = (state, info)
        scaling = _Scaling(k, s, z)
        if not scaling.inside:
            (x, y, z, s, kap, tau), info = best
            found = _check(info, _INACC)
            exit_code = OUTCONE if found is None else found
            break
        lam = scaling.times(z)
        lin = np.concatenate([np.full(p, _STATIC), scaling.v + _STATIC])
        kkt.factor(lin, scaling.blocks(target=False))
        blocks_t = scaling.blocks(target=True)
        dx1, dz1 = _refined(kkt, lin, blocks_t, k, p, -cc, big)
        rhs_z = np.concatenate([-ry, s - rz])
        dx2, dz2 = _refined(kkt, lin, blocks_t, k, p, rx, rhs_z)
        denom = kap / tau - float(cc @ dx1) - float(big @ dz1)
        dtau_aff = (rt - kap + float(cc @ dx2) + float(big @ dz2)) / denom
        dz_aff = dz2[p:] + dtau_aff * dz1[p:]
        w_dz_aff = scaling.times(dz_aff)
        ds_aff_w = -w_dz_aff - lam
        dkap_aff = -kap - kap / tau * dtau_aff
        step_aff = _line_search(k, lam, ds_aff_w, w_dz_aff, tau, dtau_aff, kap, dkap_aff)
        sigma = min(max((1.0 - step_aff) ** 3, _SIGMA_MIN), _SIGMA_MAX)
        ds = k.product(lam, lam) + k.product(ds_aff_w, w_dz_aff)
        ds[: nl] -= sigma * mu
        ds[k.head] -= sigma * mu
        lam_ds = k.divide(lam, ds)
        w_lam_ds = scaling.times(lam_ds)
        rhs_x = (1.0 - sigma) * rx
        rhs_z = np.concatenate([(1.0 - sigma) * -ry, -(1.0 - sigma) * rz + w_lam_ds])
        dx2, dz2 = _refined(kkt, lin, blocks_t, k, p, rhs_x, rhs_z)
        bkap = kap * tau + dkap_aff * dtau_aff - sigma * mu
        dtau = ((1.0 - sigma) * rt - bkap / tau + float(cc @ dx2) + float(big @ dz2)) / denom
        dx, dzall = dx2 + dtau * dx1, dz2 + dtau * dz1
        w_dz = scaling.times(dzall[p:])
        ds_w = -(lam_ds + w_dz)
        dkap = -(bkap + kap * dtau) / tau
        step = _line_search(k, lam, ds_w, w_dz, tau, dtau, kap, dkap) * _GAMMA
        x = x + step * dx
        y = y + step * dzall[:p]
        z = z + step * dzall[p:]
        s = s + step * scaling.times(ds_w)
        kap += step * dkap
        tau += step * dtau
    return ConeAnswer(x / (col * tau), y / (row[:p] * tau), z / (row[p:] * tau), s * (row[p:] / tau), exit_code,
                      it)


def _norm(v: np.ndarray) -> float:
    return math.sqrt(float(v @ v))


def _check(info: dict, mode: int) -> int | None:
    """ECOS's exit tests at full (mode 0) or reduced accuracy (mode 10); None when none is met."""
    feastol, abstol, reltol = _TOL if mode == 0 else _TOL_INACC
    if ((-info["cx"] > 0 or -info["by"] - info["hz"] >= -abstol) and info["pres"] < feastol
            and info["dres"] < feastol and (info["gap"] < abstol or info["relgap"] < reltol)):
        return OPTIMAL + mode
    if info["dinfres"] < feastol and info["tau"] < info["kap"]:
        return DINF + mode
    if ((info["pinfres"] < feastol and info["tau"] < info["kap"])
            or (info["tau"] < _TOL[0] and info["kap"] < _TOL[0] and info["pinfres"] < _TOL[0])):
        return PINF + mode
    return None


def _better(a: dict, b: dict) -> bool:
    """ECOS's compareStatistics (its tests of pinfres against NaN always pass in C, so they do here)."""
    if a["kapovert"] > 1:
        return (a["gap"] > 0 and b["gap"] > 0 and a["gap"] < b["gap"] and a["pinfres"] > 0
                and a["pinfres"] < b["pres"] and a["mu"] > 0 and a["mu"] < b["mu"])
    return (a["gap"] > 0 and b["gap"] > 0 and a["gap"] < b["gap"] and a["pres"] > 0 and a["pres"] < b["pres"]
            and a["dres"] > 0 and a["dres"] < b["dres"] and a["kapovert"] > 0 and a["kapovert"] < b["kapovert"]
            and a["mu"] > 0 and a["mu"] < b["mu"])


def _line_search(k: _Cones, lam: np.ndarray, ds: np.ndarray, dz: np.ndarray, tau: float, dtau: float, kap: float,
                 dkap: float) -> float:
    """ECOS's step length: the longest step keeping the scaled slacks and duals in their cones and τ, κ positive,
    clipped to [1e-6, 0.999]."""
    nl = k.nl
    if nl:
        rho, sig = float((ds[:nl] / lam[:nl]).min()), float((dz[:nl] / lam[:nl]).min())
        if -sig > -rho:
            alpha = 1.0 / -sig if sig < 0 else 1.0 / _EPS
        else:
            alpha = 1.0 / -rho if rho < 0 else 1.0 / _EPS
    else:
        alpha = 10.0
    for v, dv in ((tau, dtau), (kap, dkap)):
        if dv != 0 and 0 < -v / dv < alpha:
            alpha = -v / dv
    if len(k.q):
        c = k.cone_of_tail
        l0, l1 = lam[k.head], lam[k.tail]
        norm2 = l0 * l0 - k.tail_sum(l1 * l1)
        ok = norm2 > 0
        lnorm = np.sqrt(np.where(ok, norm2, 1.0))
        b0, b1 = l0 / lnorm, l1 / lnorm[c]
        for d in (ds, dz):
            d0, d1 = d[k.head], d[k.tail]
            prod = b0 * d0 - k.tail_sum(b1 * d1)
            first = prod / lnorm
            factor = (prod + d0) / (b0 + 1.0)
            rest = (d1 - factor[c] * b1) / lnorm[c]
            step = np.sqrt(k.tail_sum(rest * rest)) - first
            step = np.where(ok, step, 0.0)
            pos = step > 0
            if pos.any():
                alpha = min(alpha, float((1.0 / step[pos]).min()))
    return min(max(alpha, _STEP_MIN), _STEP_MAX)
