#include "cuda/diagnostics.h"

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace spexd::cuda {
namespace {

constexpr const char* kOnOff = "0 or 1";

const char* Allowed(const char* name) {
  for (const EnvironmentSwitch& s : CudaEnvironmentSwitches()) {
    if (std::string(s.name) == name) return s.allowed;
  }
  return "a value of the table in cuda/diagnostics.cc";  // not reached: every read is listed
}

absl::Status Refuse(const char* name, const std::string& value) {
  return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not allowed: expected ",
                                                 Allowed(name), " (or unset)"));
}

// A two-valued switch: *out = false for `off`, true for `on`; left at its default when
// unset or empty; anything else refused.
absl::Status ReadSwitch(EnvironmentLookup lookup, const char* name, const char* off,
                        const char* on, bool* out) {
  const char* v = lookup(name);
  if (v == nullptr || *v == 0) return absl::OkStatus();
  const std::string value(v);
  if (value != off && value != on) return Refuse(name, value);
  *out = value == on;
  return absl::OkStatus();
}

absl::Status ReadBatchPlan(EnvironmentLookup lookup, std::vector<int>* plan) {
  const char* name = "SPEXD_CUDA_BATCH_PLAN";
  const char* v = lookup(name);
  if (v == nullptr || *v == 0) return absl::OkStatus();
  for (absl::string_view item : absl::StrSplit(v, ',')) {
    int bundles = 0;
    if (!absl::SimpleAtoi(item, &bundles) || bundles < 1) return Refuse(name, v);
    plan->push_back(bundles);
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<EnvironmentSwitch>& CudaEnvironmentSwitches() {
  static const std::vector<EnvironmentSwitch> table = {
      {"SPEXD_CUDA_MODULE", "a path",
       "the CUDA module to load when --cuda_module is not given (before the one next to spexd)"},
      {"SPEXD_CUDA_TIMELINE", kOnOff, "1: print each batch's stage ends and the host's waits"},
      {"SPEXD_CUDA_BATCH_PLAN", "a,b,... (bundles per batch, each >= 1)",
       "the bundles of each batch, the last repeating (default: the size Prepare chose)"},
      {"SPEXD_CUDA_UPLOAD_SPLIT", kOnOff,
       "0: upload the whole frame before the first batch (default 1: first batch's columns first)"},
      {"SPEXD_CUDA_PREFAULT", kOnOff,
       "0: leave result pages to fault inside their zero fill (default 1: prefault them)"},
      {"SPEXD_CUDA_TRIDIAG_REDUCE", "register or shared",
       "shared: the shared-memory tridiagonal reduction for any nt (default register where nt allows)"},
      {"SPEXD_CUDA_TRIDIAG_ROTATE", "register or shared",
       "shared: rotate the eigenvector rows in shared memory for any nt (default register where nt allows)"},
      {"SPEXD_CUDA_GRAM", "dmma or cublas",
       "cublas: C's core blocks by batched cuBLAS GEMMs (default dmma: one tensor-core kernel where nt <= 80)"},
      {"SPEXD_CUDA_NORMAL_EQUATIONS", "dmma or entries",
       "entries: the normal equations entry by entry on the CUDA cores (default dmma: by 8 x 8 "
       "tiles on the FP64 tensor cores)"},
      {"SPEXD_CUDA_INVERSE", "trailing or band",
       "band: C's core blocks by the selected inversion inside the band, as the CPU backend "
       "(default trailing: the trailing-first block inversion and Gram products)"},
      {"SPEXD_CUDA_INVERSE_P", "panel or gemm",
       "gemm: the trailing-first inversion's P_j = L[j+1:, j] X_jj by batched cuBLAS GEMMs "
       "(default panel: in the tiled Cholesky's tensor-core panel kernel where nt <= 80)"},
      {"SPEXD_CUDA_LEAF_INVERSE", "tiles or steps",
       "steps: the tiled factor inverts each diagonal block L_kk by nt block-wide register "
       "steps (default tiles: by 16 x 16 tiles where nt <= 80)"},
      {"SPEXD_CUDA_CHOL_UPDATE", "factor or gemm",
       "gemm: the tiled Cholesky's diagonal block updates by batched cuBLAS GEMMs with the rest "
       "(default factor: in the factor kernel on the tensor cores where nt <= 80)"},
      {"SPEXD_CUDA_STREAM_PRIORITY", "equal or compute",
       "compute: the compute stream (each batch's chain up to the reduction) at the greatest "
       "stream priority (default equal: the compute and tail streams at the default)"},
      {"SPEXD_CUDA_REDUCE_STREAM", "compute or tail",
       "tail: the tridiagonal reduction on the tail stream with the QL and vectors (default "
       "compute: after the inversion on the compute stream)"},
      {"SPEXD_CUDA_NE_STREAM", "compute or prep",
       "compute: each batch's normal equations on the compute stream after the previous "
       "batch's reduction (default prep: on a stream of their own, beside that batch's chain)"},
      {"SPEXD_CUDA_LONE_FRAME", "latency or throughput",
       "throughput: a frame alone on its GPU runs as the other frames do (default latency: its "
       "compute and prep streams at the greatest priority and its reductions on the tail stream)"},
      {"SPEXD_CUDA_EIGENVECTORS", "twisted or rotate",
       "rotate: the decorrelation's eigenvectors by the logged QL rotations applied to H (default "
       "twisted: twisted factorisations and a Newton-Schulz step where nt <= 80)"},
      {"SPEXD_CUDA_REFLECTORS", "compact or product",
       "product: on the twisted path the reduction forms H and the vectors are H Z (default "
       "compact: the reflectors in compact WY form, applied to the vectors on the tensor cores)"},
      {"SPEXD_TEST_CUDA_FAULTS", "name=N,... (oom_at_alloc, transient_at_request, sticky_at_request, "
                                 "fail_patch_once, perturb_bundle_flux)",
       "tests only: inject GPU faults (docs/reliability.md)"},
  };
  return table;
}

absl::StatusOr<Diagnostics> DiagnosticsFromEnvironment(EnvironmentLookup lookup) {
  Diagnostics d;
  absl::Status s = ReadSwitch(lookup, "SPEXD_CUDA_TIMELINE", "0", "1", &d.timeline);
  if (s.ok()) s = ReadBatchPlan(lookup, &d.batch_plan);
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_UPLOAD_SPLIT", "0", "1", &d.upload_split);
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_PREFAULT", "0", "1", &d.prefault);
  if (s.ok()) {
    s = ReadSwitch(lookup, "SPEXD_CUDA_TRIDIAG_REDUCE", "shared", "register",
                   &d.tridiag_register_reduce);
  }
  if (s.ok()) {
    s = ReadSwitch(lookup, "SPEXD_CUDA_TRIDIAG_ROTATE", "shared", "register",
                   &d.tridiag_register_rotate);
  }
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_GRAM", "cublas", "dmma", &d.dmma_gram);
  if (s.ok()) {
    s = ReadSwitch(lookup, "SPEXD_CUDA_NORMAL_EQUATIONS", "entries", "dmma",
                   &d.dmma_normal_equations);
  }
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_INVERSE", "trailing", "band", &d.band_inverse);
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_INVERSE_P", "gemm", "panel", &d.panel_p);
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_LEAF_INVERSE", "steps", "tiles", &d.tile_inverse);
  if (s.ok()) {
    s = ReadSwitch(lookup, "SPEXD_CUDA_CHOL_UPDATE", "gemm", "factor", &d.diag_update_in_factor);
  }
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_STREAM_PRIORITY", "equal", "compute", &d.prioritize_compute);
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_REDUCE_STREAM", "compute", "tail", &d.reduce_on_tail);
  if (s.ok()) s = ReadSwitch(lookup, "SPEXD_CUDA_NE_STREAM", "compute", "prep", &d.ne_ahead);
  if (s.ok()) {
    s = ReadSwitch(lookup, "SPEXD_CUDA_LONE_FRAME", "throughput", "latency", &d.lone_frame_latency);
  }
  if (s.ok()) {
    s = ReadSwitch(lookup, "SPEXD_CUDA_EIGENVECTORS", "rotate", "twisted", &d.twisted_vectors);
  }
  if (s.ok()) {
    s = ReadSwitch(lookup, "SPEXD_CUDA_REFLECTORS", "product", "compact", &d.compact_reflectors);
  }
  if (!s.ok()) return s;
  if (const char* faults = lookup("SPEXD_TEST_CUDA_FAULTS")) d.test_faults = faults;
  return d;
}

absl::StatusOr<Diagnostics> DiagnosticsFromEnvironment() {
  return DiagnosticsFromEnvironment([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace spexd::cuda
