#include "core/cpu/internal/relative_eigen.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/cpu/internal/small_gemm.h"
#include "core/numerics/tridiag_eigen.h"
#include "core/numerics/tridiag_vectors.h"

namespace spexd::core::internal {
namespace {

// As the GPU's TwistedKernel (kTwistedMaxDeviation): vectors further from orthonormal come
// from close eigenvalues, where one Newton-Schulz step is not enough.
constexpr double kMaxDeviation = 1e-8;

std::size_t Sq(int n) { return static_cast<std::size_t>(n) * static_cast<std::size_t>(n); }

// C = A B, n x n column-major (A with leading dimension lda): by the AVX-512 kernel where
// the CPU has it (small_gemm.h; these products were a third of the path's time), else in
// loops.
void Product(int n, const double* a, int lda, const double* b, double* c) {
  if (SmallGemmNN(n, n, n, a, lda, b, n, 0.0, c, n)) return;
  std::fill(c, c + Sq(n), 0.0);
  for (int j = 0; j < n; ++j) {
    double* cj = c + static_cast<std::size_t>(j) * n;
    for (int k = 0; k < n; ++k) {
      const double bk = b[static_cast<std::size_t>(j) * n + k];
      const double* ak = a + static_cast<std::size_t>(k) * lda;
      for (int r = 0; r < n; ++r) cj[r] += ak[r] * bk;
    }
  }
}

}  // namespace

RelativeEigen::RelativeEigen(int n)
    : n_(n), lda_(n + 1), s_(static_cast<std::size_t>(n + 1) * n), d_(n), e_(n), tau_(n), v_(n),
      w_(n), d0_(n), e0_(n), z_(Sq(n)), p_(Sq(n)), zp_(Sq(n)), um_(n) {}

bool RelativeEigen::Decompose(const double* lower, int ld, double* vals, double* vecs) {
  using namespace ::spexd::core::tridiag;
  const int n = n_, lda = lda_;
  for (int c = 0; c < n; ++c) {  // both triangles, as the reduction reads them
    for (int r = c; r < n; ++r) {
      const double x = lower[r + static_cast<std::size_t>(c) * ld];
      s_[static_cast<std::size_t>(c) * lda + r] = x;
      s_[static_cast<std::size_t>(r) * lda + c] = x;
    }
  }
  SerialTeam team;
  double scalar = 0.0;
  HouseholderTridiagonalize(team, s_.data(), lda, n, d_.data(), e_.data(), tau_.data(), v_.data(),
                            w_.data(), &scalar);
  FormReflectorProduct(team, s_.data(), lda, n, tau_.data(), w_.data());  // s_ = H
  d0_ = d_;
  e0_ = e_;
  if (QlValuesOriented(d_.data(), e_.data(), n) < 0) return false;
  const double tnorm = TridiagonalNorm(d0_.data(), e0_.data(), n);
  double* z = z_.data();
  for (int pass = 0; pass < 2; ++pass) {  // a second pass where a quotient moved
    bool moved = false;
    for (int j = 0; j < n; ++j) {
      const double before = d_[j];
      double* zj = z + static_cast<std::size_t>(j) * n;
      if (TwistedEigenvector(d0_.data(), e0_.data(), n, before, tnorm, zj, 1, um_.data(), 1,
                             &d_[j]) < 0) {
        return false;
      }
      moved = moved || !(std::fabs(d_[j] - before) <= kTwistedRedoShift * std::fabs(before));
    }
    if (!moved) break;
  }
  // P = (3I - Z^T Z) / 2 where max |Z^T Z - I| <= kMaxDeviation.
  double* p = p_.data();
  double* zt = zp_.data();  // Z^T first, then Z P
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < n; ++r) {
      zt[static_cast<std::size_t>(r) * n + c] = z[static_cast<std::size_t>(c) * n + r];
    }
  }
  Product(n, zt, n, z, p);  // G = Z^T Z
  for (int c = 0; c < n; ++c) {
    for (int i = 0; i < n; ++i) {
      double& g = p[static_cast<std::size_t>(c) * n + i];
      const double dev = g - (c == i ? 1.0 : 0.0);
      if (!(std::fabs(dev) <= kMaxDeviation)) return false;
      g = (c == i ? 1.0 : 0.0) - 0.5 * dev;
    }
  }
  Product(n, z, n, p, zp_.data());          // Z P
  Product(n, s_.data(), lda, zp_.data(), vecs);  // V = H (Z P)
  std::copy(d_.begin(), d_.end(), vals);
  return true;
}

}  // namespace spexd::core::internal
