// The BLAS/LAPACK routines the CPU backend uses (declared in core/cpu/lapack_abi.h) and
// how it runs them.
#ifndef SPEXD_CORE_LAPACK_H_
#define SPEXD_CORE_LAPACK_H_

#include <cstddef>

#include "core/cpu/lapack_abi.h"

namespace spexd::core {
// Makes a multi-threaded BLAS (OpenBLAS) run each call on the calling thread only: the
// backend parallelises over patches, and single-threaded calls keep results independent
// of the thread count. No-op for a single-threaded BLAS.
void UseSingleThreadedBlas();
}  // namespace spexd::core

#endif  // SPEXD_CORE_LAPACK_H_
