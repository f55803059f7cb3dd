#!/usr/bin/python3
# compare_variants.py BLOCKS.bin A.bin B.bin ...: the first dump against each other, over the
# distinct blocks (as gpu_path_accuracy.py): max / p99 relative differences of the sorted
# eigenvalues, of d0 and e0 (relative to ||C||_max of the block), of H (absolute).
import sys
import numpy as np
raw = np.fromfile(sys.argv[1], dtype=np.float64)
nt = int(raw[0]); raw = raw.reshape(-1, 4 + nt * nt + nt)
_, idx = np.unique(raw, axis=0, return_index=True); idx = np.sort(idx)
cmax = np.abs(raw[idx, 4:4 + nt * nt]).max(axis=1)[:, None]
load = lambda p: np.fromfile(p, dtype=np.float64).reshape(-1, 3 * nt + nt * nt)[idx]
a = load(sys.argv[2])
la = np.sort(a[:, 2 * nt:3 * nt], axis=1)
for p in sys.argv[3:]:
    b = load(p); lb = np.sort(b[:, 2 * nt:3 * nt], axis=1)
    rl = np.abs(la - lb) / np.abs(la)
    rd = np.abs(a[:, :nt] - b[:, :nt]) / cmax
    re = np.abs(a[:, nt:2 * nt - 1] - b[:, nt:2 * nt - 1]) / cmax
    rh = np.abs(a[:, 3 * nt:] - b[:, 3 * nt:])
    f = lambda r: 'max %.2g p99 %.2g' % (r.max(), np.percentile(r, 99))
    print('%s vs %s: lambda rel %s | d0 %s | e0 %s | H %s | blocks with equal lambda %d of %d'
          % (sys.argv[2], p, f(rl), f(rd), f(re), f(rh), (rl == 0).all(axis=1).sum(), len(idx)))
