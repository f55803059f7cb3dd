#include "proto/convert/extraction_params.h"

#include "absl/strings/str_cat.h"

namespace spexd::wire {

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
  out.barycentric_correction = p.barycentric_correction();
  out.scores = !p.no_scores();
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
    case v1::MASK_POLICY_DESISPEC_EXACT:
      out.mask_policy = core::MaskPolicy::kDesispecExact;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown mask_policy value ", p.mask_policy()));
  }
  out.want_model = want_model;
  return out;
}

v1::ExtractionParams ParamsToProto(const core::ExtractionParams& p) {
  v1::ExtractionParams out;
  if (p.has_wavelength) {
    out.set_wmin(p.wmin);
    out.set_wmax(p.wmax);
    out.set_dw(p.dw);
  }
  out.set_specmin(p.specmin);
  out.set_nspec(p.nspec);
  out.set_bundlesize(p.bundlesize);
  out.set_nsubbundles(p.nsubbundles);
  out.set_nwavestep(p.nwavestep);
  out.set_wavepad(p.wavepad);
  out.set_wavepad_frac(p.wavepad_frac);
  out.set_pixpad_frac(p.pixpad_frac);
  out.set_regularize(p.regularize);
  if (p.psferr.has_value()) out.set_psferr(*p.psferr);
  out.set_barycentric_correction(p.barycentric_correction);
  out.set_no_scores(!p.scores);
  out.set_compat(p.compat == core::Compat::kCpu ? v1::COMPAT_CPU : v1::COMPAT_GPU);
  switch (p.mask_policy) {
    case core::MaskPolicy::kAnyBit:
      out.set_mask_policy(v1::MASK_POLICY_ANY_BIT);
      break;
    case core::MaskPolicy::kDesispecExact:
      out.set_mask_policy(v1::MASK_POLICY_DESISPEC_EXACT);
      break;
    case core::MaskPolicy::kDesispec:
      out.set_mask_policy(v1::MASK_POLICY_DESISPEC);
      break;
  }
  return out;
}

}  // namespace spexd::wire
