#include "core/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <memory>
#include <mutex>  // std::call_once
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/cpu/internal/lapack.h"
#include "core/frame/bundle_array_pool.h"
#include "core/base/parallel_for.h"
#include "core/cpu/internal/patch_extractor.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CpuBackend : public Backend {
 public:
  CpuBackend(int threads, TaskPool* pool) : threads_(threads > 0 ? threads : HardwareThreads()) {
    if (pool == nullptr) {
      own_pool_ = MakeTaskPool(threads_ - 1);  // the extracting thread is the threads_-th
      pool = own_pool_.get();
    }
    pool_ = pool;
    UseSingleThreadedBlas();
  }
  std::string name() const override { return "cpu"; }
  std::string description() const override { return absl::StrCat("cpu (", threads_, " threads)"); }
  // Each patch gathers its window from either kind of plane (PatchExtractor::GatherWindow):
  // a served frame skips the widened copy, 2 x 8 bytes a pixel zero-filled and written.
  bool TakesFloat32Planes() const override { return true; }

  absl::StatusOr<ExtractionSummary> Extract(const ExtractionJob& job,
                                            const BundleSink& sink) override {
    SPEXD_RETURN_IF_ERROR(ValidateJob(job, /*float32_planes_ok=*/true));
    if (job.device_image != nullptr) {
      return absl::FailedPreconditionError(
          "the cpu backend cannot read a frame from device memory (CUDA region input)");
    }
    const Geometry& geo = *job.geometry;
    const PatchPlan& plan = geo.plan();
    PatchOptions opts;
    opts.compat = geo.params().compat;
    opts.regularize = job.regularize;
    opts.psferr = job.psferr;
    PatchExtractor extractor(plan, opts);
    const PreprocImage& im = *job.image;
    ImagePlanes planes;
    if (im.has_float32_planes()) {
      planes.image32 = im.image32.data();
      planes.ivar32 = im.ivar32.data();
    } else {
      planes.image = im.image.data();
      planes.ivar = im.ivar.data();
    }

    std::vector<int> bundles = job.bundles;
    if (bundles.empty()) {
      for (int b = 0; b < plan.nbundles; ++b) bundles.push_back(b);
    }
    ExtractionSummary summary;
    const double t_start = Now();
    // One workspace per worker, sized from the plan by the worker itself on its first
    // patch: the zero fill (3 n x n per worker) runs in parallel, in the worker's memory.
    std::vector<std::unique_ptr<PatchWorkspace>> workspaces(threads_);
    // Bundles go in windows whose patches form one parallel loop: threads go on to the next
    // bundle's groups while a bundle's last ones finish (a barrier per bundle idled up to a
    // round of tasks: a bundle was 59 groups of four patches, 3.7 rounds on 16 threads;
    // of eight, 30). A window's spots are evaluated before its patches (on every thread),
    // so: the whole frame when every bundle's spots are already kept (a warm geometry);
    // one bundle at a time when the geometry keeps them but has not yet computed them (a
    // cold frame's first bundle then comes after its own spots only, not after all
    // twenty bundles'); two when it does not keep them (~90 MB a bundle, r camera).
    const bool warm = geo.caches_spots() &&
                      std::all_of(bundles.begin(), bundles.end(), [&](int b) { return geo.HasSpots(b); });
    const std::size_t window = warm ? bundles.size() : geo.caches_spots() ? 1 : 2;
    for (std::size_t w0 = 0; w0 < bundles.size(); w0 += window) {
      const std::size_t w1 = std::min(bundles.size(), w0 + window);
      SPEXD_RETURN_IF_ERROR(ExtractWindow(job, extractor, planes,
                                          {bundles.data() + w0, w1 - w0}, sink, workspaces,
                                          &summary));
    }
    summary.seconds = Now() - t_start;
    // Thread CPU seconds inside the patches, summed over threads.
    for (const auto& ws : workspaces) {
      if (ws == nullptr) continue;
      const auto& st = ws->step_seconds();
      summary.stage_seconds["patch.projection"] += st.projection;
      summary.stage_seconds["patch.normal_eq"] += st.normal_eq;
      summary.stage_seconds["patch.cholesky"] += st.cholesky;
      summary.stage_seconds["patch.inverse_blocks"] += st.inverse;
      summary.stage_seconds["patch.decorrelate"] += st.decorrelate;
      summary.stage_seconds["patch.outputs"] += st.outputs;
    }
    return summary;
  }

 private:
  // One bundle of a window: its spots, results, and the groups of patches still running.
  struct BundleWork {
    int bundle = 0, p0 = 0, p1 = 0, first_task = 0;
    std::shared_ptr<const Spots> spots;
    BundleResult result;
    std::vector<std::vector<double>> models;
    std::vector<PatchOutcome> outcomes;
    std::vector<double> conditions;
    std::atomic<int> groups_left{0};
    std::atomic<bool> finished{false};  // outcomes recorded, model stitched: ready to sink
    // The result arrays (~7 MB a bundle of the r camera) are allocated by the bundle's
    // first task: a frame holds only the bundles in progress or waiting for the sink, not
    // all of them from the start. std::call_once, not absl's: a thread that waits in
    // absl::call_once spins in uninstrumented Abseil code, so TSan did not see the
    // allocating thread's writes ordered before the waiter's reads (a TSan report in CI).
    std::once_flag allocated;
    void Allocate(const PatchPlan& plan, BundleArrayPool* arrays) {
      std::call_once(allocated, [&] {
        const std::size_t bins = static_cast<std::size_t>(plan.bundlesize) * plan.nwave;
        arrays->Lend(&result, bins, static_cast<std::size_t>(2 * plan.ndiag + 1));
        result.Allocate(bundle, plan.bundle_fiber_begin(bundle), plan.bundlesize, plan.nwave,
                        plan.ndiag);
      });
    }
  };

  // Extracts `bundles` as one parallel loop over their groups of patches (kGroup
  // consecutive patches of one bundle a task, in bundle order). The task that ends a bundle
  // records its outcomes and stitches its model; finished bundles go to `sink` in
  // ascending order, one call at a time (from the thread that finds the next one ready).
  absl::Status ExtractWindow(const ExtractionJob& job, const PatchExtractor& extractor,
                             const ImagePlanes& planes, absl::Span<const int> bundles,
                             const BundleSink& sink,
                             std::vector<std::unique_ptr<PatchWorkspace>>& workspaces,
                             ExtractionSummary* summary) {
    const Geometry& geo = *job.geometry;
    const PatchPlan& plan = geo.plan();
    constexpr int kGroup = PatchExtractor::kGroup;
    std::vector<std::unique_ptr<BundleWork>> work;
    std::vector<int> task_bundle;  // index into `work` of each task
    const double t0 = Now();
    for (int b : bundles) {
      if (CancelRequested(job)) return absl::CancelledError("extraction cancelled");
      auto w = std::make_unique<BundleWork>();
      w->bundle = b;
      w->p0 = plan.bundle_first_patch[b];
      w->p1 = plan.bundle_first_patch[b + 1];
      w->spots = geo.BundleSpots(b, pool_);
      const int n = w->p1 - w->p0, groups = (n + kGroup - 1) / kGroup;
      w->models.resize(job.want_model ? n : 0);
      w->outcomes.resize(n);
      w->conditions.assign(n, 0.0);
      w->first_task = static_cast<int>(task_bundle.size());
      w->groups_left.store(groups);
      task_bundle.insert(task_bundle.end(), groups, static_cast<int>(work.size()));
      if (groups == 0) {
        w->Allocate(plan, arrays_.get());
        FinishBundle(job, w.get());
      }
      work.push_back(std::move(w));
    }
    const double t1 = Now();
    summary->stage_seconds["spots"] += t1 - t0;

    // The sink takes finished bundles in ascending order, one call at a time, from
    // whichever thread finds the next one finished (the task that finished it, or the
    // caller between its tasks and at the end): a bundle is not held back while the caller
    // is busy with a group of patches. None once the job is cancelled or the sink failed
    // (the sink may be slow: a cancelled job must not wait on it).
    absl::Mutex sink_mu;
    std::atomic<std::size_t> next_sink{0};
    absl::Status sink_status;  // guarded by sink_mu
    double sink_seconds = 0;   // guarded by sink_mu
    std::atomic<bool> stop{false};
    auto next_ready = [&] {
      const std::size_t next = next_sink.load(std::memory_order_acquire);
      return !stop.load(std::memory_order_relaxed) && !CancelRequested(job) &&
             next < work.size() && work[next]->finished.load(std::memory_order_acquire);
    };
    auto sink_ready = [&] {
      // Re-checked after each unlock: a bundle finished by another thread while this one
      // held the lock is not left waiting.
      while (next_ready()) {
        if (!sink_mu.TryLock()) return;  // the holder sinks it
        while (next_ready()) {
          BundleWork& w = *work[next_sink.load(std::memory_order_relaxed)];
          summary->counts += w.result.counts;
          const double s0 = Now();
          sink_status = sink(std::move(w.result));
          sink_seconds += Now() - s0;
          // Whatever arrays the sink left here (it copied them) go back to the pool now,
          // for the window's later bundles, not at the window's end.
          { BundleResult done = std::move(w.result); }
          w.spots.reset();
          w.models = {};
          next_sink.fetch_add(1, std::memory_order_release);
          if (!sink_status.ok()) stop.store(true);
        }
        sink_mu.Unlock();
      }
    };
    // Patches are skipped once the job is cancelled (a bundle of a full frame takes
    // seconds on the CPU) or the sink failed.
    ParallelFor(pool_, threads_, static_cast<int>(task_bundle.size()), [&](int worker, int task) {
      if (stop.load(std::memory_order_relaxed) || CancelRequested(job)) return;
      BundleWork& w = *work[static_cast<std::size_t>(task_bundle[static_cast<std::size_t>(task)])];
      if (workspaces[worker] == nullptr) workspaces[worker] = std::make_unique<PatchWorkspace>(plan);
      w.Allocate(plan, arrays_.get());
      const int i0 = (task - w.first_task) * kGroup, count = std::min(kGroup, w.p1 - w.p0 - i0);
      extractor.ExtractGroup(&plan.patches[w.p0 + i0], count, *w.spots, planes,
                             workspaces[worker].get(), &w.result, &w.outcomes[i0],
                             &w.conditions[i0], job.want_model ? &w.models[i0] : nullptr);
      // acq_rel: the task that ends the bundle sees every other group's writes.
      if (w.groups_left.fetch_sub(1, std::memory_order_acq_rel) == 1) FinishBundle(job, &w);
      sink_ready();
    });
    // "patches": the loop's wall, including sink calls made on its threads while others
    // extracted; "sink": every sink call's seconds, so the two may overlap (as the CUDA
    // backend's stages do).
    const double t2 = Now();
    if (CancelRequested(job)) return absl::CancelledError("extraction cancelled");
    sink_ready();
    absl::MutexLock lock(&sink_mu);
    summary->stage_seconds["patches"] += t2 - t1;
    summary->stage_seconds["sink"] += sink_seconds;
    SPEXD_RETURN_IF_ERROR(sink_status);
    if (next_sink.load() != work.size()) return absl::InternalError("a bundle's patches did not all run");
    return absl::OkStatus();
  }

  void FinishBundle(const ExtractionJob& job, BundleWork* w) const {
    const PatchPlan& plan = job.geometry->plan();
    for (int i = 0; i < w->p1 - w->p0; ++i) {
      RecordPatchOutcome(plan, w->p0 + i, w->outcomes[static_cast<std::size_t>(i)],
                         w->conditions[static_cast<std::size_t>(i)], &w->result);
    }
    if (job.want_model) StitchModel(plan, w->p0, w->p1, w->models, &w->result);
    w->finished.store(true, std::memory_order_release);
  }

  // Bundle canvas from the plan; patch models are added in patch order, skipping
  // all-zero or non-finite ones (spec §2.12).
  static void StitchModel(const PatchPlan& plan, int p0, int p1,
                          const std::vector<std::vector<double>>& models, BundleResult* out) {
    const BundleCanvas& c = plan.bundle_canvas[out->bundle];
    if (c.ny == 0 || c.nx == 0) return;
    out->model_y0 = c.y0; out->model_x0 = c.x0; out->model_ny = c.ny; out->model_nx = c.nx;
    out->model.assign(static_cast<std::size_t>(c.ny) * c.nx, 0.0);
    for (int p = p0; p < p1; ++p) {
      const PatchDesc& d = plan.patches[p];
      const std::vector<double>& m = models[p - p0];
      if (d.skipped != kSkipNone || m.empty()) continue;
      bool all_zero = true, finite = true;
      for (double v : m) {
        if (v != 0.0) all_zero = false;
        if (!std::isfinite(v)) finite = false;
      }
      if (all_zero || !finite) continue;
      for (int iy = 0; iy < d.ny; ++iy) {
        double* dst = out->model.data() + static_cast<std::size_t>(d.y0 - c.y0 + iy) * c.nx + (d.x0 - c.x0);
        const double* src = m.data() + static_cast<std::size_t>(iy) * d.nx;
        for (int ix = 0; ix < d.nx; ++ix) dst[ix] += src[ix];
      }
    }
  }

  // The bundles' arrays, kept from bundle to bundle and frame to frame: a bundle's fresh
  // ~7 MB (r camera) cost a page fault per page (core/frame/bundle_array_pool.h).
  const std::shared_ptr<BundleArrayPool> arrays_ = BundleArrayPool::Create();
  int threads_;  // patches solved at once: the calling thread and up to threads_ - 1 of pool_'s
  std::unique_ptr<TaskPool> own_pool_;  // when the owner passed none
  TaskPool* pool_;
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(int threads, TaskPool* pool) {
  return std::make_unique<CpuBackend>(threads, pool);
}

}  // namespace spexd::core
