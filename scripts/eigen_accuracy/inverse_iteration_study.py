#!/usr/bin/python3
"""Can the GPU decorrelation's QL-with-vectors + rotation replay (spec §2.10 step 2)
be replaced by eigenvalues only + inverse iteration on the tridiagonal + Y = H Z diag(l^-1/4)?

Input: raw float64 records written by the SPEXD_DUMP_BLOCKS hook of dump_blocks.patch (README.md;
core/cpu/internal/patch_eigen.cc): per core block [nt, wavepad_eff, nwavestep, ndiag,
C (nt*nt, full symmetric), x (nt)].

For each block Q = C^{-1/2} (GPU clipping w >= 1e-14 max w) and the decorrelation products
r = Q 1, ivar = r^2, flux = (Q x)/r, R band (2 ndiag + 1 diagonals of R = Q/r in the core rows)
are computed by
  * evd   numpy.linalg.eigh (LAPACK dsyevd, divide and conquer)   -- reference 1
  * ev    scipy eigh driver='ev' (dsyev: dsytrd + dorgtr + implicit QL/QR with vectors,
          i.e. today's GPU algorithm)                               -- reference 2
  * evr   scipy eigh driver='evr' (MRRR)                            -- reference 3
  * truth evd's decomposition refined in 80-bit long double (first-order perturbation of
          V^T C V, exact to ~1e-18 for these gaps): the yardstick for everything above
  * candidates: dsytrd -> explicit H; eigenvalues of T by dsterf (QL/QR without vectors);
          T split where |e_i| <= eps sqrt|d_i d_i+1|; inverse iteration for every eigenvalue
          (tridiagonal LU with partial pivoting as dlagtf/dlagts, fixed start vector restricted
          to the eigenvalue's split block, 1-3 iterations), optionally Gram-Schmidt within
          clusters (|l_i - l_j| < 1e-3 ||T||_1, chained, as dstein) and/or Newton-Schulz steps
          Z <- Z (3I - Z^T Z)/2; then Y = H Z diag(l^-1/4), Q = Y Y^T.
  * stein scipy eigh_tridiagonal(lapack_driver='stebz') = dstebz + real LAPACK dstein.

Usage: /usr/bin/python3 scripts/inverse_iteration_study.py BLOCKS.bin [--max N] [--out FILE]
"""
import argparse
import sys
import time

import numpy as np
import scipy.linalg as sl
from scipy.linalg import lapack

EPS = np.finfo(np.float64).eps
CLIP = 1e-14  # GPU: w <- max(w, 1e-14 max w)
START = np.random.default_rng(20250125).uniform(-1.0, 1.0, 4096)  # fixed start vector
START_PER = np.random.default_rng(4242).uniform(-1.0, 1.0, (128, 128))  # one per eigenvalue index


# ----------------------------------------------------------------------------- input
def load(path, max_blocks=None):
    raw = np.fromfile(path, dtype=np.float64)
    nt = int(raw[0])
    rec = 4 + nt * nt + nt
    raw = raw.reshape(-1, rec)
    _, idx = np.unique(raw, axis=0, return_index=True)  # cold + warm runs dump twice
    raw = raw[np.sort(idx)]
    if max_blocks:
        raw = raw[:max_blocks]
    meta = raw[0, :4].astype(int)
    C = raw[:, 4:4 + nt * nt].reshape(-1, nt, nt).copy()
    x = raw[:, 4 + nt * nt:].copy()
    return C, x, dict(nt=nt, i0=meta[1], nws=meta[2], nd=meta[3])


# ----------------------------------------------------------------------------- products
def clip(w):
    return np.maximum(w, CLIP * w.max(axis=-1, keepdims=True))


def q_from_eig(w, V):
    w = clip(w)
    return np.einsum('...ik,...k,...jk->...ij', V, w ** -0.5, V)


def products(Q, x, g):
    """Decorrelation outputs of spec §2.10 step 3 / §2.11, core rows only."""
    i0, nws, nd = g['i0'], g['nws'], g['nd']
    r = Q.sum(axis=-1)
    qx = np.einsum('...ij,...j->...i', Q, x)
    core = slice(i0, i0 + nws)
    cols = np.arange(i0, i0 + nws)
    rows = cols[None, :] - nd + np.arange(2 * nd + 1)[:, None]  # (2nd+1, nws)
    R = Q / r[..., :, None]
    band = R[..., rows, np.broadcast_to(cols, rows.shape)]
    return dict(Q=Q, r=r[..., core], ivar=(r ** 2)[..., core], flux=(qx / r)[..., core],
                Rband=band)


