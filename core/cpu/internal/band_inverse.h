// The diagonal blocks of C = M^-1 from M's banded Cholesky factor, by selected inversion
// inside the band (extraction-spec §2.10 step 1: only C's diagonal blocks are ever used).
#ifndef SPEXD_CORE_CPU_BAND_INVERSE_H_
#define SPEXD_CORE_CPU_BAND_INVERSE_H_

namespace spexd::core {

// The factor L (n x n, L[i, j] = 0 for i - j > kd) in dense lower storage, as
// BandCholeskyFactor (band_cholesky.h) leaves it: L[i, j] at l[i + j * ld]. Only the band
// (i - j <= kd) is read: storage beyond it may hold anything.
struct BandFactor {
  const double* l = nullptr;
  int ld = 0;
  int n = 0;
  int kd = 0;
};

// Writes C[J, J] (complete: both triangles, exactly symmetric) for every block
// J = [j * block, (j + 1) * block) with j >= first_block, into c (column-major, leading
// dimension ldc >= n), and below it C[i, J] for i < min(n, j * block + kd) (mirrored
// above): so a diagonal block of d >= block unknowns made of whole blocks is complete
// too when d <= kd.
// Requires n to be a multiple of block. Single-threaded BLAS calls on the calling thread.
// `z` is scratch of BandInverseScratchSize(kd, block) doubles, not touched by other calls.
inline int BandInverseScratchSize(int kd, int block) { return (kd + 2 * block) * block; }
void BandInverseDiagonalBlocks(const BandFactor& factor, int block, int first_block, double* c,
                               int ldc, double* z);

}  // namespace spexd::core

#endif  // SPEXD_CORE_CPU_BAND_INVERSE_H_
