// Runs the bundles of one request through the GPU in batches (two workspace sets, see
// cuda_backend.cc), retries failed patches with core::kRetryRegularize (spec §2.15,
// "Decisions": scoped to the failing patch, counted), and hands BundleResults in photons
// per bin to the sink in ascending bundle order, exactly like core::CpuBackend.
#ifndef SPEXD_CUDA_BATCH_EXTRACTOR_H_
#define SPEXD_CUDA_BATCH_EXTRACTOR_H_

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/backend/backend.h"
#include "core/base/task_pool.h"
#include "core/frame/bundle_array_pool.h"
#include "cuda/kernels/batch_layout.h"
#include "cuda/host/diagnostics.h"
#include "cuda/host/geometry_state.h"
#include "cuda/host/gpu_context.h"
#include "cuda/host/image_upload.h"
#include "cuda/host/patch_pipeline.h"
#include "cuda/host/workspace.h"

namespace spexd::cuda {

class BatchExtractor {
 public:
  struct Config {
    const GpuContext* ctx = nullptr;
    Workspace* workspace = nullptr;
    const GeometryState* state = nullptr;
    const core::PatchPlan* plan = nullptr;
    // Host threads for the bundle assembly (core::ParallelFor; not owned; null: the
    // calling thread alone).
    core::TaskPool* pool = nullptr;
    // The backend's resident bundle arrays (not owned; null: fresh arrays every batch).
    core::BundleArrayPool* arrays = nullptr;
    // Page-locked blocks the batches' resolution words are downloaded into (WorkspaceSet::
    // words; not owned; null: blocks of their own, pageable).
    core::PlaneBufferPool* words = nullptr;
    Diagnostics diagnostics;  // production defaults unless set (cuda/host/diagnostics.h)
    // The lone-frame latency mode (cuda_backend.cc): the tridiagonal reduction on the tail
    // stream with the QL and vectors, the compute stream going on to the next batch.
    bool reduce_on_tail = false;
    int max_batch_bundles = 0;  // a test's cap on the batch size (FaultPlan); 0: none
    bool special_resolution = false;  // FaultPlan::special_resolution
  };
  explicit BatchExtractor(const Config& config) : cfg_(config) {}

  // Chooses the batch size from the plan and the free device memory and reserves the
  // workspace (grow-only: a no-op when warm). RESOURCE_EXHAUSTED if one bundle does not fit.
  absl::Status Prepare(const core::ExtractionJob& job, int nbundles);
  // The batches `bundles` (ascending) are extracted in (after Prepare).
  std::vector<std::vector<int>> Batches(const std::vector<int>& bundles) const;
  // The CCD columns the extracted patches of `batch` read (empty when none).
  ColumnRange Columns(const std::vector<int>& batch) const;
  // Extracts the batches; the image must already be enqueued for upload (UploadImage:
  // the first batch waits for its columns only, the others for the whole frame).
  absl::Status Run(const core::ExtractionJob& job, const std::vector<std::vector<int>>& batches,
                   const core::BundleSink& sink, core::ExtractionSummary* summary);

