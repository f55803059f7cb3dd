#include "server/platform/health_metrics.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace spexd::server {
namespace {

using prometheus::Histogram;

// Condition estimates span many decades: one bucket per decade. A well-posed patch sits
// near the ratio of its brightest to faintest bin's weight; masked or truncated windows
// (spec "Decisions") climb well above.
const Histogram::BucketBoundaries kConditionBuckets = {1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,
                                                       1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e16};
const Histogram::BucketBoundaries kChi2Buckets = {0.5, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 100};
// Shadow deviations on the parity scales: float64 rounding sits near 1e-13; the bar is
// 1e-10 (core::ParityTolerances).
const Histogram::BucketBoundaries kDeviationBuckets = {1e-16, 1e-15, 1e-14, 1e-13, 1e-12, 1e-11,
                                                       1e-10, 1e-9,  1e-8,  1e-6,  1e-4,  1e-2};
const Histogram::BucketBoundaries kShadowSecondsBuckets = {0.5, 1, 2.5, 5, 10, 25, 50, 100, 250};

}  // namespace

std::string FiberBlockLabel(int fiber) {
  const int local = ((fiber % 500) + 500) % 500;  // a spectrograph has 500 fibres
  const int lo = local / 100 * 100;
  return absl::StrCat(lo, "-", lo + 99);
}

HealthMetrics::HealthMetrics(prometheus::Registry& r) {
  condition_ = &prometheus::BuildHistogram()
                    .Name("spexd_patch_condition")
                    .Help("Cholesky condition estimate (max/min diagonal of the factor)^2 of each solved patch")
                    .Register(r);
  frame_condition_ = &prometheus::BuildHistogram()
                          .Name("spexd_frame_worst_condition")
                          .Help("Largest patch condition estimate of each served frame")
                          .Register(r);
  patch_problems_ = &prometheus::BuildCounter()
                         .Name("spexd_patch_problems_total")
                         .Help("Patches that needed the regularisation retry (outcome=retried) or "
                               "failed even after it (outcome=failed), by 100-fibre block")
                         .Register(r);
  mask_bins_ = &prometheus::BuildCounter()
                    .Name("spexd_frame_mask_bins_total")
                    .Help("Served bins (bit=all) and those with each specmask bit "
                          "(somebadpix, allbadpix, bad2dfit)")
                    .Register(r);
  frame_chi2_ = &prometheus::BuildHistogram()
                     .Name("spexd_frame_chi2pix_median")
                     .Help("Median chi2pix of each served frame over its bins with ivar > 0")
                     .Register(r);
  shadow_checks_ = &prometheus::BuildCounter()
                        .Name("spexd_shadow_parity_checks_total")
                        .Help("Shadow parity checks of sampled bundles against the CPU reference, "
                              "by result (ok, drift, skipped: the check queue was full)")
                        .Register(r);
  shadow_deviation_ = &prometheus::BuildHistogram()
                           .Name("spexd_shadow_parity_deviation")
                           .Help("Worst deviation of a checked bundle from the CPU reference (flux and "
                                 "ivar relative to each spectrum's max, resolution absolute)")
                           .Register(r);
  shadow_queue_ = &prometheus::BuildGauge()
                       .Name("spexd_shadow_parity_queue")
                       .Help("Sampled bundles waiting for or in their shadow parity check")
                       .Register(r)
                       .Add({});
  shadow_seconds_ = &prometheus::BuildHistogram()
                         .Name("spexd_shadow_parity_seconds")
                         .Help("CPU reference extraction and comparison time of one sampled bundle")
                         .Register(r)
                         .Add({}, kShadowSecondsBuckets);
}

void HealthMetrics::AddUsualSeries(const std::string& backend, const std::string& gpu) {
  condition_->Add({{"backend", backend}, {"gpu", gpu}}, kConditionBuckets);
  frame_condition_->Add({{"backend", backend}, {"gpu", gpu}}, kConditionBuckets);
  frame_chi2_->Add({{"backend", backend}, {"gpu", gpu}}, kChi2Buckets);
  for (const char* bit : {"all", "somebadpix", "allbadpix", "bad2dfit"}) {
    mask_bins_->Add({{"backend", backend}, {"gpu", gpu}, {"bit", bit}});
  }
  for (const char* outcome : {"retried", "failed"}) {
    for (int f = 0; f < 500; f += 100) {
      patch_problems_->Add({{"backend", backend}, {"gpu", gpu}, {"outcome", outcome}, {"fibers", FiberBlockLabel(f)}});
    }
  }
  for (const char* result : {"ok", "drift", "skipped"}) {
    shadow_checks_->Add({{"backend", backend}, {"gpu", gpu}, {"result", result}});
  }
  shadow_deviation_->Add({{"backend", backend}, {"gpu", gpu}}, kDeviationBuckets);
}

void HealthMetrics::ObserveBundle(const std::string& backend, const std::string& gpu,
                                  const core::BundleResult& b) {
  // Bucket counts first, then one update: hundreds of patches per bundle.
  std::vector<double> buckets(kConditionBuckets.size() + 1, 0.0);
  double sum = 0;
  for (double c : b.patch_condition) {
    if (!(c > 0)) continue;  // skipped or failed
    std::size_t i = 0;
    while (i < kConditionBuckets.size() && c > kConditionBuckets[i]) ++i;
    buckets[i] += 1;
    sum += c;
  }
  condition_->Add({{"backend", backend}, {"gpu", gpu}}, kConditionBuckets).ObserveMultiple(buckets, sum);
  if (b.counts.retried == 0 && b.counts.failed == 0) return;
  // By fibre block: a bundle's 25 fibres never straddle a 100-fibre block (25 divides 100).
  const std::string fibers = FiberBlockLabel(b.fiber_begin);
  patch_problems_->Add({{"backend", backend}, {"gpu", gpu}, {"outcome", "retried"}, {"fibers", fibers}})
      .Increment(static_cast<double>(b.counts.retried));
  patch_problems_->Add({{"backend", backend}, {"gpu", gpu}, {"outcome", "failed"}, {"fibers", fibers}})
      .Increment(static_cast<double>(b.counts.failed));
}

void HealthMetrics::ObserveFrame(const std::string& backend, const std::string& gpu,
                                 const core::FrameHealth& h) {
  auto bins = [&](const char* bit, int64_t n) {
    mask_bins_->Add({{"backend", backend}, {"gpu", gpu}, {"bit", bit}}).Increment(static_cast<double>(n));
  };
  bins("all", h.bins);
  bins("somebadpix", h.somebadpix);
  bins("allbadpix", h.allbadpix);
  bins("bad2dfit", h.bad2dfit);
  frame_chi2_->Add({{"backend", backend}, {"gpu", gpu}}, kChi2Buckets).Observe(h.median_chi2pix);
  if (h.worst_condition > 0) {
    frame_condition_->Add({{"backend", backend}, {"gpu", gpu}}, kConditionBuckets).Observe(h.worst_condition);
  }
}

void HealthMetrics::CountShadowCheck(const std::string& backend, const std::string& gpu,
                                     const char* result) {
  shadow_checks_->Add({{"backend", backend}, {"gpu", gpu}, {"result", result}}).Increment();
}

void HealthMetrics::ObserveShadowDeviation(const std::string& backend, const std::string& gpu,
                                           double deviation) {
  shadow_deviation_->Add({{"backend", backend}, {"gpu", gpu}}, kDeviationBuckets).Observe(deviation);
}

}  // namespace spexd::server
