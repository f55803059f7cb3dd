#include "core/plan/patch_plan.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/numerics/patch_numerics.h"
#include "core/io/psf.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace {

struct XYRange {
  int32_t xmin, xmax, ymin, ymax;  // half-open pixel ranges
};

// xyrange of spec §2.6 over fibres [f0, f0+nf) and fullwave indices [w0, w0+nw).
XYRange ComputeXYRange(const PatchPlan& plan, int f0, int nf, int w0, int nw) {
  XYRange r{std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(),
            std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  for (int f = f0; f < f0 + nf; ++f) {
    for (int w = w0; w < w0 + nw; ++w) {
      int32_t x = plan.corner_x(f, w), y = plan.corner_y(f, w);
      r.xmin = std::min(r.xmin, x);
      r.xmax = std::max(r.xmax, x + plan.stamp_nx);
      r.ymin = std::min(r.ymin, y);
      r.ymax = std::max(r.ymax, y + plan.stamp_ny);
    }
  }
  return r;
}

// Union of the extracted windows of patches [p0, p1).
BundleCanvas CanvasOf(const PatchPlan& plan, int p0, int p1) {
  BundleCanvas c{0, 0, 0, 0};
  int32_t y1 = 0, x1 = 0;
  bool any = false;
  for (int p = p0; p < p1; ++p) {
    const PatchDesc& d = plan.patches[p];
    if (d.skipped != kSkipNone) continue;
    if (!any) {
      c.y0 = d.y0; c.x0 = d.x0; y1 = d.y0 + d.ny; x1 = d.x0 + d.nx;
      any = true;
    }
    c.y0 = std::min(c.y0, d.y0); c.x0 = std::min(c.x0, d.x0);
    y1 = std::max(y1, d.y0 + d.ny); x1 = std::max(x1, d.x0 + d.nx);
  }
  if (any) {
    c.ny = y1 - c.y0;
    c.nx = x1 - c.x0;
  }
  return c;
}

// Python int() of a float64: truncation toward zero (spec §0).
int32_t Trunc(double v) { return static_cast<int32_t>(std::trunc(v)); }

}  // namespace

absl::StatusOr<PatchPlan> BuildPatchPlan(const ExtractionParams& params, const Psf& psf,
                                         int image_height, int image_width) {
  SPEXD_ASSIGN_OR_RETURN(ExtractionPlan request, ExtractionPlan::Create(params, psf));
  return BuildPatchPlan(request, psf, image_height, image_width);
}

// One function, over 100 lines, because it transcribes spec §2.4–2.6 in the spec's own
// order (corners, then bundles -> sub-bundles -> patches with their windows and edge
// rules): split up, the float64 trimming would no longer read against the spec line by line.
absl::StatusOr<PatchPlan> BuildPatchPlan(const ExtractionPlan& request, const Psf& psf,
                                         int image_height, int image_width) {
  const ExtractionParams& params = request.params();
  if (image_height <= 0 || image_width <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("image shape ", image_height, " x ", image_width, " is empty"));
  }
  PatchPlan plan;
  plan.specmin = params.specmin;
  plan.nspec = params.nspec;
  plan.bundlesize = params.bundlesize;
  plan.nbundles = params.nspec / params.bundlesize;
  plan.nper = params.bundlesize / params.nsubbundles;
  plan.nwavestep = params.nwavestep;
  plan.wavepad_eff = request.wavepad_eff();
  plan.nwavetot = plan.nwavestep + 2 * plan.wavepad_eff;
  plan.ndiag = psf.hsizey();
  plan.stamp_ny = 2 * psf.hsizey() + 1;
  plan.stamp_nx = 2 * psf.hsizex() + 1;
  plan.image_height = image_height;
  plan.image_width = image_width;

  plan.wave = request.wave();
  plan.nwave = request.nwave();
  plan.fullwave = request.fullwave();

  // Corners of every stamp, from the trace (spec §1.4 step 2).
  const std::size_t nfull = plan.fullwave.size();
  plan.xc.resize(static_cast<std::size_t>(plan.nspec) * nfull);
  plan.yc.resize(plan.xc.size());
  for (int i = 0; i < plan.nspec; ++i) {
    int fiber = plan.specmin + i;
    for (std::size_t w = 0; w < nfull; ++w) {
      double x = psf.X(fiber, plan.fullwave[w]);
      double y = psf.Y(fiber, plan.fullwave[w]);
      if (!std::isfinite(x) || !std::isfinite(y) || std::fabs(x) > 1e9 || std::fabs(y) > 1e9) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trace of fibre ", fiber, " is not finite at ", plan.fullwave[w], " A"));
      }
      // The load-time check covers the PSF domain; the padding extrapolates beyond it.
      for (int param : {Psf::kGhSigX, Psf::kGhSigY}) {
        SPEXD_RETURN_IF_ERROR(CheckSigma(param, psf.Param(param, fiber, plan.fullwave[w]), fiber,
                                         plan.fullwave[w]));
      }
      plan.xc[i * nfull + w] = StampCorner(x, psf.hsizex());
      plan.yc[i * nfull + w] = StampCorner(y, psf.hsizey());
    }
  }

  // Bundles -> sub-bundles -> patches (spec §2.4–2.6).
  const bool compat_cpu = params.compat == Compat::kCpu;
  plan.bundle_first_patch.push_back(0);
  for (int b = 0; b < plan.nbundles; ++b) {
    const int bspecmin = plan.specmin + b * plan.bundlesize;
    for (int s0 = 0; s0 < plan.bundlesize; s0 += plan.nper) {
      // Spectral padding (spec §2.5).
      int nspectot = (s0 + plan.nper) % plan.bundlesize != 0 ? plan.nper + 1 : plan.nper;
      int pspecmin = s0;
      if (s0 % plan.bundlesize != 0) {
        pspecmin = s0 - 1;
        nspectot += 1;
      }
      for (int iwave = plan.wavepad_eff; iwave < plan.wavepad_eff + plan.nwave;
           iwave += plan.nwavestep) {
        PatchDesc d{};
        d.bundle = b;
        d.fiber0 = bspecmin + pspecmin;
        d.nspectot = nspectot;
        d.core_row = s0 - pspecmin;
        d.out_row = b * plan.bundlesize + s0;
        d.wave0 = iwave - plan.wavepad_eff;
        d.out_col = iwave - plan.wavepad_eff;
        d.nkeep = std::min(plan.nwavestep, plan.nwave - d.out_col);
        d.n = nspectot * plan.nwavetot;
        // Pixel window with the exact float64 trimming (spec §2.6).
        XYRange pad = ComputeXYRange(plan, d.fiber0, nspectot, d.wave0, plan.nwavetot);
        XYRange core = ComputeXYRange(plan, d.fiber0, nspectot, iwave, plan.nwavestep);
        const double frac = params.pixpad_frac;
        int32_t lo = Trunc(static_cast<double>(core.ymin - pad.ymin) * (1.0 - frac));
        int32_t hi = Trunc(static_cast<double>(core.ymax - pad.ymin) +
                           static_cast<double>(pad.ymax - core.ymax) * frac);
        d.y0 = pad.ymin + lo;
        d.ny = hi - lo;
        d.x0 = pad.xmin;
        d.nx = pad.xmax - pad.xmin;
        d.skipped = kSkipNone;
        if (d.y0 < 0) {
          d.skipped = kSkipBottomEdge;
        } else if (d.y0 + d.ny > image_height) {
          if (compat_cpu) {
            d.skipped = kSkipTopEdge;
          } else {
            d.ny = image_height - d.y0;  // gpu path: truncate and extract (spec §2.6.5)
            if (d.ny <= 0) d.skipped = kSkipTopEdge;
          }
        }
        if (d.skipped == kSkipNone && (d.x0 < 0 || d.x0 + d.nx > image_width)) {
          d.skipped = kSkipXEdge;
        }
        plan.patches.push_back(d);
        if (d.skipped == kSkipNone) {
          plan.max_n = std::max(plan.max_n, d.n);
          plan.max_ny = std::max(plan.max_ny, d.ny);
          plan.max_nx = std::max(plan.max_nx, d.nx);
          plan.max_npix = std::max(plan.max_npix, d.ny * d.nx);
        }
      }
    }
    plan.bundle_first_patch.push_back(static_cast<int32_t>(plan.patches.size()));
    plan.bundle_canvas.push_back(CanvasOf(plan, plan.bundle_first_patch[b],
                                          plan.bundle_first_patch[b + 1]));
  }
  plan.coupled_band.reserve(plan.patches.size());
  for (const PatchDesc& d : plan.patches) plan.coupled_band.push_back(CoupledBand(plan, d));
  return plan;
}

