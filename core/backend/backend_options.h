// Typed choices of an extraction backend, parsed once where flags or environment
// variables come in (server/main.cc, the spexctl flags, test and benchmark setup).
#ifndef SPEXD_CORE_BACKEND_OPTIONS_H_
#define SPEXD_CORE_BACKEND_OPTIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spexd::core {

class TaskPool;

// Which implementation of core::Backend: LAPACK on the CPU, or the dlopen()ed CUDA module.
enum class BackendKind { kCpu, kCuda };

// How a host thread waits for the GPU (the device's scheduling flag, process-wide per
// device): CUDA's own choice (it spins while the process has fewer contexts than cores),
// or block on an OS primitive. Not a user's choice: the server blocks, since a spinning
// waiter holds a core for as long as the GPU works (each CUDA backend waits for most of
// every batch), which the host's decode, inflate and file writes then lack
// (docs/service.md, "Workers"); a backend made alone (spexctl --local, the benchmarks)
// keeps CUDA's.
enum class CudaHostWait { kAuto, kBlock };

struct BackendOptions {
  BackendKind kind = BackendKind::kCpu;
  int threads = 0;          // CPU threads; 0 = all cores
  // The host thread pool the backend runs its parallel loops on (CPU patches and spots,
  // the CUDA backend's host-side assembly); not owned, must outlive the backend. One per
  // process, owned by whoever owns the backends (the server: --cpu_threads threads). Null:
  // the backend starts a pool of its own (the CLI, benchmarks, tests).
  TaskPool* pool = nullptr;
  int device = 0;           // CUDA device ordinal
  // Path of the CUDA module; "" = the default lookup (cuda_module_loader.h). Programs set
  // it from --cuda_module or $SPEXD_CUDA_MODULE in main: core reads no environment.
  std::string cuda_module;
  CudaHostWait cuda_host_wait = CudaHostWait::kAuto;
  // Tests only: a CPU backend's fault plan (core/backend/test_faults.h); "" in production.
  std::string cpu_test_faults;
};

// Text forms, for flags, environment variables and descriptions:
//   BackendKind           "cpu" | "cuda"
//   CudaHostWait          "auto" | "block" (descriptions only)
// Parse* return INVALID_ARGUMENT naming the accepted values.
absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view text);
absl::string_view Name(BackendKind kind);
absl::string_view Name(CudaHostWait wait);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BACKEND_OPTIONS_H_