# ----------------------------------------------------------------------------- references
def ref_evd(C):
    w, V = np.linalg.eigh(C)
    return w, V


def ref_scipy(C, driver):
    W = np.empty(C.shape[:2])
    V = np.empty_like(C)
    for b in range(C.shape[0]):
        W[b], V[b] = sl.eigh(C[b], driver=driver)
    return W, V


def truth(C, w, V):
    """Q from evd's (w, V) refined in long double: A = V^T C V = diag + F, F ~ eps ||C||;
    first-order eigenvectors W = I + K, K_ij = F_ij / (w_j - w_i), eigenvalues diag(A)."""
    L = np.longdouble
    Vl = V.astype(L)
    A = np.matmul(np.matmul(np.swapaxes(Vl, -1, -2), C.astype(L)), Vl)
    lam = np.diagonal(A, axis1=-2, axis2=-1).copy()
    gap = lam[..., None, :] - lam[..., :, None]  # w_j - w_i
    n = C.shape[-1]
    eye = np.eye(n, dtype=bool)
    gap[..., eye] = 1
    K = A / gap
    K[..., eye] = 0
    Wm = np.eye(n, dtype=L) + K
    # Orthonormalise to second order: W (I - K^T K / 2)
    Wm = Wm - 0.5 * np.matmul(Wm, np.matmul(np.swapaxes(K, -1, -2), K))
    U = np.matmul(Vl, Wm)
    lam = np.maximum(lam, L(CLIP) * lam.max(axis=-1, keepdims=True))
    Q = np.einsum('...ik,...k,...jk->...ij', U, lam ** L(-0.5), U)
    return Q, np.abs(K).max(axis=(-1, -2))


# ----------------------------------------------------------------------------- candidate
def tridiagonalise(C):
    """dsytrd (lower) per block, H = H(1)...H(n-1) formed explicitly: C = H T H^T."""
    B, n, _ = C.shape
    d = np.empty((B, n))
    e = np.empty((B, n - 1))
    V = np.zeros((B, n, n - 1))
    tau = np.empty((B, n - 1))
    for b in range(B):
        c, d[b], e[b], tau[b], info = lapack.dsytrd(C[b], lower=1)
        assert info == 0
        for i in range(n - 1):
            V[b, i + 1, i] = 1.0
            V[b, i + 2:, i] = c[i + 2:, i]
    H = np.broadcast_to(np.eye(n), (B, n, n)).copy()
    for i in range(n - 2, -1, -1):  # dorgtr/dorg2l-style backward accumulation
        v = V[:, :, i]
        H -= tau[:, i, None, None] * v[:, :, None] * np.einsum('bk,bkj->bj', v, H)[:, None, :]
    return d, e, H


def split_points(d, e):
    """dsterf's test: e_i negligible when |e_i| <= eps sqrt|d_i| sqrt|d_i+1|."""
    return np.abs(e) <= EPS * np.sqrt(np.abs(d[:-1])) * np.sqrt(np.abs(d[1:]))


def eigenvalues(d, e, method='sterf', split=True):
    """Eigenvalues of each split block of T (ascending within the block) and each value's
    block bounds [lo, hi). Also e with the split entries zeroed."""
    B, n = d.shape
    lam = np.empty((B, n))
    lo = np.empty((B, n), dtype=int)
    hi = np.empty((B, n), dtype=int)
    es = e.copy()
    nsplit = np.zeros(B, dtype=int)
    for b in range(B):
        sp = split_points(d[b], e[b]) if split else np.zeros(n - 1, bool)
        es[b, sp] = 0.0
        nsplit[b] = sp.sum()
        bounds = [0] + list(np.nonzero(sp)[0] + 1) + [n]
        for p, q in zip(bounds[:-1], bounds[1:]):
            if q - p == 1:
                w = d[b, p:q].copy()
            elif method == 'sterf':
                w, info = lapack.dsterf(d[b, p:q], es[b, p:q - 1])
                assert info == 0
            else:  # bisection
                w = sl.eigvalsh_tridiagonal(d[b, p:q], es[b, p:q - 1], lapack_driver='stebz')
            lam[b, p:q] = np.sort(w)
            lo[b, p:q] = p
            hi[b, p:q] = q
    return lam, lo, hi, es, nsplit


