// C = A B or C += A B for the band inverse's largest product (band_inverse.cc: Z = C[K, K]
// X, ~150 x 37 x 114 a block, 60 % of its multiply-adds), in AVX-512 registers: 24 x 8 tiles
// of C summed over k in order, one FMA a term. OpenBLAS's own AVX-512 kernels give the same
// bits on these shapes and about the same speed; its Haswell (AVX2) kernels, which an
// environment may force (OPENBLAS_CORETYPE), run them at less than half the speed on an
// AVX-512 CPU.
#ifndef SPEXD_CORE_CPU_INTERNAL_SMALL_GEMM_H_
#define SPEXD_CORE_CPU_INTERNAL_SMALL_GEMM_H_

namespace spexd::core::internal {

// Column-major A (m x k, lda >= m), B (k x n, ldb >= k), C (m x n, ldc >= m); beta 0 (C =
// A B) or 1 (C += A B). Returns false, touching nothing, where the CPU lacks AVX-512 (the
// caller then calls dgemm) or beta is neither 0 nor 1.
bool SmallGemmNN(int m, int n, int k, const double* a, int lda, const double* b, int ldb,
                 double beta, double* c, int ldc);

// C = op(A) B + beta C (column-major; op per ta, "N" or "T"; B per tb) by SmallGemmNN where
// the CPU has AVX-512 and tb is "N" (a transposed A copied transposed first, m x k values
// beside m n k multiply-adds, as the BLAS packs it), else by dgemm. The band inverse's and
// the relative eigen path's products.
void Gemm(const char* ta, const char* tb, int m, int n, int k, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_CPU_INTERNAL_SMALL_GEMM_H_
