#include "core/plan/extraction_params.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/psf.h"
#include "core/plan/internal/wavelength_grid.h"

namespace spexd::core {
namespace {

using L = ParamLimits;

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(msg); }

absl::Status CheckInt(const char* name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return Bad(absl::StrCat(name, " must be in [", lo, ", ", hi, "] (got ", v, ")"));
  }
  return absl::OkStatus();
}

// NaN fails both comparisons, so it is refused with the range.
absl::Status CheckReal(const char* name, double v, double lo, double hi) {
  if (!(v >= lo && v <= hi)) {
    return Bad(absl::StrCat(name, " must be finite and in [", lo, ", ", hi, "] (got ", v, ")"));
  }
  return absl::OkStatus();
}

// Ranges of each value on its own (ParamLimits).
absl::Status ValidateRanges(const ExtractionParams& p) {
  if (absl::Status s = CheckInt("specmin", p.specmin, 0, L::kMaxFibers - 1); !s.ok()) return s;
  if (absl::Status s = CheckInt("nspec", p.nspec, 1, L::kMaxFibers); !s.ok()) return s;
  if (absl::Status s = CheckInt("bundlesize", p.bundlesize, 1, L::kMaxBundleSize); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckInt("nsubbundles", p.nsubbundles, 1, p.bundlesize); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckInt("nwavestep", p.nwavestep, 1, L::kMaxNWaveStep); !s.ok()) return s;
  if (absl::Status s = CheckInt("wavepad", p.wavepad, 0, L::kMaxWavePad); !s.ok()) return s;
  if (absl::Status s = CheckReal("wavepad_frac", p.wavepad_frac, 0, L::kMaxWavePadFrac); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckReal("pixpad_frac", p.pixpad_frac, 0, 1); !s.ok()) return s;
  if (absl::Status s = CheckReal("regularize", p.regularize, 0, L::kMaxRegularize); !s.ok()) {
    return s;
  }
  if (p.psferr.has_value()) {
    if (absl::Status s = CheckReal("psferr", *p.psferr, 0, L::kMaxPsfErr); !s.ok()) return s;
  }
  if (p.has_wavelength) {
    if (!(std::isfinite(p.wmin) && std::isfinite(p.wmax) && std::isfinite(p.dw))) {
      return Bad(absl::StrCat("wavelength grid values must be finite (wmin=", p.wmin,
                              ", wmax=", p.wmax, ", dw=", p.dw, ")"));
    }
    if (absl::Status s = CheckReal("dw", p.dw, L::kMinDw, L::kMaxDw); !s.ok()) return s;
    if (!(p.wmax >= p.wmin)) {
      return Bad(absl::StrCat("wmax (", p.wmax, ") must be >= wmin (", p.wmin, ")"));
    }
  }
  return absl::OkStatus();
}

// Number of output bins of the requested grid, numpy-arange rule (spec §2.3), computed in
// float64 without allocating, so that a tiny dw is refused before any grid exists.
long RequestedBins(const ExtractionParams& params, const Psf& psf) {
  const GridRequest g = RequestedGrid(params, psf);
  // numpy.arange length (spec §2.3); clamped so that the cast is defined.
  const double count = std::ceil((g.wmax + 0.5 * g.dw - g.wmin) / g.dw);
  if (!(count >= 0)) return 0;
  if (count > 1e15) return static_cast<long>(1e15);
  return static_cast<long>(count);
}

}  // namespace

GridRequest RequestedGrid(const ExtractionParams& params, const Psf& psf) {
  if (params.has_wavelength) return {params.wmin, params.wmax, params.dw};
  return {psf.wavemin(), psf.wavemax(), 0.8};
}

const char* CompatName(Compat compat) { return compat == Compat::kCpu ? "cpu" : "gpu"; }

const char* ReproduceName(Compat compat) {
  return compat == Compat::kCpu ? "gpu_specter_cpu" : "gpu_specter_gpu";
}

bool ParseCompat(const std::string& text, Compat* out) {
  if (text == "gpu_specter_gpu" || text == "gpu") {
    *out = Compat::kGpu;
  } else if (text == "gpu_specter_cpu" || text == "cpu") {
    *out = Compat::kCpu;
  } else {
    return false;
  }
  return true;
}

double EffectivePsfErr(const ExtractionParams& params, const Psf& psf) {
  if (params.psferr.has_value()) return *params.psferr;
  if (psf.psferr().has_value()) return *psf.psferr();
  return 0.01;
}