def tri_lu(d, e, lam):
    """dlagtf for T - lam_k I, every (block, eigenvalue) at once. Arrays (n, B, m)."""
    n = d.shape[1]
    a = d.T[:, :, None] - lam[None, :, :]
    m = lam.shape[1]
    b = np.broadcast_to(e.T[:, :, None], (n - 1,) + lam.shape).copy()
    c = b.copy()
    dd = np.zeros((max(n - 2, 1),) + lam.shape)
    mult = np.zeros((n - 1,) + lam.shape)
    swap = np.zeros((n - 1,) + lam.shape, dtype=bool)
    for k in range(n - 1):
        ak, bk, ck = a[k], b[k], c[k]
        sw = np.abs(ck) > np.abs(ak)
        with np.errstate(divide='ignore', invalid='ignore'):
            m_ns = np.where(ak != 0, ck / np.where(ak != 0, ak, 1), 0.0)
            m_s = ak / np.where(sw, ck, 1)
        ak1 = a[k + 1]
        bk1 = b[k + 1] if k < n - 2 else np.zeros_like(ak)
        new_ak1 = np.where(sw, bk - m_s * ak1, ak1 - m_ns * bk)
        a[k] = np.where(sw, ck, ak)
        b[k] = np.where(sw, ak1, bk)
        if k < n - 2:
            dd[k] = np.where(sw, bk1, 0.0)
            b[k + 1] = np.where(sw, -m_s * bk1, bk1)
        a[k + 1] = new_ak1
        mult[k] = np.where(sw, m_s, m_ns)
        swap[k] = sw
    # dlagts job=-1: a zero (or underflowing) pivot becomes sign(a) * eps * max|U|
    tnorm = np.abs(d).max(axis=1) + 2 * np.abs(e).max(axis=1)
    tol = EPS * np.maximum(tnorm, np.finfo(np.float64).tiny)[:, None] * np.ones_like(lam)
    small = np.abs(a) < 1e-280
    a = np.where(small, np.where(a < 0, -tol[None], tol[None]), a)
    return a, b, dd, mult, swap, small.any(axis=0)


def tri_solve(lu, y):
    a, b, dd, mult, swap, _ = lu
    n = a.shape[0]
    y = y.copy()
    for k in range(n - 1):
        yk, yk1 = y[k].copy(), y[k + 1].copy()
        sw = swap[k]
        y[k] = np.where(sw, yk1, yk)
        y[k + 1] = np.where(sw, yk - mult[k] * yk1, yk1 - mult[k] * yk)
    x = np.empty_like(y)
    x[n - 1] = y[n - 1] / a[n - 1]
    x[n - 2] = (y[n - 2] - b[n - 2] * x[n - 1]) / a[n - 2]
    for k in range(n - 3, -1, -1):
        x[k] = (y[k] - b[k] * x[k + 1] - dd[k] * x[k + 2]) / a[k]
    return x


def tri_matvec(d, e, Z):
    """T Z for Z (B, n, m)."""
    out = d[:, :, None] * Z
    out[:, :-1] += e[:, :, None] * Z[:, 1:]
    out[:, 1:] += e[:, :, None] * Z[:, :-1]
    return out


def inverse_iteration(d, e, lam, lo, hi, iters, per_start=False):
    """Z (B, n, m) after each of 1..iters iterations, and each's residual ||T z - l z|| / ||T||."""
    B, n = d.shape
    idx = np.arange(n)
    mask = (idx[None, :, None] >= lo[:, None, :]) & (idx[None, :, None] < hi[:, None, :])
    s0 = START_PER[:n, :lam.shape[1]][None] if per_start else START[:n][None, :, None]
    x = (s0 * mask).transpose(1, 0, 2)  # (n, B, m)
    lu = tri_lu(d, e, lam)
    tnorm = np.abs(d).max(axis=1) + 2 * np.abs(e).max(axis=1)
    out = []
    for _ in range(iters):
        x = tri_solve(lu, x)
        x /= np.linalg.norm(x, axis=0, keepdims=True)
        Z = x.transpose(1, 0, 2).copy()
        res = np.linalg.norm(tri_matvec(d, e, Z) - lam[:, None, :] * Z, axis=1) / tnorm[:, None]
        out.append((Z, res))
    return out, lu[5]


