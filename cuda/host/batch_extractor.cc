#include "cuda/host/batch_extractor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/numerics/patch_numerics.h"
#include "core/plan/patch_plan.h"
#include "core/base/status_macros.h"
#include "cuda/host/batch_plan.h"
#include "cuda/host/cuda_check.h"
#include "cuda/host/fault_injection.h"
#include "cuda/kernels/decorrelation.h"
#include "cuda/kernels/resolution_narrowing.h"
#include "cuda/host/nvtx.h"
#include "cuda/kernels/patch_products.h"

namespace spexd::cuda {
namespace {

// Patches per batch the batch size aims at: enough matrices for the batched library calls
// to fill an H100/H200 (gpu-workflow.md), about 5 bundles of an r frame.
constexpr int kTargetSlots = 1200;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double ElapsedMs(const Event& a, const Event& b) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, a.get(), b.get()) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return ms;
}

int MaxPatchesPerBundle(const core::PatchPlan& plan) {
  int m = 0;
  for (int b = 0; b < plan.nbundles; ++b) {
    m = std::max(m, plan.bundle_first_patch[b + 1] - plan.bundle_first_patch[b]);
  }
  return m;
}

}  // namespace

absl::Status BatchExtractor::Prepare(const core::ExtractionJob& job, int nbundles) {
  const core::PatchPlan& plan = *cfg_.plan;
  const int ppb = std::max(1, MaxPatchesPerBundle(plan));
  max_blocks_ = MaxBlocks(plan);
  SPEXD_RETURN_IF_ERROR(CheckSharedMemory(plan.nwavetot));
  WorkspaceSpec spec;
  spec.ld = plan.max_n;
  spec.nt = plan.nwavetot;
  spec.nper = plan.nper;
  spec.nb = std::max(1, max_blocks_);
  if (PanelP()) spec.p_band = PanelPBand(plan);
  spec.max_npix = plan.max_npix;
  spec.bundlesize = plan.bundlesize;
  spec.nwave = plan.nwave;
  spec.nk = 2 * plan.ndiag + 1;
  spec.canvas_stride = job.want_model ? cfg_.state->max_canvas_pixels() : 0;
  spec.image_pixels = static_cast<std::size_t>(plan.image_height) * plan.image_width;
  spec.ql_log = true;
  spec.ql_rotations = TridiagNeedsRotationLog(plan.nwavetot);
  spec.rdiags_form = job.resolution_form;

  // Device bytes of both sets for b bundles per batch, plus the frame and its staging.
  auto need = [&](int b) {
    const std::size_t slots = static_cast<std::size_t>(b) * ppb;
    const std::size_t outs = static_cast<std::size_t>(b) * plan.bundlesize * plan.nwave * (4 + spec.nk);
    const std::size_t canvas = static_cast<std::size_t>(b) * static_cast<std::size_t>(spec.canvas_stride);
    const std::size_t ql =  // one set
        spec.ql_log ? slots * spec.nper * QlBytesPerBlock(spec.nt, spec.ql_rotations) : 0;
    const std::size_t rdiags_words =  // float32 words
        spec.rdiags_words() ? static_cast<std::size_t>(b) * plan.bundlesize * plan.nwave * spec.nk : 0;
    return 2 * (slots * spec.SlotBytes() + (outs + canvas) * sizeof(double) +
                rdiags_words * sizeof(uint32_t)) + ql +
           spec.image_pixels * (2 * sizeof(double) + 2 * sizeof(float) + sizeof(uint16_t));
  };
  std::size_t free_b = 0, total_b = 0;
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_b, &total_b));
  const double available = 0.85 * static_cast<double>(free_b + cfg_.workspace->device_bytes());
  int b = std::clamp((kTargetSlots + ppb - 1) / ppb, 1, std::max(1, nbundles));
  while (b > 1 && static_cast<double>(need(b)) > available) --b;
  if (static_cast<double>(need(b)) > available) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "CUDA backend: a batch of one bundle needs ", need(1) >> 20, " MiB of GPU memory but only ",
        static_cast<long long>(available) >> 20, " MiB are available on ", cfg_.ctx->device_name()));
  }
  if (cfg_.max_batch_bundles > 0) b = std::min(b, cfg_.max_batch_bundles);
  bundles_per_batch_ = b;
  spec.bundles = b;
  spec.slots = b * ppb;
  spec.ptr_count = MaxPointerCount(plan, spec.slots);
  spec_ = spec;
  SPEXD_RETURN_IF_ERROR(cfg_.workspace->Reserve(spec));
  return absl::OkStatus();
}

