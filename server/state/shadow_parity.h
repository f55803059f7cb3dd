// Shadow parity sampling: a sampled bundle of a served frame is extracted
// again by the CPU reference backend and compared with what was served
// (core::CompareBundles, the spec's parity bar), so that a GPU, driver or library whose
// results drift is noticed while it serves. The checks run on one thread of their own at
// the lowest priority (nice 19), with a CPU backend of --shadow_parity_threads threads
// that inherit it, behind a small bounded queue: a check that finds the queue full is dropped and counted "skipped".
// Nothing a request waits for ever waits for a check.
#ifndef SPEXD_SERVER_SHADOW_PARITY_H_
#define SPEXD_SERVER_SHADOW_PARITY_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "core/frame/bundle_parity.h"
#include "core/frame/extraction_result.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/plan/extraction_params.h"

namespace spexd::server {

class HealthMetrics;

struct ShadowParityOptions {
  double fraction = 0.01;  // frames sampled (0: off)
  int threads = 1;         // CPU threads of the reference backend
  int queue = 2;           // checks waiting or running before new ones are skipped
  core::ParityTolerances tolerances;
};

// One sampled bundle: what the check needs, all owned (the job may be gone by then).
struct ShadowCheck {
  uint64_t request_id = 0;
  std::string psf_id, client_tag, backend, gpu;
  std::shared_ptr<const core::Psf> psf;
  // The served request's plan (validated once, never again): same grid and compat setting.
  std::optional<core::ExtractionPlan> plan;
  std::shared_ptr<core::PreprocImage> image;  // the served frame's planes
  double regularize = 0, psferr = 0;
  core::BundleResult served;  // per Angstrom, as served
};

class ShadowParity {
 public:
  // `metrics` may be null. Starts the check thread when options.fraction > 0.
  ShadowParity(const ShadowParityOptions& options, HealthMetrics* metrics);
  ~ShadowParity();  // stops the thread; checks still queued are dropped
  ShadowParity(const ShadowParity&) = delete;
  ShadowParity& operator=(const ShadowParity&) = delete;

  bool enabled() const { return options_.fraction > 0; }
  // Whether to sample a frame of `nbundles` bundles, and which (an index into them).
  bool Sample(int nbundles, int* pick);
  // Queues `check`; false (counted "skipped") when the queue is full.
  bool Offer(ShadowCheck check);
  // Blocks until no check is queued or running (tests and the device script).
  void WaitIdle();
  struct Totals {
    int64_t ok = 0, drift = 0, skipped = 0, failed = 0;  // failed: the reference could not run
  };
  Totals totals() const;

 private:
  void Loop();
  void RunCheck(ShadowCheck& check);

  const ShadowParityOptions options_;
  HealthMetrics* metrics_;
  mutable absl::Mutex mu_;
  std::deque<ShadowCheck> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Totals totals_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> cancel_{false};  // stops a running check at the destructor
  std::thread thread_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_SHADOW_PARITY_H_