def clusters(d, e, lam, lo):
    """dstein's groups: within a split block, consecutive values closer than 1e-3 ||T||_1."""
    B, n = lam.shape
    onenrm = np.abs(d).copy()
    onenrm[:, :-1] += np.abs(e)
    onenrm[:, 1:] += np.abs(e)
    onenrm = onenrm.max(axis=1)
    groups = []
    for b in range(B):
        g, cur = [], [0]
        for j in range(1, n):
            if lo[b, j] == lo[b, j - 1] and lam[b, j] - lam[b, j - 1] <= 1e-3 * onenrm[b]:
                cur.append(j)
            else:
                g.append(cur)
                cur = [j]
        g.append(cur)
        groups.append([c for c in g if len(c) > 1])
    return groups


def cluster_gs(Z, groups):
    Z = Z.copy()
    for b, gs in enumerate(groups):
        for g in gs:
            for t, j in enumerate(g):
                if t:
                    P = Z[b][:, g[:t]]
                    for _ in range(2):  # classical GS twice
                        Z[b][:, j] -= P @ (P.T @ Z[b][:, j])
                Z[b][:, j] /= np.linalg.norm(Z[b][:, j])
    return Z


def newton_schulz(Z, steps=1, tol=None):
    """steps NS steps; with tol, up to `steps` steps while max|Z^T Z - I| > tol."""
    n = Z.shape[-1]
    for _ in range(steps):
        if tol is not None and orth_err(Z).max() <= tol:
            break
        Z = 0.5 * Z @ (3 * np.eye(n) - np.swapaxes(Z, -1, -2) @ Z)
    return Z


def orth_err(Z):
    n = Z.shape[-1]
    return np.abs(np.swapaxes(Z, -1, -2) @ Z - np.eye(n)).max(axis=(-1, -2))


def q_from_tri(H, Z, lam):
    Y = H @ Z * clip(lam)[:, None, :] ** -0.25
    return Y @ np.swapaxes(Y, -1, -2)


# ----------------------------------------------------------------------------- metrics
KEYS = ('Q', 'r', 'ivar', 'flux', 'Rband')


class Stats:
    """Per block: max|a - a_ref| and max|a_ref| for each output array."""

    def __init__(self):
        self.diff = {k: [] for k in KEYS}
        self.refmax = {k: [] for k in KEYS}

    def add(self, p, pref):
        for k in KEYS:
            ax = tuple(range(1, np.ndim(pref[k])))
            self.diff[k].append(np.abs(np.asarray(p[k], np.float64) - np.asarray(pref[k], np.float64)).max(axis=ax))
            self.refmax[k].append(np.abs(np.asarray(pref[k], np.float64)).max(axis=ax))

    def summary(self):
        s = {}
        for k in KEYS:
            dif = np.concatenate(self.diff[k])
            ref = np.concatenate(self.refmax[k])
            rel = dif / ref
            s[k] = dict(max=rel.max(), p99=np.percentile(rel, 99), med=np.median(rel),
                        frame=dif.max() / ref.max(), worst=int(rel.argmax()))
        return s


