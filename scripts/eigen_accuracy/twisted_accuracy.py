#!/usr/bin/python3
"""The GPU's twisted-factorisation eigenvectors (core/numerics/tridiag_vectors.h, serially), with
and without the Newton-Schulz step, against the long-double truth of
inverse_iteration_study.py on dumped real blocks (README.md), beside dsyev (ev) and
dsyevd (evd). Usage: /usr/bin/python3 twisted_accuracy.py BLOCKS.bin [N]
Also a module: twisted() and twisted_vectors() for gpu_path_accuracy.py."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inverse_iteration_study as S  # noqa: E402

EPS = 2.220446049250313e-16


def twisted(d, e, lam, tnorm):
    """core/numerics/tridiag_vectors.h: TwistedTopDown, TwistedBottomUp, TwistedSolve."""
    return twisted_rq(d, e, lam, tnorm)[0]


def twisted_rq(d, e, lam, tnorm):
    """twisted(), and lam corrected to the Rayleigh quotient of its vector:
    (T - lam I) z = gamma_r e_r with z_r = 1, so z^T T z / z^T z = lam + gamma_r / z^T z."""
    n = len(d); tiny = EPS * tnorm
    g = lambda p: (-tiny if p < 0 else tiny) if abs(p) < tiny else p
    lp = np.zeros(n); um = np.zeros(n)
    p = g(d[0] - lam)
    for i in range(n - 1):
        lp[i] = e[i] / p; p = g((d[i + 1] - lam) - e[i] * lp[i])
    m = g(d[n - 1] - lam)
    for i in range(n - 2, -1, -1):
        um[i] = e[i] / m; m = g((d[i] - lam) - e[i] * um[i])
    r, best = n - 1, np.inf
    for i in range(n - 1, -1, -1):
        gam = d[i] - lam
        if i > 0: gam -= e[i - 1] * lp[i - 1]
        if i < n - 1: gam -= e[i] * um[i]
        if abs(gam) < best: best, r, gr = abs(gam), i, gam
    z = np.empty(n); z[r] = 1.0
    for i in range(r - 1, -1, -1): z[i] = -lp[i] * z[i + 1]
    for i in range(r + 1, n): z[i] = -um[i - 1] * z[i - 1]
    ss = (z * z).sum()
    return z / np.sqrt(ss), lam + gr / ss


def twisted_vectors(d, e, lam, rayleigh=False):
    """Z[b, :, j] = twisted(d[b], e[b], lam[b, j], |T_b|_inf) for a batch of tridiagonals;
    rayleigh: (Z, the eigenvalues corrected as twisted_rq)."""
    B, n = d.shape
    Z = np.empty((B, n, n)); L = np.empty((B, n))
    for b in range(B):
        tn = max(abs(d[b, i]) + (abs(e[b, i-1]) if i > 0 else 0) + (abs(e[b, i]) if i < n-1 else 0)
                 for i in range(n))
        for j in range(n): Z[b, :, j], L[b, j] = twisted_rq(d[b], e[b], lam[b, j], tn)
    return (Z, L) if rayleigh else Z


def main():
    C, x, g = S.load(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
    acc = {}
    for s in range(0, C.shape[0], 96):
        Cb, xb = C[s:s+96], x[s:s+96]
        w1, V1 = S.ref_evd(Cb)
        Qt, _ = S.truth(Cb, w1, V1)
        pt = S.products(Qt, xb.astype(np.longdouble), g)
        d, e, H = S.tridiagonalise(Cb)
        lam, lo, hi, es, nsplit = S.eigenvalues(d, e, 'sterf', split=False)
        Z = twisted_vectors(d, e, lam)
        acc.setdefault('orth', []).append(S.orth_err(Z))
        for name, Zc in (('tw', Z), ('tw+ns', S.newton_schulz(Z)), ('tw+ns2', S.newton_schulz(Z, 2))):
            p = S.products(S.q_from_tri(H, Zc, lam), xb, g)
            acc.setdefault((name, 'truth'), S.Stats()).add(p, pt)
        for name in ('ev', 'evd'):
            w, V = S.ref_scipy(Cb, name) if name == 'ev' else (w1, V1)
            p = S.products(S.q_from_eig(w, V), xb, g)
            acc.setdefault((name, 'truth'), S.Stats()).add(p, pt)
        print(f'{s+96} blocks', file=sys.stderr)
    o = np.concatenate(acc['orth'])
    print('orth max|Z^T Z - I| of twisted: median %.2g p99 %.2g max %.2g, > 1e-8: %d' % (np.median(o), np.percentile(o, 99), o.max(), (o > 1e-8).sum()))
    for name in ('ev', 'evd', 'tw', 'tw+ns', 'tw+ns2'):
        sm = acc[(name, 'truth')].summary()
        print(name.ljust(8), ' '.join('%s max %.2g p99 %.2g frame %.2g |' % (k, sm[k]['max'], sm[k]['p99'], sm[k]['frame']) for k in ('ivar', 'flux', 'Rband')))


if __name__ == '__main__':
    main()