absl::Status ValidateParamsAlone(const ExtractionParams& p) {
  if (absl::Status s = ValidateRanges(p); !s.ok()) return s;
  // Pre-flight checks of spex / desi_extract_spectra (spec §2.2).
  if (p.bundlesize % p.nsubbundles != 0) {
    return Bad(absl::StrCat("bundlesize ", p.bundlesize, " is not a multiple of nsubbundles ",
                            p.nsubbundles));
  }
  if (p.nspec % p.bundlesize != 0) {
    return Bad(absl::StrCat("nspec ", p.nspec, " is not a multiple of bundlesize ",
                            p.bundlesize));
  }
  if (p.specmin % p.bundlesize != 0) {
    return Bad(absl::StrCat("specmin ", p.specmin, " is not a multiple of bundlesize ",
                            p.bundlesize));
  }
  const int wavepad_eff = EffectiveWavePad(p.wavepad, p.wavepad_frac);
  if (wavepad_eff > L::kMaxWavePadEff) {
    return Bad(absl::StrCat("effective wavelength padding wavepad + trunc(wavepad * "
                            "wavepad_frac) = ", wavepad_eff, " is over ", L::kMaxWavePadEff));
  }
  return absl::OkStatus();
}

absl::Status ValidateParams(const ExtractionParams& p, const Psf& psf) {
  if (absl::Status s = ValidateParamsAlone(p); !s.ok()) return s;
  // 64-bit sum: specmin + nspec near INT_MAX must not wrap.
  const int64_t fiber_end = static_cast<int64_t>(p.specmin) + p.nspec;
  if (fiber_end > psf.nspec()) {
    return Bad(absl::StrCat("fibres [", p.specmin, ", ", fiber_end, ") exceed the PSF's ",
                            psf.nspec(), " fibres"));
  }
  // Rdiags slicing needs the padding to cover the band (spec §2.2).
  const int wavepad_eff = EffectiveWavePad(p.wavepad, p.wavepad_frac);
  if (wavepad_eff < psf.hsizey()) {
    return Bad(absl::StrCat("effective wavelength padding ", wavepad_eff,
                            " is smaller than the resolution half-band HSIZEY ", psf.hsizey()));
  }
  if (p.has_wavelength) {
    // The PSF is fitted on [WAVEMIN, WAVEMAX]; gpu_specter extrapolates the padding
    // beyond it, but an output grid outside the domain is a configuration error.
    const double lo = psf.wavemin() - p.dw, hi = psf.wavemax() + p.dw;
    if (p.wmin < lo || p.wmax > hi) {
      return Bad(absl::StrCat("wavelength grid [", p.wmin, ", ", p.wmax,
                              "] reaches more than one bin (dw ", p.dw,
                              ") beyond the PSF domain [", psf.wavemin(), ", ", psf.wavemax(),
                              "]"));
    }
  }
  // Bins counted before any grid is allocated: a tiny dw cannot ask for a huge grid.
  const long nwave = RequestedBins(p, psf);
  if (nwave < 2 || nwave > static_cast<long>(L::kMaxWaveBins)) {
    const GridRequest g = RequestedGrid(p, psf);
    return Bad(absl::StrCat("wavelength grid (wmin=", g.wmin, ", wmax=", g.wmax, ", dw=", g.dw,
                            ") has ", nwave, " bins; it must have 2 to ",
                            static_cast<long>(L::kMaxWaveBins)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExtractionPlan> ExtractionPlan::Create(const ExtractionParams& params,
                                                      const Psf& psf) {
  SPEXD_RETURN_IF_ERROR(ValidateParams(params, psf));
  ExtractionPlan plan;
  plan.params_ = params;
  plan.wavepad_eff_ = EffectiveWavePad(params.wavepad, params.wavepad_frac);
  plan.psferr_ = EffectivePsfErr(params, psf);
  const GridRequest request = RequestedGrid(params, psf);
  SPEXD_ASSIGN_OR_RETURN(WavelengthGrid grid,
                         MakeOutputGrid(request.wmin, request.wmax, request.dw));
  auto grids = std::make_shared<Grids>();
  grids->request = request;
  grids->fullwave = MakePaddedGrid(grid, plan.wavepad_eff_, params.nwavestep);
  grids->wave = std::move(grid.wave);
  plan.grids_ = std::move(grids);
  return plan;
}

}  // namespace spexd::core
