#!/usr/bin/python3
# graded_backward.py BLOCKS.bin A.bin ...: the reduction's backward error E = H T H^T - C (long
# double) in C's eigenbasis, scaled as C^{-1/2} sees it: max_ij |u_i^T E u_j| / sqrt(l_i l_j).
import sys
import numpy as np
L = np.longdouble
raw = np.fromfile(sys.argv[1], dtype=np.float64)
nt = int(raw[0]); raw = raw.reshape(-1, 4 + nt * nt + nt)
_, idx = np.unique(raw, axis=0, return_index=True); idx = np.sort(idx)
C = raw[idx, 4:4 + nt * nt].reshape(-1, nt, nt)
w, U = np.linalg.eigh(C)
s = 1 / np.sqrt(w)
for p in sys.argv[2:]:
    o = np.fromfile(p, dtype=np.float64).reshape(-1, 3 * nt + nt * nt)[idx]
    H = o[:, 3 * nt:].reshape(-1, nt, nt).transpose(0, 2, 1).astype(L)
    T = np.zeros_like(H); ii = np.arange(nt)
    T[:, ii, ii] = o[:, :nt]; T[:, ii[:-1], ii[1:]] = o[:, nt:2 * nt - 1]; T[:, ii[1:], ii[:-1]] = o[:, nt:2 * nt - 1]
    E = (H @ T @ H.transpose(0, 2, 1) - C.astype(L)).astype(np.float64)  # small: double is fine now
    G = np.abs(U.transpose(0, 2, 1) @ E @ U) * s[:, :, None] * s[:, None, :]
    g = G.max(axis=(1, 2))
    print('%-11s graded backward error: median %.3g p90 %.3g p99 %.3g max %.3g' % (p, np.median(g), np.percentile(g, 90), np.percentile(g, 99), g.max()))
