// The blocked band Cholesky on dense storage (band_cholesky.h) against LAPACK's dpbtrf and
// dpbtrs on the same matrices: factors and solutions agree to rounding (a backward-stable
// factorisation of the same matrix; 1e-13 of the largest entry allows ~500 ulp), with the
// AVX-512 products and with the BLAS ones, on bandwidths narrower and wider than a block
// and sizes not a multiple of it.
#include "core/cpu/internal/band_cholesky.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/cpu/internal/lapack.h"

namespace spexd::core::internal {
namespace {

struct BandCase {
  int n, kd;
};

// A random SPD band matrix: B B^T + I with B lower, bandwidth kd / 2 (so M's is kd).
std::vector<double> BandSpd(int n, int kd, std::mt19937_64* rng) {
  std::normal_distribution<double> normal;
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  std::vector<double> b(nn, 0.0), m(nn, 0.0);
  for (int j = 0; j < n; ++j) {
    for (int i = j; i < std::min(n, j + kd / 2 + 1); ++i) b[i + j * n] = normal(*rng);
  }
  for (int j = 0; j < n; ++j) {
    for (int i = j; i < std::min(n, j + kd + 1); ++i) {
      double s = 0;
      for (int k = 0; k <= j; ++k) s += b[i + k * n] * b[j + k * n];
      m[i + j * n] = s + (i == j ? 1.0 : 0.0);
    }
  }
  return m;
}

void CheckBandCase(const BandCase& c, bool small_gemm, std::mt19937_64* rng) {
  const int n = c.n, kd = c.kd, ldab = kd + 1;
  const std::vector<double> m = BandSpd(n, kd, rng);
  std::vector<double> band(static_cast<std::size_t>(ldab) * n, 0.0);
  for (int j = 0; j < n; ++j) {
    for (int i = j; i < std::min(n, j + kd + 1); ++i) band[(i - j) + j * ldab] = m[i + j * n];
  }
  int info = 0, one = 1, nn = n, kk = kd;
  dpbtrf_("L", &nn, &kk, band.data(), &ldab, &info, 1);
  ASSERT_EQ(info, 0);
  std::vector<double> dense = m, scratch;
  ASSERT_TRUE(BandCholeskyFactor(n, kd, dense.data(), n, &scratch, small_gemm));
  double lmax = 0, ldiff = 0;
  for (int j = 0; j < n; ++j) {
    for (int i = j; i < std::min(n, j + kd + 1); ++i) {
      lmax = std::max(lmax, std::fabs(band[(i - j) + j * ldab]));
      ldiff = std::max(ldiff, std::fabs(band[(i - j) + j * ldab] - dense[i + j * n]));
    }
    for (int i = j + kd + 1; i < n; ++i) ASSERT_EQ(dense[i + j * n], 0.0) << "fill below the band";
  }
  EXPECT_LE(ldiff, 1e-13 * lmax) << "n " << n << " kd " << kd;
  std::normal_distribution<double> normal;
  std::vector<double> x(n), y;
  for (double& v : x) v = normal(*rng);
  y = x;
  dpbtrs_("L", &nn, &kk, &one, band.data(), &ldab, x.data(), &nn, &info, 1);
  BandCholeskySolve(n, kd, dense.data(), n, y.data());
  double xmax = 0, xdiff = 0;
  for (int i = 0; i < n; ++i) {
    xmax = std::max(xmax, std::fabs(x[i]));
    xdiff = std::max(xdiff, std::fabs(x[i] - y[i]));
  }
  EXPECT_LE(xdiff, 1e-12 * xmax) << "n " << n << " kd " << kd;
}

TEST(BandCholeskyTest, MatchesDpbtrfAndDpbtrs) {
  std::mt19937_64 rng(5);
  for (bool small_gemm : {true, false}) {
    SCOPED_TRACE(small_gemm ? "AVX-512 products where available" : "BLAS products");
    for (const BandCase& c : {BandCase{518, 153}, BandCase{444, 150}, BandCase{100, 20},
                              BandCase{97, 40}, BandCase{33, 32}, BandCase{5, 3},
                              BandCase{64, 1}, BandCase{40, 39}}) {
      CheckBandCase(c, small_gemm, &rng);
    }
  }
}

TEST(BandCholeskyTest, RefusesAMatrixThatIsNotPositiveDefinite) {
  const int n = 50, kd = 5;
  std::vector<double> m(static_cast<std::size_t>(n) * n, 0.0), scratch;
  for (int j = 0; j < n; ++j) m[j + j * n] = j == 37 ? -1.0 : 2.0;
  EXPECT_FALSE(BandCholeskyFactor(n, kd, m.data(), n, &scratch));
}

}  // namespace
}  // namespace spexd::core::internal
