// Device and pinned host buffers of the CUDA backend, sized once from the patch plan
// (docs/design.md "Conventions"): two sets of per-slot buffers so that batch k+1
// computes while batch k's results are copied out and handed to the sink, the frame's
// image and ivar, and the staging used to upload them. Reserve() is grow-only and counts
// the reallocations; nothing here is allocated per patch or per batch.
#ifndef SPEXD_CUDA_WORKSPACE_H_
#define SPEXD_CUDA_WORKSPACE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/frame/extraction_result.h"
#include "core/io/plane_buffer.h"
#include "cuda/kernels/batch_layout.h"
#include "cuda/kernels/device_types.h"
#include "cuda/host/gpu_context.h"
#include "cuda/kernels/kernel_args.h"
#include "cuda/host/memory.h"

namespace spexd::cuda {

struct WorkspaceSpec {
  int ld = 0, nt = 0, nper = 0, nb = 0, max_npix = 0;
  int p_band = 0;         // LayoutChoices::panel_p: the plan's largest TrailingReadBand, else 0
  int slots = 0;          // patches per batch, skipped ones included (per set)
  int bundles = 0;        // bundles per batch
  int bundlesize = 0, nwave = 0, nk = 0;
  int64_t canvas_stride = 0;  // pixels per bundle canvas (0: no model)
  std::size_t ptr_count = 0;
  std::size_t image_pixels = 0;
  bool ql_log = false;  // QlBuffers for slots * nper blocks (tridiagonal eigensolver)
  bool ql_rotations = false;  // with their rotation log (TridiagNeedsRotationLog)
  // The job's ExtractionJob::resolution_form. Other than kFloat64, the resolution is
  // narrowed on the device to float32 words (out_rdiag_words): in big-endian order for the
  // frame file (kFileBytes), else in the host's for the float32 stream.
  core::ResolutionForm rdiags_form = core::ResolutionForm::kFloat64;
  bool rdiags_words() const { return rdiags_form != core::ResolutionForm::kFloat64; }
  // Whether some job took the float64 resolution, downloaded through the page-locked
  // h_rdiag: Workspace::Reserve sets it from rdiags_form and keeps it once set. A worker
  // that only writes frame files or float32 streams never pins that buffer (26-31 MB a
  // set for an r frame's batch of 5 or 6 bundles).
  bool host_rdiag = false;

  // The GEMM scratch: nb leaf blocks, then the panel's P_j (p_band blocks each for
  // j <= nb - 2; batch_layout.h's PanelPOffset), where LayoutChoices::panel_p.
  int64_t t_stride() const { return ScratchStride(nb, nt, p_band); }
  int64_t p_base() const { return static_cast<int64_t>(nb) * nt * nt; }
  // Device bytes of one set for one slot (used to choose the batch size).
  std::size_t SlotBytes() const;
};

// Stage boundaries recorded on the compute stream for each run.
enum StageMark : int {
  kMarkStart = 0,
  kMarkNormalEquations,
  kMarkCholesky,
  kMarkSolve,
  kMarkInverseBlocks,
  kMarkInverseSqrt,
  kMarkFinalise,
  kNumMarks
};

struct WorkspaceSet {
  DeviceBuffer<double> m, x, fw, t, c, fmodel, pix, model, cond, ldiag;
  DeviceBuffer<int32_t> status, mflags, info, eig_info;
  DeviceBuffer<uint64_t> ptrs;
  DeviceBuffer<RunEntry> entries;
  DeviceBuffer<double> out_flux, out_ivar, out_rdiag, out_pixmask, out_chi2, canvas;
  // out_rdiag as float32 words (WorkspaceSpec::rdiags_form), and per bundle the sum of the
  // frame file's words (its DATASUM's share).
  DeviceBuffer<uint32_t> out_rdiag_words;
  DeviceBuffer<unsigned long long> word_sums;
  PinnedBuffer<unsigned long long> h_word_sums;
  // The batch's resolution words, downloaded into a block of the backend's page-locked pool
  // of which the bundles hold parts (BundleResult::rdiags_file, rdiags_f32): they cross the
  // host once, as the file or the stream takes them. Held here until the set's next batch,
  // whose enqueue waits for this download first, so that the pool never hands the block
  // out again while a copy may still write it.
  std::shared_ptr<core::PlaneBuffer<char>> words;
  DeviceBuffer<CanvasDesc> canvas_desc;
  DeviceBuffer<CanvasPatch> canvas_list;
  PinnedBuffer<uint64_t> h_ptrs;
  PinnedBuffer<RunEntry> h_entries;
  PinnedBuffer<double> h_flux, h_ivar, h_rdiag, h_pixmask, h_chi2, h_canvas;
  PinnedBuffer<int32_t> h_status;
  PinnedBuffer<double> h_cond;  // per slot, downloaded with h_status
  PinnedBuffer<CanvasDesc> h_canvas_desc;
  PinnedBuffer<CanvasPatch> h_canvas_list;
  // Ordering: `decorrelated` after a run's flux, ivar and resolution are written (before its
  // model), `compute_done` after all of it, `outputs_copied` after the download.
  Event decorrelated, compute_done, outputs_copied;
  // Per bundle of a batch: its flux, ivar and float64 resolution are in the pinned buffers
  // (the host copies them out while the next bundles' arrays cross).
  std::vector<Event> bundle_copied;
  Event normal_equations_done;  // prep stream -> compute (the normal equations ahead)
  Event marks[kNumMarks];              // stage timing (compute stream)
  Event d2h_start, d2h_end;            // download timing (copy stream)
  bool events_created = false;

