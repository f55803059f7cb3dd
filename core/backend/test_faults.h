// Test-only fault switch of the CPU backend, in the style of the CUDA module's
// SPEXD_TEST_CUDA_FAULTS (cuda/host/fault_injection.h): read from the environment variable
// SPEXD_TEST_CPU_FAULTS when CreateBackend makes a CPU backend, so that no production
// option or flag carries it, and CI can test the shadow parity check without a GPU.
// A comma-separated list; unset in production, where nothing is wrapped:
//   perturb_bundle_flux=B  bundle B (plan index) of every request is handed to the sink
//                          with each spectrum's peak raised by 1e-6 of it
//                          (core::PerturbBundleFlux)
// Backends made with CreateCpuBackend directly (the shadow parity reference) never see it.
#ifndef SPEXD_CORE_TEST_FAULTS_H_
#define SPEXD_CORE_TEST_FAULTS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"

namespace spexd::core {

struct CpuFaultPlan {
  int perturb_bundle_flux = -1;  // -1: never
};

absl::StatusOr<CpuFaultPlan> ParseCpuFaultPlan(const std::string& spec);

// `backend` as it is when SPEXD_TEST_CPU_FAULTS is unset, else wrapped to apply the plan;
// INVALID_ARGUMENT for a malformed plan.
absl::StatusOr<std::unique_ptr<Backend>> WithCpuTestFaults(std::unique_ptr<Backend> backend);

}  // namespace spexd::core

#endif  // SPEXD_CORE_TEST_FAULTS_H_
