// BatchExtractor::ReportEigenSweeps (SPEXD_CUDA_STATS, diagnostics only): the batch's
// eigensolver sweep counts, copied back with a synchronous copy and summarised on stderr.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda/batch_extractor.h"
#include "cuda/cuda_check.h"

namespace spexd::cuda {

absl::Status BatchExtractor::ReportEigenSweeps(const Batch& batch) {
  // Diagnostics only: the shared-memory eigensolvers leave their sweep count in eig_info
  // (-1: QL did not converge, -2: the QL log was too small and the block ran its QL in
  // the decorrelation kernel).
  WorkspaceSet* s = &cfg_.workspace->set(batch.set);
  const std::size_t n = batch.layout.entries.size() * static_cast<std::size_t>(spec_.nper);
  if (n == 0) return absl::OkStatus();
  std::vector<int32_t> sweeps(n);
  SPEXD_CUDA_RETURN_IF_ERROR(cudaMemcpy(sweeps.data(), s->eig_info.get(), n * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost));
  long long total = 0, logged = 0;
  int most = 0, failed = 0, overflow = 0;
  for (int32_t v : sweeps) {
    if (v == -1) ++failed;
    if (v == -2) ++overflow;
    if (v < 0) continue;
    total += v;
    ++logged;
    most = std::max(most, static_cast<int>(v));
  }
  std::fprintf(stderr,
               "[spexd-cuda] eigen sweeps: mean %.2f max %d over %lld blocks; %d not converged, "
               "%d beyond the QL log\n",
               logged > 0 ? static_cast<double>(total) / static_cast<double>(logged) : 0.0, most,
               logged, failed, overflow);
  return absl::OkStatus();
}

}  // namespace spexd::cuda