absl::Status BatchExtractor::UploadPointers(WorkspaceSet* s, const RunLayout& layout,
                                            cudaStream_t stream) const {
  if (layout.ptrs.size() > s->h_ptrs.size()) {
    return absl::InternalError("run layout exceeds the reserved pointer buffer");
  }
  if (!layout.ptrs.empty()) {
    std::memcpy(s->h_ptrs.get(), layout.ptrs.data(), layout.ptrs.size() * sizeof(uint64_t));
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->ptrs.get(), s->h_ptrs.get(),
                                               layout.ptrs.size() * sizeof(uint64_t),
                                               cudaMemcpyHostToDevice, stream));
  }
  return absl::OkStatus();
}

absl::Status BatchExtractor::UploadLayout(WorkspaceSet* s, const RunLayout& layout,
                                          cudaStream_t stream) const {
  if (layout.entries.size() > s->h_entries.size()) {
    return absl::InternalError("run layout exceeds the reserved entry buffer");
  }
  SPEXD_RETURN_IF_ERROR(UploadPointers(s, layout, stream));
  if (!layout.entries.empty()) {
    std::memcpy(s->h_entries.get(), layout.entries.data(), layout.entries.size() * sizeof(RunEntry));
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->entries.get(), s->h_entries.get(),
                                               layout.entries.size() * sizeof(RunEntry),
                                               cudaMemcpyHostToDevice, stream));
  }
  return absl::OkStatus();
}

absl::Status BatchExtractor::EnqueueCanvas(WorkspaceSet* s, const Batch& batch,
                                           cudaStream_t stream) const {
  const core::PatchPlan& plan = *cfg_.plan;
  std::vector<int32_t> slot_of(plan.patches.size(), -1);
  for (const RunEntry& e : batch.layout.entries) slot_of[e.patch] = e.slot;
  int32_t n = 0;
  for (std::size_t pos = 0; pos < batch.bundles.size(); ++pos) {
    const int b = batch.bundles[pos];
    CanvasDesc cd = cfg_.state->canvas(b);
    cd.list_begin = n;
    for (int p = plan.bundle_first_patch[b]; p < plan.bundle_first_patch[b + 1]; ++p) {
      s->h_canvas_list[static_cast<std::size_t>(n++)] = CanvasPatch{slot_of[p], p};
    }
    cd.list_end = n;
    s->h_canvas_desc[pos] = cd;
  }
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->canvas_desc.get(), s->h_canvas_desc.get(),
                                             batch.bundles.size() * sizeof(CanvasDesc),
                                             cudaMemcpyHostToDevice, stream));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->canvas_list.get(), s->h_canvas_list.get(),
                                             static_cast<std::size_t>(n) * sizeof(CanvasPatch),
                                             cudaMemcpyHostToDevice, stream));
  CanvasArgs a{};
  a.desc = s->canvas_desc.get();
  a.list = s->canvas_list.get();
  a.patches = cfg_.state->patches();
  a.model = s->model.get();
  a.status = s->status.get();
  a.mflags = s->mflags.get();
  a.max_npix = cfg_.state->dims().max_npix;
  a.canvas_stride = spec_.canvas_stride;
  a.canvas = s->canvas.get();
  a.nbundles = static_cast<int>(batch.bundles.size());
  SPEXD_CUDA_RETURN_IF_ERROR(LaunchStitchCanvas(a, stream));
  return absl::OkStatus();
}

