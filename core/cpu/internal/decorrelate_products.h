// The products of one core block's Q = V diag(g) V^T that the decorrelation keeps (spec
// §2.10 step 3, §2.11), without forming Q: its row sums r = V (g o V^T 1), Q x = V (g o V^T x)
// and the resolution band Q[i + d, i] of the core wavelengths, |d| <= nd. About a quarter of
// Q's n^3 products (nt = 74: 110,000 against 405,000), in vectors of eight doubles in every
// copy (AVX-512, AVX2, baseline) and without FMA contraction (core/CMakeLists.txt), so that
// every copy gives the same bits.
#ifndef SPEXD_CORE_CPU_INTERNAL_DECORRELATE_PRODUCTS_H_
#define SPEXD_CORE_CPU_INTERNAL_DECORRELATE_PRODUCTS_H_

#include "core/cpu/internal/simd_level.h"

namespace spexd::core::internal {

struct DecorrelateBlock {
  const double* v;  // nt x nt column-major eigenvectors, column k for g[k]
  const double* g;  // nt weights (1 / sqrt of the clipped eigenvalues)
  const double* x;  // nt values Q multiplies
  int nt;
  int i0, nstep, nd;  // the core wavelengths [i0, i0 + nstep); nd <= i0, i0 + nstep + nd <= nt
};

// r[nt], qx[nt]; band[kk * nstep + w] = Q[i0 + w - nd + kk, i0 + w] for kk in [0, 2 nd];
// scratch: 2 nt doubles. `level`: the copy that runs (a narrower one than the CPU has for
// tests; one it lacks falls back to the widest).
void DecorrelateProducts(const DecorrelateBlock& b, double* r, double* qx, double* band,
                         double* scratch, SimdLevel level = WidestSimdLevel());

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_DECORRELATE_PRODUCTS_H_
