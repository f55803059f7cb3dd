// CudaBackend: request flow of the CUDA backend. Per request: validate, find or
// build the warm GeometryState, reserve the workspace (no-op when warm), upload the image,
// then run the bundles in batches through two workspace sets: batch k+1 computes while
// batch k's results are copied out (copy stream) and handed to the sink in bundle order.
// Host synchronisation: once per batch, where its results reach the host.
//
// Memory: Memory() and Release() may be called from any thread while a request runs on
// the worker's thread. They never wait for mu_ (held for a whole request): Memory() reads
// a snapshot kept under mem_mu_, and Release() queues the geometry and frees its state
// only when mu_ is free (TryLock); otherwise whoever holds mu_ frees it after unlocking
// (ReleasePendingIfIdle), so a release is never lost.
#include "cuda/host/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/base/task_pool.h"
#include "core/frame/bundle_array_pool.h"
#include "core/frame/bundle_parity.h"
#include "core/io/plane_buffer.h"
#include "cuda/host/batch_extractor.h"
#include "cuda/host/cuda_check.h"
#include "cuda/kernels/device_limits.h"
#include "cuda/host/diagnostics.h"
#include "cuda/host/fault_injection.h"
#include "cuda/host/frames_in_flight.h"
#include "cuda/host/geometry_state.h"
#include "cuda/host/gpu_context.h"
#include "cuda/host/image_upload.h"
#include "cuda/host/ipc_region.h"
#include "cuda/host/nvtx.h"
#include "cuda/host/warm_geometries.h"
#include "cuda/host/workspace.h"

namespace spexd::cuda {
namespace {

#ifdef SPEXD_CUDA_DEBUG
constexpr bool kDebugChecks = true;  // synchronising check after every launch, device asserts
#else
constexpr bool kDebugChecks = false;
#endif

// Host threads of a backend whose owner passed no pool (the copies they do are bound by
// page faults and memory bandwidth, not by cores).
constexpr int kMaxHostThreads = 16;
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class CudaBackend final : public core::Backend, public core::GpuCapabilities {
 public:
  CudaBackend(std::unique_ptr<GpuContext> ctx, const core::BackendOptions& options,
              Diagnostics diagnostics, FaultPlan faults)
      : ctx_(std::move(ctx)),
        host_wait_(options.cuda_host_wait),
        diagnostics_(std::move(diagnostics)),
        faults_(faults),
        workspace_(std::make_unique<Workspace>()) {
    if (options.pool == nullptr) {
      own_pool_ = core::MakeTaskPool(std::min(kMaxHostThreads, core::HardwareThreads()) - 1);
    }
    pool_ = options.pool != nullptr ? options.pool : own_pool_.get();
    if (ctx_ != nullptr) words_.set_pinner(MakePlanePinner(ctx_->device()));
  }

  ~CudaBackend() override {
    // Pending work may still use the workspace: drain before the buffers are freed.
    if (ctx_ != nullptr) {
      (void)ctx_->Activate();
      (void)ctx_->SynchronizeStreams();
    }
  }

  std::string name() const override { return "cuda"; }

  std::string description() const override {
    return absl::StrCat("cuda (device ", ctx_->device(), ": ", ctx_->device_name(), ", ",
                        ctx_->total_memory() >> 20, " MiB, ",
                        "sm_", ctx_->arch(),
                        host_wait_ == core::CudaHostWait::kAuto ? "" : ", host wait ",
                        host_wait_ == core::CudaHostWait::kAuto ? "" : core::Name(host_wait_),
                        kDebugChecks ? ", debug checks" : "", ")");
  }

  bool healthy() const override { return healthy_.load(); }

  core::GpuCapabilities* gpu() override { return this; }

  // Float32 planes are copied to the pinned staging as they are (UploadImage).
  bool TakesFloat32Planes() const override { return true; }
  bool TakesRawPlanes() const override { return true; }  // ruled on the device (UploadImage)
  std::shared_ptr<core::PlaneMemoryPinner> PlanePinner() override {
    return MakePlanePinner(ctx_->device());
  }

  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    SPEXD_RETURN_IF_ERROR(core::ValidateJob(job, /*float32_planes_ok=*/true,
                                                 /*raw_planes_ok=*/true));
    absl::StatusOr<core::ExtractionSummary> result = ExtractAndRelease(job, sink);
    // Releases queued while mu_ was held (see the file comment).
    ReleasePendingIfIdle();
    return result;
  }

