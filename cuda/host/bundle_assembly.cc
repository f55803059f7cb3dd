// BatchExtractor's bundle assembly: a batch's results leave the pinned output buffers
// into the BundleResults handed to the sink (batch_extractor.h: SizeBundle,
// AllocateBundles, FillBundles).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/base/parallel_for.h"
#include "core/frame/patch_outcome.h"
#include "core/plan/patch_plan.h"
#include "core/base/prefault.h"
#include "cuda/host/batch_extractor.h"

namespace spexd::cuda {

void BatchExtractor::SizeBundle(const Batch& batch, std::size_t pos, core::BundleResult* r,
                                std::vector<OutCopy>* copies) const {
  const core::PatchPlan& plan = *cfg_.plan;
  const WorkspaceSet& s = cfg_.workspace->set(batch.set);
  const int b = batch.bundles[pos];
  const int nk = spec_.nk, nwave = plan.nwave, bs = plan.bundlesize;
  const std::size_t per_bundle = static_cast<std::size_t>(bs) * nwave;
  // Resident arrays of an earlier bundle when the backend has some idle: their pages are
  // mapped already (core/frame/bundle_array_pool.h).
  if (cfg_.arrays != nullptr) {
    cfg_.arrays->Lend(r, per_bundle, spec_.rdiags_words() ? 0 : static_cast<std::size_t>(nk));
  }
  // group: the download that brings the source (EnqueueDownload): the bundle's own for
  // flux, ivar and resolution, kLateGroup for what waits for the model.
  const auto copy = [copies](std::vector<double>* dst, const double* src, std::size_t n, int group) {
    copies->push_back({.dst = dst, .src = reinterpret_cast<const char*>(src),
                       .n = n * sizeof(double), .fresh = dst->capacity() < n, .group = group});
  };
  const int own = static_cast<int>(pos);
  // As BundleResult::Allocate, but filled straight from the pinned buffers (one pass).
  r->bundle = b;
  r->fiber_begin = plan.bundle_fiber_begin(b);
  r->nfibers = bs;
  r->nwave = nwave;
  r->ndiag = plan.ndiag;
  const std::size_t o = pos * per_bundle;
  copy(&r->flux, s.h_flux.get() + o, per_bundle, own);
  copy(&r->ivar, s.h_ivar.get() + o, per_bundle, own);
  copy(&r->pixmask_fraction, s.h_pixmask.get() + o, per_bundle, kLateGroup);
  copy(&r->chi2pix, s.h_chi2.get() + o, per_bundle, kLateGroup);
  if (spec_.rdiags_words()) {  // float32 words: the bundle's part of the batch's block
    r->rdiags.clear();
    const std::size_t n = per_bundle * nk * sizeof(uint32_t);
    const bool file = spec_.rdiags_form == core::ResolutionForm::kFileBytes;
    (file ? r->rdiags_file : r->rdiags_f32) =
        core::PlaneBuffer<char>::Part(s.words, s.words->data() + pos * n, n);
  } else {
    copy(&r->rdiags, s.h_rdiag.get() + o * nk, per_bundle * nk, own);
  }
  r->failed_bins.assign(per_bundle, 0);
  for (int p = plan.bundle_first_patch[b]; p < plan.bundle_first_patch[b + 1]; ++p) {
    if (plan.patches[p].skipped != core::kSkipNone) {
      core::RecordPatchOutcome(plan, p, core::PatchOutcome::kSkipped, 0.0, r);
    }
  }
  if (spec_.canvas_stride > 0) {
    const CanvasDesc& cd = cfg_.state->canvas(b);
    if (cd.ny > 0 && cd.nx > 0) {
      r->model_y0 = cd.y0;
      r->model_x0 = cd.x0;
      r->model_ny = cd.ny;
      r->model_nx = cd.nx;
      const double* src = s.h_canvas.get() + pos * static_cast<std::size_t>(spec_.canvas_stride);
      copy(&r->model, src, static_cast<std::size_t>(cd.ny) * cd.nx, kLateGroup);
    }
  }
}

// The copies out of pinned memory into fresh vectors are page-fault bound, and the last
// batch's sit on the request's critical path. So the vectors are lent by the backend's pool
// of resident arrays (mapped already: nothing to do but the copies); those it has none for
// are allocated, their pages faulted in on the pool in 1 MiB pieces (core/base/prefault.h)
// and zeroed while the host waits for the batch. The copies, memcpys in 128 KiB pieces,
// then follow the download bundle by bundle (Finish): on a lone r frame on an H200, 0.32 ms
// of them remained after the last download instead of 1.48 (record
// cuda_frame-h200-bundle-fill).
namespace {
// 1 MiB pieces to fault in (in 128 KiB pieces the last batch's prefault took 7 ms instead
// of 3 and held up the request's end), 128 KiB pieces to copy (a batch's ~35 MB as ~280
// pieces: as ~45 of 1 MiB the thread with three had 3 MiB where the mean is 2.2).
constexpr std::size_t kFaultPiece = std::size_t{1} << 20;
constexpr std::size_t kPiece = std::size_t{1} << 17;
// Threads of the host pool a batch's assembly takes at most. The copies are bound by
// memory bandwidth, which a few threads saturate: more only wait on memory longer each,
// and the host pays the stalls in CPU-seconds (the pool is the whole server's: the loads'
// decoding and the frame files' encoding run on it too). On one H200 (spexd_host_cost_bench,
// 8 clients) four instead of sixteen took 0.01-0.03 CPU-s a frame off the pool in eight
// of its ten modes (the other two moved less than 0.005), the frames' wall time within
// the run's noise.
constexpr int kMaxAssemblyThreads = 4;
int AssemblyThreads() { return std::min(kMaxAssemblyThreads, core::HardwareThreads()); }
}  // namespace

void BatchExtractor::OutCopy::Fresh() const {  // a lent array too small: not copied on growth
  std::vector<double>().swap(*dst);
  dst->reserve(n / sizeof(double));
}

void BatchExtractor::OutCopy::Resize() const { dst->resize(n / sizeof(double)); }

BatchExtractor::Assembly BatchExtractor::AllocateBundles(const Batch& batch) const {
  Assembly a;
  a.results.resize(batch.bundles.size());
  for (std::size_t pos = 0; pos < a.results.size(); ++pos) SizeBundle(batch, pos, &a.results[pos], &a.copies);
  std::vector<int> fresh;  // copies whose arrays need new memory
  for (std::size_t c = 0; c < a.copies.size(); ++c) {
    const OutCopy& oc = a.copies[c];
    if (oc.fresh) {
      oc.Fresh();
      fresh.push_back(static_cast<int>(c));
    } else {
      oc.Resize();  // lent, mapped memory: nothing to do at an unchanged size
    }
  }
  // (copy, first byte) of every `size`-byte piece of the copies in `which`.
  const auto pieces = [&](std::size_t size, const std::vector<int>& which) {
    std::vector<std::pair<int, std::size_t>> out;
    for (const int c : which) {
      for (std::size_t e = 0; e < a.copies[static_cast<std::size_t>(c)].n; e += size) out.emplace_back(c, e);
    }
    return out;
  };
  // The bundles' groups, then the late one.
  std::vector<std::vector<int>> groups(a.results.size() + 1);
  for (std::size_t c = 0; c < a.copies.size(); ++c) {
    const int g = a.copies[c].group;
    groups[g == kLateGroup ? a.results.size() : static_cast<std::size_t>(g)].push_back(static_cast<int>(c));
  }
  for (const std::vector<int>& g : groups) a.pieces.push_back(pieces(kPiece, g));
  if (!fresh.empty()) {
    const std::vector<std::pair<int, std::size_t>> fault = pieces(kFaultPiece, fresh);
    core::ParallelFor(cfg_.pool, AssemblyThreads(), static_cast<int>(fault.size()), [&](int, int t) {
      const auto [c, e] = fault[static_cast<std::size_t>(t)];
      const OutCopy& oc = a.copies[static_cast<std::size_t>(c)];
      core::PrefaultForWrite(oc.data() + e, std::min(kFaultPiece, oc.n - e));
    });
    core::ParallelFor(cfg_.pool, AssemblyThreads(), static_cast<int>(fresh.size()), [&](int, int i) {
      const OutCopy& oc = a.copies[static_cast<std::size_t>(fresh[static_cast<std::size_t>(i)])];
      oc.Resize();
    });
  }
  return a;
}

void BatchExtractor::CopyGroup(const Assembly& a, std::size_t group) const {
  const std::vector<std::pair<int, std::size_t>>& pieces = a.pieces[group];
  core::ParallelFor(cfg_.pool, AssemblyThreads(), static_cast<int>(pieces.size()), [&](int, int t) {
    const auto [c, e] = pieces[static_cast<std::size_t>(t)];
    const OutCopy& oc = a.copies[static_cast<std::size_t>(c)];
    std::memcpy(oc.data() + e, oc.src + e, std::min(kPiece, oc.n - e));
  });
}

void BatchExtractor::FillBundles(const Batch& batch, const std::vector<char>& retried, Assembly* a) const {
  const core::PatchPlan& plan = *cfg_.plan;
  const WorkspaceSet& s = cfg_.workspace->set(batch.set);
  if (spec_.rdiags_form == core::ResolutionForm::kFileBytes) {  // summed on the device
    for (std::size_t pos = 0; pos < a->results.size(); ++pos) {
      a->results[pos].rdiags_file_word_sum = s.h_word_sums[pos];
    }
  }
  // Outcomes, with the CPU backend's bookkeeping (core/frame/patch_outcome.h).
  for (const RunEntry& e : batch.layout.entries) {
    core::BundleResult& r = a->results[static_cast<std::size_t>(e.bundle_pos)];
    const std::size_t slot = static_cast<std::size_t>(e.slot);
    core::PatchOutcome outcome = core::PatchOutcome::kFailed;
    if (s.h_status[slot] == 0) {
      outcome = retried[slot] ? core::PatchOutcome::kRetried : core::PatchOutcome::kExtracted;
    } else {
      core::MarkPatchFailed(plan, plan.patches[e.patch], &r);
    }
    core::RecordPatchOutcome(plan, e.patch, outcome, s.h_cond[slot], &r);
  }
}

}  // namespace spexd::cuda