absl::Status BatchExtractor::EnqueueDownload(WorkspaceSet* s, const Batch& batch,
                                             cudaStream_t stream) const {
  const std::size_t out = BatchBins(batch);
  const std::size_t bytes = out * sizeof(double);
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, s->decorrelated.get(), 0));
  if (cfg_.special_resolution) {  // test-only (fault_injection.h); pageable: copied at once
    const std::size_t n = std::min<std::size_t>(kSpecialResolutionCount, out * spec_.nk);
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->out_rdiag.get(), kSpecialResolution, n * sizeof(double),
                                               cudaMemcpyHostToDevice, stream));
  }
  // Bundle by bundle, each with its event, so that the host copies a bundle out of the
  // pinned buffers while the next ones cross (Finish): a frame's last batch then ends with
  // one bundle's copies instead of all of them.
  const std::size_t per_bundle = static_cast<std::size_t>(spec_.bundlesize) * spec_.nwave;
  if (s->bundle_copied.size() < batch.bundles.size()) {
    return absl::InternalError("the batch has more bundles than the workspace has events");
  }
  for (std::size_t pos = 0; pos < batch.bundles.size(); ++pos) {
    const std::size_t o = pos * per_bundle, n = per_bundle * sizeof(double);
    SPEXD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(s->h_flux.get() + o, s->out_flux.get() + o, n, cudaMemcpyDeviceToHost, stream));
    SPEXD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(s->h_ivar.get() + o, s->out_ivar.get() + o, n, cudaMemcpyDeviceToHost, stream));
    if (!spec_.rdiags_words()) {
      SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->h_rdiag.get() + o * spec_.nk, s->out_rdiag.get() + o * spec_.nk,
                                                 n * spec_.nk, cudaMemcpyDeviceToHost, stream));
    }
    SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->bundle_copied[pos].get(), stream));
  }
  if (spec_.rdiags_words()) {
    // Narrowed here to the bytes of the frame file or float32 stream that alone reads them:
    // half the bytes cross, into the block whose parts the bundles hand on, and the host
    // sends or writes them as they are (ExtractionJob::resolution_form); the file's word
    // sums come with them.
    const std::size_t words = out * spec_.nk;
    if (s->words == nullptr || s->words->size() < words * sizeof(uint32_t)) {
      return absl::InternalError("the batch's resolution words have no block");
    }
    if (spec_.rdiags_form == core::ResolutionForm::kFileBytes) {
      const std::size_t nb = batch.bundles.size();
      SPEXD_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(s->word_sums.get(), 0, nb * sizeof(unsigned long long), stream));
      SPEXD_CUDA_RETURN_IF_ERROR(LaunchNarrowToFileWords(s->out_rdiag.get(), nb, words / nb,
                                                         s->out_rdiag_words.get(), s->word_sums.get(), stream));
      SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->h_word_sums.get(), s->word_sums.get(),
                                                 nb * sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                                                 stream));
    } else {
      SPEXD_CUDA_RETURN_IF_ERROR(
          LaunchNarrowToFloat32(s->out_rdiag.get(), words, s->out_rdiag_words.get(), stream));
    }
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->words->data(), s->out_rdiag_words.get(),
                                               words * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
  }
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, s->compute_done.get(), 0));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->h_pixmask.get(), s->out_pixmask.get(), bytes, cudaMemcpyDeviceToHost, stream));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->h_chi2.get(), s->out_chi2.get(), bytes, cudaMemcpyDeviceToHost, stream));
  const std::size_t nslots = batch.layout.entries.size();
  if (nslots > 0) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->h_status.get(), s->status.get(), nslots * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, stream));
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s->h_cond.get(), s->cond.get(), nslots * sizeof(double),
                                               cudaMemcpyDeviceToHost, stream));
  }
  if (spec_.canvas_stride > 0) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        s->h_canvas.get(), s->canvas.get(),
        batch.bundles.size() * static_cast<std::size_t>(spec_.canvas_stride) * sizeof(double),
        cudaMemcpyDeviceToHost, stream));
  }
  return absl::OkStatus();
}

absl::Status BatchExtractor::TakeWordsBlock(WorkspaceSet* s, std::size_t bytes) const {
  if (s->words != nullptr) {  // the set's previous batch: its download must be over
    SPEXD_CUDA_RETURN_IF_ERROR(cfg_.ctx->WaitForEvent(s->outputs_copied.get()));
  }
  try {
    s->words = std::make_shared<core::PlaneBuffer<char>>(core::PlaneBuffer<char>::Make(bytes, cfg_.words));
  } catch (const std::bad_alloc&) {
    s->words = nullptr;
    return absl::ResourceExhaustedError(
        absl::StrCat("CUDA backend: no host memory for a batch's resolution (", bytes >> 20, " MiB)"));
  }
  return absl::OkStatus();
}

