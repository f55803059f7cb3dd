#!/usr/bin/python3
# Usage: gpu_path_accuracy.py BLOCKS.bin OURS.bin [N] (OURS.bin: ql_values_dump BLOCKS.bin
# OURS.bin [reverse]). The GPU path's own eigenvalues (serial QlValues on the serial
# Householder reduction, as tridiag_eigen.h runs it) through the twisted vectors +
# Newton-Schulz, against the truth; with the Rayleigh quotients, and as the kernel runs
# them ('gpu'); beside dsterf's eigenvalues of the same T.
import os
import sys

import numpy as np
import scipy.linalg as sl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inverse_iteration_study as S  # noqa: E402
from twisted_accuracy import twisted_vectors  # noqa: E402

BLOCKS, OURS = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2350
raw = np.fromfile(BLOCKS, dtype=np.float64)
nt = int(raw[0])
raw = raw.reshape(-1, 4 + nt * nt + nt)
_, idx = np.unique(raw, axis=0, return_index=True)  # the records S.load keeps, in its order
ours = np.fromfile(OURS, dtype=np.float64).reshape(-1, 3 * nt + nt * nt)[np.sort(idx)[:N]]
C, x, g = S.load(BLOCKS, N)
REDO = 1e-13  # kTwistedRedoShift (core/numerics/tridiag_vectors.h)
acc = {}; lam_err = []; rq_err = []; redone = 0
for s in range(0, C.shape[0], 96):
    Cb, xb, ob = C[s:s+96], x[s:s+96], ours[s:s+96]
    B, n = Cb.shape[0], nt
    w1, V1 = S.ref_evd(Cb)
    Qt, _ = S.truth(Cb, w1, V1)
    pt = S.products(Qt, xb.astype(np.longdouble), g)
    d0, e0, lam = ob[:, :n], ob[:, n:2*n], ob[:, 2*n:3*n]
    H = ob[:, 3*n:].reshape(B, n, n).transpose(0, 2, 1)  # column-major -> [r, c]
    lam_ster = np.array([sl.eigvalsh_tridiagonal(d0[b], e0[b, :n-1]) for b in range(B)])
    wt = np.array([np.sort(np.linalg.eigvalsh(Qt[b].astype(np.float64)))[::-1] ** -2.0 for b in range(B)])
    lam_err.append(np.abs(np.sort(lam, axis=1) - np.sort(wt, axis=1)) / np.sort(wt, axis=1))
    # 'ours+rq': the vectors from our eigenvalues, the values corrected to their vectors'
    # Rayleigh quotients (twisted_rq); 'gpu': as TwistedKernel does, a second
    # pass from the quotients in blocks where one moved by > REDO relative.
    Z, lam_rq = twisted_vectors(d0, e0, lam, rayleigh=True)
    rq_err.append(np.abs(np.sort(lam_rq, axis=1) - np.sort(wt, axis=1)) / np.sort(wt, axis=1))
    redo = ~(np.abs(lam_rq - lam) <= REDO * np.abs(lam)).all(axis=1)
    Z2, lam2 = Z.copy(), lam_rq.copy()
    if redo.any():
        Z2[redo], lam2[redo] = twisted_vectors(d0[redo], e0[redo], lam_rq[redo], rayleigh=True)
    redone += int(redo.sum())
    for name, Zn, L in (('ours', Z, lam), ('ours+rq', Z, lam_rq), ('gpu', Z2, lam2),
                        ('sterf', twisted_vectors(d0, e0, lam_ster), lam_ster)):
        p = S.products(S.q_from_tri(H, S.newton_schulz(Zn), L), xb, g)
        acc.setdefault(name, S.Stats()).add(p, pt)
    print(f'{s+96}', file=sys.stderr)
le = np.concatenate(lam_err)
print('relative eigenvalue error of QlValues vs truth: median %.2g p99 %.2g max %.2g' % (np.median(le), np.percentile(le, 99), le.max()))
rq = np.concatenate(rq_err)
print('the same, corrected to the Rayleigh quotients: median %.2g p99 %.2g max %.2g' % (np.median(rq), np.percentile(rq, 99), rq.max()))
print('blocks given the second pass: %d of %d' % (redone, N))
for name in ('ours', 'ours+rq', 'gpu', 'sterf'):
    sm = acc[name].summary()
    print(('tw+ns with %s eigenvalues' % name).ljust(34), ' '.join('%s max %.2g p99 %.2g frame %.2g |' % (k, sm[k]['max'], sm[k]['p99'], sm[k]['frame']) for k in ('ivar', 'flux', 'Rband')))
