#!/usr/bin/python3
# paired.py: per-block comparison of per_block.py's outputs (pb_VARIANT.npz, 'gpu' row) against
# pb_base.npz and pb_old.npz: geometric mean of the per-block error ratios, share of blocks worse.
import numpy as np
vs = ['base', 'old', 'fma', 'symfma', 'tiles', 'tilesfma']
P = {v: np.load('pb_%s.npz' % v) for v in vs}
for k in ('ivar', 'flux', 'Rband'):
    for v in vs:
        a, b, c = P[v]['gpu_' + k], P['base']['gpu_' + k], P['old']['gpu_' + k]
        print('%-5s %-8s median %.3g p90 %.3g p99 %.3g max %.3g | geo-mean ratio to base %.3f, blocks worse than base %.0f%% | to old %.3f, %.0f%%'
              % (k, v, np.median(a), np.percentile(a, 90), np.percentile(a, 99), a.max(),
                 np.exp(np.mean(np.log(a / b))), 100 * np.mean(a > b),
                 np.exp(np.mean(np.log(a / c))), 100 * np.mean(a > c)))
