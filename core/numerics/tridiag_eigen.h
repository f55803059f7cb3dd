// Symmetric eigen-decomposition of one small dense matrix (the 74x74 blocks C_ss of
// extraction-spec §2.10 step 2) by a team of threads: Householder reduction to a
// tridiagonal T, explicit product of the reflectors, and implicit-shift QL on T with
// the rotations applied to that product (the EISPACK tred2/tql2 scheme, parallelised).
//
// Written once for any "team": the CUDA kernel runs it with a thread block
// (cuda/kernels/tridiag_decorrelation.cu), the host tests with SerialTeam below, against LAPACK.
//
// Storage: column-major, a[c * lda + r] = A(r, c), both triangles present on entry; on
// exit the columns of the same storage are the eigenvectors and d the eigenvalues (not
// sorted).
//
// A Team provides rank()/size() (all members), lane()/lanes() and group()/groups() (a 2-D
// split for matrix loops: lanes of a warp, warps), Sync() (barrier), Sum(x) (sum over
// the team, identical on every member, includes a barrier) and GroupSum(x) (sum over
// the member's group, valid on its lane 0; every member must call it).
#ifndef SPEXD_CORE_NUMERICS_TRIDIAG_EIGEN_H_
#define SPEXD_CORE_NUMERICS_TRIDIAG_EIGEN_H_

#include <cmath>

#include "core/numerics/host_device.h"

