#include "core/cpu/internal/normal_equations.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/cpu/internal/lane_vec.h"

namespace spexd::core::internal {
namespace {

constexpr int kMaxLanes = 8;

int RoundUp(int k, int l) { return (k + l - 1) / l * l; }

double* AlignTo64(double* p) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<double*>((a + 63) & ~static_cast<std::uintptr_t>(63));
}

// A run's pixels, up to kMaxRun, as rows of `stride` doubles: their entries' values (pv)
// and the weighted values v * pv (va; lanes past k hold stale values, never added). Each
// vector of a column of M is summed over the run in a register, then added into M's band:
// the pixels' products in their order (pv[l] * (v * pv[e]), as the pixel-by-pixel sum
// forms them), one scatter a run.
constexpr int kMaxRun = 16;

template <int L>
SPEXD_LANE_INLINE void FlushRun(int k, int kp, const int32_t* cols, int run, const double* pvs,
                                const double* vas, int stride, int kd, double* m) {
  using V = typename LaneVec<L>::V;
  alignas(64) double sum[L];
  for (int l = 0; l < k; ++l) {
    double* mcol = m + static_cast<std::size_t>(cols[l]) * kd;  // M[q, cols[l]] at mcol[q]
    for (int c = l / L * L; c < kp; c += L) {
      V acc = {};
      for (int r = 0; r < run; ++r) {
        const V a = Broadcast<L>(pvs[r * stride + l]);
        acc += a * *reinterpret_cast<const V*>(vas + r * stride + c);
      }
      *reinterpret_cast<V*>(sum) = acc;
      const int e1 = std::min(c + L, k);
      for (int e = std::max(c, l); e < e1; ++e) mcol[cols[e]] += sum[e - c];
    }
  }
}

template <int L>
SPEXD_LANE_INLINE void Accumulate(const PixelEntries& a, const PixelWindow& w, int kd, double* m,
                                  double* b, double* fw, int stride, double* pvs, double* vas) {
  const int32_t* run_cols = nullptr;
  int run_k = 0, kp = 0, run = 0;
  const int npix = w.ny * w.nx;
  for (int p = 0; p < npix; ++p) {
    const double v = w.ivar[p];
    const int e0 = a.start[p], k = a.start[p + 1] - e0;
    if (v == 0.0 || k == 0) continue;
    const int32_t* cols = a.col + e0;
    const double* pv = a.val + e0;
    if (run == kMaxRun || k != run_k || std::memcmp(cols, run_cols, sizeof(int32_t) * k) != 0) {
      if (run > 0) FlushRun<L>(run_k, kp, run_cols, run, pvs, vas, stride, kd, m);
      run_cols = cols;
      run_k = k;
      kp = RoundUp(k, L);
      run = 0;
    }
    double* pr = pvs + run * stride;
    double* vr = vas + run * stride;
    ++run;
    for (int e = 0; e < k; ++e) {
      pr[e] = pv[e];
      vr[e] = v * pv[e];
    }
    // b and fw pixel by pixel, as the spec's order of summation has them.
    const double pix = w.image[p];
    for (int e = 0; e < k; ++e) {
      fw[cols[e]] += vr[e];
      b[cols[e]] += vr[e] * pix;
    }
  }
  if (run > 0) FlushRun<L>(run_k, kp, run_cols, run, pvs, vas, stride, kd, m);
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void AccumulateAvx512(const PixelEntries& a,
                                                         const PixelWindow& w, int kd, double* m,
                                                         double* b, double* fw, int stride,
                                                         double* pvs, double* vas) {
  Accumulate<8>(a, w, kd, m, b, fw, stride, pvs, vas);
}
__attribute__((target("avx2"))) void AccumulateAvx2(const PixelEntries& a, const PixelWindow& w,
                                                    int kd, double* m, double* b, double* fw,
                                                    int stride, double* pvs, double* vas) {
  Accumulate<4>(a, w, kd, m, b, fw, stride, pvs, vas);
}
#endif
void AccumulateBaseline(const PixelEntries& a, const PixelWindow& w, int kd, double* m, double* b,
                        double* fw, int stride, double* pvs, double* vas) {
  Accumulate<4>(a, w, kd, m, b, fw, stride, pvs, vas);
}

}  // namespace

void AccumulateNormalEquations(const PixelEntries& a, const PixelWindow& w, int kd, double* m,
                               double* b, double* fw, NormalEqScratch* scratch,
                               SimdLevel level) {
  int kmax = 0;
  for (int p = 0; p < w.ny * w.nx; ++p) kmax = std::max(kmax, a.start[p + 1] - a.start[p]);
  // Rows of whole 64-byte lines, so that no vector read splits a cache line.
  const int stride = RoundUp(std::max(kmax, 1), kMaxLanes);
  const std::size_t need = static_cast<std::size_t>(stride) * kMaxRun + kMaxLanes;
  if (scratch->pv.size() < need) scratch->pv.resize(need);
  if (scratch->weighted.size() < need) scratch->weighted.resize(need);
  double* pvs = AlignTo64(scratch->pv.data());
  double* vas = AlignTo64(scratch->weighted.data());
  if (!SimdLevelAvailable(level)) level = WidestSimdLevel();
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512) return AccumulateAvx512(a, w, kd, m, b, fw, stride, pvs, vas);
  if (level == SimdLevel::kAvx2) return AccumulateAvx2(a, w, kd, m, b, fw, stride, pvs, vas);
#endif
  AccumulateBaseline(a, w, kd, m, b, fw, stride, pvs, vas);
}

}  // namespace spexd::core::internal
