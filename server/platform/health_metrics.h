// Numerical-health and shadow-parity metrics (alerts and runbook in
// docs/operations.md). Registered on ServerMetrics' registry. Labels are bounded:
// backend (cpu | cuda), gpu (device ordinal or "cpu"), outcome, result, bit, and fibers
// (the 100-fibre block of a spectrograph's 500: "0-99" ... "400-499"). No label names a
// request or a PSF: those go to the log lines.
#ifndef SPEXD_SERVER_HEALTH_METRICS_H_
#define SPEXD_SERVER_HEALTH_METRICS_H_

#include <string>

#include "core/frame/bundle_parity.h"
#include "core/frame/extraction_result.h"
#include "core/frame/health_summary.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace spexd::server {

class HealthMetrics {
 public:
  explicit HealthMetrics(prometheus::Registry& registry);

  // One served bundle: its patches' condition estimates (one histogram update per bundle,
  // not per patch) and its retried and failed patches by fibre block.
  void ObserveBundle(const std::string& backend, const std::string& gpu, const core::BundleResult& b);
  // One served frame: mask bit counts, median chi2pix, worst condition.
  void ObserveFrame(const std::string& backend, const std::string& gpu, const core::FrameHealth& h);
  // A shadow parity check: result "ok", "drift" or "skipped"; the deviation (worst of
  // flux, ivar, R on the parity scales) for the first two.
  void CountShadowCheck(const std::string& backend, const std::string& gpu, const char* result);
  void ObserveShadowDeviation(const std::string& backend, const std::string& gpu, double deviation);
  void SetShadowQueue(double n) { shadow_queue_->Set(n); }
  void ObserveShadowSeconds(double s) { shadow_seconds_->Observe(s); }
  // Shows the usual series at 0 (a rule's rate() needs a series before the first event).
  void AddUsualSeries(const std::string& backend, const std::string& gpu);

 private:
  prometheus::Family<prometheus::Histogram>* condition_;
  prometheus::Family<prometheus::Histogram>* frame_condition_;
  prometheus::Family<prometheus::Counter>* patch_problems_;
  prometheus::Family<prometheus::Counter>* mask_bins_;
  prometheus::Family<prometheus::Histogram>* frame_chi2_;
  prometheus::Family<prometheus::Counter>* shadow_checks_;
  prometheus::Family<prometheus::Histogram>* shadow_deviation_;
  prometheus::Gauge* shadow_queue_;
  prometheus::Histogram* shadow_seconds_;
};

// The `fibers` label of absolute fibre `fiber`.
std::string FiberBlockLabel(int fiber);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_HEALTH_METRICS_H_
