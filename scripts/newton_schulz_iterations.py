#!/usr/bin/env python3
"""How many coupled Newton-Schulz steps a 74x74 C_ss^(-1/2) needs (a matrix-multiply
iteration for the inverse square roots, counted against the eigen path).

Random SPD blocks with log-spaced eigenvalues at condition numbers that bracket the spec's
cond(M) (§2.9: 5e2-1.5e3; a principal block of C = M^-1 is no worse conditioned than M),
iterated in float64 until the result is within 1e-13 of the eigen path's (of its largest
entry), scaled by the largest eigenvalue (ideal) or by the Frobenius norm (what a kernel
can afford). Prints the steps and the multiply-adds per block (three n^3 products a step).
Needs numpy (Debian's python3-numpy: run with /usr/bin/python3).
"""
import numpy as np

N = 74
rng = np.random.default_rng(1)

for kappa in (10, 1e2, 1e3, 1.5e3, 1e4):
    q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    w = np.geomspace(1.0, 1.0 / kappa, N)
    a = (q * w) @ q.T
    ref = (q * (1.0 / np.sqrt(w))) @ q.T
    for name, c in (("lambda_max", w.max()), ("frobenius", np.linalg.norm(a))):
        y, z, steps = a / c, np.eye(N), 0
        while True:
            t = (3.0 * np.eye(N) - z @ y) / 2.0
            y, z, steps = y @ t, t @ z, steps + 1
            err = np.abs(z / np.sqrt(c) - ref).max() / np.abs(ref).max()
            if err < 1e-13 or steps > 60:
                break
        print(f"cond {kappa:7.0f}  scale {name:10s}  {steps:2d} steps  error {err:.1e}  "
              f"{steps * 3 * N**3 / 1e6:.1f} M multiply-adds per block")