 private:
  struct Batch {
    std::vector<int> bundles;
    RunLayout layout;
    int set = 0;
    bool first = false;  // the request's first batch (waits for its columns only)
    bool timed = false;
  };
  SlotAddresses Addresses(const WorkspaceSet& s) const;
  LayoutChoices Choices() const;
  bool PanelP() const;       // LayoutChoices::panel_p for this backend
  bool DiagUpdateInFactor() const;  // LayoutChoices::diag_update_in_factor, RunArgs::diag_update
  // UNIMPLEMENTED where the device's shared memory a block (or a test's cap) is less than
  // the run's kernels need for patches of nt.
  absl::Status CheckSharedMemory(int nt) const;
  RunArgs MakeArgs(const WorkspaceSet& s, int count, const core::ExtractionJob& job) const;
  // A batch (record_marks) overlaps its tail with the next batch (RunResources::tail);
  // a retry stays on the compute stream.
  RunResources Resources(WorkspaceSet* s, bool record_marks) const;
  absl::Status UploadLayout(WorkspaceSet* s, const RunLayout& layout, cudaStream_t stream) const;
  absl::Status UploadPointers(WorkspaceSet* s, const RunLayout& layout, cudaStream_t stream) const;
  absl::Status EnqueueCanvas(WorkspaceSet* s, const Batch& batch, cudaStream_t stream) const;
  // The bins of the batch's output arrays: its bundles' fibres x wavelengths.
  std::size_t BatchBins(const Batch& batch) const {
    return batch.bundles.size() * static_cast<std::size_t>(spec_.bundlesize) * spec_.nwave;
  }
  // A block for the batch's resolution words (WorkspaceSet::words), once the set's previous
  // download is over.
  absl::Status TakeWordsBlock(WorkspaceSet* s, std::size_t bytes) const;
  // The batch's outputs to the pinned buffers on `stream` (a float32 resolution to
  // WorkspaceSet::words): flux, ivar and resolution once `decorrelated`, bundle by bundle
  // (WorkspaceSet::bundle_copied), the rest once `compute_done` (the model's sums come
  // last: the largest copies overlap them, which shortens a frame's last batch).
  absl::Status EnqueueDownload(WorkspaceSet* s, const Batch& batch, cudaStream_t stream) const;
  absl::Status Enqueue(const core::ExtractionJob& job, Batch* batch);
  absl::Status Retry(const core::ExtractionJob& job, Batch* batch, const std::vector<RunEntry>& failing);
  // Waits for the batch's outputs, retries its failed patches, assembles its bundles and
  // hands them to the sink, in order.
  absl::Status Finish(const core::ExtractionJob& job, Batch* batch, const core::BundleSink& sink,
                      core::ExtractionSummary* summary);
  // Finish's stages. Stage times of the batch (CUDA events, already complete).
  absl::Status CollectTimes(const Batch& batch, core::ExtractionSummary* summary);
  // Retries the patches whose solve failed (when the request is unregularised); returns
  // a flag per slot, 1 where the patch was retried.
  absl::StatusOr<std::vector<char>> RetryFailed(const core::ExtractionJob& job, Batch* batch);
  // OutCopy::group of the copies whose sources come down after the model's sums.
  static constexpr int kLateGroup = -1;
  // One float64 array's copy out of a pinned buffer.
  struct OutCopy {
    std::vector<double>* dst = nullptr;
    const char* src = nullptr;
    std::size_t n = 0;   // bytes
    bool fresh = false;  // dst needs new memory (not lent by Config::arrays, or too small)
    int group = kLateGroup;  // the bundle whose WorkspaceSet::bundle_copied brings src
    char* data() const { return reinterpret_cast<char*>(dst->data()); }
    void Fresh() const;              // empties dst and reserves n bytes
    void Resize() const;             // to n bytes
  };
  // A batch's results, allocated before its outputs are ready.
  struct Assembly {
    std::vector<core::BundleResult> results;
    std::vector<OutCopy> copies;
    // (copy, first byte) of 128 KiB pieces: group pos's for bundle pos, then the late ones.
    std::vector<std::vector<std::pair<int, std::size_t>>> pieces;
  };
  // Bundle `pos` of the batch: its fields and skipped patches, its part of the batch's
  // resolution words (if any), and the copies that fill its float64 arrays from the pinned
  // output buffers.
  void SizeBundle(const Batch& batch, std::size_t pos, core::BundleResult* r,
                  std::vector<OutCopy>* copies) const;
  // Every bundle of the batch with its arrays sized: lent by Config::arrays, or else
  // allocated, faulted in and zeroed (needs no device output: runs while the batch computes).
  Assembly AllocateBundles(const Batch& batch) const;
  // The copies of one group of Assembly::pieces (its download must be over).
  void CopyGroup(const Assembly& a, std::size_t group) const;
  // After every group's copies: counts the patch outcomes, marks failed bins.
  void FillBundles(const Batch& batch, const std::vector<char>& retried, Assembly* a) const;

  Config cfg_;
  WorkspaceSpec spec_;
  int bundles_per_batch_ = 1;
  int max_blocks_ = 0;
};

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_BATCH_EXTRACTOR_H_
