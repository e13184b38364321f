"""The cones of ECOS's cone programs (``optim.gavel.ecos_cone``): ``nl`` linear rows (the nonnegative orthant), then
second-order cones, each row block (v0, v1) with v0 ≥ ‖v1‖. The Jordan product and division of the cones, ECOS's move
of a point into them, and the Nesterov-Todd scaling W at a primal-dual pair, as ECOS 2.0 computes them (its
``cone.c``): W is diagonal on the linear rows and η·[a q'; q I + qq'/(1 + a)] on a cone."""

from __future__ import annotations

import numpy as np

from optim.gavel.ipm import _GAMMA, _REG

__all__ = ["Cones", "Scaling"]

_STATIC = _REG


class Cones:
    """The cone structure: ``nl`` linear rows, then second-order cones of sizes ``q`` (each at least 2 rows)."""

    def __init__(self, nl: int, q: list[int]):
        self.nl = nl
        self.q = np.asarray(q, dtype=np.int64)
        if (self.q < 2).any():
            raise ValueError("second-order cones of fewer than 2 rows are not supported")
        self.m = nl + int(self.q.sum())
        self.head = nl + np.concatenate([[0], np.cumsum(self.q)[:-1]]).astype(np.int64) if len(q) else np.zeros(0, int)
        tail_mask = np.ones(self.m - nl, dtype=bool)
        tail_mask[self.head - nl] = False
        self.tail = nl + np.flatnonzero(tail_mask)
        self.tail_start = np.concatenate([[0], np.cumsum(self.q - 1)[:-1]]).astype(np.int64) if len(q) else self.head
        self.cone_of_tail = np.repeat(np.arange(len(q)), self.q - 1)
        last = self.head + self.q - 1
        self.sign = np.ones(self.m)  # ECOS's refinement: +δ on every cone row but each cone's last, −δ there
        self.sign[last] = -1.0
        self.degree = nl + len(q)

    def tail_sum(self, v: np.ndarray) -> np.ndarray:
        return np.add.reduceat(v, self.tail_start) if len(self.q) else np.zeros(0)

    def residual(self, v: np.ndarray) -> np.ndarray:
        """v0² − ‖v1‖² per cone."""
        return v[self.head] ** 2 - self.tail_sum(v[self.tail] ** 2)

    def into(self, r: np.ndarray) -> np.ndarray:
        """ECOS's bring2cone: r + (1 + its largest violation, at least −0.99)·e."""
        alpha = -_GAMMA
        lp = r[: self.nl]
        if (lp <= 0).any():
            alpha = max(alpha, float((-lp[lp <= 0]).max()))
        if len(self.q):
            cres = r[self.head] - np.sqrt(self.tail_sum(r[self.tail] ** 2))
            bad = cres <= 0
            if bad.any():
                alpha = max(alpha, float((-cres[bad]).max()))
        s = r.copy()
        s[: self.nl] += alpha + 1.0
        s[self.head] += alpha + 1.0
        return s

    def product(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The Jordan product u ∘ v."""
        w = u * v
        if len(self.q):
            w[self.head] = u[self.head] * v[self.head] + self.tail_sum(u[self.tail] * v[self.tail])
            w[self.tail] = (u[self.head][self.cone_of_tail] * v[self.tail]
                            + v[self.head][self.cone_of_tail] * u[self.tail])
        return w

    def divide(self, u: np.ndarray, w: np.ndarray) -> np.ndarray:
        """v with u ∘ v = w."""
        v = w / u
        if len(self.q):
            u0, w0 = u[self.head], w[self.head]
            rho = u0 * u0 - self.tail_sum(u[self.tail] ** 2)
            zeta = self.tail_sum(u[self.tail] * w[self.tail])
            factor = (zeta / u0 - w0) / rho
            v[self.head] = (u0 * w0 - zeta) / rho
            c = self.cone_of_tail
            v[self.tail] = factor[c] * u[self.tail] + w[self.tail] / u0[c]
        return v


class Scaling:
    """The Nesterov-Todd scaling W at (s, z): diagonal on the linear rows, η·[a q'; q I + qq'/(1+a)] on a cone."""

    def __init__(self, k: Cones, s: np.ndarray, z: np.ndarray):
        self.k = k
        nl = k.nl
        self.v = s[:nl] / z[:nl]
        self.w = np.sqrt(self.v)
        self.inside = True
        if not len(k.q):
            return
        sres, zres = k.residual(s), k.residual(z)
        if (sres <= 0).any() or (zres <= 0).any():
            self.inside = False
            return
        snorm, znorm = np.sqrt(sres), np.sqrt(zres)
        c = k.cone_of_tail
        sbar_h, zbar_h = s[k.head] / snorm, z[k.head] / znorm
        sbar_t, zbar_t = s[k.tail] / snorm[c], z[k.tail] / znorm[c]
        self.eta2 = snorm / znorm
        self.eta = np.sqrt(self.eta2)
        gamma = np.sqrt(0.5 * (1.0 + sbar_h * zbar_h + k.tail_sum(sbar_t * zbar_t)))
        half = 0.5 / gamma
        self.a = half * (sbar_h + zbar_h)
        self.q = half[c] * (sbar_t - zbar_t)
        self.ww = k.tail_sum(self.q * self.q)
        a, ww = self.a, self.ww
        temp = 1.0 + a
        self.c = 1.0 + a + ww / temp
        self.d = 1.0 + 2.0 / temp + ww / (temp * temp)
        d1 = np.maximum(0.5 * (a * a + ww * (1.0 - self.c * self.c / (1.0 + ww * self.d))), 0.0)
        u0_sq = a * a + ww - d1
        c2 = self.c * self.c / u0_sq
        if (c2 - self.d <= 0).any():
            self.inside = False
            return
        self.d1, self.u0, self.u1, self.v1 = d1, np.sqrt(u0_sq), np.sqrt(c2), np.sqrt(c2 - self.d)

    def times(self, z: np.ndarray) -> np.ndarray:
        """W z."""
        k = self.k
        out = self.w * z[: k.nl]
        if not len(k.q):
            return out
        res = np.empty(k.m)
        res[: k.nl] = out
        c = k.cone_of_tail
        zeta = k.tail_sum(self.q * z[k.tail])
        factor = z[k.head] + zeta / (1.0 + self.a)
        res[k.head] = self.eta * (self.a * z[k.head] + zeta)
        res[k.tail] = self.eta[c] * (z[k.tail] + factor[c] * self.q)
        return res

    def blocks(self, target: bool) -> list[np.ndarray]:
        """Each cone's block of the KKT system's (negated) lower-right corner: W² plus ECOS's regularisation, as its
        refinement targets it (``target``) or as it factors it (the expanded form with the δ's in its diagonal)."""
        k = self.k
        if len(k.q) and (k.q == k.q[0]).all():
            return list(self._equal_blocks(target, int(k.q[0])))
        out = []
        for j, p in enumerate(k.q.tolist()):
            qj = self.q[k.tail_start[j]: k.tail_start[j] + p - 1]
            e2 = self.eta2[j]
            if target:
                blk = np.empty((p, p))
                blk[0, 0] = self.a[j] ** 2 + self.ww[j]
                blk[0, 1:] = blk[1:, 0] = self.c[j] * qj
                blk[1:, 1:] = np.eye(p - 1) + self.d[j] * np.outer(qj, qj)
                blk *= e2
                blk[np.diag_indices(p)] += _STATIC
                blk[p - 1, p - 1] -= 2.0 * _STATIC
            else:
                u = np.concatenate([[self.u0[j]], self.u1[j] * qj])
                v = np.concatenate([[0.0], self.v1[j] * qj])
                dd = np.ones(p)
                dd[0] = self.d1[j]
                blk = e2 * (np.diag(dd) - np.outer(v, v)) + (e2 * e2 / (e2 + _STATIC)) * np.outer(u, u)
                blk[np.diag_indices(p)] += _STATIC
            out.append(blk)
        return out

    def _equal_blocks(self, target: bool, p: int) -> np.ndarray:
        """``blocks`` for cones all of ``p`` rows, as one array: the same operations element by element (the same
        bits), without a loop over the cones."""
        k = self.k
        nc = len(k.q)
        q = self.q.reshape(nc, p - 1)
        e2 = self.eta2[:, None, None]
        qq = q[:, :, None] * q[:, None, :]
        if target:
            blk = np.empty((nc, p, p))
            blk[:, 0, 0] = np.array([a ** 2 for a in self.a.tolist()]) + self.ww  # pow(), as the loop's scalars
            blk[:, 0, 1:] = self.c[:, None] * q
            blk[:, 1:, 0] = blk[:, 0, 1:]
            blk[:, 1:, 1:] = np.eye(p - 1)[None] + self.d[:, None, None] * qq
            blk *= e2
            blk[:, np.arange(p), np.arange(p)] += _STATIC
            blk[:, p - 1, p - 1] -= 2.0 * _STATIC
            return blk
        u = np.concatenate([self.u0[:, None], self.u1[:, None] * q], axis=1)
        v = np.concatenate([np.zeros((nc, 1)), self.v1[:, None] * q], axis=1)
        dd = np.ones((nc, p))
        dd[:, 0] = self.d1
        diag = np.zeros((nc, p, p))
        diag[:, np.arange(p), np.arange(p)] = dd
        blk = e2 * (diag - v[:, :, None] * v[:, None, :]) + (e2 * e2 / (e2 + _STATIC)) * (u[:, :, None] * u[:, None, :])
        blk[:, np.arange(p), np.arange(p)] += _STATIC
        return blk
