#include "core/cpu/internal/relative_eigen.h"

#include <algorithm>
#include <cstddef>

#include "core/cpu/internal/small_gemm.h"
#include "core/numerics/tridiag_eigen.h"
#include "core/numerics/tridiag_vectors.h"

namespace spexd::core::internal {
namespace {

std::size_t Sq(int n) { return static_cast<std::size_t>(n) * static_cast<std::size_t>(n); }

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
  double* z = z_.data();
  if (!TwistedVectorsSerial(d0_.data(), e0_.data(), n, d_.data(), z, n, um_.data())) return false;
  // Z <- Z P (one Newton-Schulz step), then V = H Z; the products by small_gemm.h's Gemm
  // (the AVX-512 kernel where the CPU has it: they were a third of this path's time).
  double* p = p_.data();
  Gemm("T", "N", n, n, n, z, n, z, n, 0.0, p, n);  // G = Z^T Z
  if (!NewtonSchulzFactor(p, n)) return false;
  Gemm("N", "N", n, n, n, z, n, p, n, 0.0, zp_.data(), n);
  Gemm("N", "N", n, n, n, s_.data(), lda, zp_.data(), n, 0.0, vecs, n);
  std::copy(d_.begin(), d_.end(), vals);
  return true;
}

}  // namespace spexd::core::internal
