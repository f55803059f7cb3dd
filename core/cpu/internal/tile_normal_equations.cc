#include "core/cpu/internal/tile_normal_equations.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/cpu/internal/lane_vec.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace spexd::core::internal {
namespace {

constexpr int kTile = kStampTile;

// Where pixel row y of the common box k starts: in Q's planar canvas (box qb) and in L's
// weighted canvas (box lb, eight values a pixel).
struct RowStart {
  const double* a;
  const double* w;
};
inline RowStart RowOf(const double* a, const PixelBox& qb, const double* w, const PixelBox& lb,
                      const PixelBox& k, int y) {
  return {a + static_cast<std::size_t>(y - qb.y0) * (qb.x1 - qb.x0) + (k.x0 - qb.x0),
          w + (static_cast<std::size_t>(y - lb.y0) * (lb.x1 - lb.x0) + (k.x0 - lb.x0)) * kTile};
}

// One tile pair's sums over the common box k: acc[i][j] = sum over pixels, row by row, of
// a_i * w_j, a from Q's planar canvas (planes `plane` doubles apart), w from L's weighted
// canvas. The vector copies below keep each sum's order and its fused multiply-adds.
void PairSumsPortable(const double* a, std::size_t plane, const PixelBox& qb, const double* w,
                      const PixelBox& lb, const PixelBox& k, double (&acc)[kTile][kTile]) {
  for (auto& r : acc) std::fill(r, r + kTile, 0.0);
  for (int y = k.y0; y < k.y1; ++y) {
    RowStart r = RowOf(a, qb, w, lb, k, y);
    for (int x = k.x0; x < k.x1; ++x, ++r.a, r.w += kTile) {
      for (int i = 0; i < kTile; ++i) {
        for (int j = 0; j < kTile; ++j) acc[i][j] = std::fma(r.a[i * plane], r.w[j], acc[i][j]);
      }
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void PairSumsAvx512(const double* a, std::size_t plane,
                                                        const PixelBox& qb, const double* w,
                                                        const PixelBox& lb, const PixelBox& k,
                                                        double (&acc)[kTile][kTile]) {
  __m512d s[kTile];
  SPEXD_UNROLL_LANES
  for (int i = 0; i < kTile; ++i) s[i] = _mm512_setzero_pd();
  for (int y = k.y0; y < k.y1; ++y) {
    RowStart r = RowOf(a, qb, w, lb, k, y);
    for (int x = k.x0; x < k.x1; ++x, ++r.a, r.w += kTile) {
      const __m512d wv = _mm512_load_pd(r.w);
      SPEXD_UNROLL_LANES
      for (int i = 0; i < kTile; ++i) s[i] = _mm512_fmadd_pd(_mm512_set1_pd(r.a[i * plane]), wv, s[i]);
    }
  }
  SPEXD_UNROLL_LANES
  for (int i = 0; i < kTile; ++i) _mm512_storeu_pd(acc[i], s[i]);
}

// AVX2 with FMA: eight 4-wide sums a half (sixteen would not fit the sixteen registers), the
// two halves of L's eight columns one after the other.
__attribute__((target("avx2,fma"))) void PairSumsAvx2(const double* a, std::size_t plane,
                                                      const PixelBox& qb, const double* w,
                                                      const PixelBox& lb, const PixelBox& k,
                                                      double (&acc)[kTile][kTile]) {
  for (int half = 0; half < 2; ++half) {
    __m256d s[kTile];
    SPEXD_UNROLL_LANES
    for (int i = 0; i < kTile; ++i) s[i] = _mm256_setzero_pd();
    for (int y = k.y0; y < k.y1; ++y) {
      RowStart r = RowOf(a, qb, w, lb, k, y);
      r.w += 4 * half;
      for (int x = k.x0; x < k.x1; ++x, ++r.a, r.w += kTile) {
        const __m256d wv = _mm256_load_pd(r.w);
        SPEXD_UNROLL_LANES
        for (int i = 0; i < kTile; ++i) s[i] = _mm256_fmadd_pd(_mm256_set1_pd(r.a[i * plane]), wv, s[i]);
      }
    }
    SPEXD_UNROLL_LANES
    for (int i = 0; i < kTile; ++i) _mm256_storeu_pd(acc[i] + 4 * half, s[i]);
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
  const int ntile = StampTilesPerSpectrum(p.nt), ntiles = p.n / p.nt * ntile;
  auto first = [&](int t) { return (t / ntile) * p.nt + (t % ntile) * kTile; };
  auto count = [&](int t) { return StampTileCount(p.nt, t % ntile); };
  std::vector<PixelBox>& box = scratch->box;
  std::vector<std::size_t>& off = scratch->off;
  // Each tile's box (its stamps' union, clipped to the window) and canvas offset (eight
  // planes of the box's pixels, each a whole number of 64-byte lines).
  const PixelBox window{0, p.ny, 0, p.nx};
  box.resize(ntiles);
  off.resize(ntiles);
  auto plane_of = [&](int t) {
    return RoundUp8(static_cast<std::size_t>(box[t].y1 - box[t].y0) * (box[t].x1 - box[t].x0));
  };
  std::size_t total = 0;
  for (int t = 0; t < ntiles; ++t) {
    PixelBox b = kNoPixels;
    for (int q = first(t); q < first(t) + count(t); ++q) b = WithStamp(b, p.oy[q], p.ox[q], p.stny, p.stnx);
    b = Intersect(b, window);
    box[t] = IsEmpty(b) ? PixelBox{0, 0, 0, 0} : b;
    off[t] = total;
    total += plane_of(t) * kTile;
  }
  std::size_t widest = 0;
  for (int t = 0; t < ntiles; ++t) widest = std::max(widest, plane_of(t) * kTile);
  scratch->a.resize(total + 8);
  scratch->w.resize(widest + 8);
  double* a0 = scratch->a.data();
  while (reinterpret_cast<std::uintptr_t>(a0) % 64 != 0) ++a0;
  double* w0 = scratch->w.data();
  while (reinterpret_cast<std::uintptr_t>(w0) % 64 != 0) ++w0;
  // The A canvases: each tile's stamps on its box, a plane a stamp (zero outside it).
  for (int t = 0; t < ntiles; ++t) {
    const PixelBox& b = box[t];
    const int bw = b.x1 - b.x0;
    const std::size_t plane = plane_of(t);
    double* c = a0 + off[t];
    std::fill(c, c + plane * kTile, 0.0);
    for (int i = 0; i < count(t); ++i) {
      const int q = first(t) + i;
      const PixelBox sb = Intersect(b, WithStamp(kNoPixels, p.oy[q], p.ox[q], p.stny, p.stnx));
      for (int y = sb.y0; y < sb.y1; ++y) {
        const double* src = p.stamp[q] + static_cast<std::size_t>(y - p.oy[q]) * p.stnx - p.ox[q];
        double* dst = c + i * plane + static_cast<std::size_t>(y - b.y0) * bw - b.x0;
        std::copy(src + sb.x0, src + sb.x1, dst + sb.x0);
      }
    }
  }
#if defined(__x86_64__)
  const bool avx512 = level == SimdLevel::kAvx512 && SimdLevelAvailable(SimdLevel::kAvx512);
  const bool avx2 = !avx512 && level != SimdLevel::kBaseline && HasAvx2Fma();
#endif
  double acc[kTile][kTile];
  for (int lt = 0; lt < ntiles; ++lt) {
    const PixelBox& lb = box[lt];
    if (IsEmpty(lb)) continue;
    // L's weighted canvas, w_j = v_p A[p, l0 + j] eight a pixel, and b, fw pixel by pixel
    // in the window's order, v = 0 pixels skipped (the pixel-by-pixel sums' order).
    const int lw = lb.x1 - lb.x0, l0 = first(lt), lc = count(lt);
    const std::size_t lplane = plane_of(lt);
    const double* al = a0 + off[lt];
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
      const PixelBox& qb = box[qt];
      const PixelBox k = Intersect(lb, qb);
      if (IsEmpty(k)) continue;
      const double* aq = a0 + off[qt];
#if defined(__x86_64__)
      if (avx512) {
        PairSumsAvx512(aq, plane_of(qt), qb, w0, lb, k, acc);
      } else if (avx2) {
        PairSumsAvx2(aq, plane_of(qt), qb, w0, lb, k, acc);
      } else {
        PairSumsPortable(aq, plane_of(qt), qb, w0, lb, k, acc);
      }
#else
      PairSumsPortable(aq, plane_of(qt), qb, w0, lb, k, acc);
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
