// The decorrelation's products from V without forming Q (core/cpu/internal/
// decorrelate_products.h) against Q = V diag(g) V^T formed term by term: row sums, Q x and
// the resolution band, for block sizes with and without a partial vector at the end; and
// every vector copy gives the baseline's bits.
#include "core/cpu/internal/decorrelate_products.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace spexd::core::internal {
namespace {

struct ProductsCase {
  int nt, i0, nstep, nd;
};

struct ProductsInputs {
  std::vector<double> v, g, x;
};

ProductsInputs MakeProductsInputs(int nt, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  ProductsInputs in;
  in.v.resize(static_cast<std::size_t>(nt) * nt);
  for (double& e : in.v) e = u(rng);
  in.g.resize(nt);
  for (int k = 0; k < nt; ++k) in.g[k] = std::pow(10.0, 3.0 * (u(rng) + 1.0));  // 1 .. 1e6
  in.x.resize(nt);
  for (double& e : in.x) e = 100.0 * u(rng);
  return in;
}

class DecorrelateProductsTest : public ::testing::TestWithParam<ProductsCase> {};

TEST_P(DecorrelateProductsTest, MatchesQFormedTermByTerm) {
  const ProductsCase c = GetParam();
  const ProductsInputs in = MakeProductsInputs(c.nt, 17);
  const int nt = c.nt, nk = 2 * c.nd + 1;
  std::vector<double> r(nt), qx(nt), band(nk * c.nstep), scratch(2 * nt);
  DecorrelateProducts(DecorrelateBlock{in.v.data(), in.g.data(), in.x.data(), nt, c.i0, c.nstep, c.nd},
                      r.data(), qx.data(), band.data(), scratch.data());
  // Q[i, j] = sum_k g_k V[i, k] V[j, k], with the sum of the terms' magnitudes: each
  // product's rounding is bounded by (2 (N + 2) eps) of the terms' magnitudes summed
  // (N terms; the row sums and Q x go through two levels of sums); a wrong or missing
  // term is off by a whole term, far more.
  auto v = [&](int i, int k) { return in.v[i + static_cast<std::size_t>(k) * nt]; };
  for (int i = 0; i < nt; ++i) {
    double rs = 0, rabs = 0, xs = 0, xabs = 0;
    for (int j = 0; j < nt; ++j) {
      for (int k = 0; k < nt; ++k) {
        const double t = in.g[k] * v(i, k) * v(j, k);
        rs += t;
        rabs += std::fabs(t);
        xs += t * in.x[j];
        xabs += std::fabs(t * in.x[j]);
      }
    }
    const double n2 = 2.0 * nt * nt + 4.0;
    EXPECT_LE(std::fabs(r[i] - rs), 2 * n2 * DBL_EPSILON * rabs) << "row sum " << i;
    EXPECT_LE(std::fabs(qx[i] - xs), 2 * n2 * DBL_EPSILON * xabs) << "Q x " << i;
  }
  for (int kk = 0; kk < nk; ++kk) {
    for (int w = 0; w < c.nstep; ++w) {
      const int i = c.i0 + w, row = i - c.nd + kk;
      double q = 0, qabs = 0;
      for (int k = 0; k < nt; ++k) {
        q += in.g[k] * v(row, k) * v(i, k);
        qabs += std::fabs(in.g[k] * v(row, k) * v(i, k));
      }
      EXPECT_LE(std::fabs(band[kk * c.nstep + w] - q), 2.0 * (nt + 2) * DBL_EPSILON * qabs)
          << "band " << kk << " " << w;
    }
  }
}

TEST_P(DecorrelateProductsTest, EveryVectorWidthGivesTheBaselineBits) {
  const ProductsCase c = GetParam();
  const ProductsInputs in = MakeProductsInputs(c.nt, 23);
  const int nt = c.nt, nb = (2 * c.nd + 1) * c.nstep;
  const DecorrelateBlock b{in.v.data(), in.g.data(), in.x.data(), nt, c.i0, c.nstep, c.nd};
  std::vector<double> r0(nt), q0(nt), b0(nb), scratch(2 * nt);
  DecorrelateProducts(b, r0.data(), q0.data(), b0.data(), scratch.data(), SimdLevel::kBaseline);
  for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!SimdLevelAvailable(level)) {
      GTEST_LOG_(INFO) << "level " << static_cast<int>(level) << " not on this CPU: not compared";
      continue;
    }
    std::vector<double> r(nt), q(nt), band(nb);
    DecorrelateProducts(b, r.data(), q.data(), band.data(), scratch.data(), level);
    EXPECT_EQ(std::memcmp(r.data(), r0.data(), sizeof(double) * nt), 0);
    EXPECT_EQ(std::memcmp(q.data(), q0.data(), sizeof(double) * nt), 0);
    EXPECT_EQ(std::memcmp(band.data(), b0.data(), sizeof(double) * nb), 0);
  }
}

// The r frame's block (74: a partial vector; 50 core wavelengths: a partial vector), whole
// vectors, and a block narrower than one vector.
INSTANTIATE_TEST_SUITE_P(Shapes, DecorrelateProductsTest,
                         ::testing::Values(ProductsCase{74, 12, 50, 11}, ProductsCase{32, 8, 16, 3},
                                           ProductsCase{5, 2, 1, 2}));

}  // namespace
}  // namespace spexd::core::internal
