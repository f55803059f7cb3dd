#include "core/frame/bundle_parity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/frame/frame.h"

namespace spexd::core {
namespace {

// Per bin of the bundle: 1 where a patch of either side is ill-conditioned (or failed on
// one side only, which rounding decides there too), from the per-patch condition estimates.
std::vector<uint8_t> EnvelopeBins(const PatchPlan& plan, const BundleResult& a,
                                  const BundleResult& b, double threshold) {
  std::vector<uint8_t> env(static_cast<std::size_t>(a.nfibers) * a.nwave, 0);
  const int p0 = plan.bundle_first_patch[a.bundle], p1 = plan.bundle_first_patch[a.bundle + 1];
  for (int p = p0; p < p1; ++p) {
    const std::size_t i = static_cast<std::size_t>(p - p0);
    const double ca = i < a.patch_condition.size() ? a.patch_condition[i] : 0.0;
    const double cb = i < b.patch_condition.size() ? b.patch_condition[i] : 0.0;
    const bool one_failed = (ca == 0.0) != (cb == 0.0);
    if (!(ca > threshold || cb > threshold || one_failed)) continue;
    const PatchDesc& d = plan.patches[p];
    for (int s = 0; s < plan.nper; ++s) {
      const int row = d.out_row - d.bundle * plan.bundlesize + s;
      if (row < 0 || row >= a.nfibers) continue;
      for (int w = 0; w < d.nkeep; ++w) {
        env[static_cast<std::size_t>(row) * a.nwave + d.out_col + w] = 1;
      }
    }
  }
  return env;
}

}  // namespace

double ParityReport::worst() const { return std::max({flux, ivar, resolution}); }

ParityReport CompareBundles(const PatchPlan& plan, const BundleResult& s, const BundleResult& r,
                            const ParityTolerances& tol) {
  ParityReport rep;
  auto fail = [&rep](std::string what) {
    if (!rep.drift) rep.detail = std::move(what);
    rep.drift = true;
  };
  const std::size_t n = static_cast<std::size_t>(r.nfibers) * r.nwave;
  const int nk = 2 * r.ndiag + 1;
  if (s.bundle != r.bundle || s.nfibers != r.nfibers || s.nwave != r.nwave || s.ndiag != r.ndiag ||
      s.flux.size() != n || s.ivar.size() != n || s.chi2pix.size() != n ||
      s.pixmask_fraction.size() != n || s.rdiags.size() != n * nk || r.flux.size() != n ||
      r.ivar.size() != n || r.rdiags.size() != n * nk || s.per_angstrom != r.per_angstrom) {
    fail("bundle shapes differ");
    rep.flux = 1;
    return rep;
  }
  const std::vector<uint8_t> env = EnvelopeBins(plan, s, r, tol.ill_conditioned);
  for (int f = 0; f < r.nfibers; ++f) {
    const std::size_t row = static_cast<std::size_t>(f) * r.nwave;
    double fmax = 0, imax = 0;
    for (int w = 0; w < r.nwave; ++w) {
      fmax = std::max(fmax, std::fabs(r.flux[row + w]));
      imax = std::max(imax, r.ivar[row + w]);
    }
    if (fmax == 0) fmax = 1;  // an empty spectrum: absolute
    if (imax == 0) imax = 1;
    for (int w = 0; w < r.nwave; ++w) {
      const std::size_t i = row + w;
      const bool s_failed = !s.failed_bins.empty() && s.failed_bins[i];
      const bool r_failed = !r.failed_bins.empty() && r.failed_bins[i];
      if (LocalMaskBits(s.pixmask_fraction[i], s_failed) !=
          LocalMaskBits(r.pixmask_fraction[i], r_failed)) {
        ++rep.mask_mismatches;
        fail(absl::StrCat("mask bits differ at fibre ", r.fiber_begin + f, ", bin ", w));
      }
      const double df = std::fabs(s.flux[i] - r.flux[i]);
      const double di = std::fabs(s.ivar[i] - r.ivar[i]);
      if (!std::isfinite(s.flux[i]) || !std::isfinite(s.ivar[i])) {
        fail(absl::StrCat("non-finite served value at fibre ", r.fiber_begin + f, ", bin ", w));
        rep.flux = std::max(rep.flux, 1.0);
        continue;
      }
      if (env[i]) {
        ++rep.envelope_bins;
        double dr = 0;
        for (int k = 0; k < nk; ++k) {
          const std::size_t j = (static_cast<std::size_t>(f) * nk + k) * r.nwave + w;
          dr = std::max(dr, std::fabs(s.rdiags[j] - r.rdiags[j]));
        }
        if (df / fmax > tol.envelope || di / imax > tol.envelope || dr > tol.envelope) {
          ++rep.envelope_violations;
          fail(absl::StrCat("ill-conditioned patch outside the envelope at fibre ",
                            r.fiber_begin + f, ", bin ", w));
        }
        continue;
      }
      rep.flux = std::max(rep.flux, df / fmax);
      rep.ivar = std::max(rep.ivar, di / imax);
      rep.pixmask = std::max(rep.pixmask, std::fabs(s.pixmask_fraction[i] - r.pixmask_fraction[i]));
      rep.chi2pix = std::max(rep.chi2pix, std::fabs(s.chi2pix[i] - r.chi2pix[i]) /
                                              std::max(std::fabs(r.chi2pix[i]), 1.0));
      for (int k = 0; k < nk; ++k) {
        const std::size_t j = (static_cast<std::size_t>(f) * nk + k) * r.nwave + w;
        rep.resolution = std::max(rep.resolution, std::fabs(s.rdiags[j] - r.rdiags[j]));
      }
    }
  }
  if (rep.flux > tol.flux) fail(absl::StrCat("flux deviates by ", rep.flux, " of the spectrum's max"));
  if (rep.ivar > tol.ivar) fail(absl::StrCat("ivar deviates by ", rep.ivar, " of the spectrum's max"));
  if (rep.resolution > tol.resolution) fail(absl::StrCat("resolution deviates by ", rep.resolution));
  if (rep.pixmask > tol.pixmask) fail(absl::StrCat("pixmask_fraction deviates by ", rep.pixmask));
  if (rep.chi2pix > tol.chi2pix) fail(absl::StrCat("chi2pix deviates by ", rep.chi2pix, " relative"));
  return rep;
}

void PerturbBundleFlux(BundleResult* b, double relative) {
  for (int f = 0; f < b->nfibers; ++f) {
    double* row = b->flux.data() + static_cast<std::size_t>(f) * b->nwave;
    int at = 0;
    for (int w = 1; w < b->nwave; ++w) {
      if (std::fabs(row[w]) > std::fabs(row[at])) at = w;
    }
    if (b->nwave > 0) row[at] += relative * std::fabs(row[at]);
  }
}

}  // namespace spexd::core
