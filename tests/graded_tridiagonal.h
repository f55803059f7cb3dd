// Graded tridiagonal matrices and a long-double reference for their eigenvalues: the
// eigen-solvers' relative accuracy on T shaped like the decorrelation's reduced core
// blocks (tests/cuda/kernels/tridiag_eigen_test.cc, tests/core/cpu/lane_eigen_test.cc).
#ifndef SPEXD_TESTS_GRADED_TRIDIAGONAL_H_
#define SPEXD_TESTS_GRADED_TRIDIAGONAL_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace spexd::testing {

// T (n = 74) with its large end at the top, as the reduced core blocks (d_0 ~ 8 d_end on
// real ones): d_i falls by `grade` from d_0 to d_end (times a random factor in [0.5, 1)),
// e_i = 0.45 sqrt(d_i d_i+1) times another; e[n-1] = 0. Positive definite, ||T|| < 2.
struct GradedT {
  std::vector<double> d, e;
};
inline GradedT GradedTridiagonal(uint64_t seed, double grade) {
  const int n = 74;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 1.0);
  GradedT t{std::vector<double>(n), std::vector<double>(n, 0.0)};
  for (int i = 0; i < n; ++i) t.d[i] = std::pow(grade, -static_cast<double>(i) / (n - 1)) * u(rng);
  for (int i = 0; i + 1 < n; ++i) t.e[i] = 0.45 * std::sqrt(t.d[i] * t.d[i + 1]) * u(rng);
  return t;
}

// The k-th smallest eigenvalue of T (positive definite, ||T|| < 4) by Sturm-count
// bisection in long double: ~1e-19 relative, independent of any QL.
inline long double SturmEigenvalue(const std::vector<double>& d, const std::vector<double>& e,
                                   int k) {
  const int n = static_cast<int>(d.size());
  auto below = [&](long double x) {  // eigenvalues < x
    int count = 0;
    long double q = 1;
    for (int i = 0; i < n; ++i) {
      const long double ee = i > 0 ? static_cast<long double>(e[i - 1]) * e[i - 1] : 0;
      q = static_cast<long double>(d[i]) - x - (i > 0 ? ee / q : 0);
      if (q == 0) q = 1e-4000L;
      if (q < 0) ++count;
    }
    return count;
  };
  long double lo = 0, hi = 4;
  for (int it = 0; it < 128; ++it) {
    const long double mid = (lo + hi) / 2;
    (below(mid) > k ? hi : lo) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_GRADED_TRIDIAGONAL_H_
