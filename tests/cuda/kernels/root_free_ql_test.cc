// The GPU's eigenvalue QL without square roots (core/numerics/root_free_ql.h), run by a host
// thread: relative accuracy on graded T shaped like the reduced core blocks against a
// long-double Sturm reference, agreement with the square-root QL (tridiag_eigen.h) on
// random T, its sweep count, its exact power-of-two scaling, and the corner cases of
// deflation. Needs no GPU.
#include "core/numerics/root_free_ql.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/numerics/tridiag_eigen.h"
#include "gtest/gtest.h"
#include "tests/graded_tridiagonal.h"

namespace spexd::cuda {
namespace {

using ::spexd::core::tridiag::OrientForQl;
using ::spexd::core::tridiag::QlValues;
using ::spexd::core::tridiag::QlValuesOriented;
using ::spexd::core::tridiag::QlValuesRootFree;

int RootFreeOriented(std::vector<double>* d, std::vector<double>* e) {
  const int n = static_cast<int>(d->size());
  OrientForQl(d->data(), e->data(), n);
  return QlValuesRootFree(d->data(), e->data(), n);
}

// On the graded T of the square-root QL's relative-accuracy test, the same bar (1e-14,
// against the Sturm reference), oriented as the kernel calls it.
TEST(RootFreeQl, OrientedValuesKeepRelativeAccuracyOnGradedT) {
  double worst = 0;
  for (int seed = 1; seed <= 16; ++seed) {
    for (double grade : {8.0, 100.0, 1e4}) {
      const spexd::testing::GradedT t = spexd::testing::GradedTridiagonal(seed, grade);
      const int n = static_cast<int>(t.d.size());
      std::vector<double> w = t.d, we = t.e;
      ASSERT_GE(RootFreeOriented(&w, &we), 0);
      std::sort(w.begin(), w.end());
      for (int k = 0; k < n; ++k) {
        const long double ref = spexd::testing::SturmEigenvalue(t.d, t.e, k);
        worst = std::max(worst, static_cast<double>(std::fabs(w[k] - ref) / ref));
      }
    }
  }
  EXPECT_LE(worst, 1e-14);
}

// Random T (indefinite, entries of both signs): the same eigenvalues as the square-root QL
// within a few eps ||T||, in no more sweeps than it plus a few.
TEST(RootFreeQl, AgreesWithSquareRootQlOnRandomT) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> g(0.0, 1.0);
  long sweeps_rf = 0, sweeps_sq = 0;
  for (int n : {2, 3, 5, 17, 74, 80}) {
    for (int rep = 0; rep < 8; ++rep) {
      std::vector<double> d(n), e(n, 0.0);
      for (double& x : d) x = g(rng);
      for (int i = 0; i + 1 < n; ++i) e[i] = g(rng);
      double norm = 0;
      for (int i = 0; i < n; ++i) {
        norm = std::max(norm, std::fabs(d[i]) + (i > 0 ? std::fabs(e[i - 1]) : 0) + std::fabs(e[i]));
      }
      std::vector<double> d1 = d, e1 = e, d2 = d, e2 = e;
      const int s1 = QlValuesRootFree(d1.data(), e1.data(), n);
      const int s2 = QlValues(d2.data(), e2.data(), n);
      ASSERT_GE(s1, 0);
      ASSERT_GE(s2, 0);
      sweeps_rf += s1;
      sweeps_sq += s2;
      std::sort(d1.begin(), d1.end());
      std::sort(d2.begin(), d2.end());
      for (int i = 0; i < n; ++i) {
        EXPECT_NEAR(d1[i], d2[i], 8 * n * 2.2e-16 * norm) << "n " << n << " i " << i;
      }
    }
  }
  EXPECT_LE(sweeps_rf, sweeps_sq + sweeps_sq / 10);
}

// The squares of T's entries would overflow (2^600) or underflow (2^-600) unscaled; the
// power-of-two scaling is exact, so the values are those of T scaled back, bit for bit.
TEST(RootFreeQl, ExtremeScalesGiveTheScaledValuesExactly) {
  const spexd::testing::GradedT t = spexd::testing::GradedTridiagonal(3, 100.0);
  std::vector<double> d0 = t.d, e0 = t.e;
  ASSERT_GE(RootFreeOriented(&d0, &e0), 0);
  for (int ex : {600, -600}) {
    std::vector<double> d = t.d, e = t.e;
    for (double& x : d) x = std::ldexp(x, ex);
    for (double& x : e) x = std::ldexp(x, ex);
    ASSERT_GE(RootFreeOriented(&d, &e), 0) << "scale 2^" << ex;
    for (std::size_t i = 0; i < d.size(); ++i) {
      EXPECT_EQ(d[i], std::ldexp(d0[i], ex)) << "scale 2^" << ex << " i " << i;
    }
  }
}

// Deflation's corners: diagonal T (no sweep), split T (a zero in the middle), the zero
// matrix, one and two unknowns, and a non-finite entry (a failure, not a hang).
TEST(RootFreeQl, CornerCases) {
  std::vector<double> d = {3.0, -1.0, 2.0}, e = {0.0, 0.0, 0.0};
  EXPECT_EQ(QlValuesRootFree(d.data(), e.data(), 3), 0);
  EXPECT_EQ(d, (std::vector<double>{3.0, -1.0, 2.0}));

  std::vector<double> ds = {2.0, 1.0, 5.0, 4.0}, es = {1.0, 0.0, 1.0, 0.0};
  ASSERT_GE(QlValuesRootFree(ds.data(), es.data(), 4), 0);
  std::sort(ds.begin(), ds.end());
  const double r = std::sqrt(5.0) / 2;  // each 2 x 2 [[a, 1], [1, a - 1]]: a - 1/2 -+ sqrt(5)/2
  const std::vector<double> want = {1.5 - r, 1.5 + r, 4.5 - r, 4.5 + r};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(ds[i], want[i], 1e-15 * 8) << i;

  std::vector<double> dz(4, 0.0), ez(4, 0.0);
  EXPECT_EQ(QlValuesRootFree(dz.data(), ez.data(), 4), 0);
  EXPECT_EQ(dz, std::vector<double>(4, 0.0));

  std::vector<double> d1 = {7.0}, e1 = {0.0};
  EXPECT_EQ(QlValuesRootFree(d1.data(), e1.data(), 1), 0);
  EXPECT_EQ(d1[0], 7.0);

  std::vector<double> d2 = {2.0, 2.0}, e2 = {1.0, 0.0};
  ASSERT_GE(QlValuesRootFree(d2.data(), e2.data(), 2), 1);
  std::sort(d2.begin(), d2.end());
  EXPECT_NEAR(d2[0], 1.0, 1e-15);
  EXPECT_NEAR(d2[1], 3.0, 1e-15);

  std::vector<double> dn = {1.0, NAN, 2.0}, en = {0.5, 0.5, 0.0};
  EXPECT_EQ(QlValuesRootFree(dn.data(), en.data(), 3), -1);
}

// As the square-root QL's on the same graded T: fewer sweeps than eigenvalues' worth of
// the iteration limit (a wrong deflation test shows as kQlMaxIter sweeps per value).
TEST(RootFreeQl, SweepsOnGradedTAsTheSquareRootQl) {
  for (int seed = 1; seed <= 4; ++seed) {
    const spexd::testing::GradedT t = spexd::testing::GradedTridiagonal(seed, 100.0);
    std::vector<double> d1 = t.d, e1 = t.e, d2 = t.d, e2 = t.e;
    const int rf = RootFreeOriented(&d1, &e1);
    const int sq = QlValuesOriented(d2.data(), e2.data(), static_cast<int>(d2.size()));
    ASSERT_GE(rf, 0);
    EXPECT_LE(rf, sq + sq / 10 + 2) << "seed " << seed;
  }
}

}  // namespace
}  // namespace spexd::cuda
