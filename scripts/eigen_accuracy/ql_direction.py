#!/usr/bin/python3
# Usage: ql_direction.py BLOCKS.bin OURS.bin [N]
# QlValues' arithmetic in Python (checked against OURS.bin to ~1e-15), on T as reduced and
# on T reversed where |d_end| < |d_0| (dsterf's choice of QR over QL; the reduced C blocks
# are graded, d_0 ~ 8 d_end); the twisted vectors + Newton-Schulz with each set of
# eigenvalues, against the truth. (ql_values(rel=True) has dsteqr's relative deflation
# test: on these blocks it changed nothing.)
import math, os, sys
import numpy as np
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import inverse_iteration_study as S
src = open(os.path.join(HERE, 'twisted_accuracy.py')).read()
ns = {'__file__': os.path.join(HERE, 'twisted_accuracy.py')}
exec(src[:src.index('C, x, g = S.load')], ns)
twisted = ns['twisted']
U = 2.0 ** -53
def negligible(e, a, b, rel):
    if rel: return e * e <= (U * U * abs(a)) * abs(b)  # dsteqr: eps2 = eps^2 (eps = 2^-53 there)
    return abs(e) <= U * (abs(a) + abs(b))
def ql_values(d, e, rel):
    d = list(d); e = list(e) + [0.0]; n = len(d)
    for l in range(n):
        it = 0
        while True:
            m = l
            while m < n - 1 and not negligible(e[m], d[m], d[m + 1], rel): m += 1
            if m == l: break
            it += 1
            if it > 30: raise RuntimeError('no convergence')
            g = (d[l + 1] - d[l]) / (2.0 * e[l]); r = math.hypot(g, 1.0)
            g = d[m] - d[l] + e[l] / (g + (r if g >= 0 else -r))
            s = c = 1.0; p = 0.0
            i = m - 1
            while i >= l:
                f = s * e[i]; b = c * e[i]; r = math.hypot(f, g); e[i + 1] = r
                if r == 0.0:
                    d[i + 1] -= p; e[m] = 0.0; break
                s = f / r; c = g / r; g = d[i + 1] - p; r = (d[i] - g) * s + 2.0 * c * b
                p = s * r; d[i + 1] = g + p; g = c * r - b; i -= 1
            if r == 0.0 and i >= l: continue
            d[l] -= p; e[l] = g; e[m] = 0.0
    return np.array(d)
BLOCKS, OURS = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 96
raw = np.fromfile(BLOCKS, dtype=np.float64); nt = int(raw[0])
raw = raw.reshape(-1, 4 + nt * nt + nt); _, idx = np.unique(raw, axis=0, return_index=True)
ours = np.fromfile(OURS, dtype=np.float64).reshape(-1, 3 * nt + nt * nt)[np.sort(idx)[:N]]
C, x, g = S.load(BLOCKS, N)
n = nt; acc = {}
for s0 in range(0, N, 96):
    Cb, xb, ob = C[s0:s0+96], x[s0:s0+96], ours[s0:s0+96]; B = Cb.shape[0]
    w1, V1 = S.ref_evd(Cb); Qt, _ = S.truth(Cb, w1, V1); pt = S.products(Qt, xb.astype(np.longdouble), g)
    d0, e0 = ob[:, :n], ob[:, n:2*n]; H = ob[:, 3*n:].reshape(B, n, n).transpose(0, 2, 1)
    for rel in (False, True):
        def vals(b):
            d, e = d0[b], e0[b, :n-1]
            if rel and abs(d[-1]) < abs(d[0]):  # dsterf's choice: QR (QL on the reversed T)
                d, e = d[::-1], e[::-1]
            return ql_values(d, e, False)
        L = np.array([vals(b) for b in range(B)])
        Z = np.empty((B, n, n))
        for b in range(B):
            tn = max(abs(d0[b, i]) + (abs(e0[b, i-1]) if i > 0 else 0) + (abs(e0[b, i]) if i < n-1 else 0) for i in range(n))
            for j in range(n): Z[b, :, j] = twisted(d0[b], e0[b], L[b, j], tn)
        p = S.products(S.q_from_tri(H, S.newton_schulz(Z), L), xb, g)
        acc.setdefault(rel, S.Stats()).add(p, pt)
    # check: the Python additive QL reproduces QlValues' eigenvalues
    La = np.array([ql_values(d0[b], e0[b, :n-1], False) for b in range(min(B, 8))])
    print('python additive QL vs QlValues: max |diff|/max %.2g' % (np.abs(np.sort(La, 1) - np.sort(ob[:8, 2*n:3*n], 1)).max() / np.abs(La).max()), file=sys.stderr)
for rel in (False, True):
    sm = acc[rel].summary()
    print(('QL ' + ('reversed where |d_end| < |d_0|' if rel else 'as ours')).ljust(30), ' '.join('%s max %.2g p99 %.2g |' % (k, sm[k]['max'], sm[k]['p99']) for k in ('ivar', 'flux', 'Rband')))