  core::BackendMemory Memory() const override {
    core::BackendMemory m;
    m.device = ctx_->device();
    absl::MutexLock lock(&mem_mu_);
    m.device_bytes = static_cast<int64_t>(workspace_bytes_);
    for (const WarmEntry& e : warm_) {
      m.device_bytes += static_cast<int64_t>(e.bytes);
      if (std::shared_ptr<const core::Geometry> g = e.geometry.lock()) {
        m.geometry_bytes[g.get()] += static_cast<int64_t>(e.bytes);
      }
    }
    return m;
  }

  absl::StatusOr<std::unique_ptr<core::ImportedRegion>> ImportRegion(const std::string& ipc_handle,
                                                                     int device,
                                                                     uint64_t size) override {
    if (device != ctx_->device()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "region on device ", device, ", this worker runs on device ", ctx_->device()));
    }
    // Never waits for mu_: opening a handle does not touch the workspace or the streams.
    try {
      return OpenIpcRegion(ipc_handle, device, size);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("opening a CUDA region: ", e.what()));
    }
  }

  void Release(const std::shared_ptr<const core::Geometry>& geometry) override {
    if (geometry == nullptr) return;
    {
      absl::MutexLock lock(&mem_mu_);
      pending_release_.push_back(geometry);
      has_pending_.store(true);
    }
    ReleasePendingIfIdle();
  }

 private:
  // What Memory() reports about one warm GeometryState.
  struct WarmEntry {
    std::weak_ptr<const core::Geometry> geometry;
    std::size_t bytes = 0;
  };

  static bool SameOwner(const std::weak_ptr<const core::Geometry>& a,
                        const std::weak_ptr<const core::Geometry>& b) {
    return !a.owner_before(b) && !b.owner_before(a);
  }

  absl::StatusOr<core::ExtractionSummary> ExtractAndRelease(const core::ExtractionJob& job,
                                                            const core::BundleSink& sink) {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<core::ExtractionSummary> result = ExtractUnderLock(job, sink);
    // A geometry released before or during this request (its PSF was unloaded while the
    // job was queued or running) does not stay warm.
    ReleaseStatesLocked();
    return result;
  }

  // Frees queued releases when no request holds mu_; never waits for one.
  void ReleasePendingIfIdle() {
    while (has_pending_.load()) {
      if (!mu_.TryLock()) return;  // the holder calls this again after unlocking
      ReleaseStatesLocked();
      mu_.Unlock();
    }
  }

  // Drops the states of released geometries and of geometries nobody holds any more, and
  // the workspace when no state is left (an unloaded server returns its device memory).
  void ReleaseStatesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    {
      absl::MutexLock lock(&mem_mu_);
      for (auto& g : pending_release_) released_.push_back(g);
      pending_release_.clear();
      has_pending_.store(false);
    }
    released_.erase(std::remove_if(released_.begin(), released_.end(),
                                   [](const std::weak_ptr<const core::Geometry>& w) { return w.expired(); }),
                    released_.end());
    // Called only by the algorithms below, on this thread, under mu_.
    auto drop = [this](const std::unique_ptr<GeometryState>& st)
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (st->geometry().expired()) return true;
      for (const auto& r : released_) {
        if (SameOwner(r, st->geometry())) return true;
      }
      return false;
    };
    const bool drops = std::any_of(states_.begin(), states_.end(), drop);
    const bool held = workspace_->device_bytes() + spot_inputs_.bytes() > 0;
    if (!drops && !(states_.empty() && held)) return;
    // Frees happen on this thread, which may not be the worker's: select the device.
    (void)ctx_->Activate();
    // Work of the last request may still read the state: cudaFree waits for the device.
    states_.erase(std::remove_if(states_.begin(), states_.end(), drop), states_.end());
    if (states_.empty()) {
      workspace_ = std::make_unique<Workspace>();
      spot_inputs_ = SpotInputs();
    }
    PublishMemoryLocked();
  }

  // Refreshes what Memory() reports; called whenever states_ or the workspace change.
  void PublishMemoryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<WarmEntry> warm;
    warm.reserve(states_.size());
    for (const auto& st : states_) warm.push_back(WarmEntry{st->geometry(), st->device_bytes()});
    const std::size_t ws = workspace_->device_bytes() + spot_inputs_.bytes();
    absl::MutexLock lock(&mem_mu_);
    warm_ = std::move(warm);
    workspace_bytes_ = ws;
  }

  absl::StatusOr<core::ExtractionSummary> ExtractUnderLock(const core::ExtractionJob& job,
                                                           const core::BundleSink& sink)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!healthy_.load()) {
      return absl::UnavailableError("CUDA backend is unhealthy after a sticky device error");
    }
    core::ExtractionSummary summary;
    const double t0 = Now();
    absl::Status s;
    try {
      s = ExtractLocked(job, sink, &summary);
    } catch (const std::bad_alloc&) {
      s = absl::ResourceExhaustedError("out of host memory in the CUDA backend");
    } catch (const std::exception& e) {
      s = absl::InternalError(absl::StrCat("CUDA backend: ", std::string(e.what())));
    }
    if (!s.ok()) {
      // Let queued work finish before the caller may reuse or free anything, and mark the
      // backend unhealthy if the context is gone (docs/design.md "Conventions": sticky errors).
      const cudaError_t e1 = ctx_->SynchronizeStreams();
      const cudaError_t e2 = cudaGetLastError();
      if (IsStickyError(e1) || IsStickyError(e2)) {
        healthy_ = false;
      }
      return s;
    }
    summary.seconds = Now() - t0;
    return summary;
  }

  absl::StatusOr<GeometryState*> WarmState(const std::shared_ptr<const core::Geometry>& geo,
                                           core::ExtractionSummary* summary)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (std::size_t i = 0; i < states_.size(); ++i) {
      if (states_[i]->Matches(geo)) {
        std::rotate(states_.begin(), states_.begin() + static_cast<std::ptrdiff_t>(i),
                    states_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        return states_.front().get();
      }
    }
    // As many states stay warm as device memory allows (cuda/host/warm_geometries.h); the
    // least recently used make room. The last one dropped has its buffers reused rather
    // than freed: cudaFree waits for the whole device, i.e. for the other backends on this
    // GPU (GeometryState::Create), so a backend at its memory bound frees nothing. The
    // dropped states' last reader was this backend's previous frame, on this backend's
    // own streams, so waiting for those is enough.
    std::unique_ptr<GeometryState> evicted;
    std::size_t free_b = 0, total_b = 0;
    SPEXD_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_b, &total_b));
    std::vector<std::size_t> warm_bytes;
    warm_bytes.reserve(states_.size());
    for (const auto& st : states_) warm_bytes.push_back(st->device_bytes());
    const int max_states =
        faults_.warm_geometries > 0 ? faults_.warm_geometries : kMaxWarmGeometries;
    const int drop =
        WarmStatesToDrop(warm_bytes, GeometryStateBytes(geo->plan()), free_b, total_b, max_states);
    if (drop > 0) {
      SPEXD_CUDA_RETURN_IF_ERROR(ctx_->SynchronizeStreams());
      for (int k = 0; k < drop; ++k) {
        evicted = std::move(states_.back());  // frees the one dropped before it
        states_.pop_back();
      }
    }
    NvtxRange range{"warm geometry (spots, plan upload)"};
    absl::StatusOr<std::unique_ptr<GeometryState>> st =
        GeometryState::Create(geo, *ctx_, &spot_inputs_, std::move(evicted));
    if (!st.ok()) {
      PublishMemoryLocked();
      return st.status();
    }
    summary->stage_seconds["spots"] += (*st)->spot_seconds();
    states_.insert(states_.begin(), *std::move(st));
    PublishMemoryLocked();
    return states_.front().get();
  }

  absl::Status ExtractLocked(const core::ExtractionJob& job, const core::BundleSink& sink,
                             core::ExtractionSummary* summary) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    SPEXD_RETURN_IF_ERROR(ctx_->Activate());
    // Alone on the GPU, a frame runs in the latency mode from the geometry upload on (the
    // streams change only between frames): its compute, prep and tail streams at the
    // greatest priority (FramePriorities) and its reductions on the tail stream, 0.7-0.9 ms
    // sooner on an H100. Frames that share the GPU keep equal priorities and the reductions
    // on the compute stream, which give the most frames a second.
    const FrameInFlight in_flight(ctx_->device());
    const bool latency = in_flight.alone();
    SPEXD_RETURN_IF_ERROR(ctx_->SetStreamPriorities(FramePriorities(latency)));
    const core::PatchPlan& plan = job.geometry->plan();
    std::vector<int> bundles = job.bundles;
    if (bundles.empty()) {
      for (int b = 0; b < plan.nbundles; ++b) bundles.push_back(b);
    }
    if (bundles.empty()) return absl::OkStatus();
    SPEXD_ASSIGN_OR_RETURN(GeometryState * state, WarmState(job.geometry, summary));

    BatchExtractor::Config config;
    config.ctx = ctx_.get();
    config.workspace = workspace_.get();
    config.state = state;
    config.plan = &plan;
    config.pool = pool_;
    config.arrays = arrays_.get();
    config.words = &words_;
    config.diagnostics = diagnostics_;
    config.reduce_on_tail = latency;
    config.max_batch_bundles = faults_.batch_bundles;
    config.special_resolution = faults_.special_resolution;
    BatchExtractor extractor(config);
    const absl::Status prepared = extractor.Prepare(job, static_cast<int>(bundles.size()));
    PublishMemoryLocked();  // the workspace may have grown
    SPEXD_RETURN_IF_ERROR(prepared);
    const std::vector<std::vector<int>> batches = extractor.Batches(bundles);

    bool raw = false;  // raw planes: the device counts what the rules did
    if (job.device_image != nullptr) {
      NvtxRange range{"import image from a CUDA region"};
      const std::size_t pixels = static_cast<std::size_t>(plan.image_height) * plan.image_width;
      SPEXD_RETURN_IF_ERROR(ImportImage(*ctx_, *workspace_, *job.device_image, pixels));
    } else {
      UploadStats upload;
      NvtxRange range{"upload image"};
      // The first batch's columns go first, so that its normal equations start sooner.
      const ColumnRange first = extractor.Columns(batches.front());
      SPEXD_RETURN_IF_ERROR(UploadImage(*ctx_, *workspace_, *job.image, first, pool_, &upload));
      summary->stage_seconds["upload_host"] += upload.host_seconds;
      raw = upload.raw;
    }
    SPEXD_RETURN_IF_ERROR(InjectRequestFault(faults_, ++requests_, ctx_->compute()));
    if (faults_.perturb_bundle_flux >= 0) {
      // Test-only (fault_injection.h): a wrong result the shadow parity check must flag.
      const core::BundleSink perturbing = [&](core::BundleResult&& b) {
        if (b.bundle == faults_.perturb_bundle_flux) core::PerturbBundleFlux(&b);
        return sink(std::move(b));
      };
      return extractor.Run(job, batches, perturbing, summary);
    }
    SPEXD_RETURN_IF_ERROR(extractor.Run(job, batches, sink, summary));
    if (raw) {
      SPEXD_RETURN_IF_ERROR(
          RuleCounts(*workspace_, &summary->pixels_masked, &summary->pixels_nonfinite));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<GpuContext> ctx_;
  core::CudaHostWait host_wait_;
  const Diagnostics diagnostics_;  // the timeline and test faults (cuda/host/diagnostics.h)
  const FaultPlan faults_;  // test-only (fault_injection.h); all zero in production
  // Host threads (bundle assembly; the image upload can use them too): the owner's pool
  // (BackendOptions::pool), or else one of this backend's own.
  std::unique_ptr<core::TaskPool> own_pool_;
  core::TaskPool* pool_ = nullptr;
  // The bundles' result arrays, resident from frame to frame: lent to each batch's bundles
  // and given back when their consumers drop them (core/frame/bundle_array_pool.h).
  const std::shared_ptr<core::BundleArrayPool> arrays_ = core::BundleArrayPool::Create();
  // Page-locked blocks the batches' resolution words are downloaded into (WorkspaceSet::
  // words), reused as their bundles' consumers drop them: about four r frames' worth.
  core::PlaneBufferPool words_{int64_t{256} << 20};
  absl::Mutex mu_;  // held for a whole request
  int requests_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<Workspace> workspace_ ABSL_GUARDED_BY(mu_);
  SpotInputs spot_inputs_ ABSL_GUARDED_BY(mu_);  // GeometryState::Create's, kept between calls
  std::vector<std::unique_ptr<GeometryState>> states_ ABSL_GUARDED_BY(mu_);  // MRU first
  // Released geometries still alive: a queued job may warm one again; it is dropped again
  // when that request ends.
  std::vector<std::weak_ptr<const core::Geometry>> released_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> healthy_{true};

  mutable absl::Mutex mem_mu_;  // never held while waiting for mu_
  std::vector<WarmEntry> warm_ ABSL_GUARDED_BY(mem_mu_);
  std::size_t workspace_bytes_ ABSL_GUARDED_BY(mem_mu_) = 0;
  std::vector<std::weak_ptr<const core::Geometry>> pending_release_ ABSL_GUARDED_BY(mem_mu_);
  std::atomic<bool> has_pending_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<core::Backend>> CreateCudaBackend(
    const core::BackendOptions& options) {
  // The environment switches, read here only (cuda/host/diagnostics.h): a bad value fails the
  // creation with INVALID_ARGUMENT naming it.
  absl::StatusOr<Diagnostics> diagnostics = DiagnosticsFromEnvironment();
  if (!diagnostics.ok()) return diagnostics.status();
  absl::StatusOr<FaultPlan> faults = ParseFaultPlan(diagnostics->test_faults);
  if (!faults.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SPEXD_TEST_CUDA_FAULTS: ", faults.status().message()));
  }
  if (faults->oom_at_alloc > 0) ArmAllocationFault(faults->oom_at_alloc);
  ArmAllocationPoison(faults->poison_allocations);
  if (faults->fail_patch_once >= 0) ArmPatchFault(faults->fail_patch_once);
  // Each creation sets the cap (none without one), so a capped backend's test leaves no cap
  // behind for the backends created after it.
  SetSharedMemoryCap(static_cast<std::size_t>(faults->shared_memory_cap));
  auto ctx = GpuContext::Create(options.device, options.cuda_host_wait);
  if (!ctx.ok()) {
    return absl::UnavailableError(absl::StrCat("CUDA backend unavailable: ", ctx.status().ToString()));
  }
  return std::unique_ptr<core::Backend>(new CudaBackend(std::move(ctx).value(), options,
                                                    *std::move(diagnostics), *faults));
}

}  // namespace spexd::cuda
