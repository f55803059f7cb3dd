// Every environment switch of the CUDA backend, in one table (kCudaSwitches), read once
// when a backend is created and passed down from there; nothing else in cuda/ calls
// getenv. A value the table does not allow fails the backend's creation with
// INVALID_ARGUMENT naming the variable and its allowed values, so that a mistyped switch
// is refused at startup rather than silently ignored. An unset or empty variable means
// the default, which is what production runs. The table is documented in
// docs/service.md ("Environment switches"); docs/performance.md ("Profiling") says what the
// diagnostics show.
#ifndef SPEXD_CUDA_DIAGNOSTICS_H_
#define SPEXD_CUDA_DIAGNOSTICS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spexd::cuda {

struct Diagnostics {
  bool timeline = false;        // SPEXD_CUDA_TIMELINE=1: each batch's stage ends and waits
  std::vector<int> batch_plan;  // SPEXD_CUDA_BATCH_PLAN=a,b,...; empty: Prepare's choice
  bool upload_split = true;     // SPEXD_CUDA_UPLOAD_SPLIT=0: whole frame before batch 1
  bool prefault = true;         // SPEXD_CUDA_PREFAULT=0: result pages fault in their fill
  // SPEXD_CUDA_TRIDIAG_REDUCE / _ROTATE=shared: the shared-memory kernels for any nt
  // instead of the register ones where nt allows (A/B benches, GPU tests of the kernels).
  bool tridiag_register_reduce = true;
  bool tridiag_register_rotate = true;
  // SPEXD_CUDA_GRAM=cublas: C's core blocks by batched cuBLAS GEMMs instead of the DMMA
  // kernel (cuda/core_gram.h; A/B benches).
  bool dmma_gram = true;
  // SPEXD_CUDA_NORMAL_EQUATIONS=entries: M entry by entry on the CUDA cores instead of by
  // tensor-core tiles (normal_equations.h; A/B benches).
  bool dmma_normal_equations = true;
  // SPEXD_CUDA_INVERSE=band: C's core blocks by the selected inversion inside the band
  // (batch_layout.h; with batched cuBLAS GEMMs of 74 x 74 blocks its
  // stage took 21.1 ms a frame against 15.4 for the trailing-first inversion, so not the
  // default) instead of the trailing-first inversion and the Grams.
  bool band_inverse = false;
  // SPEXD_CUDA_INVERSE_P=gemm: the trailing-first inversion's first product P_j =
  // L[j+1:, j] X_jj by batched cuBLAS GEMMs instead of in the DMMA panel kernel of the
  // tiled Cholesky (RunArgs::panel_p; A/B benches).
  bool panel_p = true;
  // SPEXD_CUDA_LEAF_INVERSE=steps: the tiled factor inverts L_kk by nt block-wide register
  // steps (default tiles: by 16 x 16 tiles where nt <= 80, tile_inverse.cuh).
  bool tile_inverse = true;
  // SPEXD_CUDA_CHOL_UPDATE=gemm: every block of the tiled Cholesky's updates by batched
  // cuBLAS GEMMs (default factor: the diagonal block's in the factor kernel on the tensor
  // cores where nt <= 80, RunArgs::diag_update; the blocks below it by the GEMMs).
  bool diag_update_in_factor = true;
  // SPEXD_CUDA_STREAM_PRIORITY=compute: the compute stream (each batch's chain from the
  // normal equations to the reduction) at the greatest stream priority, the tail stream's
  // QL, vectors and finalise filling what it leaves (default equal: both at the default).
  bool prioritize_compute = false;
  // SPEXD_CUDA_REDUCE_STREAM=tail: the tridiagonal reduction on the tail stream with the QL
  // and vectors, the compute stream going on to the next batch after the inversion.
  bool reduce_on_tail = false;
  // A frame that starts with no other frame in flight on its GPU (in this process) runs
  // as both switches above would set it, its prep stream prioritised too: its compute and
  // prep streams at the greatest priority and its reductions on the tail stream (a lone
  // frame 0.7-0.9 ms sooner on an H100), while frames
  // that share the GPU keep the defaults, which give the most frames a second.
  // SPEXD_CUDA_LONE_FRAME=throughput: every frame as the two switches say.
  bool lone_frame_latency = true;
  // A batch's normal equations (and its entries' upload and output zeroing) on a stream of
  // their own, beside the previous batch's chain (-0.2 ms a frame,
  // two in flight unchanged); SPEXD_CUDA_NE_STREAM=compute: at the head of the compute
  // stream's chain, after the previous batch's reduction.
  bool ne_ahead = true;
  // The decorrelation's eigenvectors from T's eigenvalues by twisted factorisations and
  // one Newton-Schulz step (core/numerics/tridiag_vectors.h; 5.6 % faster a
  // frame than the rotations; with the oriented QL and Rayleigh quotients, ivar within 3.5e-13 of a
  // long-double reference on real blocks);
  // SPEXD_CUDA_EIGENVECTORS=rotate: the logged QL rotations applied to H.
  bool twisted_vectors = true;
  // SPEXD_CUDA_REFLECTORS=product: on the twisted path the reduction forms H = H_0 ...
  // H_{n-3} and the twisted kernel multiplies H Z, instead of the default (compact) where
  // the reduction stores the reflectors in compact WY form and the twisted kernel applies
  // them to Z on the tensor cores.
  bool compact_reflectors = true;
  std::string test_faults;  // SPEXD_TEST_CUDA_FAULTS (cuda/fault_injection.h), tests only
};

struct EnvironmentSwitch {
  const char* name;
  const char* allowed;  // the values accepted, as shown in errors and docs
  const char* effect;
};
// The table: every switch, SPEXD_CUDA_MODULE included (read by the host's module
// loader, core/cuda_module_loader.cc, before any backend exists).
const std::vector<EnvironmentSwitch>& CudaEnvironmentSwitches();

// Reads the switches through `lookup` (getenv's contract: nullptr when unset).
using EnvironmentLookup = const char* (*)(const char* name);
absl::StatusOr<Diagnostics> DiagnosticsFromEnvironment(EnvironmentLookup lookup);
absl::StatusOr<Diagnostics> DiagnosticsFromEnvironment();  // the process environment

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DIAGNOSTICS_H_
