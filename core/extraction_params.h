// Parameters of one extraction (desi_extract_spectra's flags) and their validation:
// extraction-spec §2.2 and the "Decisions" section.
#ifndef SPEXD_CORE_EXTRACTION_PARAMS_H_
#define SPEXD_CORE_EXTRACTION_PARAMS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "core/preproc.h"

namespace spexd::core {

class Psf;

// Which gpu_specter path to reproduce where the two differ (extraction-spec §2.17).
enum class Compat { kGpu, kCpu };
const char* CompatName(Compat compat);
bool ParseCompat(const std::string& text, Compat* out);

struct ExtractionParams {
  // Output grid; when !has_wavelength the PSF's WAVEMIN/WAVEMAX and dw = 0.8 are used.
  bool has_wavelength = true;
  double wmin = 5760.0, wmax = 7620.0, dw = 0.8;
  int specmin = 0;
  int nspec = 500;
  int bundlesize = 25;
  int nsubbundles = 5;
  int nwavestep = 50;
  int wavepad = 10;
  double wavepad_frac = 0.2;
  double pixpad_frac = 0.8;
  double regularize = 0.0;
  std::optional<double> psferr;  // request > PSF PSFERR > 0.01 (see EffectivePsfErr)
  Compat compat = Compat::kGpu;
  MaskPolicy mask_policy = MaskPolicy::kDesispec;
  bool want_model = false;
};

// The requested output grid (wmin, wmax, dw): the request's, or the PSF domain with
// dw = 0.8 when none was given (spec §2.2). Also what the frame's WAVEMIN, WAVEMAX and
// WAVESTEP keywords record.
struct GridRequest {
  double wmin = 0, wmax = 0, dw = 0;
};
GridRequest RequestedGrid(const ExtractionParams& params, const Psf& psf);

// psferr rule of the spec's "Decisions".
double EffectivePsfErr(const ExtractionParams& params, const Psf& psf);

// Checks the parameters on their own and against the PSF: the pre-flight checks of
// spec §2.2 (bundlesize % nsubbundles, nspec % bundlesize, specmin % bundlesize),
// fibre range inside the PSF, positive sizes, wavepad_eff >= ndiag, and the padded
// wavelength range inside what the PSF can be evaluated on. INVALID_ARGUMENT naming
// the offending value otherwise.
absl::Status ValidateParams(const ExtractionParams& params, const Psf& psf);

}  // namespace spexd::core

#endif  // SPEXD_CORE_EXTRACTION_PARAMS_H_
