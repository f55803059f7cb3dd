// Test-only fault injection for the CUDA backend (the GPU failure paths run on
// a real GPU). Configured by the environment variable SPEXD_TEST_CUDA_FAULTS, read with
// the other switches (cuda/host/diagnostics.h) when a CUDA backend is created (so that no production option or flag carries it), holding a
// comma-separated list; unset in production, where every hook is one untaken branch:
//   oom_at_alloc=N        the Nth device allocation of the process asks the driver for
//                         more memory than the device has: a genuine
//                         cudaErrorMemoryAllocation, once
//   transient_at_request=N  request N (1-based, per backend) fails before its first batch
//                         with a non-sticky error, once (the retry succeeds)
//   sticky_at_request=N   request N launches a kernel that traps: a genuine sticky error
//                         (cudaErrorLaunchFailure) that ruins the CUDA context
//   fail_patch_once=P     the first run of patches that holds plan patch P (0-based index
//                         into PatchPlan::patches) gets NaN on the diagonal of P's normal
//                         matrix after regularisation, so that P's solve fails as a
//                         non-finite or non-SPD system would; the backend then retries P
//                         with core::kRetryRegularize (extraction-spec §2.15), which
//                         succeeds. Once per process
//   perturb_bundle_flux=B bundle B (plan index) of every request is handed to the sink
//                         with each spectrum's peak raised by 1e-6 of it
//                         (core::PerturbBundleFlux): a wrong result that the shadow
//                         parity check must flag
//   poison_allocations=1  every device allocation of the process from then on (until a
//                         backend is created without it) is filled with 0xFF bytes, NaN
//                         as doubles: a kernel that reads workspace nothing wrote shows
//   batch_bundles=N       at most N bundles a batch (a test setting, not a fault: small
//                         batches make a request's batches reuse the two workspace sets,
//                         the races between a batch's retry and the next batch's download)
//   shared_memory_cap=B   the planner and the launchers allow at most B bytes of shared
//                         memory a block (device_limits.h; 166912 is an A100's): an H100
//                         then plans and launches as a GPU with less shared memory would.
//                         Process-wide, set by every backend's creation (none without it:
//                         the last backend created decides for all)
//   warm_geometries=N     a backend keeps at most N geometries warm (a test setting:
//                         with few, a new geometry takes over an evicted one's buffers,
//                         which device memory alone would rarely make it do)
//   special_resolution=1  each batch's first resolution values are overwritten, before
//                         their download, by NaNs of both signs and several payloads,
//                         infinities, signed zeros, denormals and values at float32's
//                         limits (kSpecialResolution), so that the device's narrowing to
//                         the frame file's bytes meets every case the host's does
#ifndef SPEXD_CUDA_FAULT_INJECTION_H_
#define SPEXD_CUDA_FAULT_INJECTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/kernels/batch_layout.h"
#include "cuda/kernels/fault_kernels.h"
#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

struct FaultPlan {
  int64_t oom_at_alloc = 0;  // 0: never
  int transient_at_request = 0;
  int sticky_at_request = 0;
  int64_t fail_patch_once = -1;  // -1: never
  int perturb_bundle_flux = -1;  // -1: never
  bool poison_allocations = false;
  int batch_bundles = 0;  // 0: the planner's batch size
  int64_t shared_memory_cap = 0;  // 0: the device's limit
  int warm_geometries = 0;  // 0: as device memory allows (warm_geometries.h)
  bool special_resolution = false;
};

// The values special_resolution writes at the start of a batch's resolution output.
extern const double kSpecialResolution[];
extern const int kSpecialResolutionCount;

// An empty plan for an empty spec; INVALID_ARGUMENT naming an unknown or bad item.
absl::StatusOr<FaultPlan> ParseFaultPlan(const std::string& spec);

// Arms the allocation fault (process-wide: allocations are counted in cuda/host/memory.cc).
void ArmAllocationFault(int64_t at_allocation);

// Sets or clears the allocation poison (process-wide, in cuda/host/memory.cc).
void ArmAllocationPoison(bool on);

// Arms the patch fault (process-wide, like the allocation fault: runs are enqueued by the
// batch pipeline, which knows no plan of faults).
void ArmPatchFault(int64_t patch);

// The patch hook, called by EnqueueRun after the normal equations are regularised, on
// their stream. Returns a launch error, or OK.
absl::Status InjectPatchFault(const std::vector<RunEntry>& entries, const RunArgs& args,
                              cudaStream_t stream);

// The request hook, called by CudaBackend once per request before the first batch, on
// the request's compute stream. Returns the injected error, or OK.
absl::Status InjectRequestFault(const FaultPlan& plan, int request, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_FAULT_INJECTION_H_
