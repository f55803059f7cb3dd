#include "core/extraction_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/psf.h"
#include "core/wavelength_grid.h"

namespace spexd::core {

const char* CompatName(Compat compat) { return compat == Compat::kCpu ? "cpu" : "gpu"; }

bool ParseCompat(const std::string& text, Compat* out) {
  if (text == "gpu") {
    *out = Compat::kGpu;
  } else if (text == "cpu") {
    *out = Compat::kCpu;
  } else {
    return false;
  }
  return true;
}

GridRequest RequestedGrid(const ExtractionParams& params, const Psf& psf) {
  if (params.has_wavelength) return {params.wmin, params.wmax, params.dw};
  return {psf.wavemin(), psf.wavemax(), 0.8};
}

double EffectivePsfErr(const ExtractionParams& params, const Psf& psf) {
  if (params.psferr.has_value()) return *params.psferr;
  if (psf.psferr().has_value()) return *psf.psferr();
  return 0.01;
}

absl::Status ValidateParams(const ExtractionParams& p, const Psf& psf) {
  auto bad = [](const std::string& msg) { return absl::InvalidArgumentError(msg); };
  if (p.nspec <= 0) return bad(absl::StrCat("nspec must be positive (got ", p.nspec, ")"));
  if (p.specmin < 0) return bad(absl::StrCat("specmin must be >= 0 (got ", p.specmin, ")"));
  if (p.bundlesize <= 0) return bad(absl::StrCat("bundlesize must be positive (got ", p.bundlesize, ")"));
  if (p.nsubbundles <= 0) return bad(absl::StrCat("nsubbundles must be positive (got ", p.nsubbundles, ")"));
  if (p.nwavestep <= 0) return bad(absl::StrCat("nwavestep must be positive (got ", p.nwavestep, ")"));
  if (p.wavepad < 0) return bad(absl::StrCat("wavepad must be >= 0 (got ", p.wavepad, ")"));
  if (!(p.wavepad_frac >= 0 && p.wavepad_frac <= 10)) {
    return bad(absl::StrCat("wavepad_frac must be in [0, 10] (got ", p.wavepad_frac, ")"));
  }
  if (!(p.pixpad_frac >= 0 && p.pixpad_frac <= 1)) {
    return bad(absl::StrCat("pixpad_frac must be in [0, 1] (got ", p.pixpad_frac, ")"));
  }
  if (!(p.regularize >= 0 && std::isfinite(p.regularize))) {
    return bad(absl::StrCat("regularize must be finite and >= 0 (got ", p.regularize, ")"));
  }
  if (p.psferr.has_value() && !(*p.psferr >= 0 && std::isfinite(*p.psferr))) {
    return bad(absl::StrCat("psferr must be finite and >= 0 (got ", *p.psferr, ")"));
  }
  // Pre-flight checks of spex / desi_extract_spectra (spec §2.2).
  if (p.bundlesize % p.nsubbundles != 0) {
    return bad(absl::StrCat("bundlesize ", p.bundlesize, " is not a multiple of nsubbundles ",
                            p.nsubbundles));
  }
  if (p.nspec % p.bundlesize != 0) {
    return bad(absl::StrCat("nspec ", p.nspec, " is not a multiple of bundlesize ",
                            p.bundlesize));
  }
  if (p.specmin % p.bundlesize != 0) {
    return bad(absl::StrCat("specmin ", p.specmin, " is not a multiple of bundlesize ",
                            p.bundlesize));
  }
  if (p.specmin + p.nspec > psf.nspec()) {
    return bad(absl::StrCat("fibres [", p.specmin, ", ", p.specmin + p.nspec,
                            ") exceed the PSF's ", psf.nspec(), " fibres"));
  }
  // Rdiags slicing needs the padding to cover the band (spec §2.2).
  int wavepad_eff = EffectiveWavePad(p.wavepad, p.wavepad_frac);
  if (wavepad_eff < psf.hsizey()) {
    return bad(absl::StrCat("effective wavelength padding ", wavepad_eff,
                            " is smaller than the resolution half-band HSIZEY ", psf.hsizey()));
  }
  if (p.has_wavelength) {
    if (!(std::isfinite(p.wmin) && std::isfinite(p.wmax) && std::isfinite(p.dw))) {
      return bad("wavelength grid values must be finite");
    }
    // The PSF is fitted on [WAVEMIN, WAVEMAX]; gpu_specter extrapolates the padding
    // beyond it, but an output grid outside the domain is a configuration error.
    double lo = psf.wavemin() - p.dw, hi = psf.wavemax() + p.dw;
    if (p.wmin < lo || p.wmax > hi) {
      return bad(absl::StrCat("wavelength grid [", p.wmin, ", ", p.wmax,
                              "] lies outside the PSF domain [", psf.wavemin(), ", ",
                              psf.wavemax(), "]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace spexd::core