# ----------------------------------------------------------------------------- driver
def run_batch(C, x, g, acc, extra, variants):
    B, n, _ = C.shape
    w1, V1 = ref_evd(C)
    Qt, kmax = truth(C, w1, V1)
    pt = products(Qt, x.astype(np.longdouble), g)
    extra['truth_kmax'].append(kmax.astype(np.float64))
    wmin, wmax = w1[:, 0], w1[:, -1]
    extra['cond'].append(wmax / wmin)
    gaps = np.diff(w1, axis=1)
    extra['min_gap_abs'].append(gaps.min(axis=1) / wmax)  # relative to ||C||
    extra['min_gap_rel'].append((gaps / w1[:, 1:]).min(axis=1))  # relative to the value

    refs = {'evd': (w1, V1), 'ev': ref_scipy(C, 'ev'), 'evr': ref_scipy(C, 'evr')}
    p1 = products(q_from_eig(w1, V1), x, g)
    for name, (w, V) in refs.items():
        p = products(q_from_eig(w, V), x, g) if name != 'evd' else p1
        acc.setdefault((name, 'truth'), Stats()).add(p, pt)
        if name != 'evd':
            acc.setdefault((name, 'evd'), Stats()).add(p, p1)

    t = time.time()
    d, e, H = tridiagonalise(C)
    extra['t_tri'].append(time.time() - t)
    T = np.zeros((B, n, n))
    ii = np.arange(n)
    T[:, ii, ii] = d
    T[:, ii[1:], ii[:-1]] = e
    T[:, ii[:-1], ii[1:]] = e
    extra['tri_resid'].append(np.abs(H @ T @ np.swapaxes(H, 1, 2) - C).max(axis=(1, 2)) / wmax)
    lam, lo, hi, es, nsplit = eigenvalues(d, e, 'sterf')
    extra['nsplit'].append(nsplit)
    extra['lam_err'].append(np.abs(np.sort(lam, axis=1) - w1).max(axis=1) / wmax)
    t = time.time()
    its, singular = inverse_iteration(d, es, lam, lo, hi, 3)
    extra['t_inv'].append(time.time() - t)
    extra['singular'].append(singular.any(axis=1))
    groups = clusters(d, es, lam, lo)
    extra['nclustered'].append(np.array([sum(len(c) for c in gs) for gs in groups]))
    extra['maxcluster'].append(np.array([max([len(c) for c in gs], default=1) for gs in groups]))
    for it, (Z, res) in enumerate(its, 1):
        extra[f'res_it{it}'].append(res.max(axis=1))
        extra[f'orth_it{it}'].append(orth_err(Z))
        Zg = cluster_gs(Z, groups)
        extra[f'orth_gs_it{it}'].append(orth_err(Zg))
        cand = {f'ii{it}': Z, f'ii{it}+gs': Zg, f'ii{it}+ns': newton_schulz(Z),
                f'ii{it}+ns2': newton_schulz(Z, 2), f'ii{it}+gs+ns': newton_schulz(Zg)}
        extra[f'orth_ns_it{it}'].append(orth_err(cand[f'ii{it}+ns']))
        extra[f'orth_gsns_it{it}'].append(orth_err(cand[f'ii{it}+gs+ns']))
        for name, Zc in cand.items():
            if name not in variants:
                variants.append(name)
            p = products(q_from_tri(H, Zc, lam), x, g)
            acc.setdefault((name, 'truth'), Stats()).add(p, pt)
            acc.setdefault((name, 'evd'), Stats()).add(p, p1)
    # distinct start vector per eigenvalue (robust for (near-)equal eigenvalues), NS to convergence
    its_p, _ = inverse_iteration(d, es, lam, lo, hi, 2, per_start=True)
    Zp = its_p[1][0]
    extra['orth_per_it2'].append(orth_err(Zp))
    steps = np.zeros(B, dtype=int)
    Zc = Zp.copy()
    for _ in range(8):
        bad = orth_err(Zc) > 4 * EPS
        if not bad.any():
            break
        steps += bad
        Zc[bad] = newton_schulz(Zc[bad])
    extra['ns_steps'].append(steps)
    for name, Zq in (('ii2p+ns', newton_schulz(Zp)), ('ii2p+ns(conv)', Zc)):
        pq = products(q_from_tri(H, Zq, lam), x, g)
        acc.setdefault((name, 'truth'), Stats()).add(pq, pt)
        acc.setdefault((name, 'evd'), Stats()).add(pq, p1)
    # bisection eigenvalues instead of dsterf, best variant
    lamb, lob, hib, esb, _ = eigenvalues(d, e, 'stebz')
    its_b, _ = inverse_iteration(d, esb, lamb, lob, hib, 2)
    Zb = newton_schulz(cluster_gs(its_b[1][0], clusters(d, esb, lamb, lob)))
    pb = products(q_from_tri(H, Zb, lamb), x, g)
    acc.setdefault(('ii2+gs+ns(bisect)', 'truth'), Stats()).add(pb, pt)
    acc.setdefault(('ii2+gs+ns(bisect)', 'evd'), Stats()).add(pb, p1)
    # real LAPACK dstebz + dstein on the same T and H
    Zs = np.empty_like(C)
    ls = np.empty((B, n))
    for b in range(B):
        ls[b], Zs[b] = sl.eigh_tridiagonal(d[b], e[b], lapack_driver='stebz')
    extra['orth_stein'].append(orth_err(Zs))
    ps = products(q_from_tri(H, Zs, ls), x, g)
    acc.setdefault(('lapack-dstein', 'truth'), Stats()).add(ps, pt)
    acc.setdefault(('lapack-dstein', 'evd'), Stats()).add(ps, p1)


