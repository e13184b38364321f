"""ECOS's answer to a linear program of any sparsity: ``optim.gavel.ipm``'s method (ECOS's homogeneous self-dual
interior-point iterations with its settings, equilibration and start) on a general sparse constraint matrix, each
Newton system solved by eliminating the bounds on single variables into a diagonal and the other rows through a
dense Cholesky factorisation of their Schur complement (jobs, types: a few hundred rows however many pairs).

``optim.gavel.ipm`` solves the LPs of Gavel's policies without pairs by blocks, one job at a time; with pairs the
constraints of a job reach into the combinations it shares, so the packing policies' LPs (``packed_lp``) come here.

    minimise c·x  subject to  G x ≤ h   (ECOS's nonnegative cone: s = h − G x ≥ 0)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import scipy.sparse as sp
from scipy.linalg import cho_factor, cho_solve
from threadpoolctl import ThreadpoolController

from optim.gavel.ipm import _EQUIL_PASSES, _REG, hsd_solve

__all__ = ["ecos_lp"]


def _equilibrate(g: sp.spmatrix, collapse: Callable[[np.ndarray], np.ndarray] | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """ECOS's row and column scalings: three passes dividing each row and column by the square root of its largest
    absolute entry (1 where that is below 1e-6); ``collapse`` rewrites the rows' largest entries first (a cone's rows
    are scaled alike)."""
    rows, cols = g.shape
    row, col = np.ones(rows), np.ones(cols)
    a = abs(g).tocoo()
    for _ in range(_EQUIL_PASSES):
        v = a.data / (row[a.row] * col[a.col])
        col_max = np.zeros(cols)
        np.maximum.at(col_max, a.col, v)
        row_max = np.zeros(rows)
        np.maximum.at(row_max, a.row, v)
        if collapse is not None:
            row_max = collapse(row_max)
        col *= np.where(col_max < 1e-6, 1.0, np.sqrt(col_max))
        row *= np.where(row_max < 1e-6, 1.0, np.sqrt(row_max))
    return row, col


def _as_slice(index: np.ndarray) -> np.ndarray | slice:
    """A sorted index array as the slice it is when its entries are consecutive (a view, not a gather: the packed
    LPs' bound rows are the first rows, on the columns in order)."""
    if len(index) and int(index[-1]) - int(index[0]) + 1 == len(index) and bool((np.diff(index) == 1).all()):
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


@cache
def _blas() -> ThreadpoolController:
    """The process's BLAS libraries (found once; numpy's and SciPy's are loaded by then)."""
    return ThreadpoolController()


def ecos_lp(g: sp.spmatrix, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, bool]:
    """Run ECOS's method on min c·x s.t. G x ≤ h. Returns (x, whether it stopped optimal).

    BLAS runs on one thread here: the factorisations are of a few hundred rows and the vectors of some 10^5
    entries, where OpenBLAS's threads cost more than they give (20x the CPU time on a loaded 2-core machine), and
    one thread makes the answer's last bits the same on every machine whatever its core count."""
    with _blas().limit(limits=1, user_api="blas"):
        return _ecos_lp(g, h, c)


def _ecos_lp(g: sp.spmatrix, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, bool]:
    g = sp.csr_matrix(g, dtype=float)
    rows, cols = g.shape
    row, col = _equilibrate(g)
    gs = sp.csr_matrix(sp.diags(1.0 / row) @ g @ sp.diags(1.0 / col))
    gt = sp.csr_matrix(gs.T)
    h = np.asarray(h, dtype=float) / row
    c = np.asarray(c, dtype=float) / col
    count = np.diff(gs.indptr)
    lone_rows = np.flatnonzero(count == 1)  # rows of one entry (bounds on one variable): eliminated into their column
    rest_rows = np.flatnonzero(count != 1)
    lone_val = gs.data[gs.indptr[lone_rows]]
    lone_cols = gs.indices[gs.indptr[lone_rows]]
    lone_col = _as_slice(lone_cols)
    gr = sp.csr_matrix(gs[rest_rows])
    grt = sp.csr_matrix(gr.T)
    # G_r D⁻¹ G_r' as G_r @ diags(D⁻¹) @ G_r' sums it, without the first product: SciPy's sparse product leaves
    # each row's entries in reverse column order, so the second sums over them in that order; scaling a copy of G_r
    # with its rows reversed gives the same matrix to the bit at a fraction of the work
    at = np.arange(gr.nnz)
    row_of = np.repeat(np.arange(gr.shape[0]), np.diff(gr.indptr))
    flip = gr.indptr[row_of] + gr.indptr[row_of + 1] - 1 - at
    desc = sp.csr_matrix((gr.data[flip], gr.indices[flip], gr.indptr.copy()), shape=gr.shape)
    # one bound per column: plain indexing adds as np.add.at does
    unique = len(np.unique(lone_cols)) == len(lone_cols)
    lone, rest = _as_slice(lone_rows), _as_slice(rest_rows)

    def add_at(v: np.ndarray, add: np.ndarray) -> None:
        if unique:
            v[lone_col] += add
        else:
            np.add.at(v, lone_cols, add)

    def times(dx: np.ndarray) -> np.ndarray:
        """G x, a bound row as its one product and the other rows through their own matrix (the same bits as
        ``gs @ dx``, without CSR's per-row work on the bound rows)."""
        out = np.empty(rows)
        out[lone] = lone_val * dx[lone_col]
        out[rest] = gr @ dx
        return out

    def kkt(dd: np.ndarray) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """A solver of [reg·I  G'; G  −diag(dd)] [dx; dz] = [rx; rz]: rows of one entry folded into a diagonal over
        the columns, then the other rows' Schur complement G_r D⁻¹ G_r' + diag(dd_r) (positive definite) by
        Cholesky, and two steps of iterative refinement on the whole system, as ECOS refines its LDL solves."""
        d_lone = dd[lone]
        dx_diag = np.full(cols, _REG)
        add_at(dx_diag, lone_val * lone_val / d_lone)
        inv = 1.0 / dx_diag
        scaled = desc.copy()
        scaled.data *= inv[desc.indices]
        m_r = (scaled @ grt).toarray() + np.diag(dd[rest])
        chol = cho_factor(m_r, check_finite=False)

        def once(rx: np.ndarray, rz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            r1 = rx.copy()
            add_at(r1, lone_val * rz[lone] / d_lone)
            dz_r = cho_solve(chol, gr @ (inv * r1) - rz[rest], check_finite=False)
            dx = inv * (r1 - grt @ dz_r)
            dz = np.empty(rows)
            dz[rest] = dz_r
            dz[lone] = (lone_val * dx[lone_col] - rz[lone]) / d_lone
            return dx, dz

        def step(rx: np.ndarray, rz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            dx, dz = once(rx, rz)
            for _ in range(2):
                ex = rx - (_REG * dx + gt @ dz)
                ez = rz - (times(dx) - dd * dz)
                cx, cz = once(ex, ez)
                dx, dz = dx + cx, dz + cz
            return dx, dz

        return step

    x, tau, optimal = hsd_solve(kkt, lambda x: gs @ x, lambda z: gt @ z, c, h, lambda v: float(np.linalg.norm(v)))
    return x / (tau * col), optimal
