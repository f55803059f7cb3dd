// The CUDA backend's environment variables, in one table (CudaEnvironmentSwitches), read
// once when a backend is created and passed down from there; nothing else in cuda/ calls
// getenv. The algorithms and schedules are not among them: each has one path, chosen
// from the plan and the device. What remains: the module's path (read by the host's
// loader), a timeline for profiling, and test faults. A value the table does not allow
// fails the backend's creation with INVALID_ARGUMENT naming the variable and its allowed
// values, so that a mistyped switch is refused at startup rather than silently ignored.
// An unset or empty variable means the default, which is what production runs. The table
// is documented in docs/service.md ("Environment switches").
#ifndef SPEXD_CUDA_DIAGNOSTICS_H_
#define SPEXD_CUDA_DIAGNOSTICS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spexd::cuda {

struct Diagnostics {
  bool timeline = false;    // SPEXD_CUDA_TIMELINE=1: each batch's stage ends and waits
  std::string test_faults;  // SPEXD_TEST_CUDA_FAULTS (cuda/host/fault_injection.h), tests only
};

struct EnvironmentSwitch {
  const char* name;
  const char* allowed;  // the values accepted, as shown in errors and docs
  const char* effect;
};
// The table: every variable, SPEXD_CUDA_MODULE included (read by each program's main,
// which passes it on as core::BackendOptions::cuda_module, before any backend exists).
const std::vector<EnvironmentSwitch>& CudaEnvironmentSwitches();

// Reads the switches through `lookup` (getenv's contract: nullptr when unset).
using EnvironmentLookup = const char* (*)(const char* name);
absl::StatusOr<Diagnostics> DiagnosticsFromEnvironment(EnvironmentLookup lookup);
absl::StatusOr<Diagnostics> DiagnosticsFromEnvironment();  // the process environment

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DIAGNOSTICS_H_
