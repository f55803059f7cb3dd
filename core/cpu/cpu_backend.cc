#include "core/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/internal/lapack.h"
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

    for (int b : bundles) {
      if (CancelRequested(job)) return absl::CancelledError("extraction cancelled");
      double t0 = Now();
      std::shared_ptr<const Spots> spots = geo.BundleSpots(b, pool_);
      double t1 = Now();
      summary.stage_seconds["spots"] += t1 - t0;

      BundleResult result;
      result.Allocate(b, plan.bundle_fiber_begin(b), plan.bundlesize, plan.nwave, plan.ndiag);
      const int p0 = plan.bundle_first_patch[b], p1 = plan.bundle_first_patch[b + 1];
      std::vector<std::vector<double>> models(job.want_model ? p1 - p0 : 0);
      std::vector<PatchOutcome> outcomes(p1 - p0);
      std::vector<double> conditions(p1 - p0, 0.0);
      // Patches are skipped once the job is cancelled: a bundle of a full frame takes
      // seconds on the CPU.
      // Patches go in groups of consecutive ones (ExtractGroup: their eigen-decompositions
      // fill whole groups of SIMD lanes).
      constexpr int kGroup = PatchExtractor::kGroup;
      ParallelFor(pool_, threads_, (p1 - p0 + kGroup - 1) / kGroup, [&](int worker, int task) {
        if (CancelRequested(job)) return;
        if (workspaces[worker] == nullptr) workspaces[worker] = std::make_unique<PatchWorkspace>(plan);
        const int i0 = task * kGroup, count = std::min(kGroup, p1 - p0 - i0);
        extractor.ExtractGroup(&plan.patches[p0 + i0], count, *spots, planes, workspaces[worker].get(), &result,
                               &outcomes[i0], &conditions[i0],
                               job.want_model ? &models[i0] : nullptr);
      });
      if (CancelRequested(job)) return absl::CancelledError("extraction cancelled");
      double t2 = Now();
      summary.stage_seconds["patches"] += t2 - t1;

      for (int i = 0; i < p1 - p0; ++i) {
        RecordPatchOutcome(plan, p0 + i, outcomes[i], conditions[i], &result);
      }
      if (job.want_model) StitchModel(plan, p0, p1, models, &result);
      summary.stage_seconds["stitch"] += Now() - t2;
      summary.counts += result.counts;
      const double t3 = Now();
      SPEXD_RETURN_IF_ERROR(sink(std::move(result)));
      summary.stage_seconds["sink"] += Now() - t3;
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

  int threads_;  // patches solved at once: the calling thread and up to threads_ - 1 of pool_'s
  std::unique_ptr<TaskPool> own_pool_;  // when the owner passed none
  TaskPool* pool_;
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(int threads, TaskPool* pool) {
  return std::make_unique<CpuBackend>(threads, pool);
}

}  // namespace spexd::core
