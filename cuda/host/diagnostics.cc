#include "cuda/host/diagnostics.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace spexd::cuda {
namespace {

const char* Allowed(const char* name) {
  for (const EnvironmentSwitch& s : CudaEnvironmentSwitches()) {
    if (std::string(s.name) == name) return s.allowed;
  }
  return "a value of the table in cuda/host/diagnostics.cc";  // not reached: every read is listed
}

// A two-valued switch: *out = false for `off`, true for `on`; left at its default when
// unset or empty; anything else refused.
absl::Status ReadSwitch(EnvironmentLookup lookup, const char* name, const char* off,
                        const char* on, bool* out) {
  const char* v = lookup(name);
  if (v == nullptr || *v == 0) return absl::OkStatus();
  const std::string value(v);
  if (value != off && value != on) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not allowed: expected ",
                                                   Allowed(name), " (or unset)"));
  }
  *out = value == on;
  return absl::OkStatus();
}

}  // namespace

const std::vector<EnvironmentSwitch>& CudaEnvironmentSwitches() {
  static const std::vector<EnvironmentSwitch> table = {
      {"SPEXD_CUDA_MODULE", "a path",
       "the CUDA module to load when --cuda_module is not given (instead of the one next to spexd)"},
      {"SPEXD_CUDA_TIMELINE", "0 or 1", "1: print each batch's stage ends and the host's waits"},
      {"SPEXD_TEST_CUDA_FAULTS",
       "name=N,... (oom_at_alloc, transient_at_request, sticky_at_request, fail_patch_once, "
       "perturb_bundle_flux, poison_allocations, batch_bundles, shared_memory_cap, "
       "warm_geometries, special_resolution)",
       "tests only: inject GPU faults, set the batches' size, cap the shared memory a block "
       "may use or the geometries kept warm (docs/reliability.md)"},
  };
  return table;
}

absl::StatusOr<Diagnostics> DiagnosticsFromEnvironment(EnvironmentLookup lookup) {
  Diagnostics d;
  absl::Status s = ReadSwitch(lookup, "SPEXD_CUDA_TIMELINE", "0", "1", &d.timeline);
  if (!s.ok()) return s;
  if (const char* faults = lookup("SPEXD_TEST_CUDA_FAULTS")) d.test_faults = faults;
  return d;
}

absl::StatusOr<Diagnostics> DiagnosticsFromEnvironment() {
  return DiagnosticsFromEnvironment([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace spexd::cuda
