#include "core/frame/frame.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace spexd::core {

void FinalizeBundle(const std::vector<double>& dwave, BundleResult* b) {
  if (b->per_angstrom) return;
  for (int f = 0; f < b->nfibers; ++f) {
    for (int w = 0; w < b->nwave; ++w) {
      const std::size_t i = static_cast<std::size_t>(f) * b->nwave + w;
      b->flux[i] /= dwave[w];
      b->ivar[i] *= dwave[w] * dwave[w];
    }
  }
  b->per_angstrom = true;
}

double MedianInPlace(double* begin, double* end) {
  if (begin == end) return 0.0;
  const std::size_t n = static_cast<std::size_t>(end - begin), h = n / 2;
  std::nth_element(begin, begin + h, end);
  double hi = begin[h];
  if (n % 2 == 1) return hi;
  double lo = *std::max_element(begin, begin + h);
  return lo + (hi - lo) * 0.5;  // numpy's mean of the two middle values
}

double Median(std::vector<double> v) { return MedianInPlace(v.data(), v.data() + v.size()); }

FrameAssembler::FrameAssembler(const Geometry& geometry, bool want_model) : geometry_(geometry) {
  const PatchPlan& plan = geometry.plan();
  frame_.nwave = plan.nwave;
  frame_.ndiag = plan.ndiag;
  frame_.wave = plan.wave;
  // The whole frame's arrays at once: appending bundle by bundle would regrow and copy
  // them (rdiags alone is ~100 MB for an r frame) on the extracting thread between
  // bundles, while the backend's other threads wait (issue 25). Pages of bundles a job
  // does not extract are never touched.
  const std::size_t bins = static_cast<std::size_t>(plan.nspec) * plan.nwave;
  frame_.flux.reserve(bins);
  frame_.ivar.reserve(bins);
  frame_.pixmask_fraction.reserve(bins);
  frame_.chi2pix.reserve(bins);
  frame_.rdiags.reserve(bins * static_cast<std::size_t>(2 * plan.ndiag + 1));
  if (want_model) {
    frame_.model_height = plan.image_height;
    frame_.model_width = plan.image_width;
    frame_.model.assign(static_cast<std::size_t>(plan.image_height) * plan.image_width, 0.0);
  }
}

absl::Status FrameAssembler::Add(const BundleResult& b) {
  if (!b.per_angstrom) return absl::InternalError("bundle added before FinalizeBundle");
  if (b.bundle <= last_bundle_) return absl::InternalError("bundles added out of order");
  if (b.nwave != frame_.nwave) return absl::InternalError("bundle has the wrong number of wavelengths");
  if (frame_.nspec == 0) frame_.specmin = b.fiber_begin;
  last_bundle_ = b.bundle;
  frame_.nspec += b.nfibers;
  auto append = [](std::vector<double>* dst, const std::vector<double>& src) {
    dst->insert(dst->end(), src.begin(), src.end());
  };
  append(&frame_.flux, b.flux);
  append(&frame_.ivar, b.ivar);
  append(&frame_.rdiags, b.rdiags);
  append(&frame_.pixmask_fraction, b.pixmask_fraction);
  append(&frame_.chi2pix, b.chi2pix);
  frame_.failed_bins.insert(frame_.failed_bins.end(), b.failed_bins.begin(), b.failed_bins.end());
  frame_.counts += b.counts;
  if (!frame_.model.empty() && !b.model.empty()) {
    // Bundle canvases are added into the frame model (spec §2.12).
    for (int y = 0; y < b.model_ny; ++y) {
      const int gy = b.model_y0 + y;
      if (gy < 0 || gy >= frame_.model_height) continue;
      for (int x = 0; x < b.model_nx; ++x) {
        const int gx = b.model_x0 + x;
        if (gx < 0 || gx >= frame_.model_width) continue;
        frame_.model[static_cast<std::size_t>(gy) * frame_.model_width + gx] +=
            b.model[static_cast<std::size_t>(y) * b.model_nx + x];
      }
    }
  }
  return absl::OkStatus();
}

Frame FrameAssembler::Finish() {
  ComputeSpecMask(&frame_);
  return std::move(frame_);
}

uint32_t LocalMaskBits(double pf, bool failed, MaskPolicy policy) {
  uint32_t m = 0;
  if (pf > 0.5) m |= kSomeBadPix;
  // desispec tests == 1.0; a normalised stamp sums to 1 only up to rounding that
  // depends on summation order, so allow 1e-12 (deliberate: a fully masked bin must
  // not escape ALLBADPIX by one ulp). kDesispecExact keeps desispec's == 1.0.
  const double all_bad = policy == MaskPolicy::kDesispecExact ? 1.0 : 1.0 - 1e-12;
  if (pf >= all_bad) m |= kAllBadPix;
  if (failed) m |= kBad2DFit;
  return m;
}

void ComputeSpecMask(Frame* f, MaskPolicy policy) {
  const int ns = f->nspec, nw = f->nwave;
  f->mask.assign(static_cast<std::size_t>(ns) * nw, 0);
  std::vector<double> med_wave(nw), med_fiber(ns), tmp;
  for (int w = 0; w < nw; ++w) {
    tmp.clear();
    for (int s = 0; s < ns; ++s) tmp.push_back(f->chi2pix[static_cast<std::size_t>(s) * nw + w]);
    med_wave[w] = Median(tmp);
  }
  for (int s = 0; s < ns; ++s) {
    auto begin = f->chi2pix.begin() + static_cast<std::ptrdiff_t>(s) * nw;
    med_fiber[s] = Median(std::vector<double>(begin, begin + nw));
  }
  for (int s = 0; s < ns; ++s) {
    for (int w = 0; w < nw; ++w) {
      const std::size_t i = static_cast<std::size_t>(s) * nw + w;
      uint32_t m = LocalMaskBits(f->pixmask_fraction[i],
                                 !f->failed_bins.empty() && f->failed_bins[i] != 0, policy);
      const double c = f->chi2pix[i];
      if (c > 5 * med_wave[w] && c > 5 * med_fiber[s]) m |= kBad2DFit;
      f->mask[i] = m;
    }
  }
}

}  // namespace spexd::core
