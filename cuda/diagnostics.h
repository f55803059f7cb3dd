// Diagnostic switches of the CUDA backend, read once from the environment when a backend
// is created (docs/perf.md, "Profiling"): SPEXD_CUDA_TIMELINE=1 prints each batch's stage
// ends and the host's waits; SPEXD_CUDA_BATCH_PLAN=a,b,... sets the bundles per batch (the
// last repeats); SPEXD_CUDA_UPLOAD_SPLIT=0 uploads the whole frame before the first batch;
// SPEXD_CUDA_PREFAULT=0 leaves result pages to fault inside their zero fill. Defaults are
// what production runs.
#ifndef SPEXD_CUDA_DIAGNOSTICS_H_
#define SPEXD_CUDA_DIAGNOSTICS_H_

#include <vector>

namespace spexd::cuda {

struct Diagnostics {
  bool timeline = false;
  std::vector<int> batch_plan;  // empty: the batch size Prepare chose
  bool upload_split = true;
  bool prefault = true;
};

Diagnostics DiagnosticsFromEnvironment();

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DIAGNOSTICS_H_
