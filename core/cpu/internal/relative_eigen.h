// The eigen-decomposition of one ill-conditioned block C_ss (extraction-spec §2.10 step 2)
// with its small eigenvalues and their vectors to high relative accuracy: the GPU path's
// arithmetic (core/numerics/tridiag_eigen.h, tridiag_vectors.h) run serially. Householder
// reduction to T and the reflectors' product H, QL on T oriented from its small end for the
// eigenvalues, a twisted factorisation per eigenvalue for T's vectors Z with its Rayleigh
// quotient as the eigenvalue (a second pass where one moved), one Newton-Schulz step
// Z <- Z (3I - Z^T Z) / 2, and V = H Z.
//
// Why: the SIMD lanes (lane_eigen.h) accumulate QL's rotations into the vectors, accurate
// to u ||C|| / gap; at a block's condition kappa the decorrelation's ivar then moves by up to
// ~kappa u (1.03e-12 of a fibre's largest at the first bin of an r frame, condition 1.24e4,
// where this path is within 6e-14 of an exact recomputation). It
// costs several lanes' worth a block, so the CPU backend runs it only where the
// lanes found the condition above kRelativeEigenCondition.
#ifndef SPEXD_CORE_CPU_INTERNAL_RELATIVE_EIGEN_H_
#define SPEXD_CORE_CPU_INTERNAL_RELATIVE_EIGEN_H_

#include <vector>

namespace spexd::core::internal {

// Blocks better conditioned than this keep the lanes' decomposition: their ivar error,
// ~0.8 kappa u, stays below ~4.5e-13 of a fibre's largest (3.4 % of an r frame's blocks
// are above it).
inline constexpr double kRelativeEigenCondition = 5e3;

class RelativeEigen {
 public:
  explicit RelativeEigen(int n);
  // `lower`: the block's lower triangle, column-major with leading dimension ld. On
  // success vals[0..n) and vecs (column-major n x n) hold the decomposition, in no
  // particular order; false where QL does not converge or the twisted vectors are not
  // orthonormal to 1e-8 (close eigenvalues), and the caller keeps its own: then vals and
  // vecs are left untouched.
  bool Decompose(const double* lower, int ld, double* vals, double* vecs);

 private:
  int n_, lda_;
  std::vector<double> s_, d_, e_, tau_, v_, w_, d0_, e0_, z_, p_, zp_, um_;
};

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_RELATIVE_EIGEN_H_