namespace spexd::core::tridiag {

// QL stops on E(m) when |e_m| <= kQlEps (|d_m| + |d_m+1|) (unit roundoff: the subdiagonal
// is then below the rounding error of its neighbours, as in LAPACK's dsteqr); an
// eigenvalue that needs more than kQlMaxIter implicit shifts is reported as a failure
// (dsteqr allows 30 per eigenvalue too).
inline constexpr double kQlEps = 1.1102230246251565e-16;  // 2^-53
inline constexpr int kQlMaxIter = 30;

// One thread doing everything: the host tests' team.
struct SerialTeam {
  SPEXD_HD int rank() const { return 0; }
  SPEXD_HD int size() const { return 1; }
  SPEXD_HD int lane() const { return 0; }
  SPEXD_HD int lanes() const { return 1; }
  SPEXD_HD int group() const { return 0; }
  SPEXD_HD int groups() const { return 1; }
  SPEXD_HD void Sync() {}
  SPEXD_HD double Sum(double x) { return x; }
  SPEXD_HD double GroupSum(double x) { return x; }
};

// a * b never contracted into an FMA: keeps the rank-2 update exactly symmetric.
SPEXD_HD double MulRn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// x[begin..n) . y[begin..n) in two partial sums (even and odd offsets from begin),
// added at the end: two independent dependency chains per thread.
SPEXD_HD double InterleavedDot(const double* x, const double* y, int begin, int n) {
  double s0 = 0.0, s1 = 0.0;
  int i = begin;
  for (; i + 1 < n; i += 2) {
    s0 += x[i] * y[i];
    s1 += x[i + 1] * y[i + 1];
  }
  if (i < n) s0 += x[i] * y[i];
  return s0 + s1;
}

SPEXD_HD double RecipSqrt(double x) {
#if defined(__CUDA_ARCH__)
  return rsqrt(x);  // 1 ulp
#else
  return 1.0 / sqrt(x);
#endif
}

// Householder reduction A = H T H^T, H = H_0 ... H_{n-3}, H_k = I - tau_k v_k v_k^T with
// v_k(k+1) = 1 and v_k(0..k) = 0 (LAPACK's dsytd2 convention, from the first column).
// d[0..n-1], e[0..n-2] receive T; v_k(k+2..n-1) is left in column k below the
// subdiagonal and tau_k in tau[k]. v and w are scratch of n, `scalar` one double of
// scratch visible to the whole team. Three barriers per column: v, the sum p.v (which
// also publishes p), the end of the update (group 0, which updates column k+1, also
// sums the next column's squares on the way). Ends with a barrier.
// The reflector H = I - tau v v^T (v_{k+1} = 1) that zeroes column k below k+1, from
// alpha = A(k+1, k) and sigma = the sum of A(i, k)^2 over i >= k+2; beta is the new
// A(k+1, k) and v_i = A(i, k) * scale for i >= k+2. sigma = 0: H = I (tau = 0).
struct Reflector {
  double tau = 0.0, beta = 0.0, scale = 0.0;
};
SPEXD_HD Reflector MakeReflector(double alpha, double sigma) {
  Reflector h;
  h.beta = alpha;
  if (sigma > 0.0) {
    const double norm = sqrt(alpha * alpha + sigma);
    h.beta = alpha >= 0.0 ? -norm : norm;
    h.tau = (h.beta - alpha) / h.beta;
    h.scale = 1.0 / (alpha - h.beta);
  }
  return h;
}

template <class Team>
SPEXD_HD void HouseholderTridiagonalize(Team& t, double* a, int lda, int n, double* d, double* e,
                                        double* tau, double* v, double* w, double* scalar) {
  double sigma = 0.0;  // sum of A(i, k)^2 over i >= k+2
  if (n > 2) {
    double part = 0.0;
    for (int i = 2 + t.rank(); i < n; i += t.size()) part += a[i] * a[i];
    sigma = t.Sum(part);
  }
  for (int k = 0; k + 2 < n; ++k) {
    double* col = a + k * lda;
    const Reflector h = MakeReflector(col[k + 1], sigma);
    const double tk = h.tau, beta = h.beta, scale = h.scale;
    for (int i = k + 1 + t.rank(); i < n; i += t.size()) {
      const double vi = i == k + 1 ? 1.0 : col[i] * scale;
      v[i] = vi;
      if (i > k + 1) col[i] = vi;
    }
    if (t.rank() == 0) {
      d[k] = col[k];
      e[k] = beta;
      tau[k] = tk;
    }
    const double* next = col + lda;  // column k+1
    if (tk == 0.0) {  // H_k = I (uniform over the team): column k+1 is as it was
      double part = 0.0;
      for (int i = k + 3 + t.rank(); i < n; i += t.size()) part += next[i] * next[i];
      sigma = t.Sum(part);
      continue;
    }
    t.Sync();
    // p = tau A22 v (A22 symmetric: row i read as column i), kept in w.
    double pv = 0.0;
    for (int i = k + 1 + t.rank(); i < n; i += t.size()) {
      const double p = tk * InterleavedDot(a + i * lda, v, k + 1, n);
      w[i] = p;
      pv += p * v[i];
    }
    const double two_k = tk * t.Sum(pv);  // 2K, K = (tau/2) p.v; the barrier publishes p
    // A22 -= v p^T + p v^T - 2K v v^T (= v x^T + x v^T with x = p - K v), both triangles,
    // bitwise symmetric. Three rows per member with v_i, p_i in registers: shared-memory
    // traffic is what this loop costs.
    double part = 0.0;
    for (int i0 = k + 1 + t.lane(); i0 < n; i0 += 3 * t.lanes()) {
      const int i1 = i0 + t.lanes(), i2 = i1 + t.lanes();
      const double v0 = v[i0], p0 = w[i0];
      const double v1 = i1 < n ? v[i1] : 0.0, p1 = i1 < n ? w[i1] : 0.0;
      const double v2 = i2 < n ? v[i2] : 0.0, p2 = i2 < n ? w[i2] : 0.0;
      for (int j = k + 1 + t.group(); j < n; j += t.groups()) {
        double* cj = a + j * lda;
        const double vj = v[j], pj = w[j];
        cj[i0] -= (MulRn(v0, pj) + MulRn(p0, vj)) - MulRn(two_k, MulRn(v0, vj));
        if (i1 < n) cj[i1] -= (MulRn(v1, pj) + MulRn(p1, vj)) - MulRn(two_k, MulRn(v1, vj));
        if (i2 < n) cj[i2] -= (MulRn(v2, pj) + MulRn(p2, vj)) - MulRn(two_k, MulRn(v2, vj));
        if (j == k + 1) {  // group 0: the next column's sigma (rows k+3..)
          if (i0 >= k + 3) part += cj[i0] * cj[i0];
          if (i1 < n && i1 >= k + 3) part += cj[i1] * cj[i1];
          if (i2 < n && i2 >= k + 3) part += cj[i2] * cj[i2];
        }
      }
    }
    part = t.GroupSum(part);
    if (t.group() == 0 && t.lane() == 0) *scalar = part;
    t.Sync();
    sigma = *scalar;
  }
  t.Sync();
  if (t.rank() == 0) {
    if (n >= 2) {
      d[n - 2] = a[(n - 2) * lda + n - 2];
      e[n - 2] = a[(n - 2) * lda + n - 1];
    }
    d[n - 1] = a[(n - 1) * lda + n - 1];
    e[n - 1] = 0.0;
  }
  t.Sync();
}

// Overwrites a (holding the reflectors of HouseholderTridiagonalize) with H = H_0 ... H_{n-3},
// built from the last reflector back: P_k = H_k P_{k+1} only touches rows and columns
// k+1.., and v_k sits in column k, which P_k never writes. w: scratch of n. Ends with a
// barrier.
template <class Team>
SPEXD_HD void FormReflectorProduct(Team& t, double* a, int lda, int n, const double* tau, double* w) {
  if (t.rank() == 0) a[(n - 1) * lda + n - 1] = 1.0;
  t.Sync();
  for (int k = n - 3; k >= 0; --k) {
    const double* v = a + k * lda;
    const double tk = tau[k];
    for (int j = k + 2 + t.rank(); j < n; j += t.size()) {
      w[j] = tk * InterleavedDot(a + j * lda, v, k + 2, n);
    }
    t.Sync();
    for (int i0 = k + 2 + t.lane(); i0 < n; i0 += 3 * t.lanes()) {
      const int i1 = i0 + t.lanes(), i2 = i1 + t.lanes();
      const double v0 = v[i0], v1 = i1 < n ? v[i1] : 0.0, v2 = i2 < n ? v[i2] : 0.0;
      for (int j = k + 2 + t.group(); j < n; j += t.groups()) {
        double* cj = a + j * lda;
        const double wj = w[j];
        cj[i0] -= v0 * wj;
        if (i1 < n) cj[i1] -= v1 * wj;
        if (i2 < n) cj[i2] -= v2 * wj;
      }
    }
    for (int j = k + 2 + t.rank(); j < n; j += t.size()) a[j * lda + k + 1] = -w[j];     // row k+1
    for (int i = k + 2 + t.rank(); i < n; i += t.size()) a[(k + 1) * lda + i] = -tk * v[i];  // column k+1
    if (t.rank() == 0) a[(k + 1) * lda + k + 1] = 1.0 - tk;
    t.Sync();
  }
  for (int i = t.rank(); i < n; i += t.size()) {
    a[i] = i == 0 ? 1.0 : 0.0;        // column 0
    a[i * lda] = i == 0 ? 1.0 : 0.0;  // row 0
  }
  t.Sync();
}

// Progress of the QL iteration (only the producing member holds one).
struct QlState {
  int l = 0;
  int iter = 0;
  // The deflation search's answer, known from the last completed sweep (its values are
  // final by then): for l == known_l the first negligible e from l is known_m, and for
  // l == known_l + 1 (known_l deflated) it is known_next. -1: search.
  int known_l = -1;
  int known_m = 0;
  int known_next = 0;
};

// The deflation half of a QL step: advances st->l past every converged eigenvalue and
// returns m, the end of the unreduced block from st->l (the first negligible e), or -1 when
// every eigenvalue has converged. d and e are only read.
SPEXD_HD int QlDeflate(QlState* st, const double* d, const double* e, int n) {
  while (st->l < n) {
    const int l = st->l;
    int m = l;
    if (l == st->known_l) {
      m = st->known_m;
    } else if (l == st->known_l + 1 && st->known_m == st->known_l) {
      m = st->known_next;
    } else {
      for (; m < n - 1; ++m) {
        const double dd = fabs(d[m]) + fabs(d[m + 1]);
        if (fabs(e[m]) <= kQlEps * dd) break;
      }
    }
    if (m > l) return m;
    ++st->l;  // deflated: known_* stay valid for l + 1 (no value changed)
    st->iter = 0;
  }
  return -1;
}

// One implicit-shift QL sweep on the unreduced block l = st->l .. m (m from QlDeflate;
// Numerical Recipes' tqli / EISPACK tql2). Writes the sweep's rotations of columns (i, i+1),
// i = *hi down to *lo, in that order: c[k], s[k] for i = *hi - k, as ApplyRotationsToRow
// reads them. Returns 1 after a sweep, 0 when it made no rotation (an underflow deflated at
// its first step: deflate again), -1 when the eigenvalue needed more than kQlMaxIter sweeps.
// kLog = false: the rotations are not written (c, s unused; QlValues).
template <bool kLog = true>
SPEXD_HD int QlSweepAt(QlState* st, double* d, double* e, int m, double* c, double* s, int* lo,
                       int* hi) {
  const int l = st->l;
  st->known_l = -1;  // a sweep follows; it sets them again if it completes
  if (++st->iter > kQlMaxIter) return -1;
  double g = (d[l + 1] - d[l]) / (2.0 * e[l]);
  double r = hypot(g, 1.0);
  g = d[m] - d[l] + e[l] / (g + (g >= 0.0 ? r : -r));
  double sn = 1.0, cs = 1.0, p = 0.0;
  // d[i+1], d[i], e[i] of the next step are loaded one step ahead: the loop writes
  // only d[i+1], e[i+1], so they are still the values from before the sweep.
  double d_hi = d[m], d_i = d[m - 1], e_i = e[m - 1];
  // The search after this sweep, done during it: e[k] and d[k] are final once step k - 1
  // is done, d[k + 1] at step k. kneg: the first k in [l + 1, m - 1] with e[k]
  // negligible, else m (e[m] = 0 after the sweep). The same test on the same values as
  // the search's, so the same answer and the same bits (~20 % of QL's instructions).
  int kneg = m;
  double d_above = 0.0;  // the new d[i + 2]
  int i = m - 1;
  // Pointers stepped with i (an index recomputed its 64-bit address every step).
  [[maybe_unused]] double* cw = c;
  [[maybe_unused]] double* sw = s;
  for (; i >= l; --i) {
    // At i == l (the last step) d_next and e_next go unused: any valid entry will do, so
    // the loads need no branch around them (a jump less a rotation on the GPU).
    const int next = i > l ? i - 1 : i;
    const double d_next = d[next], e_next = e[next];
    const double f = sn * e_i, b = cs * e_i;
    const double r2 = f * f + g * g;
    if (r2 > 1e-290 && r2 < 1e290) {
      const double ri = RecipSqrt(r2);
      r = r2 * ri;
      sn = f * ri;
      cs = g * ri;
    } else {
      r = hypot(f, g);
      if (r == 0.0) {  // underflow: deflate here and restart (rotations i+1.. are valid)
        e[i + 1] = 0.0;
        d[i + 1] = d_hi - p;
        e[m] = 0.0;
        break;
      }
      sn = f / r;
      cs = g / r;
    }
    e[i + 1] = r;
    const double e_new = r;
    g = d_hi - p;
    r = (d_i - g) * sn + 2.0 * cs * b;
    p = sn * r;
    const double d_new = g + p;
    d[i + 1] = d_new;
    g = cs * r - b;
    // Both tests evaluated, a select instead of a jump around the second.
    const bool negligible = fabs(e_new) <= kQlEps * (fabs(d_new) + fabs(d_above));
    kneg = ((i < m - 1) & negligible) ? i + 1 : kneg;
    d_above = d_new;
    if constexpr (kLog) {
      *cw++ = cs;  // c[m - 1 - i]
      *sw++ = sn;
    }
    d_hi = d_i;
    d_i = d_next;
    e_i = e_next;
  }
  if (i < l) {
    d[l] -= p;
    e[l] = g;
    e[m] = 0.0;
    st->known_l = l;
    st->known_next = kneg;
    st->known_m = fabs(e[l]) <= kQlEps * (fabs(d[l]) + fabs(d[l + 1])) ? l : kneg;
  }
  *lo = i + 1;
  *hi = m - 1;
  return *hi >= *lo ? 1 : 0;
}

// QlDeflate, then QlSweepAt, until a sweep made rotations: 1 after such a sweep, 0 when every
// eigenvalue has converged, -1 when one needed more than kQlMaxIter sweeps. d[n], e[n]
// (e[n-1] = 0) evolve.
template <bool kLog = true>
SPEXD_HD int QlNextSweep(QlState* st, double* d, double* e, int n, double* c, double* s, int* lo,
                         int* hi) {
  for (;;) {
    const int m = QlDeflate(st, d, e, n);
    if (m < 0) return 0;
    const int r = QlSweepAt<kLog>(st, d, e, m, c, s, lo, hi);
    if (r != 0) return r;
  }
}

// Rotations as QlNextSweep writes them: cosines and sines in two arrays.
struct SplitRotations {
  const double* __restrict__ c;
  const double* __restrict__ s;
  SPEXD_HD void Get(int q, double* cq, double* sq) const {
    *cq = c[q];
    *sq = s[q];
  }
};

// Applies `count` consecutive rotations of a sweep to row `row` of Z: rotation q acts on
// columns (i, i+1), i = top - q, with rot.Get(q) -> (c, s). A sweep may be applied in
// pieces: the next piece starts at top - count.
template <class Rotations>
SPEXD_HD void ApplyRotationRange(double* __restrict__ z, int lda, int row, int top, int count,
                                 const Rotations& rot) {
  double f = z[(top + 1) * lda + row];
  for (int q = 0; q < count; ++q) {
    const int i = top - q;
    double cq, sq;
    rot.Get(q, &cq, &sq);
    const double zi = z[i * lda + row];
    z[(i + 1) * lda + row] = sq * zi + cq * f;
    f = cq * zi - sq * f;
  }
  z[(top - count + 1) * lda + row] = f;
}

// Applies a sweep's rotations (columns (i, i+1), i = hi down to lo; c, s as written by
// QlNextSweep) to row `row` of Z.
SPEXD_HD void ApplyRotationsToRow(double* z, int lda, int row, int lo, int hi, const double* c,
                                  const double* s) {
  ApplyRotationRange(z, lda, row, hi, hi - lo + 1, SplitRotations{c, s});
}

// QL to the end by one thread, logging every sweep's rotations (c, s: rot_cap entries)
// and its (lo, hi) (lohi: 2 * sweep_cap ints) instead of applying them, so that many
// blocks iterate at once, one per thread, and their rows are rotated later
// (ApplyLoggedSweeps). Returns the number of sweeps, -1 if QL did not converge, -2 if
// the log is too small (d, e are then partly iterated).
SPEXD_HD int QlLogged(double* d, double* e, int n, double* c, double* s, int rot_cap, int* lohi,
                      int sweep_cap) {
  QlState st;
  int sweeps = 0, rot = 0;
  for (;;) {
    if (sweeps == sweep_cap || rot + n > rot_cap) return -2;
    int lo = 0, hi = -1;
    const int r = QlNextSweep(&st, d, e, n, c + rot, s + rot, &lo, &hi);
    if (r <= 0) return r < 0 ? -1 : sweeps;
    lohi[2 * sweeps] = lo;
    lohi[2 * sweeps + 1] = hi;
    ++sweeps;
    rot += hi - lo + 1;
  }
}

// QL to the end by one thread, the rotations not kept: the eigenvalues alone, bit for bit
// those of QlLogged (the twisted path's; core/numerics/tridiag_vectors.h). Returns the number of
// sweeps, or -1 if QL did not converge.
SPEXD_HD int QlValues(double* d, double* e, int n) {
  QlState st;
  for (int sweeps = 0;; ++sweeps) {
    int lo = 0, hi = -1;
    const int r = QlNextSweep<false>(&st, d, e, n, nullptr, nullptr, &lo, &hi);
    if (r <= 0) return r < 0 ? -1 : sweeps;
  }
}

// QlValues with the sweeps of many QL chains in step, one chain a GPU lane: any(running)
// returns whether any chain still sweeps (the GPU: a vote of the warp, where its lanes
// reconverge; one chain alone: running). Every chain runs QlValues's arithmetic, bit for bit,
// and returns its result; a chain that has finished idles until no chain runs. In step, the
// lanes' sweeps are of nearly equal length round by round (73, 73, 72 ... on graded T), so
// the warp's lanes stay busy; left to diverge at their deflations, they drifted into groups
// issued one after the other (15.9 of 32 threads active on average).
template <class Any>
SPEXD_HD int QlValuesInStep(double* d, double* e, int n, Any any) {
  QlState st;
  int sweeps = 0, info = 0;
  bool running = true;
  for (;;) {
    int m = -1;
    if (running) {
      m = QlDeflate(&st, d, e, n);
      if (m < 0) {
        running = false;
        info = sweeps;
      }
    }
    if (!any(running)) return info;
    if (running) {
      int lo = 0, hi = -1;
      const int r = QlSweepAt<false>(&st, d, e, m, nullptr, nullptr, &lo, &hi);
      if (r < 0) {
        running = false;
        info = -1;
      }
      sweeps += r > 0 ? 1 : 0;
    }
  }
}

// Reverses T (d, e; e[n-1] = 0) where its bottom end is the smaller in magnitude
// (|d_end| < |d_0|), so that QL chases from the smaller end: LAPACK's choice between QL and
// QR (dsterf, dsteqr), as QL on the reversed T is QR on T. The reduced core blocks are
// graded, d_0 ~ 8 d_end in 99.5 % of an r frame's; QL from the larger end lost up to
// 4.2e-12 relative on their smallest eigenvalues, and the decorrelation's ivar 5.1e-12
// (1.1e-12 oriented; then the twisted vectors' Rayleigh quotients, tridiag_vectors.h); it also
// takes fewer sweeps. Returns whether it reversed. The eigenvalues are the same set; the reversed
// T's vectors are T's read
// backwards.
SPEXD_HD bool OrientForQl(double* d, double* e, int n) {
  if (n < 2 || !(fabs(d[n - 1]) < fabs(d[0]))) return false;
  for (int i = 0, j = n - 1; i < j; ++i, --j) {
    const double t = d[i];
    d[i] = d[j];
    d[j] = t;
  }
  for (int i = 0, j = n - 2; i < j; ++i, --j) {
    const double t = e[i];
    e[i] = e[j];
    e[j] = t;
  }
  e[n - 1] = 0.0;
  return true;
}

// The twisted path's eigenvalues: QlValues on T oriented (OrientForQl). d then holds the
// eigenvalues (a set, in QL's order); e is overwritten.
SPEXD_HD int QlValuesOriented(double* d, double* e, int n) {
  OrientForQl(d, e, n);
  return QlValues(d, e, n);
}

// Applies the sweeps logged by QlLogged to row `row` of Z, in order.
SPEXD_HD void ApplyLoggedSweeps(double* z, int lda, int row, const double* c, const double* s,
                                const int* lohi, int sweeps) {
  int rot = 0;
  for (int k = 0; k < sweeps; ++k) {
    const int lo = lohi[2 * k], hi = lohi[2 * k + 1];
    ApplyRotationsToRow(z, lda, row, lo, hi, c + rot, s + rot);
    rot += hi - lo + 1;
  }
}

// Eigenvalues of T (d, e from HouseholderTridiagonalize) into d, rotations applied to the
// columns of z (the reflector product) -> eigenvectors. Rank 0 computes sweep k+1 while
// the members from lanes() on apply sweep k (one row each), so the serial part and the
// row updates overlap; double-buffered rotations cbuf/sbuf [2][n] and ctl [2][3].
// Returns the number of sweeps, or -1 if QL did not converge.
template <class Team>
SPEXD_HD int TridiagonalQl(Team& t, double* d, double* e, double* z, int lda, int n, double* cbuf,
                           double* sbuf, int* ctl) {
  QlState st;
  auto produce = [&](int buf) {
    int* c3 = ctl + 3 * buf;
    int lo = 0, hi = -1;
    c3[0] = QlNextSweep(&st, d, e, n, cbuf + buf * n, sbuf + buf * n, &lo, &hi);
    c3[1] = lo;
    c3[2] = hi;
  };
  if (t.rank() == 0) produce(0);
  t.Sync();
  const bool serial = t.size() <= t.lanes();
  const int first = serial ? 0 : t.lanes();
  const int stride = serial ? t.size() : t.size() - t.lanes();
  int buf = 0, sweeps = 0;
  for (;;) {
    const int state = ctl[3 * buf], lo = ctl[3 * buf + 1], hi = ctl[3 * buf + 2];
    if (state <= 0) return state < 0 ? -1 : sweeps;
    ++sweeps;
    if (t.rank() == 0) produce(buf ^ 1);
    if (t.rank() >= first) {
      for (int row = t.rank() - first; row < n; row += stride) {
        ApplyRotationsToRow(z, lda, row, lo, hi, cbuf + buf * n, sbuf + buf * n);
      }
    }
    t.Sync();
    buf ^= 1;
  }
}

}  // namespace spexd::core::tridiag

#endif  // SPEXD_CORE_NUMERICS_TRIDIAG_EIGEN_H_
