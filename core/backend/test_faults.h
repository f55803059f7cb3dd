// Test-only fault plan of the CPU backend, in the style of the CUDA module's
// SPEXD_TEST_CUDA_FAULTS (cuda/host/fault_injection.h): BackendOptions::cpu_test_faults,
// which spexd's main sets from $SPEXD_TEST_CPU_FAULTS (no flag carries it), so that CI can
// test the shadow parity check without a GPU. A comma-separated list; empty in production,
// where nothing is wrapped:
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

// `backend` as it is when `spec` is empty, else wrapped to apply the plan; INVALID_ARGUMENT
// for a malformed plan.
absl::StatusOr<std::unique_ptr<Backend>> WithCpuTestFaults(std::unique_ptr<Backend> backend,
                                                           const std::string& spec);

}  // namespace spexd::core

#endif  // SPEXD_CORE_TEST_FAULTS_H_
