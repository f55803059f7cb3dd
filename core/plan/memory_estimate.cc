#include "core/plan/memory_estimate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/plan/patch_plan.h"
#include "core/io/psf.h"

namespace spexd::core {

std::string MemoryEstimate::Describe() const {
  auto mb = [](double b) { return b / 1e6; };
  return absl::StrFormat(
      "%.0f MB (plan %.1f MB, spots %.1f MB, results %.1f MB, model %.1f MB, solver "
      "workspace %.1f MB)",
      mb(total()), mb(plan), mb(spots), mb(results), mb(model), mb(workspace));
}

MemoryEstimate EstimateMemory(const ExtractionPlan& request, const Psf& psf,
                              int64_t image_pixels, int threads) {
  constexpr double kD = sizeof(double), kI = sizeof(int32_t);
  const ExtractionParams& p = request.params();
  const double nwave = request.nwave();
  const double pad = request.wavepad_eff();
  const double nfull = static_cast<double>(request.fullwave().size());  // spec §2.3
  const double nwavetot = p.nwavestep + 2 * pad;
  const double nper = p.bundlesize / p.nsubbundles;
  // A patch holds its sub-bundle plus one neighbour each side (spec §2.5).
  const double nspectot = std::min<double>(nper + 2, p.bundlesize);
  const double n = nspectot * nwavetot;
  const double stamp = (2.0 * psf.hsizey() + 1) * (2.0 * psf.hsizex() + 1);
  const double ndiag = psf.hsizey();
  const double npatches = (p.nspec / p.bundlesize) * p.nsubbundles * std::ceil(nwave / p.nwavestep);

  MemoryEstimate e;
  e.plan = npatches * sizeof(PatchDesc) + p.nspec * nfull * 2 * kI + (nfull + nwave) * kD;
  e.spots = 2 * p.bundlesize * nfull * (stamp * kD + 2 * kI);
  // flux, ivar, chi2pix, pixmask_fraction, 2*ndiag+1 diagonals, failed flags; held once
  // by the bundle being streamed and once by the assembled frame.
  e.results = 2 * p.nspec * nwave * ((4 + 2 * ndiag + 1) * kD + 1);
  e.model = p.want_model ? static_cast<double>(image_pixels) * kD : 0;
  // PatchWorkspace: M's band, L and C (n x n each), sparse A (n stamps of entries with a
  // column index), its pixel index (at most the pixels of n stamps), vectors.
  const double npix = std::min(n * stamp, static_cast<double>(image_pixels));
  const double per_thread =
      3 * n * n * kD + n * stamp * (kD + kI) + npix * 2 * kI + 12 * n * kD;
  e.workspace = std::max(threads, 1) * per_thread;
  return e;
}

}  // namespace spexd::core
