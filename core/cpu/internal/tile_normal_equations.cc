#include "core/cpu/internal/tile_normal_equations.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace spexd::core::internal {
namespace {

constexpr int kTile = 8;

struct Box {
  int y0, y1, x0, x1;
  bool empty() const { return y0 >= y1 || x0 >= x1; }
};

// One tile pair's sums over the common box k: acc[i][j] = sum over pixels, row by row, of
// a_i * w_j, a from Q's planar canvas (box qb, planes `plane` doubles apart), w from L's
// weighted canvas (box lb, eight values a pixel).
void PairSumsPortable(const double* a, std::size_t plane, const Box& qb, const double* w,
                      const Box& lb, const Box& k, double (&acc)[kTile][kTile]) {
  for (auto& r : acc) std::fill(r, r + kTile, 0.0);
  const int qw = qb.x1 - qb.x0, lw = lb.x1 - lb.x0;
  for (int y = k.y0; y < k.y1; ++y) {
    const double* pa = a + static_cast<std::size_t>(y - qb.y0) * qw + (k.x0 - qb.x0);
    const double* pw = w + (static_cast<std::size_t>(y - lb.y0) * lw + (k.x0 - lb.x0)) * kTile;
    for (int x = k.x0; x < k.x1; ++x, ++pa, pw += kTile) {
      for (int i = 0; i < kTile; ++i) {
        for (int j = 0; j < kTile; ++j) acc[i][j] = std::fma(pa[i * plane], pw[j], acc[i][j]);
      }
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void PairSumsAvx512(const double* a, std::size_t plane,
                                                        const Box& qb, const double* w,
                                                        const Box& lb, const Box& k,
                                                        double (&acc)[kTile][kTile]) {
  __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0,
          s7 = s0;
  const int qw = qb.x1 - qb.x0, lw = lb.x1 - lb.x0;
  for (int y = k.y0; y < k.y1; ++y) {
    const double* pa = a + static_cast<std::size_t>(y - qb.y0) * qw + (k.x0 - qb.x0);
    const double* pw = w + (static_cast<std::size_t>(y - lb.y0) * lw + (k.x0 - lb.x0)) * kTile;
    for (int x = k.x0; x < k.x1; ++x, ++pa, pw += kTile) {
      const __m512d wv = _mm512_load_pd(pw);
      s0 = _mm512_fmadd_pd(_mm512_set1_pd(pa[0 * plane]), wv, s0);
      s1 = _mm512_fmadd_pd(_mm512_set1_pd(pa[1 * plane]), wv, s1);
      s2 = _mm512_fmadd_pd(_mm512_set1_pd(pa[2 * plane]), wv, s2);
      s3 = _mm512_fmadd_pd(_mm512_set1_pd(pa[3 * plane]), wv, s3);
      s4 = _mm512_fmadd_pd(_mm512_set1_pd(pa[4 * plane]), wv, s4);
      s5 = _mm512_fmadd_pd(_mm512_set1_pd(pa[5 * plane]), wv, s5);
      s6 = _mm512_fmadd_pd(_mm512_set1_pd(pa[6 * plane]), wv, s6);
      s7 = _mm512_fmadd_pd(_mm512_set1_pd(pa[7 * plane]), wv, s7);
    }
  }
  _mm512_storeu_pd(acc[0], s0);
  _mm512_storeu_pd(acc[1], s1);
  _mm512_storeu_pd(acc[2], s2);
  _mm512_storeu_pd(acc[3], s3);
  _mm512_storeu_pd(acc[4], s4);
  _mm512_storeu_pd(acc[5], s5);
  _mm512_storeu_pd(acc[6], s6);
  _mm512_storeu_pd(acc[7], s7);
}

// AVX2 with FMA: eight 4-wide sums a half (sixteen would not fit the sixteen registers), the
// two halves of L's eight columns one after the other; each sum's order is unchanged.
__attribute__((target("avx2,fma"))) void PairSumsAvx2(const double* a, std::size_t plane,
                                                      const Box& qb, const double* w,
                                                      const Box& lb, const Box& k,
                                                      double (&acc)[kTile][kTile]) {
  const int qw = qb.x1 - qb.x0, lw = lb.x1 - lb.x0;
  for (int half = 0; half < 2; ++half) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0,
            s7 = s0;
    for (int y = k.y0; y < k.y1; ++y) {
      const double* pa = a + static_cast<std::size_t>(y - qb.y0) * qw + (k.x0 - qb.x0);
      const double* pw =
          w + (static_cast<std::size_t>(y - lb.y0) * lw + (k.x0 - lb.x0)) * kTile + 4 * half;
      for (int x = k.x0; x < k.x1; ++x, ++pa, pw += kTile) {
        const __m256d wv = _mm256_load_pd(pw);
        s0 = _mm256_fmadd_pd(_mm256_set1_pd(pa[0 * plane]), wv, s0);
        s1 = _mm256_fmadd_pd(_mm256_set1_pd(pa[1 * plane]), wv, s1);
        s2 = _mm256_fmadd_pd(_mm256_set1_pd(pa[2 * plane]), wv, s2);
        s3 = _mm256_fmadd_pd(_mm256_set1_pd(pa[3 * plane]), wv, s3);
        s4 = _mm256_fmadd_pd(_mm256_set1_pd(pa[4 * plane]), wv, s4);
        s5 = _mm256_fmadd_pd(_mm256_set1_pd(pa[5 * plane]), wv, s5);
        s6 = _mm256_fmadd_pd(_mm256_set1_pd(pa[6 * plane]), wv, s6);
        s7 = _mm256_fmadd_pd(_mm256_set1_pd(pa[7 * plane]), wv, s7);
      }
    }
    _mm256_storeu_pd(acc[0] + 4 * half, s0);
    _mm256_storeu_pd(acc[1] + 4 * half, s1);
    _mm256_storeu_pd(acc[2] + 4 * half, s2);
    _mm256_storeu_pd(acc[3] + 4 * half, s3);
    _mm256_storeu_pd(acc[4] + 4 * half, s4);
    _mm256_storeu_pd(acc[5] + 4 * half, s5);
    _mm256_storeu_pd(acc[6] + 4 * half, s6);
    _mm256_storeu_pd(acc[7] + 4 * half, s7);
  }
}

bool HasAvx2Fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

std::size_t RoundUp8(std::size_t k) { return (k + 7) / 8 * 8; }

}  // namespace

bool TileNormalEquationsVectorised() {
#if defined(__x86_64__)
  return SimdLevelAvailable(SimdLevel::kAvx512) || HasAvx2Fma();
#else
  return false;
#endif
}

void TileNormalEquations(const PatchStamps& p, int ld, int reach, double* m, double* rhs,
                         double* fw, TileScratch* scratch, SimdLevel level) {
  const int ntile = (p.nt + kTile - 1) / kTile, nspec = p.n / p.nt, ntiles = nspec * ntile;
  auto first = [&](int t) { return (t / ntile) * p.nt + (t % ntile) * kTile; };
  auto count = [&](int t) { return std::min(kTile, p.nt - (t % ntile) * kTile); };
  // Each tile's box (its stamps' union, clipped to the window) and canvas offset (eight
  // planes of the box's pixels, each a whole number of 64-byte lines).
  scratch->box.assign(static_cast<std::size_t>(ntiles) * 4, 0);
  scratch->off.assign(static_cast<std::size_t>(ntiles) + 1, 0);
  std::size_t total = 0, widest = 0;
  for (int t = 0; t < ntiles; ++t) {
    Box b{INT_MAX, INT_MIN, INT_MAX, INT_MIN};
    for (int i = 0; i < count(t); ++i) {
      const int q = first(t) + i;
      b.y0 = std::min(b.y0, p.oy[q]);
      b.y1 = std::max(b.y1, p.oy[q] + p.stny);
      b.x0 = std::min(b.x0, p.ox[q]);
      b.x1 = std::max(b.x1, p.ox[q] + p.stnx);
    }
    b = Box{std::max(b.y0, 0), std::min(b.y1, p.ny), std::max(b.x0, 0), std::min(b.x1, p.nx)};
    if (b.empty()) b = Box{0, 0, 0, 0};
    int32_t* bt = scratch->box.data() + 4 * t;
    bt[0] = b.y0, bt[1] = b.y1, bt[2] = b.x0, bt[3] = b.x1;
    const std::size_t len = static_cast<std::size_t>(b.y1 - b.y0) * (b.x1 - b.x0);
    scratch->off[t] = static_cast<int32_t>(total);
    total += RoundUp8(len) * kTile;
    widest = std::max(widest, len * kTile);
  }
  scratch->a.resize(total + 8);
  scratch->w.resize(widest + 8);
  double* a0 = scratch->a.data();
  while (reinterpret_cast<std::uintptr_t>(a0) % 64 != 0) ++a0;
  double* w0 = scratch->w.data();
  while (reinterpret_cast<std::uintptr_t>(w0) % 64 != 0) ++w0;
  auto box = [&](int t) {
    const int32_t* bt = scratch->box.data() + 4 * t;
    return Box{bt[0], bt[1], bt[2], bt[3]};
  };
  auto plane_of = [&](int t) {
    const Box b = box(t);
    return RoundUp8(static_cast<std::size_t>(b.y1 - b.y0) * (b.x1 - b.x0));
  };
  // The A canvases: each tile's stamps on its box, a plane a stamp (zero outside it).
  for (int t = 0; t < ntiles; ++t) {
    const Box b = box(t);
    const int bw = b.x1 - b.x0;
    const std::size_t plane = plane_of(t);
    double* c = a0 + scratch->off[t];
    std::fill(c, c + plane * kTile, 0.0);
    for (int i = 0; i < count(t); ++i) {
      const int q = first(t) + i;
      const int ya = std::max(b.y0, p.oy[q]), yb = std::min(b.y1, p.oy[q] + p.stny);
      const int xa = std::max(b.x0, p.ox[q]), xb = std::min(b.x1, p.ox[q] + p.stnx);
      for (int y = ya; y < yb; ++y) {
        const double* src = p.stamp[q] + static_cast<std::size_t>(y - p.oy[q]) * p.stnx - p.ox[q];
        double* dst = c + i * plane + static_cast<std::size_t>(y - b.y0) * bw - b.x0;
        std::copy(src + xa, src + xb, dst + xa);
      }
    }
  }
#if defined(__x86_64__)
  const bool avx512 = level == SimdLevel::kAvx512 && SimdLevelAvailable(SimdLevel::kAvx512);
  const bool avx2 = !avx512 && level != SimdLevel::kBaseline && HasAvx2Fma();
#endif
  double acc[kTile][kTile];
  for (int lt = 0; lt < ntiles; ++lt) {
    const Box lb = box(lt);
    if (lb.empty()) continue;
    // L's weighted canvas, w_j = v_p A[p, l0 + j] eight a pixel, and b, fw pixel by pixel
    // in the window's order, v = 0 pixels skipped (AccumulateRightHandSide's sums).
    const int lw = lb.x1 - lb.x0, l0 = first(lt), lc = count(lt);
    const std::size_t lplane = plane_of(lt);
    const double* al = a0 + scratch->off[lt];
    double sb[kTile] = {}, sf[kTile] = {};
    for (int y = lb.y0; y < lb.y1; ++y) {
      const double* v = p.ivar + static_cast<std::size_t>(y) * p.nx;
      const double* img = p.image + static_cast<std::size_t>(y) * p.nx;
      const std::size_t row = static_cast<std::size_t>(y - lb.y0) * lw - lb.x0;
      for (int x = lb.x0; x < lb.x1; ++x) {
        double* wo = w0 + (row + x) * kTile;
        if (v[x] == 0.0) {
          std::fill(wo, wo + kTile, 0.0);
          continue;
        }
        for (int j = 0; j < kTile; ++j) {
          const double vr = v[x] * al[j * lplane + row + x];
          wo[j] = vr;
          sf[j] += vr;
          sb[j] += vr * img[x];
        }
      }
    }
    for (int j = 0; j < lc; ++j) {
      fw[l0 + j] += sf[j];
      rhs[l0 + j] += sb[j];
    }
    for (int qt = lt; qt < ntiles; ++qt) {
      const int q0 = first(qt);
      if (q0 - (l0 + lc - 1) > reach) break;  // tiles run in q order
      const Box qb = box(qt);
      const Box k{std::max(lb.y0, qb.y0), std::min(lb.y1, qb.y1), std::max(lb.x0, qb.x0),
                  std::min(lb.x1, qb.x1)};
      if (k.empty()) continue;
#if defined(__x86_64__)
      if (avx512) {
        PairSumsAvx512(a0 + scratch->off[qt], plane_of(qt), qb, w0, lb, k, acc);
      } else if (avx2) {
        PairSumsAvx2(a0 + scratch->off[qt], plane_of(qt), qb, w0, lb, k, acc);
      } else {
        PairSumsPortable(a0 + scratch->off[qt], plane_of(qt), qb, w0, lb, k, acc);
      }
#else
      PairSumsPortable(a0 + scratch->off[qt], plane_of(qt), qb, w0, lb, k, acc);
#endif
      for (int i = 0; i < count(qt); ++i) {
        const int q = q0 + i;
        for (int j = 0; j < lc; ++j) {
          const int l = l0 + j;
          if (q >= l && q - l <= reach) m[q + static_cast<std::size_t>(l) * ld] = acc[i][j];
        }
      }
    }
  }
}

}  // namespace spexd::core::internal