def study(C, x, g, batch=96):
    acc, variants = {}, []
    extra = {k: [] for k in ('cond', 'min_gap_abs', 'min_gap_rel', 'truth_kmax', 't_tri', 't_inv',
                             'tri_resid', 'nsplit', 'lam_err', 'singular', 'nclustered',
                             'maxcluster', 'orth_stein', 'orth_per_it2', 'ns_steps')}
    for it in (1, 2, 3):
        for k in ('res', 'orth', 'orth_gs', 'orth_ns', 'orth_gsns'):
            extra[f'{k}_it{it}'] = []
    for s in range(0, C.shape[0], batch):
        run_batch(C[s:s + batch], x[s:s + batch], g, acc, extra, variants)
        print(f'  {min(s + batch, C.shape[0])}/{C.shape[0]} blocks', file=sys.stderr, flush=True)
    extra = {k: np.concatenate([np.atleast_1d(v) for v in vs]) if vs and np.ndim(vs[0]) else np.array(vs)
             for k, vs in extra.items()}
    order = ['evd', 'ev', 'evr'] + variants + ['ii2p+ns', 'ii2p+ns(conv)', 'ii2+gs+ns(bisect)',
                                               'lapack-dstein']
    return acc, order, extra


def fmt_table(acc, order, against, title):
    lines = [title,
             f"{'variant':<20}" + ''.join(f'{k + " max":>10}{k + " p99":>10}' for k in KEYS)
             + f"{'flux frm':>10}{'ivar frm':>10}{'R frm':>10}"]
    for name in order:
        st = acc.get((name, against))
        if st is None:
            continue
        s = st.summary()
        lines.append(f'{name:<20}' + ''.join(f'{s[k]["max"]:10.1e}{s[k]["p99"]:10.1e}' for k in KEYS)
                     + f'{s["flux"]["frame"]:10.1e}{s["ivar"]["frame"]:10.1e}{s["Rband"]["frame"]:10.1e}')
    return lines


def pct(v, name, f='.1e'):
    q = np.percentile(v, [0, 50, 99, 100])
    return f'{name:<38} min {q[0]:{f}}  med {q[1]:{f}}  p99 {q[2]:{f}}  max {q[3]:{f}}'


