// The selected inversion's diagonal blocks (core/cpu/internal/band_inverse.h) against the
// dense inverse of the same matrix, over band widths below, at and above the block size,
// the last partial K, a single block and a band as wide as the matrix.
#include "core/cpu/internal/band_inverse.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/internal/band_cholesky.h"
#include "core/cpu/internal/lapack.h"

extern "C" void dpotri_(const char* uplo, const int* n, double* a, const int* lda, int* info,
                        std::size_t);

namespace spexd::core {
namespace {

constexpr std::size_t kOne = 1;

struct Shape {
  int n, block, kd, first_block;
  int diag = 0;  // size of the diagonal blocks checked (whole blocks); 0: block
};

// M = B B^T + I with B lower banded (bandwidth kd): SPD, bandwidth kd, well conditioned.
std::vector<double> RandomBandedSpd(int n, int kd, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> bl(static_cast<std::size_t>(n) * n, 0.0), m(bl.size(), 0.0);
  for (int j = 0; j < n; ++j) {
    for (int i = j; i <= std::min(n - 1, j + kd); ++i) bl[i + static_cast<std::size_t>(j) * n] = u(rng);
  }
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) {
      double s = i == j ? 1.0 : 0.0;
      for (int k = 0; k <= std::min(i, j); ++k) {
        s += bl[i + static_cast<std::size_t>(k) * n] * bl[j + static_cast<std::size_t>(k) * n];
      }
      m[i + static_cast<std::size_t>(j) * n] = s;
    }
  }
  return m;
}

class BandInverseTest : public ::testing::TestWithParam<Shape> {};

TEST_P(BandInverseTest, DiagonalBlocksMatchTheDenseInverse) {
  const auto [n, b, kd, first, diag_arg] = GetParam();
  const int diag = diag_arg > 0 ? diag_arg : b;
  const std::vector<double> m = RandomBandedSpd(n, kd, 17u + static_cast<unsigned>(n + kd));
  // The factor as the patch extractor makes it (BandCholeskyFactor on dense storage, M's
  // lower triangle stored only within BandCholeskyReach(kd) of the diagonal: garbage
  // beyond it, left from an earlier patch).
  std::vector<double> factor = m, scratch;
  for (int j = 0; j < n; ++j) {
    for (int i = j + internal::BandCholeskyReach(kd) + 1; i < n; ++i) {
      factor[i + static_cast<std::size_t>(j) * n] = std::nan("");
    }
  }
  ASSERT_TRUE(internal::BandCholeskyFactor(n, kd, factor.data(), n, &scratch));
  int info = 0, nn = n;
  // Reference: dense Cholesky and the inverse from it (dpotri; lower triangle).
  std::vector<double> ref = m;
  dpotrf_("L", &nn, ref.data(), &nn, &info, kOne);
  ASSERT_EQ(info, 0);
  dpotri_("L", &nn, ref.data(), &nn, &info, kOne);
  ASSERT_EQ(info, 0);

  // Garbage in C and the scratch: the function must not read what it did not write.
  std::vector<double> c(static_cast<std::size_t>(n) * n, std::nan(""));
  std::vector<double> z(static_cast<std::size_t>(BandInverseScratchSize(kd, b)), std::nan(""));
  BandInverseDiagonalBlocks(BandFactor{factor.data(), n, n, kd}, b, first, c.data(), n, z.data());
  // Diagonal blocks of `diag` unknowns from the first computed column on.
  for (int jb = first * b / diag; jb < n / diag; ++jb) {
    double scale = 0, diff = 0;
    for (int jj = 0; jj < diag; ++jj) {
      for (int ii = jj; ii < diag; ++ii) {
        const int i = jb * diag + ii, j = jb * diag + jj;
        const double want = ref[i + static_cast<std::size_t>(j) * n];
        scale = std::max(scale, std::fabs(want));
        diff = std::max(diff, std::fabs(c[i + static_cast<std::size_t>(j) * n] - want));
        ASSERT_EQ(c[i + static_cast<std::size_t>(j) * n], c[j + static_cast<std::size_t>(i) * n])
            << "block " << jb << " not symmetric at " << ii << "," << jj;
      }
    }
    EXPECT_LT(diff, 1e-13 * scale) << "block " << jb << " (n " << n << ", kd " << kd << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BandInverseTest,
    ::testing::Values(Shape{518, 74, 156, 1},   // a full patch: two neighbours and a bit
                      Shape{444, 74, 157, 0},   // an edge patch from its first spectrum
                      Shape{518, 74, 148, 1},   // kd = 2 blocks exactly
                      Shape{370, 74, 75, 0},    // kd = block + 1: one dense row of X
                      Shape{370, 74, 74, 0},    // kd = block
                      Shape{370, 74, 40, 1},    // kd < block: the dense copy of L
                      Shape{370, 74, 0, 0},     // diagonal M (a wholly masked patch)
                      Shape{370, 74, 9, 1},     // kd + reach < block: unstored L_JJ
                      Shape{74, 74, 30, 0},     // one block
                      Shape{100, 20, 99, 0},    // band as wide as the matrix
                      Shape{296, 74, 220, 2},   // X with an upper triangle and a dense strip
                      Shape{30, 5, 0, 1},       // diagonal M
                      Shape{35, 7, 12, 3},
                      // Half-spectrum recursion blocks, spectra of 74 checked (kd >= 74).
                      Shape{518, 37, 156, 2, 74}, Shape{444, 37, 157, 0, 74},
                      Shape{370, 37, 74, 0, 74}, Shape{296, 37, 220, 4, 74}),
    [](const ::testing::TestParamInfo<Shape>& p) {
      return "n" + std::to_string(p.param.n) + "_b" + std::to_string(p.param.block) + "_kd" +
             std::to_string(p.param.kd) + "_first" + std::to_string(p.param.first_block) +
             (p.param.diag > 0 ? "_diag" + std::to_string(p.param.diag) : "");
    });

}  // namespace
}  // namespace spexd::core