absl::Status BatchExtractor::Enqueue(const core::ExtractionJob& job, Batch* batch) {
  NvtxRange range{"enqueue batch"};
  WorkspaceSet* s = &cfg_.workspace->set(batch->set);
  if (spec_.rdiags_words()) {
    SPEXD_RETURN_IF_ERROR(TakeWordsBlock(s, BatchBins(*batch) * spec_.nk * sizeof(uint32_t)));
  }
  cudaStream_t compute = cfg_.ctx->compute(), copy = cfg_.ctx->copy();
  // Everything up to the normal equations on `head`, the prep stream, where they run
  // beside the previous batch's solve and inversion instead of after its reduction
  // (0.2 ms a frame on the H100).
  const cudaStream_t head = cfg_.ctx->prep();
  // The previous batch of this set must have left the device outputs, and the batch's
  // columns of the image must be on the device. The previous batch must also have
  // factored: the normal equations take the whole GPU for about 2 ms, and landing inside
  // its Cholesky they hold back every dependent step left (they stretch a frame's first
  // Cholesky from 2.9 ms to 5.3 on an H200).
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(head, s->outputs_copied.get(), 0));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(head, cfg_.workspace->factored().get(), 0));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(
      head, (batch->first ? cfg_.workspace->first_columns() : cfg_.workspace->upload_end()).get(), 0));
  // The normal equations need only the entries: launched before the rest of the layout is
  // built (patch_pipeline.h), so that the GPU starts a frame's first batch sooner.
  batch->layout = RunLayout{};
  batch->layout.entries = MakeBatchEntries(*cfg_.plan, batch->bundles, job.regularize);
  SPEXD_RETURN_IF_ERROR(UploadLayout(s, batch->layout, head));
  // Skipped patches leave zeros (spec §2.12).
  const std::size_t out = BatchBins(*batch);
  const std::size_t bytes = out * sizeof(double);
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->out_flux.get(), 0, bytes, head));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->out_ivar.get(), 0, bytes, head));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->out_pixmask.get(), 0, bytes, head));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->out_chi2.get(), 0, bytes, head));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(s->out_rdiag.get(), 0, bytes * spec_.nk, head));
  const int count = static_cast<int>(batch->layout.entries.size());
  batch->timed = count > 0;
  const RunResources res = Resources(s, true);
  const RunArgs args = MakeArgs(*s, count, job);
  SPEXD_RETURN_IF_ERROR(EnqueueNormalEquations(res, batch->layout.entries, args, head));
  if (head != compute) {
    SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->normal_equations_done.get(), head));
    SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, s->normal_equations_done.get(), 0));
  }
  std::vector<RunEntry> entries = batch->layout.entries;
  batch->layout = BuildRunLayout(*cfg_.plan, std::move(entries), Addresses(*s), Choices());
  // The device copy of the entries was uploaded before: the layout must keep their order
  // (MakeBatchEntries sorts by n first, BuildRunLayout's stable sort by n keeps it).
  for (std::size_t i = 0; i < batch->layout.entries.size(); ++i) {
    const RunEntry& a = batch->layout.entries[i];
    const RunEntry& b = s->h_entries.get()[i];
    if (a.patch != b.patch || a.slot != b.slot) {
      return absl::InternalError("the run layout reordered the batch's entries");
    }
  }
  SPEXD_RETURN_IF_ERROR(UploadPointers(s, batch->layout, compute));
  SPEXD_RETURN_IF_ERROR(EnqueueAfterNormalEquations(res, batch->layout, args));
  // An empty run enqueues nothing on the tail stream: its outputs are ready on compute.
  const cudaStream_t last = count > 0 ? res.tail : compute;
  if (count == 0) SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->decorrelated.get(), compute));
  if (spec_.canvas_stride > 0) SPEXD_RETURN_IF_ERROR(EnqueueCanvas(s, *batch, last));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->compute_done.get(), last));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, s->decorrelated.get(), 0));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->d2h_start.get(), copy));
  SPEXD_RETURN_IF_ERROR(EnqueueDownload(s, *batch, copy));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->d2h_end.get(), copy));
  SPEXD_CUDA_RETURN_IF_ERROR(cudaEventRecord(s->outputs_copied.get(), copy));
  return absl::OkStatus();
}

