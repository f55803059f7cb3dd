// The weighted normal equations of one patch from its sparse A by pixel (spec §2.8):
// M = A^T diag(v) A in LAPACK lower band storage, b = A^T diag(v) d, fw = A^T v.
//
// Neighbouring pixels of a row mostly lie in the same stamps (the same sorted column list:
// runs of 3.4 pixels on average in an r frame), so their outer products are summed over
// the run in SIMD registers and added into M's band once per run: k^2 / 2 scattered adds
// a run instead of a pixel. M's entries are therefore sums in another order than pixel by
// pixel (rounding-level differences); b and fw are summed pixel by pixel. Products are
// not contracted into FMAs (core/CMakeLists.txt), so every vector width gives the same bits.
#ifndef SPEXD_CORE_CPU_INTERNAL_NORMAL_EQUATIONS_H_
#define SPEXD_CORE_CPU_INTERNAL_NORMAL_EQUATIONS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/cpu/internal/simd_level.h"

namespace spexd::core::internal {

// A by pixel: pixel p's entries are [start[p], start[p + 1]) of (col, val), cols ascending.
struct PixelEntries {
  const int32_t* start;
  const int32_t* col;
  const double* val;
};

// The pixel window: ny rows of nx pixels; image and ivar [ny][nx].
struct PixelWindow {
  int ny, nx;
  const double* image;
  const double* ivar;
};

// Scratch reused across patches (grow-only).
struct NormalEqScratch {
  std::vector<double> pv, weighted;  // a run's pixels: values and weighted values
};

// Adds the window's pixels into m (lower band, M[i, j] for i >= j at m[i + j * kd]; every
// pixel's column span must be <= kd), b and fw. Pixels with v = 0 are skipped. The caller
// zeroes the outputs. `level`: the copy that runs (a narrower one than the CPU has for
// tests; one it lacks falls back to the widest).
void AccumulateNormalEquations(const PixelEntries& a, const PixelWindow& w, int kd, double* m,
                               double* b, double* fw, NormalEqScratch* scratch,
                               SimdLevel level = WidestSimdLevel());

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_NORMAL_EQUATIONS_H_
