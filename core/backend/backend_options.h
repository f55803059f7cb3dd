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

// The CUDA backend's triangular solves after the batched Cholesky (spec §2.9) and the
// leaf inverses of C's diagonal blocks: its own substitution kernels (one warp per
// patch; the default) or cuSOLVER/cuBLAS batched calls (potrsBatched, trsmBatched),
// kept to cross-check them.
enum class CudaTriangularSolver { kWarpSubstitution, kCusolverBatched };

// The CUDA backend's eigen-decompositions of the 74x74 blocks C_ss (spec §2.10 step 2):
// Householder tridiagonalisation + implicit QL in shared memory (the default, the
// fastest, docs/performance.md), the shared-memory cyclic Jacobi kernel, or
// cusolverDnXsyevBatched. All meet the parity bar.
enum class CudaEigensolver { kSharedMemoryTridiagonalQl, kSharedMemoryJacobi, kCusolverSyevBatched };

// The CUDA backend's Cholesky factorisation of the patch matrices (spec §2.9): left-looking
// over the patch's spectrum blocks (a batched DGEMM brings each block column up to date,
// then one kernel factors its diagonal block in shared memory and another solves the
// blocks below it; the default, docs/performance.md), or cusolverDnDpotrfBatched.
enum class CudaCholesky { kTiledLeftLooking, kCusolverPotrfBatched };

// How a host thread waits for the GPU (the device's scheduling flag, process-wide per
// device): CUDA's own choice (it spins while the process has fewer contexts than cores),
// spin, yield, or block on an OS primitive. A spinning waiter holds a core for as long
// as the GPU works (each CUDA backend waits for most of every batch), which the host's
// decode, inflate and file writes then lack (docs/performance.md).
enum class CudaHostWait { kAuto, kSpin, kYield, kBlock };

struct BackendOptions {
  BackendKind kind = BackendKind::kCpu;
  int threads = 0;          // CPU threads; 0 = all cores
  // The host thread pool the backend runs its parallel loops on (CPU patches and spots,
  // the CUDA backend's host-side assembly); not owned, must outlive the backend. One per
  // process, owned by whoever owns the backends (the server: --cpu_threads threads). Null:
  // the backend starts a pool of its own (the CLI, benchmarks, tests).
  TaskPool* pool = nullptr;
  int device = 0;           // CUDA device ordinal
  std::string cuda_module;  // path of the CUDA module; "" = the default lookup
  CudaTriangularSolver cuda_solver = CudaTriangularSolver::kWarpSubstitution;
  CudaEigensolver cuda_eigen = CudaEigensolver::kSharedMemoryTridiagonalQl;
  CudaCholesky cuda_cholesky = CudaCholesky::kTiledLeftLooking;
  CudaHostWait cuda_host_wait = CudaHostWait::kAuto;
  bool cuda_stats = false;  // Jacobi sweep counts on stderr (synchronises per batch)
};

// Text forms, for flags, environment variables and descriptions:
//   BackendKind           "cpu" | "cuda"
//   CudaTriangularSolver  "warp" | "cusolver"
//   CudaEigensolver       "tridiag" | "jacobi" | "syevbatched"
//   CudaCholesky          "tiled" | "potrfbatched"
//   CudaHostWait          "auto" | "spin" | "yield" | "block"
// Parse* return INVALID_ARGUMENT naming the accepted values.
absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view text);
absl::StatusOr<CudaTriangularSolver> ParseCudaTriangularSolver(absl::string_view text);
absl::StatusOr<CudaEigensolver> ParseCudaEigensolver(absl::string_view text);
absl::StatusOr<CudaCholesky> ParseCudaCholesky(absl::string_view text);
absl::StatusOr<CudaHostWait> ParseCudaHostWait(absl::string_view text);
absl::string_view Name(BackendKind kind);
absl::string_view Name(CudaTriangularSolver solver);
absl::string_view Name(CudaEigensolver eigen);
absl::string_view Name(CudaCholesky cholesky);
absl::string_view Name(CudaHostWait wait);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BACKEND_OPTIONS_H_
