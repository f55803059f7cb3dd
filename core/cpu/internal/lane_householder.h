// The Householder half of the lane eigen-solver (lane_eigen.h): the reduction of each
// lane's symmetric matrix to tridiagonal form and the forming of its orthogonal factor Q,
// one matrix per SIMD lane. Templates inlined into lane_eigen.cc's copies for each
// instruction set (included there only: that file's compile options, FMA contraction
// included, apply to them).
#ifndef SPEXD_CORE_CPU_INTERNAL_LANE_HOUSEHOLDER_H_
#define SPEXD_CORE_CPU_INTERNAL_LANE_HOUSEHOLDER_H_

#include <algorithm>
#include <cstddef>

#include "core/cpu/internal/lane_vec.h"

namespace spexd::core::internal::lane {

// One lane per matrix; L = 4 (256-bit vectors) or 8 (512-bit): LaneVec<L> (lane_vec.h).
template <int L>
SPEXD_LANE_INLINE typename LaneVec<L>::V Sqrt(typename LaneVec<L>::V x) {
  typename LaneVec<L>::V r;
  for (int l = 0; l < L; ++l) r[l] = __builtin_sqrt(x[l]);
  return r;
}
// The working arrays as lane vectors.
template <int L>
struct Work {
  using V = typename LaneVec<L>::V;
  int n;
  V* a;    // n x n, the matrix; after the reduction column k below k+1 holds reflector k
  V* z;    // n x n, the orthogonal factor, then the eigenvectors
  V* d;    // n, the diagonal, then the eigenvalues
  V* e;    // n, e[i] couples i and i+1 (e[n-1] = 0)
  V* tau;  // n, the reflectors' scales
  V* p;    // 2n scratch
  V* rc;   // n, a QL sweep's rotations (cos)
  V* rs;   // n, (sin)
};

// Householder reduction to tridiagonal form on the lower triangle (as LAPACK's dsytd2 with
// uplo = L): H_k = I - tau v v^T zeroes column k below row k + 1. v = (1, col[k+2..]) is
// kept in column k from row k + 1 (the 1 included), beta in e[k].
template <int L>
SPEXD_LANE_INLINE void Reflector(const Work<L>& w, int k) {
  using V = typename LaneVec<L>::V;
  using Mask = typename LaneVec<L>::Mask;
  const int n = w.n;
  V* col = w.a + static_cast<std::size_t>(k) * n;
  const V alpha = col[k + 1];
  V sigma = Broadcast<L>(0.0);
  for (int i = k + 2; i < n; ++i) sigma += col[i] * col[i];
  const Mask flat = sigma == 0.0;  // already tridiagonal here: H_k = I
  const V norm = Sqrt<L>(alpha * alpha + sigma);
  const V beta = flat ? alpha : (alpha >= 0.0 ? -norm : norm);
  const V tau = flat ? Broadcast<L>(0.0) : (beta - alpha) / (flat ? Broadcast<L>(1.0) : beta);
  const V scale = flat ? Broadcast<L>(0.0) : 1.0 / (flat ? Broadcast<L>(1.0) : alpha - beta);
  for (int i = k + 2; i < n; ++i) col[i] *= scale;
  col[k + 1] = Broadcast<L>(1.0);
  w.e[k] = beta;
  w.tau[k] = tau;
}

// C columns from j0 (C = 1 or 2) of one pass: step k's rank-2 update A -= v q^T + q v^T on
// their rows i >= j, and with the updated values the next step's p = A x (x = the next
// reflector, rows and columns k+2..) from the lower triangle: a[i,j] (i > j) adds
// a[i,j] x_j to p[i] and a[i,j] x_i to p[j] (t, a chain per column), so the trailing
// triangle is read and written once a step (it was read three times, in full, before).
template <int L, int C>
SPEXD_LANE_INLINE void UpdateColumns(typename LaneVec<L>::V* a, int n, int j0,
                                     const typename LaneVec<L>::V* v,
                                     const typename LaneVec<L>::V* q,
                                     const typename LaneVec<L>::V* x,
                                     typename LaneVec<L>::V* p) {
  using V = typename LaneVec<L>::V;
  V* col[C];
  V vj[C], qj[C], xj[C], t[C];
  SPEXD_UNROLL_LANES
  for (int c = 0; c < C; ++c) {
    col[c] = a + static_cast<std::size_t>(j0 + c) * n;
    vj[c] = v[j0 + c];
    qj[c] = q[j0 + c];
    xj[c] = x[j0 + c];
  }
  // The corner: rows j0 .. j0 + C - 1, each column from its diagonal.
  SPEXD_UNROLL_LANES
  for (int c = 0; c < C; ++c) {
    const int i = j0 + c;
    SPEXD_UNROLL_LANES
    for (int cc = 0; cc <= c; ++cc) {
      const V y = col[cc][i] - (v[i] * qj[cc] + q[i] * vj[cc]);
      col[cc][i] = y;
      if (cc == c) {
        t[c] = y * xj[c];
      } else {
        p[i] += y * xj[cc];
        t[cc] += y * x[i];
      }
    }
  }
  for (int i = j0 + C; i < n; ++i) {
    const V vi = v[i], qi = q[i], xi = x[i];
    V pi = p[i];
    SPEXD_UNROLL_LANES
    for (int c = 0; c < C; ++c) {
      const V y = col[c][i] - (vi * qj[c] + qi * vj[c]);
      col[c][i] = y;
      pi += y * xj[c];
      t[c] += y * xi;
    }
    p[i] = pi;
  }
  SPEXD_UNROLL_LANES
  for (int c = 0; c < C; ++c) p[j0 + c] += t[c];
}

// One pass over columns k+2.. (pairs, then one): step k's update and the next p.
template <int L>
SPEXD_LANE_INLINE void UpdatePass(const Work<L>& w, int k, const typename LaneVec<L>::V* v,
                                  const typename LaneVec<L>::V* q,
                                  const typename LaneVec<L>::V* x) {
  const int n = w.n;
  for (int i = k + 2; i < n; ++i) w.p[i] = Broadcast<L>(0.0);
  int j = k + 2;
  for (; j + 2 <= n; j += 2) UpdateColumns<L, 2>(w.a, n, j, v, q, x, w.p);
  if (j < n) UpdateColumns<L, 1>(w.a, n, j, v, q, x, w.p);
}

template <int L>
SPEXD_LANE_INLINE void Tridiagonalize(const Work<L>& w) {
  using V = typename LaneVec<L>::V;
  const int n = w.n;
  V* const a = w.a;
  V* const p = w.p;
  V* const q = w.p + n;
  if (n >= 3) {
    // p = A22 v for the first reflector: a pass with v = q = 0 (the update adds exact zeros).
    Reflector(w, 0);
    for (int i = 0; i < n; ++i) q[i] = Broadcast<L>(0.0);
    UpdatePass(w, -1, q, q, a);
  }
  for (int k = 0; k + 2 < n; ++k) {
    const V* v = a + static_cast<std::size_t>(k) * n;  // v[k+1] = 1
    const V tau = w.tau[k];
    V pv = p[k + 1];
    for (int i = k + 2; i < n; ++i) pv += p[i] * v[i];
    // q = tau p - (tau^2 / 2)(p.v) v.
    const V half_k = 0.5 * tau * tau * pv;
    q[k + 1] = tau * p[k + 1] - half_k;
    for (int i = k + 2; i < n; ++i) q[i] = tau * p[i] - half_k * v[i];
    // Column k + 1 first: it gives the next reflector, which the pass's p needs.
    V* next = a + static_cast<std::size_t>(k + 1) * n;
    const V vj = v[k + 1], qj = q[k + 1];
    for (int i = k + 1; i < n; ++i) next[i] -= v[i] * qj + q[i] * vj;
    if (k + 3 < n) Reflector(w, k + 1);
    UpdatePass(w, k, v, q, next);
  }
  for (int i = 0; i < n; ++i) w.d[i] = a[static_cast<std::size_t>(i) * n + i];
  if (n >= 2) {
    w.e[n - 2] = a[static_cast<std::size_t>(n - 2) * n + n - 1];
    w.tau[n - 2] = Broadcast<L>(0.0);
  }
  w.e[n - 1] = Broadcast<L>(0.0);
}

// Z = H_0 H_1 ... H_{n-3}, accumulated backwards (H_k touches rows and columns k+1..).
// Column j takes H_k for every k < j, largest k first, each as t = tau (z_j[k+1] + v.z_j),
// z_j -= t v. Reflectors in blocks of kFormQBlock: a group of four columns takes the whole
// block while it is in L1 (Z, 8 lanes x 74 x 74, lives in L2), so Z is streamed once a
// block instead of once a reflector. Four columns at a time because each dot product is
// a chain of dependent sums: four in flight hide their latency. A column's arithmetic and
// its order are the same whatever the blocking (the same bits as one reflector a pass).
constexpr int kFormQBlock = 4;

template <int L>
SPEXD_LANE_INLINE void ReflectColumn(const typename LaneVec<L>::V* v, typename LaneVec<L>::V tau,
                                     int k, int n, typename LaneVec<L>::V* zj) {
  using V = typename LaneVec<L>::V;
  V t = zj[k + 1];
  for (int i = k + 2; i < n; ++i) t += v[i] * zj[i];
  t *= tau;
  zj[k + 1] -= t;
  for (int i = k + 2; i < n; ++i) zj[i] -= t * v[i];
}

template <int L>
SPEXD_LANE_INLINE void ReflectColumns4(const typename LaneVec<L>::V* v,
                                       typename LaneVec<L>::V tau, int k, int n,
                                       typename LaneVec<L>::V* const* zj) {
  using V = typename LaneVec<L>::V;
  V t[4];
  SPEXD_UNROLL_LANES
  for (int c = 0; c < 4; ++c) t[c] = zj[c][k + 1];
  for (int i = k + 2; i < n; ++i) {
    const V vi = v[i];
    SPEXD_UNROLL_LANES
    for (int c = 0; c < 4; ++c) t[c] += vi * zj[c][i];
  }
  SPEXD_UNROLL_LANES
  for (int c = 0; c < 4; ++c) {
    t[c] *= tau;
    zj[c][k + 1] -= t[c];
  }
  for (int i = k + 2; i < n; ++i) {
    const V vi = v[i];
    SPEXD_UNROLL_LANES
    for (int c = 0; c < 4; ++c) zj[c][i] -= t[c] * vi;
  }
}

template <int L>
SPEXD_LANE_INLINE void FormQ(const Work<L>& w) {
  using V = typename LaneVec<L>::V;
  const int n = w.n;
  V* const z = w.z;
  const V* const a = w.a;
  const V* const taus = w.tau;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n) * n; ++i) z[i] = Broadcast<L>(0.0);
  for (int i = 0; i < n; ++i) z[static_cast<std::size_t>(i) * n + i] = Broadcast<L>(1.0);
  auto column = [&](int j) { return z + static_cast<std::size_t>(j) * n; };
  auto reflector = [&](int k) { return a + static_cast<std::size_t>(k) * n; };
  for (int k1 = n - 3; k1 >= 0; k1 -= kFormQBlock) {
    const int k0 = std::max(0, k1 - kFormQBlock + 1);  // this block: H_k1 .. H_k0
    int j = k0 + 1;
    // Columns k0+1 .. k1 take only the block's H_k with k < j.
    for (; j <= k1 && j < n; ++j) {
      for (int k = std::min(k1, j - 1); k >= k0; --k) {
        ReflectColumn<L>(reflector(k), taus[k], k, n, column(j));
      }
    }
    for (; j + 4 <= n; j += 4) {
      V* const zj[4] = {column(j), column(j + 1), column(j + 2), column(j + 3)};
      for (int k = k1; k >= k0; --k) ReflectColumns4<L>(reflector(k), taus[k], k, n, zj);
    }
    for (; j < n; ++j) {
      for (int k = k1; k >= k0; --k) ReflectColumn<L>(reflector(k), taus[k], k, n, column(j));
    }
  }
}

}  // namespace spexd::core::internal::lane

#endif  // SPEXD_CORE_CPU_INTERNAL_LANE_HOUSEHOLDER_H_
