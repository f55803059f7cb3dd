#include "core/cpu/internal/decorrelate_products.h"

#include <algorithm>
#include <cstddef>

#include "core/cpu/internal/lane_vec.h"

namespace spexd::core::internal {
namespace {

// Eight doubles in every copy.
using V8 = LaneVec<8>::V;
constexpr int kLanes = 8;

SPEXD_LANE_INLINE V8 Load(const double* p) { return *reinterpret_cast<const V8*>(p); }
SPEXD_LANE_INLINE void Add(double* p, V8 v) { *reinterpret_cast<V8*>(p) += v; }
SPEXD_LANE_INLINE double LaneSum(V8 v) {  // in lane order, in every copy
  double s = v[0];
  for (int l = 1; l < kLanes; ++l) s += v[l];
  return s;
}

SPEXD_LANE_INLINE void Products(const DecorrelateBlock& b, double* r, double* qx, double* band,
                                double* scratch) {
  const int nt = b.nt, vec_end = nt / kLanes * kLanes;
  const int nk = 2 * b.nd + 1, band_end = b.nstep / kLanes * kLanes;
  // r = V (g o V^T 1) and Q x = V (g o V^T x), through wu = g o V^T 1 and wt = g o V^T x.
  double* wu = scratch;
  double* wt = scratch + nt;
  for (int k = 0; k < nt; ++k) {
    const double* col = b.v + static_cast<std::size_t>(k) * nt;
    V8 su = Broadcast<kLanes>(0.0), st = Broadcast<kLanes>(0.0);
    for (int i = 0; i < vec_end; i += kLanes) {
      const V8 c = Load(col + i);
      su += c;
      st += c * Load(b.x + i);
    }
    double u = LaneSum(su), t = LaneSum(st);
    for (int i = vec_end; i < nt; ++i) {
      u += col[i];
      t += col[i] * b.x[i];
    }
    wu[k] = b.g[k] * u;
    wt[k] = b.g[k] * t;
  }
  std::fill(r, r + nt, 0.0);
  std::fill(qx, qx + nt, 0.0);
  for (int k = 0; k < nt; ++k) {
    const double* col = b.v + static_cast<std::size_t>(k) * nt;
    const V8 cu = Broadcast<kLanes>(wu[k]), ct = Broadcast<kLanes>(wt[k]);
    for (int i = 0; i < vec_end; i += kLanes) {
      const V8 c = Load(col + i);
      Add(r + i, cu * c);
      Add(qx + i, ct * c);
    }
    for (int i = vec_end; i < nt; ++i) {
      r[i] += wu[k] * col[i];
      qx[i] += wt[k] * col[i];
    }
  }
  // Q[i + d, i] = sum_k (g_k V[i + d, k]) V[i, k], k ascending.
  std::fill(band, band + static_cast<std::size_t>(nk) * b.nstep, 0.0);
  for (int k = 0; k < nt; ++k) {
    const double* col = b.v + static_cast<std::size_t>(k) * nt + b.i0;
    const double gk = b.g[k];
    const V8 g = Broadcast<kLanes>(gk);
    for (int kk = 0; kk < nk; ++kk) {
      const double* row = col + (kk - b.nd);
      double* out = band + static_cast<std::size_t>(kk) * b.nstep;
      for (int w = 0; w < band_end; w += kLanes) Add(out + w, g * Load(row + w) * Load(col + w));
      for (int w = band_end; w < b.nstep; ++w) out[w] += gk * row[w] * col[w];
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void ProductsAvx512(const DecorrelateBlock& b, double* r,
                                                       double* qx, double* band, double* scratch) {
  Products(b, r, qx, band, scratch);
}
__attribute__((target("avx2"))) void ProductsAvx2(const DecorrelateBlock& b, double* r, double* qx,
                                                  double* band, double* scratch) {
  Products(b, r, qx, band, scratch);
}
#endif
void ProductsBaseline(const DecorrelateBlock& b, double* r, double* qx, double* band,
                      double* scratch) {
  Products(b, r, qx, band, scratch);
}

}  // namespace

void DecorrelateProducts(const DecorrelateBlock& b, double* r, double* qx, double* band,
                         double* scratch, SimdLevel level) {
  if (!SimdLevelAvailable(level)) level = WidestSimdLevel();
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512) return ProductsAvx512(b, r, qx, band, scratch);
  if (level == SimdLevel::kAvx2) return ProductsAvx2(b, r, qx, band, scratch);
#endif
  ProductsBaseline(b, r, qx, band, scratch);
}

}  // namespace spexd::core::internal
