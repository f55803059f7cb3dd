#include "core/cpu/internal/small_gemm.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/cpu/internal/lapack.h"

#include "core/cpu/internal/lane_vec.h"
#include "core/cpu/internal/simd_level.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace spexd::core::internal {
namespace {

#if defined(__x86_64__)
#define SPEXD_AVX512 __attribute__((target("avx512f")))

// One tile of C: rows [0, 8 RV) (the rows from `rows` on masked off where MASKED), NC
// columns, summed over all k in registers (RV * NC accumulators; 24 of the 32 registers
// at RV = 3, NC = 8), then stored or added into C.
template <int RV, int NC, bool MASKED>
SPEXD_AVX512 inline __attribute__((always_inline)) void Tile(int rows, int k, const double* a,
                                                             int lda, const double* b, int ldb,
                                                             bool add, double* c, int ldc) {
  __m512d acc[RV][NC];
  __mmask8 mask[RV];
  SPEXD_UNROLL_LANES
  for (int r = 0; r < RV; ++r) {
    const int left = std::clamp(rows - 8 * r, 0, 8);
    mask[r] = static_cast<__mmask8>((1u << left) - 1);
    SPEXD_UNROLL_LANES
    for (int j = 0; j < NC; ++j) acc[r][j] = _mm512_setzero_pd();
  }
  for (int p = 0; p < k; ++p) {
    const double* ap = a + static_cast<std::size_t>(p) * lda;
    __m512d av[RV];
    SPEXD_UNROLL_LANES
    for (int r = 0; r < RV; ++r) {
      av[r] = MASKED ? _mm512_maskz_loadu_pd(mask[r], ap + 8 * r) : _mm512_loadu_pd(ap + 8 * r);
    }
    SPEXD_UNROLL_LANES
    for (int j = 0; j < NC; ++j) {
      const __m512d bv = _mm512_set1_pd(b[p + static_cast<std::size_t>(j) * ldb]);
      SPEXD_UNROLL_LANES
      for (int r = 0; r < RV; ++r) acc[r][j] = _mm512_fmadd_pd(av[r], bv, acc[r][j]);
    }
  }
  SPEXD_UNROLL_LANES
  for (int j = 0; j < NC; ++j) {
    double* cj = c + static_cast<std::size_t>(j) * ldc;
    SPEXD_UNROLL_LANES
    for (int r = 0; r < RV; ++r) {
      if (MASKED) {
        const __m512d old = add ? _mm512_maskz_loadu_pd(mask[r], cj + 8 * r) : _mm512_setzero_pd();
        _mm512_mask_storeu_pd(cj + 8 * r, mask[r], add ? _mm512_add_pd(old, acc[r][j]) : acc[r][j]);
      } else {
        _mm512_storeu_pd(cj + 8 * r,
                         add ? _mm512_add_pd(_mm512_loadu_pd(cj + 8 * r), acc[r][j]) : acc[r][j]);
      }
    }
  }
}

// NC columns of C, all m rows: tiles of 24 rows, then one masked tile.
template <int NC>
SPEXD_AVX512 void Columns(int m, int k, const double* a, int lda, const double* b, int ldb,
                          bool add, double* c, int ldc) {
  int i = 0;
  for (; i + 24 <= m; i += 24) Tile<3, NC, false>(24, k, a + i, lda, b, ldb, add, c + i, ldc);
  if (i < m) Tile<3, NC, true>(m - i, k, a + i, lda, b, ldb, add, c + i, ldc);
}

SPEXD_AVX512 void GemmAvx512(int m, int n, int k, const double* a, int lda, const double* b,
                             int ldb, bool add, double* c, int ldc) {
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    Columns<8>(m, k, a, lda, b + static_cast<std::size_t>(j) * ldb, ldb, add,
               c + static_cast<std::size_t>(j) * ldc, ldc);
  }
  const double* bj = b + static_cast<std::size_t>(j) * ldb;
  double* cj = c + static_cast<std::size_t>(j) * ldc;
  switch (n - j) {
    case 7: Columns<7>(m, k, a, lda, bj, ldb, add, cj, ldc); break;
    case 6: Columns<6>(m, k, a, lda, bj, ldb, add, cj, ldc); break;
    case 5: Columns<5>(m, k, a, lda, bj, ldb, add, cj, ldc); break;
    case 4: Columns<4>(m, k, a, lda, bj, ldb, add, cj, ldc); break;
    case 3: Columns<3>(m, k, a, lda, bj, ldb, add, cj, ldc); break;
    case 2: Columns<2>(m, k, a, lda, bj, ldb, add, cj, ldc); break;
    case 1: Columns<1>(m, k, a, lda, bj, ldb, add, cj, ldc); break;
    default: break;
  }
}
#endif

}  // namespace

bool SmallGemmNN(int m, int n, int k, const double* a, int lda, const double* b, int ldb,
                 double beta, double* c, int ldc) {
#if defined(__x86_64__)
  if (!SimdLevelAvailable(SimdLevel::kAvx512) || (beta != 0.0 && beta != 1.0)) return false;
  if (m <= 0 || n <= 0) return true;
  GemmAvx512(m, n, k, a, lda, b, ldb, beta == 1.0, c, ldc);
  return true;
#else
  (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  return false;
#endif
}

void Gemm(const char* ta, const char* tb, int m, int n, int k, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc) {
  if (tb[0] == 'N' && SimdLevelAvailable(SimdLevel::kAvx512)) {
    if (ta[0] == 'N' && SmallGemmNN(m, n, k, a, lda, b, ldb, beta, c, ldc)) return;
    if (ta[0] == 'T') {
      thread_local std::vector<double> at;
      at.resize(static_cast<std::size_t>(m) * k);
      for (int p = 0; p < k; ++p) {
        for (int i = 0; i < m; ++i) {
          at[i + static_cast<std::size_t>(p) * m] = a[p + static_cast<std::ptrdiff_t>(i) * lda];
        }
      }
      if (SmallGemmNN(m, n, k, at.data(), std::max(m, 1), b, ldb, beta, c, ldc)) return;
    }
  }
  constexpr std::size_t kOne = 1;  // hidden Fortran string length
  const double one = 1.0;
  dgemm_(ta, tb, &m, &n, &k, &one, a, &lda, b, &ldb, &beta, c, &ldc, kOne, kOne);
}

}  // namespace spexd::core::internal
