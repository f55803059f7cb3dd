#include "cuda/host/fault_injection.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cuda/host/cuda_check.h"
#include "cuda/host/memory.h"

namespace spexd::cuda {
namespace {

std::atomic<int64_t> g_patch_fault{-1};  // the armed patch, -1 when none

}  // namespace

// Bit patterns: NaNs (quiet and signalling, both signs, payloads in the bits float32
// keeps and in those it drops), infinities, zeros, float64 denormals, float32 denormals
// and their rounding, the largest float and what rounds to it or to infinity, ties.
const double kSpecialResolution[] = {
    std::bit_cast<double>(uint64_t{0x7ff8000000000000}), std::bit_cast<double>(uint64_t{0xfff8000000000000}),
    std::bit_cast<double>(uint64_t{0x7ff0000000000001}), std::bit_cast<double>(uint64_t{0x7ff4000000000000}),
    std::bit_cast<double>(uint64_t{0x7ff7ffffe0000000}), std::bit_cast<double>(uint64_t{0xfffabcdef1234567}),
    std::bit_cast<double>(uint64_t{0x7ff000001fffffff}), std::bit_cast<double>(uint64_t{0xfff0000020000000}),
    std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 0.0, -0.0,
    std::numeric_limits<double>::denorm_min(), -4.9e-320, 1e-42, -1.4e-45, 7e-46, 0.7e-45,
    1.5 * std::numeric_limits<float>::denorm_min(), 2.5 * std::numeric_limits<float>::denorm_min(),
    1e39, -1e300, std::numeric_limits<float>::max(),
    std::numeric_limits<float>::max() * (1 + 0x1p-25), std::numeric_limits<float>::max() * (1 + 0x1p-24),
    1.0 + 0x1p-24, 1.0 + 0x1p-24 + 0x1p-50, 1.0 + 3 * 0x1p-24, -(1.0 + 0x1p-24), 0.1, -1.0 / 3.0};
const int kSpecialResolutionCount = static_cast<int>(std::size(kSpecialResolution));

absl::StatusOr<FaultPlan> ParseFaultPlan(const std::string& spec) {
  FaultPlan plan;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    int64_t n = 0;
    // A patch or bundle index is 0-based.
    const int64_t least = kv.first == "fail_patch_once" || kv.first == "perturb_bundle_flux" ? 0 : 1;
    if (!absl::SimpleAtoi(kv.second, &n) || n < least) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda fault '", item, "': expected name=N with N >= ", least));
    }
    if (kv.first == "fail_patch_once") {
      plan.fail_patch_once = n;
    } else if (kv.first == "perturb_bundle_flux") {
      plan.perturb_bundle_flux = static_cast<int>(n);
    } else if (kv.first == "poison_allocations") {
      plan.poison_allocations = true;
    } else if (kv.first == "oom_at_alloc") {
      plan.oom_at_alloc = n;
    } else if (kv.first == "transient_at_request") {
      plan.transient_at_request = static_cast<int>(n);
    } else if (kv.first == "sticky_at_request") {
      plan.sticky_at_request = static_cast<int>(n);
    } else if (kv.first == "batch_bundles") {
      plan.batch_bundles = static_cast<int>(n);
    } else if (kv.first == "shared_memory_cap") {
      plan.shared_memory_cap = n;
    } else if (kv.first == "warm_geometries") {
      plan.warm_geometries = static_cast<int>(n);
    } else if (kv.first == "special_resolution") {
      plan.special_resolution = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown cuda fault '", kv.first,
          "' (oom_at_alloc, transient_at_request, sticky_at_request, fail_patch_once, "
          "perturb_bundle_flux, poison_allocations, batch_bundles, shared_memory_cap, "
          "warm_geometries, special_resolution)"));
    }
  }
  return plan;
}

void ArmAllocationFault(int64_t at_allocation) { internal::SetAllocationFault(at_allocation); }

void ArmAllocationPoison(bool on) { internal::SetAllocationPoison(on); }

void ArmPatchFault(int64_t patch) { g_patch_fault.store(patch, std::memory_order_relaxed); }

absl::Status InjectPatchFault(const std::vector<RunEntry>& entries, const RunArgs& args,
                              cudaStream_t stream) {
  int64_t armed = g_patch_fault.load(std::memory_order_relaxed);
  if (armed < 0) return absl::OkStatus();  // production: nothing armed
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].patch != armed) continue;
    // Once: only the run that takes the fault poisons the patch (its retry runs clean).
    if (!g_patch_fault.compare_exchange_strong(armed, -1)) return absl::OkStatus();
    SPEXD_CUDA_RETURN_IF_ERROR(LaunchPoisonNormalMatrix(args, static_cast<int>(i), stream));
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

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
