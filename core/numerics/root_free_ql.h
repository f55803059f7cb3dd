// Eigenvalues of a symmetric tridiagonal T by QL without square roots in the sweep (the
// Pal-Walker-Kahan form, as LAPACK's dsterf): the sweep runs on the squared off-diagonals
// e_i^2, so a rotation costs two reciprocals and no square root. Only the shift takes one
// square root a sweep. The GPU's eigenvalue kernel (cuda/kernels/tridiag_kernel_common.cuh)
// runs it, one thread a block; the twisted solve then replaces each value by its vector's
// Rayleigh quotient (tridiag_vectors.h). The CPU backend keeps tridiag_eigen.h's QlValues,
// whose bits its reference comparisons hold.
#ifndef SPEXD_CORE_NUMERICS_ROOT_FREE_QL_H_
#define SPEXD_CORE_NUMERICS_ROOT_FREE_QL_H_

#include <cmath>

#include "core/numerics/host_device.h"
#include "core/numerics/tridiag_eigen.h"

namespace spexd::core::tridiag {

// e_m is negligible when e_m^2 <= kQlEps^2 (|d_m| + |d_m+1|)^2: tridiag_eigen.h's test
// (|e_m| <= kQlEps (|d_m| + |d_m+1|)), squared, so both deflate alike.
SPEXD_HD bool NegligibleSquared(double e2, double dm, double dm1) {
  const double s = kQlEps * (fabs(dm) + fabs(dm1));
  return e2 <= s * s;
}

// QL on d[n], e[n] (e[n-1] ignored) from its top, to the end: d receives the eigenvalues
// (a set, not sorted), e is overwritten. Call it on T oriented (OrientForQl) for relative
// accuracy on graded T. Returns the number of sweeps, or -1 when an eigenvalue needed more
// than kQlMaxIter sweeps.
//
// T is first scaled by a power of two (exact) so that its largest entry is near one: the
// squares then neither overflow nor lose the small entries to underflow.
SPEXD_HD int QlValuesRootFree(double* d, double* e, int n) {
  if (n <= 1) return 0;
  double big = 0.0;
  for (int i = 0; i < n; ++i) big = fmax(big, fabs(d[i]));
  for (int i = 0; i + 1 < n; ++i) big = fmax(big, fabs(e[i]));
  if (!(big > 0.0) || !(big < INFINITY)) return big == 0.0 ? 0 : -1;  // zero T; or NaN, inf
  int ex = 0;
  frexp(big, &ex);
  const double down = ldexp(1.0, -ex), up = ldexp(1.0, ex);
  for (int i = 0; i < n; ++i) d[i] *= down;
  for (int i = 0; i + 1 < n; ++i) {
    const double x = e[i] * down;
    e[i] = x * x;
  }
  e[n - 1] = 0.0;
  int sweeps = 0, iter = 0, l = 0;
  // The deflation search's answer where the last sweep found it: `known` for the current
  // l, `known_next` for l + 1 once l deflates (no value changes then). -1: search.
  int known = -1, known_next = -1;
  while (l < n) {
    int m = known;
    if (m < 0) {
      for (m = l; m < n - 1; ++m) {
        if (NegligibleSquared(e[m], d[m], d[m + 1])) break;
      }
    }
    if (m == l) {
      ++l;
      iter = 0;
      known = known_next;
      known_next = -1;
      continue;
    }
    known = known_next = -1;
    if (++iter > kQlMaxIter) return -1;
    ++sweeps;
    e[m] = 0.0;  // negligible: the block ends at m
    // The shift from T's top 2 x 2 at l (as tridiag_eigen.h's, which does not depend on
    // the sign of e_l).
    const double rte = sqrt(e[l]);
    const double sg = (d[l + 1] - d[l]) / (2.0 * rte);
    const double r0 = hypot(sg, 1.0);
    const double sigma = d[l] - rte / (sg + (sg >= 0.0 ? r0 : -r0));
    double c = 1.0, s = 0.0, gamma = d[m] - sigma, p = gamma * gamma;
    // The search after this sweep, done during it: the first k in [l + 1, m - 1] with
    // e_k^2 negligible (the new e_k and d_k come at step k - 1, d_k+1 at step k), else m.
    int kneg = m;
    double d_above = 0.0;  // the new d[i + 2]
    for (int i = m - 1; i >= l; --i) {
      const double bb = e[i], alpha = d[i];
      const double r = p + bb;
      const double ri = 1.0 / r;
      const double e_new = s * r;  // the new e[i + 1] (i < m - 1)
      const double oldc = c, oldgam = gamma;
      const bool normal = p > 1e-290;  // 1 / p finite: p / c = gamma^2 (r / p) below
      const double rp = 1.0 / p;       // beside ri, off the dependency chain
      c = p * ri;
      s = bb * ri;
      gamma = c * (alpha - sigma) - s * oldgam;
      const double d_new = oldgam + (alpha - gamma);
      d[i + 1] = d_new;
      if (i < m - 1) {
        e[i + 1] = e_new;
        if (NegligibleSquared(e_new, d_new, d_above)) kneg = i + 1;
      }
      d_above = d_new;
      if (normal) {
        p = gamma * gamma * (r * rp);
      } else {
        p = c != 0.0 ? gamma * gamma / c : oldc * bb;
      }
    }
    e[l] = s * p;
    d[l] = sigma + gamma;
    if (NegligibleSquared(e[l], d[l], d[l + 1])) {
      known = l;
      known_next = kneg;
    } else {
      known = kneg;
    }
  }
  for (int i = 0; i < n; ++i) d[i] *= up;
  return sweeps;
}

}  // namespace spexd::core::tridiag

#endif  // SPEXD_CORE_NUMERICS_ROOT_FREE_QL_H_
