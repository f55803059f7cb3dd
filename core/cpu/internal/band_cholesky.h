// Cholesky factor and solve of the patch matrix M (SPD, bandwidth kd) held in dense lower
// storage (spec §2.9: any backward-stable SPD solver). Blocked by kBlock columns as
// LAPACK's dpbtrf, whose trailing updates are the same products; here they run through
// SmallGemmNN (small_gemm.h) where the CPU has AVX-512, 2.3x OpenBLAS's Haswell kernels,
// which dpbtrf's calls get where the environment forces them;
// elsewhere one dsyrk a block, as in dpbtrf.
#ifndef SPEXD_CORE_CPU_INTERNAL_BAND_CHOLESKY_H_
#define SPEXD_CORE_CPU_INTERNAL_BAND_CHOLESKY_H_

#include <vector>

namespace spexd::core::internal {

inline constexpr int kBandCholeskyBlock = 32;

// Rows below the diagonal, per column, that the factorisation reads: kd + kBandCholeskyBlock
// (a block's panel reaches kd rows past its last column). Entries of M there outside the
// band must be zero.
inline int BandCholeskyReach(int kd) { return kd + kBandCholeskyBlock; }

// M = L L^T in place: a (column-major, leading dimension lda >= n) holds M's lower triangle
// within BandCholeskyReach(kd) of the diagonal (zeros outside the band) and gets L's.
// False where M is not positive definite. `scratch` grows as needed. `small_gemm` = false
// keeps the trailing updates in the BLAS, as on a CPU without AVX-512 (tests).
bool BandCholeskyFactor(int n, int kd, double* a, int lda, std::vector<double>* scratch,
                        bool small_gemm = true);

// Solves L L^T x = b in place (x holds b), L from BandCholeskyFactor.
void BandCholeskySolve(int n, int kd, const double* l, int lda, double* x);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_BAND_CHOLESKY_H_
