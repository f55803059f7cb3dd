// Symmetric eigen-decompositions of several small matrices at once, one per SIMD lane
// (issue 25, CPU): the decorrelation's C_ss^{-1/2} (spec §2.10 step 2) needs one 74x74
// eigen-decomposition per spectrum of a patch, and LAPACK's dsyevd, one block at a time,
// was half of a CPU frame. Here every step (Householder tridiagonalisation, forming its
// orthogonal factor, implicit QL with Wilkinson shifts) runs on kLanes matrices in the
// lanes of one vector, so that the scalar recurrences of QL are shared too.
#ifndef SPEXD_CORE_CPU_INTERNAL_LANE_EIGEN_H_
#define SPEXD_CORE_CPU_INTERNAL_LANE_EIGEN_H_

#include <vector>

namespace spexd::core::internal {

class LaneEigen {
 public:
  static constexpr int kLanes = 4;

  explicit LaneEigen(int n);
  int n() const { return n_; }

  // Lane l < count takes the lower triangle of the n x n matrix at src[l] (column-major,
  // leading dimension ld); lanes from count on take the identity. Each lane is scaled by a
  // power of two (exact) so that the QL recurrences neither overflow nor underflow.
  void Load(const double* const* src, int ld, int count);

  // A = V diag(w) V^T for every loaded lane. Returns a bit per lane that converged (bit l
  // for lane l); a lane whose QL iteration did not converge, or whose values are not
  // finite, has its bit clear and the caller decomposes it another way.
  unsigned Decompose();

  // Lane l's eigenvalues (n, unsorted) and eigenvectors (column j of `vectors`, column-major
  // n x n, for values[j]), after Decompose.
  void Export(int lane, double* values, double* vectors) const;

 private:
  int n_;
  // Lane-interleaved storage: element (i, j) of lane l at [(i + j * n) * kLanes + l].
  std::vector<double> a_, z_, d_, e_, tau_, work_, rot_c_, rot_s_;
  double scale_[kLanes];
};

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_LANE_EIGEN_H_
