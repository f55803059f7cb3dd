// Symmetric eigen-decompositions of several small matrices at once, one per SIMD lane
// (CPU backend): the decorrelation's C_ss^{-1/2} (spec §2.10 step 2) needs one 74x74
// eigen-decomposition per spectrum of a patch, and LAPACK's dsyevd, one block at a time,
// was half of a CPU frame. Here every step (Householder tridiagonalisation, forming its
// orthogonal factor, implicit QL with Wilkinson shifts) runs on lanes() matrices in the
// lanes of one vector, so that the scalar recurrences of QL are shared too: 8 with
// AVX-512 (whose two 512-bit FMA units on Intel cores double the arithmetic per cycle),
// else 4 (AVX2 + FMA, or the baseline copy). A lane's arithmetic is the same whatever the
// width, so its bits do not depend on the lanes beside it.
#ifndef SPEXD_CORE_CPU_INTERNAL_LANE_EIGEN_H_
#define SPEXD_CORE_CPU_INTERNAL_LANE_EIGEN_H_

#include <vector>

namespace spexd::core::internal {

class LaneEigen {
 public:
  static constexpr int kMaxLanes = 8;

  // `lanes` = 0: the widest this CPU runs (WidestLanes()); 4 or 8 asks for that width (8
  // only where the CPU has AVX-512, else 4).
  explicit LaneEigen(int n, int lanes = 0);
  LaneEigen(const LaneEigen&) = delete;  // the array pointers point into buffer_
  LaneEigen& operator=(const LaneEigen&) = delete;
  int n() const { return n_; }
  int lanes() const { return lanes_; }
  static int WidestLanes();

  // Lane l < count (<= lanes()) takes the lower triangle of the n x n matrix at src[l] (column-major,
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
  int lanes_;
  // Lane-interleaved storage: element (i, j) of lane l at [(i + j * n) * lanes_ + l]. One
  // buffer, each array starting on a 64-byte line: a vector read that splits two cache
  // lines costs twice (the solver ran 1.7x slower from std::vector's 16-byte alignment).
  std::vector<double> buffer_;
  double *a_, *z_, *d_, *e_, *tau_, *work_, *rot_c_, *rot_s_;
  double scale_[kMaxLanes];
};

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_LANE_EIGEN_H_
