#!/usr/bin/python3
# reduction_accuracy.py BLOCKS.bin A.bin B.bin ...: the Householder reduction alone, per dump
# (ql_values_dump / update_forms_dump output) over the distinct blocks: the eigenvalues of
# its T (long-double Sturm bisection, exact to ~1e-19 ||T||) against C's (long-double
# Rayleigh quotients of eigh's vectors), relative; and ||H T H^T - C||_max / ||C||_max,
# ||H^T H - I||_max in long double.
import sys
import numpy as np
L = np.longdouble
raw = np.fromfile(sys.argv[1], dtype=np.float64)
nt = int(raw[0]); raw = raw.reshape(-1, 4 + nt * nt + nt)
_, idx = np.unique(raw, axis=0, return_index=True); idx = np.sort(idx)
C = raw[idx, 4:4 + nt * nt].reshape(-1, nt, nt)  # symmetric: layout irrelevant
_, V = np.linalg.eigh(C)
Vl = V.astype(L)
truth = np.sort(np.einsum('bik,bij,bjk->bk', Vl, C.astype(L), Vl), axis=1)

def sturm_eigs(d, e):
    """All eigenvalues of each T (d (B,n), e (B,n-1)) by bisection on Sturm counts, long double."""
    d, e2 = d.astype(L), e.astype(L) ** 2
    B, n = d.shape
    r = np.zeros((B, n), L); r[:, :-1] += np.sqrt(e2); r[:, 1:] += np.sqrt(e2)
    lo = np.broadcast_to((d - r).min(axis=1, keepdims=True), (B, n)).copy()
    hi = np.broadcast_to((d + r).max(axis=1, keepdims=True), (B, n)).copy()
    k = np.arange(n)[None, :]
    tiny = L(np.finfo(L).tiny) * 1e10
    for _ in range(96):
        mid = 0.5 * (lo + hi)
        q = d[:, :1] - mid; cnt = (q < 0).astype(int)
        for i in range(1, n):
            q = np.where(q == 0, -tiny, q)
            q = d[:, i:i + 1] - mid - e2[:, i - 1:i] / q
            cnt += q < 0
        up = cnt > k  # eigenvalue k below mid
        hi = np.where(up, mid, hi); lo = np.where(up, lo, mid)
    return 0.5 * (lo + hi)

for p in sys.argv[2:]:
    o = np.fromfile(p, dtype=np.float64).reshape(-1, 3 * nt + nt * nt)[idx]
    d0, e0 = o[:, :nt], o[:, nt:2 * nt - 1]
    lam = np.concatenate([sturm_eigs(d0[s:s + 300], e0[s:s + 300]) for s in range(0, len(idx), 300)])
    rel = np.abs((lam - truth) / truth).astype(np.float64)
    H = o[:, 3 * nt:].reshape(-1, nt, nt).transpose(0, 2, 1).astype(L)
    T = np.zeros_like(H); ii = np.arange(nt)
    T[:, ii, ii] = d0; T[:, ii[:-1], ii[1:]] = e0; T[:, ii[1:], ii[:-1]] = e0
    back = (np.abs(H @ T @ H.transpose(0, 2, 1) - C).max(axis=(1, 2)) / np.abs(C).max(axis=(1, 2))).astype(float)
    orth = np.abs(H.transpose(0, 2, 1) @ H - np.eye(nt, dtype=L)).max(axis=(1, 2)).astype(float)
    smallest = rel[:, 0]
    print('%-12s eig(T) vs eig(C) rel: median %.2g p99 %.2g max %.2g (smallest eigenvalue: p99 %.2g max %.2g) | '
          'backward max %.2g median %.2g | orth max %.2g' % (p, np.median(rel), np.percentile(rel, 99), rel.max(),
          np.percentile(smallest, 99), smallest.max(), back.max(), np.median(back), orth.max()))
