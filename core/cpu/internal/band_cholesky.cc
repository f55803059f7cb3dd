#include "core/cpu/internal/band_cholesky.h"

#include <algorithm>
#include <cstddef>

#include "core/cpu/internal/lapack.h"
#include "core/cpu/internal/simd_level.h"
#include "core/cpu/internal/small_gemm.h"

namespace spexd::core::internal {
namespace {

constexpr std::size_t kOne = 1;  // hidden Fortran string length
constexpr double kPlus = 1.0, kMinus = -1.0;

}  // namespace

bool BandCholeskyFactor(int n, int kd, double* a, int lda, std::vector<double>* scratch,
                        bool small_gemm) {
  auto at = [&](int i, int j) { return a + i + static_cast<std::ptrdiff_t>(j) * lda; };
  for (int j = 0; j < n; j += kBandCholeskyBlock) {
    int ib = std::min(kBandCholeskyBlock, n - j), info = 0;
    dpotrf_("L", &ib, at(j, j), &lda, &info, kOne);
    if (info != 0) return false;
    // The panel P: the kd rows below the block (its last column's band; the rows past the
    // band of its first columns are zero and stay zero), P = P L11^-T.
    int rows = std::min(kd, n - j - ib);
    if (rows <= 0) continue;
    double* p = at(j + ib, j);
    dtrsm_("R", "L", "T", "N", &rows, &ib, &kPlus, at(j, j), &lda, p, &lda, kOne, kOne, kOne, kOne);
    // The trailing window (inside the band): A22 -= P P^T.
    double* a22 = at(j + ib, j + ib);
    if (!small_gemm || !SimdLevelAvailable(SimdLevel::kAvx512)) {
      dsyrk_("L", "N", &rows, &ib, &kMinus, p, &lda, &kPlus, a22, &lda, kOne, kOne);
      continue;
    }
    // By the AVX-512 kernel on -P^T (ib x rows), columns of 8 from each one's diagonal
    // down. It also writes the upper triangle of each 8 x 8 diagonal tile: entries of M's
    // upper triangle, which nothing reads.
    scratch->resize(static_cast<std::size_t>(ib) * rows);
    double* pt = scratch->data();
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < ib; ++c) {
        pt[c + static_cast<std::size_t>(r) * ib] = -p[r + static_cast<std::ptrdiff_t>(c) * lda];
      }
    }
    constexpr int kCols = 8;
    for (int c0 = 0; c0 < rows; c0 += kCols) {
      SmallGemmNN(rows - c0, std::min(kCols, rows - c0), ib, p + c0, lda,
                  pt + static_cast<std::size_t>(c0) * ib, ib, 1.0,
                  a22 + c0 + static_cast<std::ptrdiff_t>(c0) * lda, lda);
    }
  }
  return true;
}

void BandCholeskySolve(int n, int kd, const double* l, int lda, double* x) {
  auto at = [&](int i, int j) { return l[i + static_cast<std::ptrdiff_t>(j) * lda]; };
  // L y = b, by columns.
  for (int j = 0; j < n; ++j) {
    const double y = x[j] / at(j, j);
    x[j] = y;
    const int end = std::min(n, j + kd + 1);
    for (int i = j + 1; i < end; ++i) x[i] -= at(i, j) * y;
  }
  // L^T x = y, by columns from the last: each a dot product, in four partial sums (one
  // chain of dependent multiply-adds a column made this solve 2.4x dpbtrs's time).
  for (int j = n - 1; j >= 0; --j) {
    const int end = std::min(n, j + kd + 1);
    const double* col = l + static_cast<std::ptrdiff_t>(j) * lda;
    double t[4] = {0.0, 0.0, 0.0, 0.0};
    int i = j + 1;
    for (; i + 4 <= end; i += 4) {
      for (int u = 0; u < 4; ++u) t[u] += col[i + u] * x[i + u];
    }
    for (; i < end; ++i) t[0] += col[i] * x[i];
    x[j] = (x[j] - ((t[0] + t[1]) + (t[2] + t[3]))) / col[j];
  }
}

}  // namespace spexd::core::internal
