// Test-only fault injection for the CUDA backend (issue 10: the GPU failure paths run on
// a real GPU). Configured by the environment variable SPEXD_TEST_CUDA_FAULTS, read when a
// CUDA backend is created (so that no production option or flag carries it), holding a
// comma-separated list; unset in production, where every hook is one untaken branch:
//   oom_at_alloc=N        the Nth device allocation of the process asks the driver for
//                         more memory than the device has: a genuine
//                         cudaErrorMemoryAllocation, once
//   transient_at_request=N  request N (1-based, per backend) fails before its first batch
//                         with a non-sticky error, once (the retry succeeds)
//   sticky_at_request=N   request N launches a kernel that traps: a genuine sticky error
//                         (cudaErrorLaunchFailure) that ruins the CUDA context
#ifndef SPEXD_CUDA_FAULT_INJECTION_H_
#define SPEXD_CUDA_FAULT_INJECTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spexd::cuda {

struct FaultPlan {
  int64_t oom_at_alloc = 0;  // 0: never
  int transient_at_request = 0;
  int sticky_at_request = 0;
};

absl::StatusOr<FaultPlan> ParseFaultPlan(const std::string& spec);
// ParseFaultPlan(getenv("SPEXD_TEST_CUDA_FAULTS")); an empty plan when unset.
absl::StatusOr<FaultPlan> FaultPlanFromEnvironment();

// Arms the allocation fault (process-wide: allocations are counted in cuda/memory.cc).
void ArmAllocationFault(int64_t at_allocation);

// The request hook, called by CudaBackend once per request before the first batch, on
// the request's compute stream. Returns the injected error, or OK.
absl::Status InjectRequestFault(const FaultPlan& plan, int request, cudaStream_t stream);

// Launches a one-thread kernel that executes a trap instruction (fault_kernels.cu).
void LaunchTrapKernel(cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_FAULT_INJECTION_H_
