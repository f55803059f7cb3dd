// Enqueues one run of patches (a batch, or the retry of its failed patches) through the
// whole per-patch pipeline on the context's compute stream (extraction-spec §2.7–2.11):
// normal equations -> regularisation -> batched Cholesky and solve -> C's core diagonal
// blocks -> inverse square roots and decorrelation -> pixel model, chi2, pixmask.
#ifndef SPEXD_CUDA_PATCH_PIPELINE_H_
#define SPEXD_CUDA_PATCH_PIPELINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "cuda/kernels/batch_layout.h"
#include "cuda/host/gpu_context.h"
#include "cuda/kernels/kernel_args.h"
#include "cuda/host/workspace.h"

namespace spexd::core {
struct PatchPlan;
}

namespace spexd::cuda {

struct RunResources {
  const GpuContext* ctx;
  Workspace* workspace;    // the QL buffers
  WorkspaceSet* set;       // stage events
  const uint64_t* d_ptrs;  // device copy of layout.ptrs
  int max_blocks;          // MaxBlocks(plan)
  bool record_marks;       // record the StageMark events
  // Stream of the run's tail (QL, rotation, products, model): ctx->tail() lets it overlap
  // the next run's factorisations, ctx->compute() keeps the run on one stream. The caller
  // orders what follows the run after `tail`.
  cudaStream_t tail;
  // The tridiagonal reduction on `tail` too (the lone-frame latency mode).
  bool reduce_on_tail = false;
};

// Enqueues the run; `args.entries` must be the device copy of layout.entries. Nothing is
// synchronised or allocated. Returns INTERNAL on a launch or library error.
absl::Status EnqueueRun(const RunResources& res, const RunLayout& layout, const RunArgs& args);

// EnqueueRun in two parts: the normal equations need only the entries (and their device
// copy in args), so that a caller can launch them before it builds the rest of the layout
// (BuildRunLayout: ~1 ms of host time a batch, which delayed a frame's first kernels), then
// the rest with the layout of the same entries and its pointer arrays on the device.
// On `stream` (the compute stream, or the prep stream that runs a batch's normal
// equations ahead; the caller orders the compute stream after it).
absl::Status EnqueueNormalEquations(const RunResources& res, const std::vector<RunEntry>& entries,
                                    const RunArgs& args, cudaStream_t stream);
absl::Status EnqueueAfterNormalEquations(const RunResources& res, const RunLayout& layout,
                                         const RunArgs& args);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_PATCH_PIPELINE_H_
