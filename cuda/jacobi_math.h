// Per-element math of the parallel cyclic Jacobi eigensolver used for the 74x74 blocks
// C_ss (extraction-spec §2.10 step 2), shared by the kernel and a host test that replays
// the same round-robin schedule serially against LAPACK.
#ifndef SPEXD_CUDA_JACOBI_MATH_H_
#define SPEXD_CUDA_JACOBI_MATH_H_

#include <cmath>

#include "core/numerics/host_device.h"

namespace spexd::cuda {

// Relative and absolute (times the largest initial |diagonal|) thresholds below which an
// off-diagonal element is left alone. The absolute floor sits at the rounding level of
// the rotations, so sweeps always terminate; the resulting error in C^{-1/2} is about
// 1e-15 * cond(C) relative, far inside the 1e-10 parity bar (spec "Decisions").
inline constexpr double kJacobiRelTol = 1e-14;
inline constexpr double kJacobiAbsTol = 1e-15;
inline constexpr int kJacobiMaxSweeps = 30;

// Round-robin ("circle method") schedule on m (even) indices: pair k of round r, with
// p < q. Over rounds 0..m-2 every pair meets exactly once, and the pairs of one round are
// disjoint, so their rotations commute and run in parallel.
SPEXD_HD void RoundRobinPair(int round, int k, int m, int* p, int* q) {
  int a, b;
  if (k == 0) {
    a = m - 1;
    b = round;
  } else {
    a = (round + k) % (m - 1);
    b = (round - k + (m - 1)) % (m - 1);
  }
  *p = a < b ? a : b;
  *q = a < b ? b : a;
}

// Rotation J (J_pp = J_qq = c, J_pq = s, J_qp = -s) that zeroes a_pq in J^T A J.
// Returns false (c = 1, s = 0) when a_pq is already negligible.
SPEXD_HD bool JacobiRotation(double app, double aqq, double apq, double abs_tol, double* c,
                             double* s) {
  *c = 1.0;
  *s = 0.0;
  // |apq| <= max(rel_tol sqrt(|app aqq|), abs_tol), squared: no square roots on the
  // critical path of a round.
  const double rel2 = kJacobiRelTol * kJacobiRelTol * fabs(app * aqq);
  const double lim2 = rel2 > abs_tol * abs_tol ? rel2 : abs_tol * abs_tol;
  if (apq * apq <= lim2) return false;
  const double theta = (aqq - app) / (2.0 * apq);
  double t;
  if (fabs(theta) > 1e150) {
    t = 0.5 / theta;
  } else {
    t = 1.0 / (fabs(theta) + sqrt(theta * theta + 1.0));
    if (theta < 0.0) t = -t;
  }
#if defined(__CUDA_ARCH__)
  *c = rsqrt(t * t + 1.0);  // correctly rounded to 1 ulp, cheaper than 1/sqrt
#else
  *c = 1.0 / sqrt(t * t + 1.0);
#endif
  *s = t * (*c);
  return true;
}

// Row update of (J^T A): rows p, q at one column.
SPEXD_HD void RotatePair(double c, double s, double* xp, double* xq) {
  const double a = *xp, b = *xq;
  *xp = c * a - s * b;
  *xq = s * a + c * b;
}

// Fused two-sided update of one 2x2 block of A for row pair 1 and column pair 2:
// B' = J1^T B J2, B = [[pp, pq], [qp, qq]] (rows p1, q1; columns p2, q2). The same
// arithmetic as rotating the rows, then the columns, so the order of the pairs in a
// round does not matter and every block is updated by one thread without a barrier.
SPEXD_HD void RotateBlock(double c1, double s1, double c2, double s2, double* pp, double* pq,
                          double* qp, double* qq) {
  const double tpp = c1 * (*pp) - s1 * (*qp), tqp = s1 * (*pp) + c1 * (*qp);
  const double tpq = c1 * (*pq) - s1 * (*qq), tqq = s1 * (*pq) + c1 * (*qq);
  *pp = c2 * tpp - s2 * tpq;
  *pq = s2 * tpp + c2 * tpq;
  *qp = c2 * tqp - s2 * tqq;
  *qq = s2 * tqp + c2 * tqq;
}

// Index of the lower block-triangle entry (k1 >= k2) of np pairs: b -> (k1, k2), row-major.
SPEXD_HD void LowerBlockPair(int b, int* k1, int* k2) {
  int r = static_cast<int>((sqrt(8.0 * b + 1.0) - 1.0) * 0.5);
  while ((r + 1) * (r + 2) / 2 <= b) ++r;  // guard against rounding of the square root
  while (r * (r + 1) / 2 > b) --r;
  *k1 = r;
  *k2 = b - r * (r + 1) / 2;
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_JACOBI_MATH_H_
