// The decorrelation's eigen-decompositions of a patch's core blocks C_ss (spec §2.10 step
// 2). Four blocks at a time in SIMD lanes (lane_eigen.h): fewer flops than dsyevd per
// block, and no OpenBLAS call, whose buffer lock serialises many threads calling it at
// once (the CPU frame stopped scaling past 8 cores on the GPU host; docs/perf.md, issue
// 25). The rest of a patch's blocks, and any lane that does not converge, go to dsyevd.
// Eigenvector order and signs do not matter: only V f(w) V^T is used (spec §2.10).
#include <algorithm>
#include <cstdlib>
#include <cstring>

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

bool PatchExtractor::DecomposeWithLapack(const PatchDesc& d, int s, int k,
                                         PatchWorkspace* ws) const {
  const int nt = plan_.nwavetot;
  double* c = ws->block_vecs.data() + static_cast<std::size_t>(k) * nt * nt;
  // C_ss's lower triangle, from BandInverse (leading dimension n).
  const double* css = ws->cfull.data() + static_cast<std::size_t>(s) * nt * (d.n + 1);
  for (int j = 0; j < nt; ++j) {
    std::copy(css + static_cast<std::size_t>(j) * d.n + j,
              css + static_cast<std::size_t>(j) * d.n + nt, c + j * nt + j);
  }
  int info = 0;
  int lwork = static_cast<int>(ws->lapack_work.size());
  int liwork = static_cast<int>(ws->lapack_iwork.size());
  dsyevd_("V", "L", &nt, c, &nt, ws->block_vals.data() + static_cast<std::size_t>(k) * nt,
          ws->lapack_work.data(), &lwork, ws->lapack_iwork.data(), &liwork, &info, kOne, kOne);
  return info == 0;
}

bool PatchExtractor::DecomposeCoreBlocks(const PatchDesc& d, PatchWorkspace* ws) const {
  using internal::LaneEigen;
  const int nt = plan_.nwavetot, count = plan_.nper;
  int k = 0;
  if (UseLanes()) {
    // Whole groups only: a group costs the same with one lane as with four.
    for (; k + LaneEigen::kLanes <= count; k += LaneEigen::kLanes) {
      const double* src[LaneEigen::kLanes];
      for (int l = 0; l < LaneEigen::kLanes; ++l) {
        const int s = d.core_row + k + l;
        src[l] = ws->cfull.data() + static_cast<std::size_t>(s) * nt * (d.n + 1);
      }
      ws->lanes->Load(src, d.n, LaneEigen::kLanes);
      const unsigned ok = ws->lanes->Decompose();
      for (int l = 0; l < LaneEigen::kLanes; ++l) {
        const std::size_t slot = static_cast<std::size_t>(k + l);
        if (ok & (1u << l)) {
          ws->lanes->Export(l, ws->block_vals.data() + slot * nt,
                            ws->block_vecs.data() + slot * nt * nt);
        } else if (!DecomposeWithLapack(d, d.core_row + k + l, k + l, ws)) {
          return false;
        }
      }
    }
  }
  for (; k < count; ++k) {
    if (!DecomposeWithLapack(d, d.core_row + k, k, ws)) return false;
  }
  return true;
}

}  // namespace spexd::core
