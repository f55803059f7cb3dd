#include "core/cpu/internal/lane_eigen.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/cpu/internal/lane_householder.h"
#include "core/cpu/internal/lane_vec.h"

namespace spexd::core::internal {
namespace {

using lane::Sqrt;
using lane::Work;

// |x| by clearing the sign bits (as fabs).
template <int L>
SPEXD_LANE_INLINE typename LaneVec<L>::V Abs(typename LaneVec<L>::V x) {
  using Mask = typename LaneVec<L>::Mask;
  Mask bits = {};
  for (int l = 0; l < L; ++l) bits[l] = 0x7fffffffffffffffLL;
  return reinterpret_cast<typename LaneVec<L>::V>(reinterpret_cast<Mask>(x) & bits);
}
template <int L>
SPEXD_LANE_INLINE bool Any(typename LaneVec<L>::Mask m) {
  for (int l = 0; l < L; ++l) {
    if (m[l]) return true;
  }
  return false;
}

// Applies a sweep's rotations i = hi-1 .. lo (columns i, i+1 of Z) in that order to rows
// [k, k + R), with column i+1 carried in registers: one load and one store per element and
// rotation. Each row's carry is a chain of dependent products; R chains in flight hide
// their latency.
template <int L, int R>
SPEXD_LANE_INLINE void RotateRows(typename LaneVec<L>::V* z, int n,
                                  const typename LaneVec<L>::V* rc,
                                  const typename LaneVec<L>::V* rs, int lo, int hi, int k) {
  using V = typename LaneVec<L>::V;
  V carry[R];
  SPEXD_UNROLL_LANES
  for (int r = 0; r < R; ++r) carry[r] = z[static_cast<std::size_t>(hi) * n + k + r];
  for (int i = hi - 1; i >= lo; --i) {
    const V c = rc[i], s = rs[i];
    V* zi = z + static_cast<std::size_t>(i) * n + k;
    V* zi1 = z + static_cast<std::size_t>(i + 1) * n + k;
    SPEXD_UNROLL_LANES
    for (int r = 0; r < R; ++r) {
      const V x = zi[r];
      zi1[r] = s * x + c * carry[r];
      carry[r] = c * x - s * carry[r];
    }
  }
  SPEXD_UNROLL_LANES
  for (int r = 0; r < R; ++r) z[static_cast<std::size_t>(lo) * n + k + r] = carry[r];
}

// All n rows: blocks of R (16 with AVX-512's 32 registers, 8 with AVX2's 16: QL 20 % faster
// than 4 on Zen 4), then the remainder in halving blocks. The remainder went a row at a
// time, one latency-bound chain: 10 of the r camera's 74 rows took ~40 % of the time.
// A row's arithmetic is the same in any block.
template <int L, int R>
SPEXD_LANE_INLINE void ApplyRotations(const Work<L>& w, int lo, int hi) {
  // Local copies: V may alias anything, so stores through it would reload w's fields.
  const int n = w.n;
  auto* const z = w.z;
  int k = 0;
  for (; k + R <= n; k += R) RotateRows<L, R>(z, n, w.rc, w.rs, lo, hi, k);
  if constexpr (R > 8) {
    if (k + 8 <= n) { RotateRows<L, 8>(z, n, w.rc, w.rs, lo, hi, k); k += 8; }
  }
  if constexpr (R > 4) {
    if (k + 4 <= n) { RotateRows<L, 4>(z, n, w.rc, w.rs, lo, hi, k); k += 4; }
  }
  if (k + 2 <= n) { RotateRows<L, 2>(z, n, w.rc, w.rs, lo, hi, k); k += 2; }
  if (k < n) RotateRows<L, 1>(z, n, w.rc, w.rs, lo, hi, k);
}

// Per lane, LAPACK's choice between QL and QR (as OrientForQl in core/numerics/tridiag_eigen.h):
// where T's bottom end is the smaller in magnitude, T is reversed and Z's columns with it
// (T = P T' P, so T's vectors are P times those of T', and Q P times them are C's), so
// that QL chases from the small end. The reduced core blocks are graded (d_0 ~ 8 d_end);
// from the large end QL lost relative accuracy on their small eigenvalues, and the
// decorrelation's ivar was within 3.7e-12 of a long-double reference, oriented 5.8e-13.
// The lanes that reverse swap in whole vectors under a mask (exact either way).
template <int L>
SPEXD_LANE_INLINE void OrientLanes(const Work<L>& w) {
  using V = typename LaneVec<L>::V;
  using Mask = typename LaneVec<L>::Mask;
  const int n = w.n;
  if (n < 2) return;
  const Mask flip = Abs<L>(w.d[n - 1]) < Abs<L>(w.d[0]);  // per lane
  if (!Any<L>(flip)) return;
  auto swap = [&flip](V* a, V* b) {
    const V x = *a, y = *b;
    *a = flip ? y : x;
    *b = flip ? x : y;
  };
  for (int i = 0, j = n - 1; i < j; ++i, --j) swap(&w.d[i], &w.d[j]);
  for (int i = 0, j = n - 2; i < j; ++i, --j) swap(&w.e[i], &w.e[j]);
  w.e[n - 1] = flip ? V{} : w.e[n - 1];
  for (int i = 0, j = n - 1; i < j; ++i, --j) {  // columns i and j of Z
    V* zi = w.z + static_cast<std::size_t>(i) * n;
    V* zj = w.z + static_cast<std::size_t>(j) * n;
    for (int k = 0; k < n; ++k) swap(zi + k, zj + k);
  }
}

// Implicit QL with Wilkinson shifts on (d, e), rotations accumulated into Z (the textbook
// tridiagonal QL, e.g. Golub & Van Loan §8.3, with its underflow exit). Each lane converges
// its own eigenvalue l at its own pace; one vector sweep covers every lane's [l, m), and a
// lane outside its own range takes identity rotations. Returns the lanes that converged
// within 30 sweeps per eigenvalue.
template <int L, int R>
SPEXD_LANE_INLINE unsigned TridiagonalQL(const Work<L>& w) {
  using V = typename LaneVec<L>::V;
  using Mask = typename LaneVec<L>::Mask;
  const int n = w.n;
  V* const d = w.d;
  V* const e = w.e;
  V* const rc = w.rc;
  V* const rs = w.rs;
  unsigned ok = (1u << L) - 1;
  int l[L] = {}, m[L] = {}, iters[L] = {};
  for (;;) {
    // Per lane: the first m >= l with a negligible e[m]; l moves on past converged values.
    // The test for every lane at once first (in vectors, the same arithmetic as lane by
    // lane), so that each lane's scan reads one flag a row: scanning lane by lane with
    // the test was ~1/8 of QL.
    int first = n;
    for (int lane = 0; lane < L; ++lane) {
      if (l[lane] < n && (ok >> lane & 1u)) first = std::min(first, l[lane]);
    }
    V* const negligible = w.p;  // the reduction's scratch, free during QL
    for (int mm = first; mm < n - 1; ++mm) {
      const V dd = Abs<L>(d[mm]) + Abs<L>(d[mm + 1]);
      negligible[mm] = Abs<L>(e[mm]) <= DBL_EPSILON * dd ? Broadcast<L>(1.0) : Broadcast<L>(0.0);
    }
    int lo = n, hi = 0;
    for (int lane = 0; lane < L; ++lane) {
      int mm = l[lane];
      while (l[lane] < n && (ok >> lane & 1u)) {
        mm = l[lane];
        while (mm < n - 1 && negligible[mm][lane] == 0.0) ++mm;
        if (mm != l[lane]) break;
        ++l[lane];
        iters[lane] = 0;
      }
      if (l[lane] < n && (ok >> lane & 1u) && ++iters[lane] > 30) {
        ok &= ~(1u << lane);  // the caller redoes this lane another way
      }
      if (l[lane] >= n || !(ok >> lane & 1u)) {
        m[lane] = l[lane] = n;  // finished: outside every sweep
        continue;
      }
      m[lane] = mm;
      lo = std::min(lo, l[lane]);
      hi = std::max(hi, mm);
    }
    if (lo >= hi) break;
    // Per lane: the shift from the 2x2 at l, and the sweep's starting state.
    V g, s = Broadcast<L>(1.0), c = Broadcast<L>(1.0), p = Broadcast<L>(0.0), vl, vm;
    for (int lane = 0; lane < L; ++lane) {
      vl[lane] = l[lane];
      vm[lane] = m[lane];
      if (l[lane] >= n) {
        g[lane] = 0.0;
        continue;
      }
      const int ll = l[lane];
      const double dl = d[ll][lane], el = e[ll][lane];
      const double gg = (d[ll + 1][lane] - dl) / (2.0 * el);
      const double r = std::hypot(gg, 1.0);
      g[lane] = d[m[lane]][lane] - dl + el / (gg + std::copysign(r, gg));
    }
    Mask broken = Broadcast<L>(0.0) != Broadcast<L>(0.0);
    for (int i = hi - 1; i >= lo; --i) {
      const V vi = Broadcast<L>(static_cast<double>(i));
      const Mask in = (vi < vm) & (vi >= vl) & ~broken;
      const V f = s * e[i], b = c * e[i];
      const V r = Sqrt<L>(f * f + g * g);  // the lanes are scaled: no overflow
      const Mask zero = in & (r == 0.0);
      if (Any<L>(zero)) {  // underflow: e[m] is negligible after all; end that lane's sweep
        d[i + 1] = zero ? d[i + 1] - p : d[i + 1];
        for (int lane = 0; lane < L; ++lane) {
          if (zero[lane]) e[m[lane]][lane] = 0.0;
        }
        broken |= zero;
      }
      const Mask go = in & ~zero;
      e[i + 1] = go ? r : e[i + 1];
      const V safe_r = go ? r : Broadcast<L>(1.0);
      const V sn = f / safe_r, cn = g / safe_r;
      const V gi = d[i + 1] - p;
      const V ri = (d[i] - gi) * sn + 2.0 * cn * b;
      const V pn = sn * ri;
      d[i + 1] = go ? gi + pn : d[i + 1];
      p = go ? pn : p;
      g = go ? cn * ri - b : g;
      s = go ? sn : s;
      c = go ? cn : c;
      rc[i] = go ? cn : Broadcast<L>(1.0);
      rs[i] = go ? sn : Broadcast<L>(0.0);
    }
    for (int lane = 0; lane < L; ++lane) {
      if (l[lane] >= n || broken[lane]) continue;
      d[l[lane]][lane] -= p[lane];
      e[l[lane]][lane] = g[lane];
      e[m[lane]][lane] = 0.0;
    }
    ApplyRotations<L, R>(w, lo, hi);
  }
  return ok;
}

}  // namespace

int LaneEigen::WidestLanes() {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return avx512 ? 8 : 4;
#else
  return 4;
#endif
}

LaneEigen::LaneEigen(int n, int lanes)
    : n_(n), lanes_(lanes == 4 ? 4 : WidestLanes()), scale_{} {  // 8 only where AVX-512 runs
  const std::size_t nl = static_cast<std::size_t>(n) * lanes_, nn = nl * n;
  auto lines = [](std::size_t doubles) { return (doubles + 7) / 8 * 8; };
  const std::size_t sizes[] = {nn, nn, nl, nl, nl, 2 * nl, nl, nl};
  std::size_t total = 8;  // slack to align the start
  for (std::size_t sz : sizes) total += lines(sz);
  buffer_.assign(total, 0.0);
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(buffer_.data());
  double* next = buffer_.data() + ((64 - start % 64) % 64) / sizeof(double);
  double** arrays[] = {&a_, &z_, &d_, &e_, &tau_, &work_, &rot_c_, &rot_s_};
  for (int i = 0; i < 8; ++i) {
    *arrays[i] = next;
    next += lines(sizes[i]);
  }
}

void LaneEigen::Load(const double* const* src, int ld, int count) {
  const int n = n_, L = lanes_;
  for (int lane = 0; lane < L; ++lane) {
    double amax = 0;
    if (lane < count) {
      for (int j = 0; j < n; ++j) {
        for (int i = j; i < n; ++i) amax = std::max(amax, std::fabs(src[lane][i + j * ld]));
      }
    }
    // A power of two near 1 / max|a| (exact scaling); 1 for a zero or non-finite matrix,
    // whose lane then fails the finiteness check.
    int ex = 0;
    if (amax > 0 && std::isfinite(amax)) std::frexp(amax, &ex);
    scale_[lane] = std::ldexp(1.0, -ex);
    const double sc = scale_[lane];
    for (int j = 0; j < n; ++j) {
      for (int i = j; i < n; ++i) {
        const double v = lane < count ? src[lane][i + j * ld] * sc : (i == j ? 1.0 : 0.0);
        a_[(static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * n) * L + lane] = v;
      }
    }
  }
}

namespace {

template <int L, int R>
SPEXD_LANE_INLINE unsigned DecomposeLanes(const Work<L>& w) {
  lane::Tridiagonalize(w);
  lane::FormQ(w);
  OrientLanes(w);
  return TridiagonalQL<L, R>(w);
}

#if defined(__x86_64__)
// 32 vector registers: 16 rows' carries in flight.
__attribute__((target("avx512f,avx2,fma"))) unsigned DecomposeAvx512(const Work<8>& w) {
  return DecomposeLanes<8, 16>(w);
}
__attribute__((target("avx2,fma"))) unsigned DecomposeAvx2(const Work<4>& w) {
  return DecomposeLanes<4, 8>(w);
}
#endif
unsigned DecomposeBaseline(const Work<4>& w) { return DecomposeLanes<4, 4>(w); }

template <int L>
Work<L> MakeWork(int n, double* a, double* z, double* d, double* e, double* tau, double* p,
                 double* rc, double* rs) {
  using V = typename LaneVec<L>::V;
  Work<L> w;
  w.n = n;
  w.a = reinterpret_cast<V*>(a);
  w.z = reinterpret_cast<V*>(z);
  w.d = reinterpret_cast<V*>(d);
  w.e = reinterpret_cast<V*>(e);
  w.tau = reinterpret_cast<V*>(tau);
  w.p = reinterpret_cast<V*>(p);
  w.rc = reinterpret_cast<V*>(rc);
  w.rs = reinterpret_cast<V*>(rs);
  return w;
}

}  // namespace

unsigned LaneEigen::Decompose() {
  // The same operations lane by lane in every copy; the AVX2 and AVX-512 copies contract
  // products into FMAs (core/CMakeLists.txt), so their last bits differ from the baseline
  // copy's.
  unsigned ok = 0;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (lanes_ == 8) {
    ok = DecomposeAvx512(MakeWork<8>(n_, a_, z_, d_, e_, tau_, work_, rot_c_, rot_s_));
  } else if (avx2) {
    ok = DecomposeAvx2(MakeWork<4>(n_, a_, z_, d_, e_, tau_, work_, rot_c_, rot_s_));
  } else {
    ok = DecomposeBaseline(MakeWork<4>(n_, a_, z_, d_, e_, tau_, work_, rot_c_, rot_s_));
  }
#else
  ok = DecomposeBaseline(MakeWork<4>(n_, a_, z_, d_, e_, tau_, work_, rot_c_, rot_s_));
#endif
  for (int lane = 0; lane < lanes_; ++lane) {
    for (int i = 0; i < n_ && (ok >> lane & 1u); ++i) {
      if (!std::isfinite(d_[static_cast<std::size_t>(i) * lanes_ + lane])) ok &= ~(1u << lane);
    }
  }
  return ok;
}

void LaneEigen::Export(int lane, double* values, double* vectors) const {
  const int n = n_;
  const std::size_t L = static_cast<std::size_t>(lanes_);
  const double unscale = 1.0 / scale_[lane];
  for (int i = 0; i < n; ++i) values[i] = d_[static_cast<std::size_t>(i) * L + lane] * unscale;
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  for (std::size_t i = 0; i < nn; ++i) vectors[i] = z_[i * L + lane];
}

}  // namespace spexd::core::internal
