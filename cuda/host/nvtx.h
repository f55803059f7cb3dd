// NVTX ranges (header-only NVTX v3 from the CUDA toolkit) in the "spexd" domain, so that
// Nsight Systems shows each stage of an extraction by name on the host thread that
// enqueues it and, projected, on the GPU kernels it launches (docs/performance.md).
// Without a profiler attached a range costs one call through a null-checked pointer.
#ifndef SPEXD_CUDA_NVTX_H_
#define SPEXD_CUDA_NVTX_H_

#include <nvtx3/nvtx3.hpp>

namespace spexd::cuda {

struct NvtxDomain {
  static constexpr const char* name{"spexd"};
};

// Usage: `NvtxRange range{"cholesky"};` covers the enclosing scope.
using NvtxRange = nvtx3::scoped_range_in<NvtxDomain>;

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_NVTX_H_
