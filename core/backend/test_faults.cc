#include "core/backend/test_faults.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/frame/bundle_parity.h"

namespace spexd::core {
namespace {

// Forwards everything to the wrapped backend; only the bundles handed to the sink change.
class PerturbingBackend : public Backend {
 public:
  PerturbingBackend(std::unique_ptr<Backend> inner, CpuFaultPlan plan)
      : inner_(std::move(inner)), plan_(plan) {}
  std::string name() const override { return inner_->name(); }
  std::string description() const override { return inner_->description(); }
  bool healthy() const override { return inner_->healthy(); }
  GpuCapabilities* gpu() override { return inner_->gpu(); }
  BackendMemory Memory() const override { return inner_->Memory(); }
  void Release(const std::shared_ptr<const Geometry>& geometry) override { inner_->Release(geometry); }
  absl::StatusOr<ExtractionSummary> Extract(const ExtractionJob& job, const BundleSink& sink) override {
    const BundleSink perturbing = [&](BundleResult&& b) {
      if (b.bundle == plan_.perturb_bundle_flux) PerturbBundleFlux(&b);
      return sink(std::move(b));
    };
    return inner_->Extract(job, perturbing);
  }

 private:
  std::unique_ptr<Backend> inner_;
  const CpuFaultPlan plan_;
};

}  // namespace

absl::StatusOr<CpuFaultPlan> ParseCpuFaultPlan(const std::string& spec) {
  CpuFaultPlan plan;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    int n = 0;
    if (kv.first != "perturb_bundle_flux") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown cpu fault '", kv.first, "' (perturb_bundle_flux)"));
    }
    if (!absl::SimpleAtoi(kv.second, &n) || n < 0) {
      return absl::InvalidArgumentError(absl::StrCat("cpu fault '", item, "': expected name=N with N >= 0"));
    }
    plan.perturb_bundle_flux = n;
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<Backend>> WithCpuTestFaults(std::unique_ptr<Backend> backend,
                                                           const std::string& spec) {
  if (spec.empty()) return backend;
  absl::StatusOr<CpuFaultPlan> plan = ParseCpuFaultPlan(spec);
  if (!plan.ok()) return absl::InvalidArgumentError(absl::StrCat("CPU test faults: ", plan.status().message()));
  if (plan->perturb_bundle_flux < 0) return backend;
  return std::unique_ptr<Backend>(new PerturbingBackend(std::move(backend), *plan));
}

}  // namespace spexd::core
