#include "server/proto_convert.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace spexd::server {
namespace {

template <typename Field>
void AppendRange(const std::vector<double>& src, std::size_t begin, std::size_t count,
                 Field* dst) {
  dst->Reserve(static_cast<int>(count));
  dst->Add(src.begin() + static_cast<std::ptrdiff_t>(begin),
           src.begin() + static_cast<std::ptrdiff_t>(begin + count));
}

}  // namespace

absl::StatusOr<core::ExtractionParams> ParamsFromProto(const v1::ExtractionParams& p,
                                                       bool want_model) {
  core::ExtractionParams out;  // desi_extract_spectra defaults (extraction-spec §2.2)
  const int nwl = (p.has_wmin() ? 1 : 0) + (p.has_wmax() ? 1 : 0) + (p.has_dw() ? 1 : 0);
  if (nwl != 0 && nwl != 3) {
    return absl::InvalidArgumentError(
        "wavelength grid: set all of wmin, wmax and dw, or none (PSF domain, dw 0.8)");
  }
  out.has_wavelength = nwl == 3;
  if (out.has_wavelength) {
    out.wmin = p.wmin();
    out.wmax = p.wmax();
    out.dw = p.dw();
  }
  if (p.has_specmin()) out.specmin = p.specmin();
  if (p.has_nspec()) out.nspec = p.nspec();
  if (p.has_bundlesize()) out.bundlesize = p.bundlesize();
  if (p.has_nsubbundles()) out.nsubbundles = p.nsubbundles();
  if (p.has_nwavestep()) out.nwavestep = p.nwavestep();
  if (p.has_wavepad()) out.wavepad = p.wavepad();
  if (p.has_wavepad_frac()) out.wavepad_frac = p.wavepad_frac();
  if (p.has_pixpad_frac()) out.pixpad_frac = p.pixpad_frac();
  if (p.has_regularize()) out.regularize = p.regularize();
  if (p.has_psferr()) out.psferr = p.psferr();
  switch (p.compat()) {
    case v1::COMPAT_UNSPECIFIED:
    case v1::COMPAT_GPU:
      out.compat = core::Compat::kGpu;
      break;
    case v1::COMPAT_CPU:
      out.compat = core::Compat::kCpu;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown compat value ", p.compat()));
  }
  switch (p.mask_policy()) {
    case v1::MASK_POLICY_UNSPECIFIED:
    case v1::MASK_POLICY_DESISPEC:
      out.mask_policy = core::MaskPolicy::kDesispec;
      break;
    case v1::MASK_POLICY_ANY_BIT:
      out.mask_policy = core::MaskPolicy::kAnyBit;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown mask_policy value ", p.mask_policy()));
  }
  out.want_model = want_model;
  return out;
}

absl::StatusOr<std::vector<int>> SelectBundles(const v1::ExtractHeader& header,
                                               const core::PatchPlan& plan) {
  if (header.bundles_size() > 0 && header.fibers_size() > 0) {
    return absl::InvalidArgumentError("set bundles or fibers, not both");
  }
  std::set<int> chosen;
  for (int b : header.bundles()) {
    if (b < 0 || b >= plan.nbundles) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bundle ", b, " is outside the plan's bundles [0, ", plan.nbundles, ")"));
    }
    chosen.insert(b);
  }
  for (int f : header.fibers()) {
    if (f < plan.specmin || f >= plan.specmin + plan.nspec) {
      return absl::InvalidArgumentError(absl::StrCat("fibre ", f, " is outside the requested range [",
                                                     plan.specmin, ", ", plan.specmin + plan.nspec, ")"));
    }
    chosen.insert((f - plan.specmin) / plan.bundlesize);
  }
  return std::vector<int>(chosen.begin(), chosen.end());
}

std::size_t BundleBytesPerFiber(int nwave, int ndiag) {
  // flux, ivar, chi2pix, pixmask_fraction, 2*ndiag+1 diagonals (float64) + failed flags.
  return static_cast<std::size_t>(nwave) * ((4 + 2 * static_cast<std::size_t>(ndiag) + 1) * 8 + 1);
}

std::vector<v1::BundleData> BundleToParts(const core::BundleResult& b, double seconds,
                                          std::size_t max_part_bytes) {
  const std::size_t per_fiber = std::max<std::size_t>(1, BundleBytesPerFiber(b.nwave, b.ndiag));
  const int fibers_per_part =
      std::max(1, static_cast<int>(std::min<std::size_t>(max_part_bytes / per_fiber, 1u << 20)));
  const std::size_t nw = static_cast<std::size_t>(b.nwave);
  const std::size_t nk = static_cast<std::size_t>(2 * b.ndiag + 1);
  std::vector<v1::BundleData> parts;
  for (int f0 = 0; f0 < b.nfibers || (f0 == 0 && b.nfibers == 0); f0 += fibers_per_part) {
    const int nf = std::min(fibers_per_part, b.nfibers - f0);
    v1::BundleData part;
    part.set_bundle(b.bundle);
    part.set_fiber_begin(b.fiber_begin + f0);
    part.set_nfibers(nf);
    const std::size_t off = static_cast<std::size_t>(f0) * nw;
    const std::size_t n = static_cast<std::size_t>(nf) * nw;
    AppendRange(b.flux, off, n, part.mutable_flux());
    AppendRange(b.ivar, off, n, part.mutable_ivar());
    AppendRange(b.rdiags, off * nk, n * nk, part.mutable_resolution());
    AppendRange(b.chi2pix, off, n, part.mutable_chi2pix());
    AppendRange(b.pixmask_fraction, off, n, part.mutable_pixmask_fraction());
    if (!b.failed_bins.empty()) {
      part.set_failed_bins(reinterpret_cast<const char*>(b.failed_bins.data()) + off, n);
    }
    parts.push_back(std::move(part));
    if (b.nfibers == 0) break;
  }
  v1::BundleData& last = parts.back();
  last.set_last_part(true);
  CountsToProto(b.counts, last.mutable_counts());
  last.set_seconds(seconds);
  return parts;
}

void CountsToProto(const core::PatchCounts& c, v1::PatchCounts* out) {
  out->set_extracted(c.extracted);
  out->set_skipped(c.skipped);
  out->set_retried(c.retried);
  out->set_failed(c.failed);
}

}  // namespace spexd::server
