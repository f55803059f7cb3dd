#include "server/state/shadow_parity.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/backend/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/plan/geometry.h"
#include "server/platform/health_metrics.h"
#include "server/platform/log.h"

namespace spexd::server {
namespace {

// The calling thread, and the threads it starts afterwards (they inherit it), at nice 19:
// the CPU scheduler gives them about 1.5 % of a core that a request's thread also wants
// (weight 15 against 1024), all of an idle one. SCHED_IDLE would yield even more, but
// starves the check outright on a saturated host (a CI runner), so nice 19 it is.
void LowestPriority() {
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
}

}  // namespace

ShadowParity::ShadowParity(const ShadowParityOptions& options, HealthMetrics* metrics)
    : options_(options), metrics_(metrics), rng_(std::random_device{}()) {
  if (enabled()) thread_ = std::thread([this] { Loop(); });
}

ShadowParity::~ShadowParity() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  cancel_.store(true);
  if (thread_.joinable()) thread_.join();
}

bool ShadowParity::Sample(int nbundles, int* pick) {
  if (!enabled() || nbundles <= 0) return false;
  absl::MutexLock lock(&mu_);
  if (std::uniform_real_distribution<double>(0.0, 1.0)(rng_) >= options_.fraction) return false;
  *pick = std::uniform_int_distribution<int>(0, nbundles - 1)(rng_);
  return true;
}

bool ShadowParity::Offer(ShadowCheck check) {
  const std::string backend = check.backend, gpu = check.gpu;
  {
    absl::MutexLock lock(&mu_);
    if (!stop_ && static_cast<int>(queue_.size()) + running_ < options_.queue) {
      queue_.push_back(std::move(check));
      if (metrics_ != nullptr) metrics_->SetShadowQueue(static_cast<double>(queue_.size() + running_));
      return true;
    }
    ++totals_.skipped;
  }
  if (metrics_ != nullptr) metrics_->CountShadowCheck(backend, gpu, "skipped");
  return false;
}

void ShadowParity::WaitIdle() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return (queue_.empty() && running_ == 0) || stop_; };
  mu_.Await(absl::Condition(&idle));
}

ShadowParity::Totals ShadowParity::totals() const {
  absl::MutexLock lock(&mu_);
  return totals_;
}

void ShadowParity::Loop() {
  LowestPriority();
  for (;;) {
    ShadowCheck check;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stop_; };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      check = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    RunCheck(check);
    absl::MutexLock lock(&mu_);
    --running_;
    if (metrics_ != nullptr) metrics_->SetShadowQueue(static_cast<double>(queue_.size() + running_));
  }
}

void ShadowParity::RunCheck(ShadowCheck& c) {
  const auto t0 = std::chrono::steady_clock::now();
  // A geometry of its own without kept spots: the reference must not grow the cache's
  // (~90 MB of spots per bundle) nor share state with the served extraction.
  std::shared_ptr<const core::Geometry> geometry;
  absl::StatusOr<core::BundleResult> reference = [&]() -> absl::StatusOr<core::BundleResult> {
    // Raw planes decoded and ruled on the host, as the reader would have: the CPU
    // reference checks the device's rules too. Exact.
    core::WidenPlanes(c.image.get());
    if (!c.plan.has_value()) return absl::InternalError("shadow check without a plan");
    auto created = core::Geometry::Create(c.psf, *c.plan, c.image->height, c.image->width,
                                          /*cache_spots=*/false);
    if (!created.ok()) return created.status();
    geometry = *created;
    // Created on this thread: its pool's threads inherit the lowest priority.
    std::unique_ptr<core::Backend> cpu = core::CreateCpuBackend(options_.threads);
    core::ExtractionJob job;
    job.geometry = geometry;
    job.image = c.image.get();
    job.regularize = c.regularize;
    job.psferr = c.psferr;
    job.bundles = {c.served.bundle};
    job.cancel = &cancel_;
    core::BundleResult out;
    auto summary = cpu->Extract(job, [&out](core::BundleResult&& b) {
      out = std::move(b);
      return absl::OkStatus();
    });
    if (!summary.ok()) return summary.status();
    core::FinalizeBundle(geometry->dwave(), &out);
    return out;
  }();
  c.image.reset();  // the planes go back to their pool now
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (metrics_ != nullptr) metrics_->ObserveShadowSeconds(seconds);
  if (!reference.ok() && cancel_.load()) {
    // Stopped by the shutdown: not a failure of the reference (nothing counted; the
    // server is going away).
    Log(LogLevel::kInfo, "shadow_parity_stopped",
        {{"request", c.request_id}, {"psf", c.psf_id}, {"bundle", c.served.bundle}});
    return;
  }
  if (!reference.ok()) {
    {
      absl::MutexLock lock(&mu_);
      ++totals_.failed;
    }
    Log(LogLevel::kWarning, "shadow_parity_error",
        {{"request", c.request_id}, {"psf", c.psf_id}, {"bundle", c.served.bundle},
         {"error", reference.status().ToString()}});
    return;
  }
  const core::ParityReport report =
      core::CompareBundles(geometry->plan(), c.served, *reference, options_.tolerances);
  // The line first, then the counts: an alert raised on the metric always finds its line.
  Log(report.drift ? LogLevel::kError : LogLevel::kDebug,
      report.drift ? "shadow_parity_drift" : "shadow_parity_ok",
      {{"request", c.request_id}, {"tag", c.client_tag}, {"psf", c.psf_id}, {"bundle", c.served.bundle},
       {"fibers", absl::StrCat(c.served.fiber_begin, "-", c.served.fiber_begin + c.served.nfibers - 1)},
       {"backend", c.backend}, {"gpu", c.gpu}, {"compat", std::string(core::CompatName(c.plan->params().compat))},
       {"flux_dev", report.flux}, {"ivar_dev", report.ivar}, {"resolution_dev", report.resolution},
       {"pixmask_dev", report.pixmask}, {"chi2pix_dev", report.chi2pix},
       {"mask_mismatches", report.mask_mismatches}, {"envelope_bins", report.envelope_bins},
       {"detail", report.detail}, {"seconds", seconds}});
  {
    absl::MutexLock lock(&mu_);
    ++(report.drift ? totals_.drift : totals_.ok);
  }
  if (metrics_ != nullptr) {
    metrics_->CountShadowCheck(c.backend, c.gpu, report.drift ? "drift" : "ok");
    metrics_->ObserveShadowDeviation(c.backend, c.gpu, report.worst());
  }
}

}  // namespace spexd::server