namespace {

// Whether any stamp of fibre f over the patch wavelengths [w0, w0 + nwavetot) overlaps any
// stamp of fibre g there (StampsOverlap, the test of the normal equations).
bool AnyStampsOverlap(const PatchPlan& plan, int f, int g, int w0) {
  for (int w = w0; w < w0 + plan.nwavetot; ++w) {
    const int32_t x = plan.corner_x(f, w), y = plan.corner_y(f, w);
    for (int u = w0; u < w0 + plan.nwavetot; ++u) {
      if (StampsOverlap(plan.corner_y(g, u) - y, plan.corner_x(g, u) - x, plan.stamp_ny, plan.stamp_nx)) return true;
    }
  }
  return false;
}

}  // namespace

int32_t CoupledBand(const PatchPlan& plan, const PatchDesc& d) {
  struct Hull {
    int32_t x0, x1, y0, y1;
  };
  std::vector<Hull> hull(static_cast<std::size_t>(std::max(d.nspectot, 0)));
  for (int s = 0; s < d.nspectot; ++s) {
    Hull h{INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN};
    for (int w = 0; w < plan.nwavetot; ++w) {
      const int32_t x = plan.corner_x(d.fiber0 + s, d.wave0 + w);
      const int32_t y = plan.corner_y(d.fiber0 + s, d.wave0 + w);
      h = {std::min(h.x0, x), std::max(h.x1, x), std::min(h.y0, y), std::max(h.y1, y)};
    }
    hull[static_cast<std::size_t>(s)] = h;
  }
  auto near = [](int32_t lo0, int32_t hi0, int32_t lo1, int32_t hi1, int32_t size) {
    return lo1 - hi0 < size && lo0 - hi1 < size;  // some |a - b| < size, a, b in the hulls
  };
  // Hulls first (cheap); the stamp pairs only where the hulls come close.
  int32_t band = 0;
  for (int s = 0; s < d.nspectot; ++s) {
    for (int t = d.nspectot - 1; t > s; --t) {
      const Hull& a = hull[static_cast<std::size_t>(s)];
      const Hull& b = hull[static_cast<std::size_t>(t)];
      if (t - s <= band) continue;
      if (!near(a.x0, a.x1, b.x0, b.x1, plan.stamp_nx) || !near(a.y0, a.y1, b.y0, b.y1, plan.stamp_ny)) continue;
      if (AnyStampsOverlap(plan, d.fiber0 + s, d.fiber0 + t, d.wave0)) band = t - s;
    }
  }
  return band;
}

}  // namespace spexd::core
