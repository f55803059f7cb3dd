#include "cuda/fault_injection.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cuda/memory.h"

namespace spexd::cuda {

absl::StatusOr<FaultPlan> ParseFaultPlan(const std::string& spec) {
  FaultPlan plan;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    int64_t n = 0;
    if (!absl::SimpleAtoi(kv.second, &n) || n < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda fault '", item, "': expected name=N with N >= 1"));
    }
    if (kv.first == "oom_at_alloc") {
      plan.oom_at_alloc = n;
    } else if (kv.first == "transient_at_request") {
      plan.transient_at_request = static_cast<int>(n);
    } else if (kv.first == "sticky_at_request") {
      plan.sticky_at_request = static_cast<int>(n);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown cuda fault '", kv.first,
          "' (oom_at_alloc, transient_at_request, sticky_at_request)"));
    }
  }
  return plan;
}

absl::StatusOr<FaultPlan> FaultPlanFromEnvironment() {
  const char* spec = std::getenv("SPEXD_TEST_CUDA_FAULTS");
  if (spec == nullptr) return FaultPlan{};
  absl::StatusOr<FaultPlan> plan = ParseFaultPlan(spec);
  if (!plan.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SPEXD_TEST_CUDA_FAULTS: ", plan.status().message()));
  }
  return plan;
}

void ArmAllocationFault(int64_t at_allocation) { internal::SetAllocationFault(at_allocation); }

absl::Status InjectRequestFault(const FaultPlan& plan, int request, cudaStream_t stream) {
  if (request == plan.transient_at_request) {
    return absl::InternalError(absl::StrCat(
        "injected transient GPU fault (SPEXD_TEST_CUDA_FAULTS) in request ", request,
        ": its first patch batch failed; the device is fine, a retry succeeds"));
  }
  if (request == plan.sticky_at_request) {
    LaunchTrapKernel(stream);
    const cudaError_t err = cudaStreamSynchronize(stream);
    return absl::InternalError(absl::StrCat(
        "injected sticky GPU fault (SPEXD_TEST_CUDA_FAULTS) in request ", request, ": ",
        std::string(cudaGetErrorName(err)), " (", std::string(cudaGetErrorString(err)), ")"));
  }
  return absl::OkStatus();
}

}  // namespace spexd::cuda
