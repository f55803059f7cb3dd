#!/usr/bin/python3
"""Where the frame bench's CPU check of ivar (1.1e-12) comes from.

  edge_bin_study.py MDUMP FIBRE IVAR_MAX CPU_IVAR0 GPU_IVAR0 [BLOCK_OUT [LANES_EIG]]

MDUMP: SPEXD_DUMP_M's file (dump_edge_patch.patch, a CUDA frame bench run on the device
with --check-bundles 0); FIBRE: the fibre of bundle 0 the check names (ivar_at);
IVAR_MAX, CPU_IVAR0, GPU_IVAR0: that fibre's EDGE line (SPEXD_PRINT_EDGE=1). Computes the
exact ivar of the first wavelength bin from M in long double (Cholesky, C_ss, an
eigen-decomposition refined in long double), and each backend's error of it relative to
the fibre's largest ivar; with BLOCK_OUT, writes the CPU's C_ss for lanes_dump.cc, and with
LANES_EIG (lanes_dump's output) splits the CPU lanes' error into eigenvalues and vectors.
"""
import struct
import sys

import numpy as np

L = np.longdouble


def records(path):
    with open(path, 'rb') as f:
        while True:
            h = f.read(24)
            if len(h) < 24:
                return
            n, nt, core_row, out_row, nper, pad = struct.unpack('6i', h)
            if n <= 0 or nper <= 0:
                return
            M = np.frombuffer(f.read(8 * n * n), '<f8').reshape(n, n).T.copy()
            C = np.swapaxes(np.frombuffer(f.read(8 * nper * nt * nt), '<f8').reshape(nper, nt, nt), 1, 2)
            yield dict(n=n, nt=nt, core_row=core_row, out_row=out_row, nper=nper, pad=pad, M=M, C=C.copy())


def cholesky_ld(A):
    A = A.astype(L).copy()
    for j in range(A.shape[0]):
        A[j, j] = np.sqrt(A[j, j] - np.dot(A[j, :j], A[j, :j]))
        A[j + 1:, j] = (A[j + 1:, j] - A[j + 1:, :j] @ A[j, :j]) / A[j, j]
    return np.tril(A)


def forward_ld(Lm, B):
    X = np.zeros_like(B)
    for i in range(Lm.shape[0]):
        X[i] = (B[i] - Lm[i, :i] @ X[:i]) / Lm[i, i]
    return X


def refined_eig(C):
    """dsyevd's decomposition refined to second order in long double (as
    inverse_iteration_study.py's truth())."""
    w, V = np.linalg.eigh(np.asarray(C, dtype=np.float64))
    Vl = V.astype(L)
    A = Vl.T @ C.astype(L) @ Vl
    lam = np.diagonal(A).copy()
    gap = lam[None, :] - lam[:, None]
    eye = np.eye(len(lam), dtype=bool)
    gap[eye] = 1
    K = A / gap
    K[eye] = 0
    W = np.eye(len(lam), dtype=L) + K
    return lam, Vl @ (W - 0.5 * W @ (K.T @ K))


def ivar_bins(lam, U):
    lam = np.maximum(np.asarray(lam, dtype=L), L(0))
    U = np.asarray(U, dtype=L)
    return ((U * lam ** L(-0.5)) @ U.T).sum(axis=1) ** 2


def main():
    mdump, fibre = sys.argv[1], int(sys.argv[2])
    fmax, cpu0, gpu0 = (L(v) for v in sys.argv[3:6])
    for r in records(mdump):
        if not r['out_row'] <= fibre < r['out_row'] + r['nper']:
            continue
        k = fibre - r['out_row']
        s, nt, pad = r['core_row'] + k, r['nt'], r['pad']
        E = np.zeros((r['n'], nt), dtype=L)
        E[s * nt:(s + 1) * nt] = np.eye(nt, dtype=L)
        Y = forward_ld(cholesky_ld(r['M']), E)
        exact_c = Y.T @ Y
        cpu_c = r['C'][k]
        lam, U = refined_eig(exact_c)
        exact = ivar_bins(lam, U)[pad]
        print('patch n %d, core row %d, fibre %d (block %d), cond(C_ss) %.3g' % (
            r['n'], r['core_row'], fibre, s, float(lam.max() / lam.min())))
        print("CPU's C_ss against the exact: %.2e of its largest entry" % float(
            np.abs(cpu_c - exact_c).max() / np.abs(exact_c).max()))
        print('exact ivar of the first bin            %.17g' % float(exact))
        lam_c, U_c = refined_eig(cpu_c.astype(L))
        print("the CPU's C_ss, exact eigen: error %+.3e of the fibre's largest ivar" % float((ivar_bins(lam_c, U_c)[pad] - exact) / fmax))
        print('CPU backend (its lanes)       error %+.3e' % float((cpu0 - exact) / fmax))
        print('GPU backend                   error %+.3e' % float((gpu0 - exact) / fmax))
        w, V = np.linalg.eigh(cpu_c)
        print('dsyevd on the CPU C_ss        error %+.3e' % float((ivar_bins(w, V)[pad] - exact) / fmax))
        if len(sys.argv) > 6:
            rec = np.concatenate([[nt, pad, 50, 5], cpu_c.ravel(), np.zeros(nt)])
            rec.astype('<f8').tofile(sys.argv[6])
        if len(sys.argv) > 7:
            e = np.fromfile(sys.argv[7], '<f8')
            p = 2 + 2 * nt - 1
            vals, V = e[p:p + nt], e[p + nt:p + nt + nt * nt].reshape(nt, nt).T
            o = np.argsort(vals)
            print('lanes (values, vectors)       error %+.3e' % float((ivar_bins(vals, V)[pad] - exact) / fmax))
            print('lanes vectors, exact values   error %+.3e' % float((ivar_bins(np.sort(lam_c), V[:, o])[pad] - exact) / fmax))
            print('lanes values, smallest one off by %.2e relative' % float(abs(vals[o][0] - np.sort(lam_c)[0]) / np.sort(lam_c)[0]))


if __name__ == '__main__':
    main()
