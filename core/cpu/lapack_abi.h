// The BLAS/LAPACK routines the CPU backend calls, with their Fortran ABI (gfortran hidden
// string lengths included), so that any liblapack.so.3/libblas.so.3 (OpenBLAS or
// reference) serves without a cblas/lapacke header flavour. Public (not in internal/)
// because a program may supply these symbols itself: spexctl forwards them to a LAPACK it
// opens only for a local extraction (client/spexctl/lapack_on_demand.cc), checked against these
// very declarations.
#ifndef SPEXD_CORE_CPU_LAPACK_ABI_H_
#define SPEXD_CORE_CPU_LAPACK_ABI_H_

#include <cstddef>

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             double* b, const int* ldb, int* info, std::size_t);
void dpbtrf_(const char* uplo, const int* n, const int* kd, double* ab, const int* ldab, int* info,
             std::size_t);
void dpbtrs_(const char* uplo, const int* n, const int* kd, const int* nrhs, const double* ab,
             const int* ldab, double* b, const int* ldb, int* info, std::size_t);
void dsymm_(const char* side, const char* uplo, const int* m, const int* n, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta,
            double* c, const int* ldc, std::size_t, std::size_t);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const int* m, const int* n, const double* alpha, const double* a, const int* lda,
            double* b, const int* ldb, std::size_t, std::size_t, std::size_t, std::size_t);
void dtrmm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const int* m, const int* n, const double* alpha, const double* a, const int* lda,
            double* b, const int* ldb, std::size_t, std::size_t, std::size_t, std::size_t);
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* beta, double* c, const int* ldc,
            std::size_t, std::size_t);
void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc, std::size_t, std::size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda,
             double* w, double* work, const int* lwork, int* iwork, const int* liwork, int* info,
             std::size_t, std::size_t);
}

#endif  // SPEXD_CORE_CPU_LAPACK_ABI_H_
