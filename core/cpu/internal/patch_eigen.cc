// The decorrelation's eigen-decompositions of a patch's core blocks C_ss (spec §2.10 step
// 2). Four blocks at a time in SIMD lanes (lane_eigen.h): fewer flops than dsyevd per
// block, and no OpenBLAS call, whose buffer lock serialises many threads calling it at
// once (the CPU frame stopped scaling past 8 cores on the GPU host; docs/perf.md, issue
// 25). Any lane that does not converge goes to dsyevd (and every block with
// SPEXD_CPU_EIGEN=lapack).
// Eigenvector order and signs do not matter: only V f(w) V^T is used (spec §2.10).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/internal/lapack.h"
#include "core/cpu/internal/patch_extractor.h"

namespace spexd::core {
namespace {

constexpr std::size_t kOne = 1;  // Fortran hidden length of a one-character argument

// SPEXD_CPU_EIGEN=lapack: every block by dsyevd, as before the lanes (A/B measurements).
// CreateBackend has refused any other value than these (CheckCpuEnvironment).
bool UseLanes() {
  static const bool lanes = [] {
    const char* v = std::getenv("SPEXD_CPU_EIGEN");
    return v == nullptr || std::strcmp(v, "lapack") != 0;
  }();
  return lanes;
}

}  // namespace

absl::Status CheckCpuEnvironment() {
  const char* v = std::getenv("SPEXD_CPU_EIGEN");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "lanes") == 0 || std::strcmp(v, "lapack") == 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("SPEXD_CPU_EIGEN='", v, "': expected lanes or lapack (or unset)"));
}

bool PatchExtractor::DecomposeWithLapack(const double* lower, int ld, double* vals, double* vecs,
                                         PatchWorkspace* ws) const {
  const int nt = plan_.nwavetot;
  for (int j = 0; j < nt; ++j) {
    std::copy(lower + static_cast<std::size_t>(j) * ld + j, lower + static_cast<std::size_t>(j) * ld + nt,
              vecs + j * nt + j);
  }
  int info = 0;
  int lwork = static_cast<int>(ws->lapack_work.size());
  int liwork = static_cast<int>(ws->lapack_iwork.size());
  dsyevd_("V", "L", &nt, vecs, &nt, vals, ws->lapack_work.data(), &lwork,
          ws->lapack_iwork.data(), &liwork, &info, kOne, kOne);
  return info == 0;
}

bool PatchExtractor::DecomposeBlocks(int count, const double* const* lower, int ld,
                                     double* const* vals, double* const* vecs, PatchWorkspace* ws,
                                     char* ok) const {
  using internal::LaneEigen;
  bool all = true;
  int k = 0;
  if (UseLanes()) {
    // A last partial group in lanes too (it costs as much as a whole one): every block by
    // the same solver, so a patch's bits do not depend on the blocks beside it.
    for (; k < count; k += LaneEigen::kLanes) {
      const int lanes = std::min(LaneEigen::kLanes, count - k);
      ws->lanes->Load(lower + k, ld, lanes);
      const unsigned converged = ws->lanes->Decompose();
      for (int l = 0; l < lanes; ++l) {
        const int b = k + l;
        ok[b] = 1;
        if (converged & (1u << l)) {
          ws->lanes->Export(l, vals[b], vecs[b]);
        } else if (!DecomposeWithLapack(lower[b], ld, vals[b], vecs[b], ws)) {
          ok[b] = 0;
          all = false;
        }
      }
    }
  }
  for (; k < count; ++k) {
    ok[k] = DecomposeWithLapack(lower[k], ld, vals[k], vecs[k], ws) ? 1 : 0;
    all = all && ok[k] != 0;
  }
  return all;
}

bool PatchExtractor::DecomposeCoreBlocks(const PatchDesc& d, PatchWorkspace* ws) const {
  const std::size_t nt = static_cast<std::size_t>(plan_.nwavetot);
  const int count = plan_.nper;
  std::vector<const double*> lower(count);
  std::vector<double*> vals(count), vecs(count);
  std::vector<char> ok(count);
  for (int k = 0; k < count; ++k) {
    // C_ss's lower triangle, from BandInverse (leading dimension n).
    lower[k] = ws->cfull.data() + (d.core_row + k) * nt * (static_cast<std::size_t>(d.n) + 1);
    vals[k] = ws->block_vals.data() + k * nt;
    vecs[k] = ws->block_vecs.data() + k * nt * nt;
  }
  return DecomposeBlocks(count, lower.data(), d.n, vals.data(), vecs.data(), ws, ok.data());
}

}  // namespace spexd::core