# ----------------------------------------------------------------------------- edge cases
def edge_cases(g, n):
    """Synthetic blocks from a known decomposition (V, lam): C = fl(V diag(lam) V^T) (long double,
    rounded once); truth Q = V diag(lam^-1/2) V^T in long double (C's own rounding moves Q by
    ~cond * eps, so the floor here is ~1e-14..1e-13 for cond 432)."""
    L_ = np.longdouble
    rng = np.random.default_rng(7)
    Vr, _ = np.linalg.qr(rng.standard_normal((n, n)))
    x = rng.standard_normal(n)
    lr = np.geomspace(1.0, 432.0, n)
    eye = np.eye(n)
    cases = {
        'diag c*I (wholly masked patch)': (eye, np.full(n, 3.7e-2)),
        'diag, varying (cond 100)': (eye, np.geomspace(1e-3, 1e-1, n)),
        'two equal eigenvalues (smallest pair)': (Vr, np.r_[1.0, 1.0, lr[2:]]),
        'two equal eigenvalues (middle)': (Vr, np.r_[lr[:40], lr[39], lr[41:]]),
        'three eigenvalues 1e-12 apart': (Vr, np.r_[1.0, 1 + 1e-12, 1 + 2e-12, lr[3:]]),
        'cond 1e6 (geometric spectrum)': (Vr, np.geomspace(1.0, 1e6, n)),
    }
    lines = ['', 'Edge cases (errors vs long-double truth, relative to max|ref|; orth = max|Z^T Z - I|):']
    for name, (V, lam_true) in cases.items():
        Vl = V.astype(L_)
        Cl = np.matmul(Vl * lam_true.astype(L_), Vl.T)
        Cl = 0.5 * (Cl + Cl.T)
        C = Cl.astype(np.float64)
        Qt = np.matmul(Vl * lam_true.astype(L_) ** L_(-0.5), Vl.T)
        Cb, xb = C[None], x[None]
        pt = products(Qt[None], xb.astype(L_), g)
        w1, V1 = ref_evd(Cb)
        d, e, H = tridiagonalise(Cb)
        out = [f'  {name}: cond {lam_true.max() / lam_true.min():.3g}, max|e_i|/||T|| '
               f'{np.abs(e).max() / np.abs(d).max():.1e}']
        for split in (True, False):
            lam, lo, hi, es, ns = eigenvalues(d, e, 'sterf', split=split)
            its, sing = inverse_iteration(d, es, lam, lo, hi, 2)
            Z = its[1][0]
            gr = clusters(d, es, lam, lo)
            Zg = cluster_gs(Z, gr)
            res = {}
            if split:
                res['evd'] = products(q_from_eig(w1, V1), xb, g)
                res['ev'] = products(q_from_eig(*ref_scipy(Cb, 'ev')), xb, g)
            zs = {'ii2': Z, 'ii2+ns': newton_schulz(Z), 'ii2+gs': Zg, 'ii2+gs+ns': newton_schulz(Zg)}
            itp, _ = inverse_iteration(d, es, lam, lo, hi, 2, per_start=True)
            Zc = itp[1][0]
            nsteps = 0
            while nsteps < 8 and orth_err(Zc)[0] > 4 * EPS:
                Zc = newton_schulz(Zc)
                nsteps += 1
            zs[f'ii2p+ns(conv: {nsteps} steps)'] = Zc
            for k, Zc in zs.items():
                res[k] = products(q_from_tri(H, Zc, lam), xb, g)
            cl = max([len(c) for c in gr[0]], default=1)
            out.append(f'    split test {"on " if split else "off"}: splits {ns[0]}, zero pivot '
                       f'{bool(sing.any())}, largest cluster {cl}')
            for k, p in res.items():
                errs = [np.abs(np.asarray(p[a], float) - np.asarray(pt[a], float)).max()
                        / np.abs(np.asarray(pt[a], float)).max() for a in ('Q', 'ivar', 'flux', 'Rband')]
                o = f'  orth {orth_err(zs[k])[0]:.0e}' if k in zs else ''
                out.append(f'      {k:<24} Q {errs[0]:.0e}  ivar {errs[1]:.0e}  flux {errs[2]:.0e}  '
                           f'R {errs[3]:.0e}{o}')
        lines += out
    return lines


def validate_truth(C, g, count):
    """The long-double truth against mpmath (40 digits) on `count` blocks."""
    import mpmath
    mpmath.mp.dps = 40
    lines = []
    for b in range(count):
        w1, V1 = ref_evd(C[b:b + 1])
        Qt, _ = truth(C[b:b + 1], w1, V1)
        E, U = mpmath.eigsy(mpmath.matrix(C[b].tolist()))
        n = C.shape[1]
        D = mpmath.diag([E[i] ** -0.5 for i in range(n)])
        Qm = U * D * U.T
        Qm = np.array([[float(Qm[i, j]) for j in range(n)] for i in range(n)])
        err = np.abs(np.asarray(Qt, float) - Qm).max() / np.abs(Qm).max()
        err64 = np.abs(q_from_eig(w1, V1)[0] - Qm).max() / np.abs(Qm).max()
        lines.append(f'  block {b}: |Q_truth - Q_mpmath| / max = {err:.1e}  (evd: {err64:.1e})')
    return lines