  SlotBuffers Slots(const WorkspaceSpec& spec) const;  // its scratch's strides from spec
  OutputBuffers Outputs() const;
};

class Workspace {
 public:
  // Grows every buffer to `job`'s needs (no-op where already large enough).
  absl::Status Reserve(const WorkspaceSpec& job);
  WorkspaceSet& set(int i) { return sets_[i]; }
  double* image() const { return image_.get(); }
  double* ivar() const { return ivar_.get(); }
  float* stage_device() const { return stage_.get(); }
  float* stage_host() const { return h_stage_.get(); }
  double* stage_host_double() const { return reinterpret_cast<double*>(h_stage_.get()); }
  // Raw planes' MASK bits on the device, and the pixel rules' counts there and on the host
  // (masked, non-finite: UploadImage).
  uint16_t* mask_stage() const { return mask_stage_.get(); }
  unsigned long long* rule_counts() const { return rule_counts_.get(); }
  unsigned long long* rule_counts_host() const { return h_rule_counts_.get(); }
  Event& upload_start() { return upload_start_; }
  Event& upload_end() { return upload_end_; }
  // The first batch's columns of the image are on the device (UploadImage).
  Event& first_columns() { return first_columns_; }
  QlBuffers ql() const;
  // Ordering of the tridiagonal eigensolver's runs (patch_pipeline.cc): `reduced` hands a
  // run from the compute to the tail stream, `ql_free` says the shared QlBuffers are read.
  Event& reduced() { return reduced_; }
  Event& ql_free() { return ql_free_; }
  // The last batch enqueued has factored (its Cholesky is done): the next batch's normal
  // equations wait for it.
  Event& factored() { return factored_; }
  int reallocations() const { return reallocations_; }
  std::size_t device_bytes() const;

 private:
  absl::Status ReserveSet(WorkspaceSet* s, const WorkspaceSpec& spec);
  WorkspaceSet sets_[2];
  DeviceBuffer<double> image_, ivar_;
  DeviceBuffer<float> stage_;
  PinnedBuffer<float> h_stage_;
  DeviceBuffer<uint16_t> mask_stage_;
  DeviceBuffer<unsigned long long> rule_counts_;
  PinnedBuffer<unsigned long long> h_rule_counts_;
  Event upload_start_, upload_end_, first_columns_, reduced_, ql_free_, factored_;
  bool events_created_ = false;
  DeviceBuffer<double> ql_d_, ql_e_, ql_d0_, ql_e0_, ql_c_, ql_s_;
  DeviceBuffer<int32_t> ql_sweeps_;
  WorkspaceSpec reserved_{};
  int reallocations_ = 0;
};

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_WORKSPACE_H_
