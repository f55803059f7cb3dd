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

bool PatchExtractor::DecomposeCoreBlocks(const PatchDesc& d, PatchWorkspace* ws) const {
  using internal::LaneEigen;
  const int nt = plan_.nwavetot, count = plan_.nper;
  const std::size_t ld = static_cast<std::size_t>(d.n);
  auto css = [&](int k) {  // C_ss's lower triangle, from BandInverse (leading dimension n)
    return ws->cfull.data() + static_cast<std::size_t>(d.core_row + k) * nt * (ld + 1);
  };
  auto vals = [&](int k) { return ws->block_vals.data() + static_cast<std::size_t>(k) * nt; };
  auto vecs = [&](int k) { return ws->block_vecs.data() + static_cast<std::size_t>(k) * nt * nt; };
  int k = 0;
  if (UseLanes()) {
    // A last partial group in lanes too (it costs as much as a whole one): every block by
    // the same solver, so a patch's bits do not depend on how it was grouped
    // (ExtractGroup).
    for (; k < count; k += LaneEigen::kLanes) {
      const int lanes = std::min(LaneEigen::kLanes, count - k);
      const double* src[LaneEigen::kLanes];
      for (int l = 0; l < lanes; ++l) src[l] = css(k + l);
      ws->lanes->Load(src, d.n, lanes);
      const unsigned ok = ws->lanes->Decompose();
      for (int l = 0; l < lanes; ++l) {
        if (ok & (1u << l)) {
          ws->lanes->Export(l, vals(k + l), vecs(k + l));
        } else if (!DecomposeWithLapack(src[l], d.n, vals(k + l), vecs(k + l), ws)) {
          return false;
        }
      }
    }
  }
  for (; k < count; ++k) {
    if (!DecomposeWithLapack(css(k), d.n, vals(k), vecs(k), ws)) return false;
  }
  return true;
}

}  // namespace spexd::core