absl::Status BatchExtractor::Retry(const core::ExtractionJob& job, Batch* batch,
                                   const std::vector<RunEntry>& failing) {
  NvtxRange range{"retry failed patches"};
  WorkspaceSet* s = &cfg_.workspace->set(batch->set);
  cudaStream_t compute = cfg_.ctx->compute();
  std::vector<RunEntry> entries = failing;
  for (RunEntry& e : entries) e.regularize = core::kRetryRegularize;
  RunLayout layout = BuildRunLayout(*cfg_.plan, std::move(entries), Addresses(*s), Choices());
  SPEXD_RETURN_IF_ERROR(UploadLayout(s, layout, compute));
  SPEXD_RETURN_IF_ERROR(EnqueueRun(Resources(s, false), layout,
                                   MakeArgs(*s, static_cast<int>(layout.entries.size()), job)));
  if (spec_.canvas_stride > 0) SPEXD_RETURN_IF_ERROR(EnqueueCanvas(s, *batch, compute));
  SPEXD_RETURN_IF_ERROR(EnqueueDownload(s, *batch, compute));
  // Rare path: wait here (the next batch, already queued ahead on the stream, finishes too).
  SPEXD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute));
  return absl::OkStatus();
}

absl::Status BatchExtractor::CollectTimes(const Batch& batch, core::ExtractionSummary* summary) {
  WorkspaceSet* s = &cfg_.workspace->set(batch.set);
  if (batch.timed && cfg_.diagnostics.timeline) {
    // Diagnostics: each stage's end in ms after the image upload began (CUDA events).
    const Event& t0 = cfg_.workspace->upload_start();
    std::fprintf(stderr, "[spexd-cuda] timeline batch of %zu bundles (%s): start %.2f",
                 batch.bundles.size(), cfg_.reduce_on_tail ? "latency" : "throughput",
                 ElapsedMs(t0, s->marks[0]));
    for (int m = 1; m < kNumMarks; ++m) std::fprintf(stderr, " %.2f", ElapsedMs(t0, s->marks[m]));
    std::fprintf(stderr, " d2h %.2f-%.2f\n", ElapsedMs(t0, s->d2h_start), ElapsedMs(t0, s->d2h_end));
  }
  if (batch.timed) {
    static const char* kStage[kNumMarks] = {"",           "normal_equations", "cholesky", "solve",
                                            "inverse_blocks", "inverse_sqrt", "finalise"};
    for (int m = 1; m < kNumMarks; ++m) {
      summary->stage_seconds[kStage[m]] += 1e-3 * ElapsedMs(s->marks[m - 1], s->marks[m]);
    }
  }
  // From the first copy (flux, ivar and resolution, once decorrelated) to the last: it spans
  // the model's sums that it overlaps (EnqueueDownload).
  summary->stage_seconds["download"] += 1e-3 * ElapsedMs(s->d2h_start, s->d2h_end);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<char>> BatchExtractor::RetryFailed(const core::ExtractionJob& job,
                                                              Batch* batch) {
  const WorkspaceSet& s = cfg_.workspace->set(batch->set);
  const std::vector<RunEntry>& entries = batch->layout.entries;
  std::vector<RunEntry> failing;
  for (const RunEntry& e : entries) {
    if (s.h_status[static_cast<std::size_t>(e.slot)] != 0) failing.push_back(e);
  }
  std::vector<char> retried(std::max<std::size_t>(entries.size(), 1), 0);
  if (!failing.empty() && job.regularize == 0.0) {
    SPEXD_RETURN_IF_ERROR(Retry(job, batch, failing));
    for (const RunEntry& e : failing) retried[static_cast<std::size_t>(e.slot)] = 1;
  }
  return retried;
}

absl::Status BatchExtractor::Finish(const core::ExtractionJob& job, Batch* batch,
                                    const core::BundleSink& sink, core::ExtractionSummary* summary) {
  const double a0 = Now();
  Assembly assembly;
  {
    NvtxRange range{"allocate bundles"};
    assembly = AllocateBundles(*batch);
  }
  const double w0 = Now();
  summary->stage_seconds["host_prepare"] += w0 - a0;
  const WorkspaceSet& s = cfg_.workspace->set(batch->set);
  const std::size_t nb = assembly.results.size();
  double waited = 0;  // for the downloads, after the first bundle's
  {
    NvtxRange wait{"wait for batch, copying its bundles"};
    for (std::size_t pos = 0; pos < nb; ++pos) {
      const double b0 = Now();
      SPEXD_CUDA_RETURN_IF_ERROR(cfg_.ctx->WaitForEvent(s.bundle_copied[pos].get()));
      if (pos > 0) waited += Now() - b0;
      CopyGroup(assembly, pos);
    }
    const double b0 = Now();
    SPEXD_CUDA_RETURN_IF_ERROR(cfg_.ctx->WaitForEvent(s.outputs_copied.get()));
    waited += Now() - b0;
  }
  const double t0 = Now();
  if (cfg_.diagnostics.timeline) {
    std::fprintf(stderr,
                 "[spexd-cuda] host: allocated in %.2f ms, copied bundles out as they came for %.2f ms, "
                 "%.2f ms of it waiting\n",
                 1e3 * (w0 - a0), 1e3 * (t0 - w0), 1e3 * waited);
  }
  NvtxRange range{"assemble bundles"};
  SPEXD_RETURN_IF_ERROR(CollectTimes(*batch, summary));
  SPEXD_ASSIGN_OR_RETURN(std::vector<char> retried, RetryFailed(job, batch));
  const double t1 = Now();
  // A retry downloaded every output again.
  const bool again = std::find(retried.begin(), retried.end(), 1) != retried.end();
  for (std::size_t g = again ? 0 : nb; g <= nb; ++g) CopyGroup(assembly, g);
  FillBundles(*batch, retried, &assembly);
  const double t2 = Now();
  for (core::BundleResult& r : assembly.results) {
    summary->counts += r.counts;
    if (core::CancelRequested(job)) return absl::CancelledError("extraction cancelled");
    SPEXD_RETURN_IF_ERROR(sink(std::move(r)));
  }
  summary->stage_seconds["host"] += Now() - t0;
  if (cfg_.diagnostics.timeline) {
    std::fprintf(stderr, "[spexd-cuda] host: retry check %.2f ms, filled %.2f ms, sank %.2f ms\n",
                 1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (Now() - t2));
  }
  return absl::OkStatus();
}

std::vector<std::vector<int>> BatchExtractor::Batches(const std::vector<int>& bundles) const {
  std::vector<std::vector<int>> batches;
  std::size_t i = 0;
  for (int size : BatchSizes(static_cast<int>(bundles.size()), bundles_per_batch_)) {
    batches.emplace_back(bundles.begin() + static_cast<std::ptrdiff_t>(i),
                         bundles.begin() + static_cast<std::ptrdiff_t>(i + static_cast<std::size_t>(size)));
    i += static_cast<std::size_t>(size);
  }
  return batches;
}

ColumnRange BatchExtractor::Columns(const std::vector<int>& batch) const {
  const core::PatchPlan& plan = *cfg_.plan;
  ColumnRange r{plan.image_width, 0};
  for (int b : batch) {
    for (int p = plan.bundle_first_patch[b]; p < plan.bundle_first_patch[b + 1]; ++p) {
      const core::PatchDesc& d = plan.patches[static_cast<std::size_t>(p)];
      if (d.skipped != core::kSkipNone) continue;  // never read
      r.x0 = std::min(r.x0, std::max(d.x0, 0));
      r.x1 = std::max(r.x1, std::min(d.x0 + d.nx, plan.image_width));
    }
  }
  return r.x0 < r.x1 ? r : ColumnRange{};
}

absl::Status BatchExtractor::Run(const core::ExtractionJob& job,
                                 const std::vector<std::vector<int>>& chunks,
                                 const core::BundleSink& sink, core::ExtractionSummary* summary) {
  Batch batches[2];
  auto enqueue = [&](std::size_t k) {
    Batch& b = batches[k % 2];
    b.bundles = chunks[k];
    b.set = static_cast<int>(k % 2);
    b.first = k == 0;
    const double e0 = Now();
    absl::Status st = Enqueue(job, &b);
    if (cfg_.diagnostics.timeline) {
      std::fprintf(stderr, "[spexd-cuda] host: enqueued batch %zu in %.2f ms\n", k, 1e3 * (Now() - e0));
    }
    return st;
  };
  // Checked before each batch is enqueued and before each is collected, so a cancel
  // costs at most the batch in flight.
  if (chunks.empty()) return absl::OkStatus();
  if (core::CancelRequested(job)) return absl::CancelledError("extraction cancelled");
  SPEXD_RETURN_IF_ERROR(enqueue(0));
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    if (core::CancelRequested(job)) return absl::CancelledError("extraction cancelled");
    if (k + 1 < chunks.size()) SPEXD_RETURN_IF_ERROR(enqueue(k + 1));
    SPEXD_RETURN_IF_ERROR(Finish(job, &batches[k % 2], sink, summary));
  }
  summary->stage_seconds["upload"] +=
      1e-3 * ElapsedMs(cfg_.workspace->upload_start(), cfg_.workspace->upload_end());
  return absl::OkStatus();
}

}  // namespace spexd::cuda
