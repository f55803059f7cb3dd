// BatchExtractor's choices for this backend and device, and the addresses and arguments
// of a batch's run built from them (the rest of the class: batch_extractor.cc).
#include "cuda/host/batch_extractor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cuda/host/cuda_check.h"
#include "cuda/kernels/decorrelation.h"
#include "cuda/kernels/device_limits.h"
#include "cuda/kernels/tiled_cholesky.h"

namespace spexd::cuda {

// The run's largest blocks of shared memory for patches of nt: the tiled factor, its panel
// and the decorrelation (the other kernels take less: the normal equations aim at 72 KB,
// normal_equations.cu, most others stay within 48 KB). 113384 bytes for the r, b and z
// frames' nt = 74; within an A100's 166912 bytes a block for nt <= 109 and an H100's for
// every nt the geometry takes (kTiledMaxNt). A device or a test's cap (device_limits.h)
// with less refuses the request here, before any launch.
absl::Status BatchExtractor::CheckSharedMemory(int nt) const {
  const std::size_t limit = SharedMemoryPerBlock(cfg_.ctx->device());
  if (limit == 0) return absl::InternalError("CUDA backend: the device's shared memory per block is unknown");
  const std::size_t need =
      std::max({TiledCholeskySharedBytes(nt), PanelSolveSharedBytes(nt), DecorrelationSharedBytes(nt)});
  if (need > limit) {
    return absl::UnimplementedError(absl::StrCat(
        "CUDA backend: patches of nwavetot ", nt, " need ", need, " bytes of shared memory a block; ",
        cfg_.ctx->device_name(), " allows ", limit));
  }
  return absl::OkStatus();
}

// gemm 1 of the trailing-first inversion in the DMMA panel kernel where nt is within the
// DMMA panel's tiles (else batched GEMMs).
bool BatchExtractor::PanelP() const { return cfg_.plan->nwavetot <= kPanelDmmaMaxNt; }

// The tiled factor's diagonal updates in the factor kernel (RunArgs::diag_update) where
// nt allows, else batched GEMMs with the blocks below.
bool BatchExtractor::DiagUpdateInFactor() const { return cfg_.plan->nwavetot <= kFactorUpdateMaxNt; }

LayoutChoices BatchExtractor::Choices() const {
  LayoutChoices c;
  c.diag_update_in_factor = DiagUpdateInFactor();
  c.panel_p = PanelP();
  c.panel_update = PanelP();  // the DMMA panel kernel's (nt <= kPanelDmmaMaxNt)
  return c;
}

SlotAddresses BatchExtractor::Addresses(const WorkspaceSet& s) const {
  SlotAddresses a;
  a.m = reinterpret_cast<uint64_t>(s.m.get());
  a.x = reinterpret_cast<uint64_t>(s.x.get());
  a.t = reinterpret_cast<uint64_t>(s.t.get());
  a.c = reinterpret_cast<uint64_t>(s.c.get());
  a.ld = spec_.ld;
  a.t_stride = spec_.t_stride();
  a.p_base = spec_.p_base();
  a.p_band = spec_.p_band;
  return a;
}

RunArgs BatchExtractor::MakeArgs(const WorkspaceSet& s, int count, const core::ExtractionJob& job) const {
  RunArgs a{};
  a.dims = cfg_.state->dims();
  a.in = FrameInputs{cfg_.workspace->image(), cfg_.workspace->ivar(), cfg_.state->patches(),
                     cfg_.state->xc(), cfg_.state->yc(), cfg_.state->spots()};
  a.slots = s.Slots(spec_);
  a.ql = cfg_.workspace->ql();
  a.out = s.Outputs();
  a.entries = s.entries.get();
  a.count = count;
  a.psferr = job.psferr;
  a.want_model = job.want_model ? 1 : 0;
  a.panel_p = PanelP() ? 1 : 0;
  a.diag_update = DiagUpdateInFactor() ? 1 : 0;
  a.panel_update = PanelP() ? 1 : 0;
  return a;
}

RunResources BatchExtractor::Resources(WorkspaceSet* s, bool record_marks) const {
  RunResources r{};
  r.ctx = cfg_.ctx;
  r.workspace = cfg_.workspace;
  r.set = s;
  r.d_ptrs = s->ptrs.get();
  r.max_blocks = max_blocks_;
  r.record_marks = record_marks;
  r.reduce_on_tail = cfg_.reduce_on_tail;
  r.tail = record_marks ? cfg_.ctx->tail() : cfg_.ctx->compute();
  return r;
}

}  // namespace spexd::cuda
