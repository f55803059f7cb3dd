#include "tests/cuda/host/backend_parity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <utility>

#include "core/plan/spots.h"

namespace spexd::testing {

using core::BundleResult;

absl::StatusOr<RunOutput> RunJob(core::Backend& backend, const core::ExtractionJob& job) {
  RunOutput out;
  auto s = backend.Extract(job, [&](BundleResult&& b) {
    out.bundles.push_back(std::move(b));
    return absl::OkStatus();
  });
  if (!s.ok()) return s.status();
  out.summary = *s;
  return out;
}

namespace {

double RowMax(const std::vector<double>& v, int f, int nwave) {
  double m = 0;
  for (int w = 0; w < nwave; ++w) m = std::max(m, std::fabs(v[static_cast<std::size_t>(f) * nwave + w]));
  return m;
}

}  // namespace

Deviation Compare(const std::vector<BundleResult>& ref, const std::vector<BundleResult>& got,
                  const Allowance* allow) {
  Deviation d;
  EXPECT_EQ(ref.size(), got.size());
  for (std::size_t b = 0; b < std::min(ref.size(), got.size()); ++b) {
    const BundleResult& r = ref[b];
    const BundleResult& g = got[b];
    EXPECT_EQ(r.bundle, g.bundle);
    EXPECT_EQ(r.counts.extracted, g.counts.extracted) << "bundle " << r.bundle;
    EXPECT_EQ(r.counts.skipped, g.counts.skipped);
    EXPECT_EQ(r.counts.retried, g.counts.retried);
    EXPECT_EQ(r.counts.failed, g.counts.failed);
    EXPECT_EQ(r.failed_bins, g.failed_bins);
    const int nk = 2 * r.ndiag + 1;
    for (int f = 0; f < r.nfibers; ++f) {
      const double fmax = RowMax(r.flux, f, r.nwave), imax = RowMax(r.ivar, f, r.nwave);
      for (int w = 0; w < r.nwave; ++w) {
        const std::size_t i = static_cast<std::size_t>(f) * r.nwave + w;
        auto bar = [&](const std::vector<std::vector<double>>* al, double strict) {
          return al == nullptr ? strict : std::max(strict, (*al)[b][i]);
        };
        const double af = bar(allow ? &allow->flux : nullptr, 1e-10);
        const double ai = bar(allow ? &allow->ivar : nullptr, 1e-10);
        const double ar = bar(allow ? &allow->rdiag : nullptr, 1e-10);
        if (af > 1e-10 || ai > 1e-10 || ar > 1e-10) ++d.relaxed_bins;
        d.flux = std::max(d.flux, std::fabs(r.flux[i] - g.flux[i]) / std::max(fmax, 1e-300) / af);
        d.ivar = std::max(d.ivar, std::fabs(r.ivar[i] - g.ivar[i]) / std::max(imax, 1e-300) / ai);
        d.pixmask = std::max(d.pixmask, std::fabs(r.pixmask_fraction[i] - g.pixmask_fraction[i]) / 1e-12);
        const double cm = std::max(std::fabs(r.chi2pix[i]), std::fabs(g.chi2pix[i]));
        d.chi2 = std::max(d.chi2, std::fabs(r.chi2pix[i] - g.chi2pix[i]) / std::max(cm, 1e-300) / 1e-8);
        for (int k = 0; k < nk; ++k) {
          const std::size_t j = (static_cast<std::size_t>(f) * nk + k) * r.nwave + w;
          d.rdiag = std::max(d.rdiag, std::fabs(r.rdiags[j] - g.rdiags[j]) / ar);
        }
      }
    }
    EXPECT_EQ(r.model_y0, g.model_y0);
    EXPECT_EQ(r.model_x0, g.model_x0);
    EXPECT_EQ(r.model_ny, g.model_ny);
    EXPECT_EQ(r.model_nx, g.model_nx);
    if (r.model.size() == g.model.size() && !r.model.empty()) {
      double mmax = 0, dm = 0;
      for (std::size_t i = 0; i < r.model.size(); ++i) {
        mmax = std::max(mmax, std::fabs(r.model[i]));
        dm = std::max(dm, std::fabs(r.model[i] - g.model[i]));
      }
      const bool relaxed = allow != nullptr && d.relaxed_bins > 0;
      d.model = std::max(d.model, dm / std::max(mmax, 1e-300) / (relaxed ? 1e-6 : 1e-10));
    } else {
      EXPECT_EQ(r.model.size(), g.model.size());
    }
  }
  return d;
}

Allowance IllConditionedAllowance(const core::Geometry& geo, const core::PreprocImage& image,
                                  const std::vector<BundleResult>& ref, int64_t* flagged) {
  const core::PatchPlan& plan = geo.plan();
  Allowance al;
  *flagged = 0;
  for (const BundleResult& r : ref) {
    const std::size_t nbins = static_cast<std::size_t>(r.nfibers) * r.nwave;
    al.flux.emplace_back(nbins, 0.0);
    al.ivar.emplace_back(nbins, 0.0);
    al.rdiag.emplace_back(nbins, 0.0);
    const core::Spots spots = core::EvaluateSpots(geo.psf(), plan.bundle_fiber_begin(r.bundle),
                                                  plan.bundlesize, plan.fullwave);
    for (int p = plan.bundle_first_patch[r.bundle]; p < plan.bundle_first_patch[r.bundle + 1]; ++p) {
      const core::PatchDesc& d = plan.patches[p];
      if (d.skipped != core::kSkipNone) continue;
      double fmin = 1e300, fmax = 0;
      for (int q = 0; q < d.n; ++q) {
        const int f = d.fiber0 - spots.fiber_begin + q / plan.nwavetot, w = d.wave0 + q % plan.nwavetot;
        const double* st = spots.stamp(f, w);
        double fw = 0;
        for (int iy = 0; iy < spots.ny; ++iy) {
          const int y = spots.corner_y(f, w) + iy - d.y0;
          if (y < 0 || y >= d.ny) continue;
          for (int ix = 0; ix < spots.nx; ++ix) {
            const int x = spots.corner_x(f, w) + ix - d.x0;
            if (x < 0 || x >= d.nx) continue;
            fw += image.ivar[static_cast<std::size_t>(d.y0 + y) * image.width + d.x0 + x] * st[iy * spots.nx + ix];
          }
        }
        fmin = std::min(fmin, fw);
        fmax = std::max(fmax, fw);
      }
      if (!(fmin < 0.02 * fmax)) continue;
      ++*flagged;
      const std::size_t b = al.flux.size() - 1;
      for (int f = 0; f < plan.nper; ++f) {
        const int row = d.out_row - r.bundle * plan.bundlesize + f;
        for (int w = d.out_col; w < d.out_col + d.nkeep; ++w) {
          const std::size_t i = static_cast<std::size_t>(row) * r.nwave + w;
          al.flux[b][i] = al.ivar[b][i] = al.rdiag[b][i] = kIllConditionedBar;
        }
      }
    }
  }
  return al;
}

void ExpectParity(const std::string& what, const Deviation& d) {
  std::cout << "[parity] " << what << " (deviation / bar): flux " << d.flux << " ivar " << d.ivar
            << " rdiag " << d.rdiag << " pixmask " << d.pixmask << " chi2pix " << d.chi2 << " model "
            << d.model << "; bins with a conditioning allowance: " << d.relaxed_bins << std::endl;
  EXPECT_LE(d.flux, 1.0) << what;
  EXPECT_LE(d.ivar, 1.0) << what;
  EXPECT_LE(d.rdiag, 1.0) << what;
  EXPECT_LE(d.pixmask, 1.0) << what;
  EXPECT_LE(d.chi2, 1.0) << what;
  EXPECT_LE(d.model, 1.0) << what;
}

bool BitIdentical(const std::vector<BundleResult>& a, const std::vector<BundleResult>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].flux != b[i].flux || a[i].ivar != b[i].ivar || a[i].rdiags != b[i].rdiags ||
        a[i].chi2pix != b[i].chi2pix || a[i].pixmask_fraction != b[i].pixmask_fraction ||
        a[i].model != b[i].model) {
      return false;
    }
  }
  return true;
}

}  // namespace spexd::testing
