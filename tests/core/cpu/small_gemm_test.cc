// The band inverse's AVX-512 product (small_gemm.h) against its definition: each entry of
// A B summed over k in order, one fused multiply-add a term (std::fma), then stored (beta
// 0) or added to C (beta 1). The kernel does exactly that, so the bits must be equal; the
// shapes cover the tile edges (24 rows, 8 columns), k = 0 and leading dimensions past m.
#include "core/cpu/internal/small_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu/internal/simd_level.h"

namespace spexd::core::internal {
namespace {

struct Shape {
  int m, n, k;
};

void CheckShape(const Shape& s, double beta, std::mt19937_64* rng) {
  std::normal_distribution<double> normal;
  const int lda = s.m + 3, ldb = s.k + 2, ldc = s.m + 5;
  std::vector<double> a(static_cast<std::size_t>(lda) * std::max(s.k, 1));
  std::vector<double> b(static_cast<std::size_t>(ldb) * s.n);
  std::vector<double> c(static_cast<std::size_t>(ldc) * s.n);
  for (double& x : a) x = normal(*rng);
  for (double& x : b) x = normal(*rng);
  for (double& x : c) x = beta == 0.0 ? std::numeric_limits<double>::quiet_NaN() : normal(*rng);
  std::vector<double> want = c;
  for (int j = 0; j < s.n; ++j) {
    for (int i = 0; i < s.m; ++i) {
      double acc = 0.0;
      for (int p = 0; p < s.k; ++p) acc = std::fma(a[i + p * lda], b[p + j * ldb], acc);
      double& w = want[i + static_cast<std::size_t>(j) * ldc];
      w = beta == 0.0 ? acc : w + acc;
    }
  }
  ASSERT_TRUE(SmallGemmNN(s.m, s.n, s.k, a.data(), lda, b.data(), ldb, beta, c.data(), ldc));
  for (int j = 0; j < s.n; ++j) {
    for (int i = 0; i < ldc; ++i) {
      const std::size_t at = i + static_cast<std::size_t>(j) * ldc;
      if (i < s.m) {
        ASSERT_EQ(c[at], want[at]) << "m " << s.m << " n " << s.n << " k " << s.k << " beta "
                                   << beta << " at (" << i << ", " << j << ")";
      } else if (beta == 0.0) {
        ASSERT_TRUE(std::isnan(c[at])) << "row " << i << " past m was written";
      } else {
        ASSERT_EQ(c[at], want[at]) << "row " << i << " past m was changed";
      }
    }
  }
}

TEST(SmallGemmTest, EqualsTheInOrderFusedSumsOnEveryTileEdge) {
  if (!SimdLevelAvailable(SimdLevel::kAvx512)) {
    GTEST_SKIP() << "this CPU has no AVX-512F: the band inverse uses the BLAS (checked below)";
  }
  std::mt19937_64 rng(11);
  for (const Shape& s : {Shape{150, 37, 114}, Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{24, 8, 20},
                         Shape{25, 9, 33}, Shape{23, 16, 2}, Shape{48, 1, 7}, Shape{153, 37, 153},
                         Shape{9, 3, 0}}) {
    for (double beta : {0.0, 1.0}) CheckShape(s, beta, &rng);
  }
}

TEST(SmallGemmTest, DeclinesWithoutAvx512OrForAnotherBeta) {
  std::vector<double> a(4, 1.0), b(4, 1.0), c(4, 7.0);
  EXPECT_FALSE(SmallGemmNN(2, 2, 2, a.data(), 2, b.data(), 2, 0.5, c.data(), 2));
  EXPECT_EQ(c, std::vector<double>(4, 7.0));
  EXPECT_EQ(SmallGemmNN(2, 2, 2, a.data(), 2, b.data(), 2, 1.0, c.data(), 2),
            SimdLevelAvailable(SimdLevel::kAvx512));
}

}  // namespace
}  // namespace spexd::core::internal