def write_report(lines, out):
    """Prints the report and, with `out`, writes it there too."""
    text = '\n'.join(lines)
    print(text)
    if out:
        with open(out, 'w') as f:
            f.write(text + '\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('blocks')
    ap.add_argument('--max', type=int, default=0)
    ap.add_argument('--out', default='')
    ap.add_argument('--validate', type=int, default=0, help='check the truth with mpmath on N blocks')
    args = ap.parse_args()
    t0 = time.time()
    C, x, g = load(args.blocks, args.max)
    print(f'{C.shape[0]} blocks, n={g["nt"]}, core rows [{g["i0"]}, {g["i0"] + g["nws"]}), ndiag {g["nd"]}',
          file=sys.stderr)
    acc, order, ex = study(C, x, g)
    L = [f'Inverse iteration for the decorrelation blocks. Data: {args.blocks}',
         f'{C.shape[0]} distinct real C_ss blocks (n={g["nt"]}), core rows [{g["i0"]}, {g["i0"] + g["nws"]}),'
         f' ndiag {g["nd"]}.',
         'Errors: max_block |a - a_ref| / max_block |a_ref| (max and p99 over blocks); "frm" = max |a - a_ref| '
         'over all blocks / max |a_ref| over all blocks (frame-wide bar). a = Q (74x74), r = Q1, ivar, flux = '
         '(Qx)/r, Rband (core rows).',
         'Variants: iiK = K inverse iterations from one fixed start vector; iiKp = a different fixed start vector per '
         'eigenvalue; +gs = Gram-Schmidt in dstein clusters; +ns = one Newton-Schulz step (ns2 = two, '
         'ns(conv) = steps until max|Z^T Z - I| <= 4 eps, at most 8); (bisect) = dstebz eigenvalues instead of '
         'dsterf; lapack-dstein = scipy dstebz+dstein on the same T, H.', '']
    L += fmt_table(acc, order, 'truth', 'Against the long-double truth:')
    L += ['']
    L += fmt_table(acc, order, 'evd', 'Against numpy eigh (dsyevd), the usual reference:')
    L += ['', 'Block statistics:',
          pct(ex['cond'], 'cond(C_ss)', '.3g'),
          pct(ex['min_gap_abs'], 'min eigen gap / lambda_max'),
          pct(ex['min_gap_rel'], 'min eigen gap / lambda'),
          pct(ex['truth_kmax'], 'truth: max first-order |K| (validity)'),
          pct(ex['tri_resid'], '|H T H^T - C| / lambda_max'),
          pct(ex['lam_err'], 'dsterf eigenvalue err / lambda_max'),
          f'{"blocks with a split T":<38} {int((ex["nsplit"] > 0).sum())}',
          f'{"blocks with a zero pivot (perturbed)":<38} {int(ex["singular"].sum())}',
          f'{"blocks with a dstein cluster":<38} {int((ex["nclustered"] > 0).sum())}',
          pct(ex['nclustered'], 'eigenvalues in clusters per block', '.0f'),
          pct(ex['maxcluster'], 'largest cluster per block', '.0f')]
    for it in (1, 2, 3):
        L.append(pct(ex[f'res_it{it}'], f'it{it}: max ||Tz - lz|| / ||T||'))
    for it in (1, 2, 3):
        L.append(pct(ex[f'orth_it{it}'], f'it{it}: max|Z^T Z - I|'))
        L.append(pct(ex[f'orth_gs_it{it}'], f'it{it}+gs: max|Z^T Z - I|'))
        L.append(pct(ex[f'orth_ns_it{it}'], f'it{it}+ns: max|Z^T Z - I|'))
        L.append(pct(ex[f'orth_gsns_it{it}'], f'it{it}+gs+ns: max|Z^T Z - I|'))
    L.append(pct(ex['orth_stein'], 'LAPACK dstein: max|Z^T Z - I|'))
    L.append(pct(ex['orth_per_it2'], 'it2, start per eigenvalue: max|Z^T Z-I|'))
    L.append(f'{"NS steps to max|Z^T Z - I| <= 4 eps":<38} ' + ', '.join(
        f'{k}: {int((ex["ns_steps"] == k).sum())}' for k in range(ex['ns_steps'].max() + 1)))
    L += edge_cases(g, g['nt'])
    if args.validate:
        L += ['', 'Long-double truth validated against mpmath (40 digits) eigendecomposition:']
        L += validate_truth(C, g, args.validate)
    L.append(f'\n(run time {time.time() - t0:.0f} s)')
    write_report(L, args.out)


if __name__ == '__main__':
    main()
