// A random symmetric positive definite matrix for the eigen-solver's tests and benchmark
// (tests/core/cpu/lane_eigen_test.cc, tests/bench/lane_eigen_bench.cc).
#ifndef SPEXD_TESTS_RANDOM_SPD_H_
#define SPEXD_TESTS_RANDOM_SPD_H_

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace spexd::testing {

// A random symmetric positive definite matrix with eigenvalues spread log-uniformly over
// `decades` decades (the decorrelation's C_ss blocks are SPD, often ill-conditioned).
inline std::vector<double> RandomSpd(int n, double decades, std::mt19937_64* rng) {
  std::normal_distribution<double> normal;
  std::vector<double> q(static_cast<std::size_t>(n) * n);
  for (double& x : q) x = normal(*rng);
  // Orthonormalise the columns (modified Gram-Schmidt, twice).
  for (int pass = 0; pass < 2; ++pass) {
    for (int j = 0; j < n; ++j) {
      for (int k = 0; k < j; ++k) {
        double dot = 0;
        for (int i = 0; i < n; ++i) dot += q[i + k * n] * q[i + j * n];
        for (int i = 0; i < n; ++i) q[i + j * n] -= dot * q[i + k * n];
      }
      double nrm = 0;
      for (int i = 0; i < n; ++i) nrm += q[i + j * n] * q[i + j * n];
      nrm = std::sqrt(nrm);
      for (int i = 0; i < n; ++i) q[i + j * n] /= nrm;
    }
  }
  std::vector<double> a(static_cast<std::size_t>(n) * n, 0.0);
  for (int k = 0; k < n; ++k) {
    const double lam = std::pow(10.0, -decades * k / std::max(1, n - 1));
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < n; ++i) a[i + j * n] += lam * q[i + k * n] * q[j + k * n];
    }
  }
  return a;
}

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_RANDOM_SPD_H_
