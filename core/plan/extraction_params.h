// Parameters of one extraction (desi_extract_spectra's flags), their validation
// (extraction-spec §2.2 and the "Decisions" section) and the ExtractionPlan they are
// validated into. ExtractionPlan::Create is THE check of a request's parameters: the
// server makes the plan once, when the request header arrives and before any work, and
// the local CLI before reading its image; everything downstream takes
// the plan and neither re-validates nor recomputes its grid.
#ifndef SPEXD_CORE_EXTRACTION_PARAMS_H_
#define SPEXD_CORE_EXTRACTION_PARAMS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/io/preproc.h"

namespace spexd::core {

class Psf;

// Which gpu_specter path to reproduce where the two differ (extraction-spec §2.17); not
// where the work runs (that is BackendKind). User-facing option: --reproduce
// gpu_specter_gpu|gpu_specter_cpu; the older --compat gpu|cpu spellings are aliases.
enum class Compat { kGpu, kCpu };
const char* CompatName(Compat compat);  // "gpu" or "cpu" (geometry keys, test names)
const char* ReproduceName(Compat compat);  // "gpu_specter_gpu" or "gpu_specter_cpu"
// Accepts gpu_specter_gpu, gpu_specter_cpu and the deprecated gpu, cpu.
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
  std::optional<double> psferr;  // request > PSF PSFERR > 0.01 (ExtractionPlan::psferr)
  Compat compat = Compat::kGpu;
  MaskPolicy mask_policy = MaskPolicy::kDesispec;
  bool want_model = false;
  // desi_extract_spectra --barycentric-correction: extract on the grid divided by the
  // factor of core/plan/barycentric.h, write the uncorrected grid and HELIOCOR.
  bool barycentric_correction = false;
  // desi_extract_spectra --no-scores: false leaves out the SCORES HDU.
  bool scores = true;
};

// Valid ranges of the parameters (inclusive), documented in docs/service.md. Real DESI
// use (extraction-spec §2.2: desi_extract_spectra, spex, extract_frame and
// desi_benchmark_extract defaults, all three arms) sits well inside each:
// bundlesize 25, nsubbundles 1..5, nwavestep 30..50, wavepad 10 (+ frac 0.2 -> 12),
// pixpad_frac 0..0.8, regularize 0 (1e-4 on retry), psferr 0.01..0.04, dw 0.8 with
// 2326..2881 bins. The upper ends bound the cost of a request: a patch has
// (nper + 2) x (nwavestep + 2 wavepad_eff) unknowns and its dense normal matrix grows
// with the square of that.
struct ParamLimits {
  static constexpr int kMaxFibers = 100000;        // specmin + nspec (and the PSF's nspec)
  static constexpr int kMaxBundleSize = 500;       // a whole DESI camera in one bundle
  static constexpr int kMaxNWaveStep = 500;        // 10x the default
  static constexpr int kMaxWavePad = 500;          // base padding
  static constexpr int kMaxWavePadEff = 1000;      // wavepad + trunc(wavepad * frac)
  static constexpr double kMaxWavePadFrac = 10.0;
  static constexpr double kMaxRegularize = 1e6;    // added squared to M's diagonal (§2.8)
  static constexpr double kMaxPsfErr = 1.0;        // fractional model error
  static constexpr double kMinDw = 0.01;           // Angstrom
  static constexpr double kMaxDw = 10.0;
  static constexpr double kMaxWaveBins = 100000;   // output bins (nwave)
};

// The requested output grid (wmin, wmax, dw): the request's, or the PSF domain with
// dw = 0.8 when none was given (spec §2.2). Also what the frame's WAVEMIN, WAVEMAX and
// WAVESTEP keywords record.
struct GridRequest {
  double wmin = 0, wmax = 0, dw = 0;
};

// The one place the output grid is chosen: the request's when has_wavelength, else the
// PSF's domain [WAVEMIN, WAVEMAX] with dw = 0.8 (spec §2.2), whatever wmin, wmax, dw hold
// (their defaults are the r camera's grid, not the PSF's). ExtractionPlan::grid() holds it;
// anything that reports the grid (spexctl -v, frame keywords) reads it from there.
GridRequest RequestedGrid(const ExtractionParams& params, const Psf& psf);

// psferr rule of the spec's "Decisions" (ExtractionPlan::psferr holds it for a plan).
double EffectivePsfErr(const ExtractionParams& params, const Psf& psf);

// Checks every parameter on its own (the ParamLimits ranges, finiteness) and against the
// PSF: the pre-flight checks of spec §2.2 (bundlesize % nsubbundles, nspec % bundlesize,
// specmin % bundlesize), fibre range inside the PSF, wavepad_eff >= ndiag, and the
// output grid inside the PSF domain with at most kMaxWaveBins bins. All arithmetic on
// request integers is done in 64 bits, so no value can overflow.
// INVALID_ARGUMENT naming the offending value otherwise. Cheap (no PSF evaluation, no
// grid allocated). The rules of ExtractionPlan::Create, which is what callers use.
absl::Status ValidateParams(const ExtractionParams& params, const Psf& psf);
// The part of ValidateParams that needs no PSF (ranges, the §2.2 multiples, the padding
// bound). A service runs it before looking the PSF up, so that a bad request gets the
// same answer whether or not its PSF is loaded.
absl::Status ValidateParamsAlone(const ExtractionParams& params);

// One extraction's parameters, validated against its PSF, with what follows from them:
// the requested grid, the output and padded wavelength grids (spec §2.3), the effective
// padding and psferr. Immutable, and made only by Create: holding one means the checks
// passed. Copies share the grids.
class ExtractionPlan {
 public:
  // ValidateParams, then the grids. INVALID_ARGUMENT as ValidateParams.
  static absl::StatusOr<ExtractionPlan> Create(const ExtractionParams& params, const Psf& psf);

  const ExtractionParams& params() const { return params_; }
  // (wmin, wmax, dw) as requested, or the PSF domain with dw = 0.8 (spec §2.2).
  const GridRequest& grid() const { return grids_->request; }
  // numpy arange(wmin, wmax + 0.5*dw, dw) (spec §2.3): at least 2 bins.
  const std::vector<double>& wave() const { return grids_->wave; }
  int nwave() const { return static_cast<int>(grids_->wave.size()); }
  // The padded grid "fullwave" of the patches (spec §2.3).
  const std::vector<double>& fullwave() const { return grids_->fullwave; }
  // wavepad + trunc(wavepad * wavepad_frac) (spec §2.3).
  int wavepad_eff() const { return wavepad_eff_; }
  // psferr rule of the spec's "Decisions": request > PSF PSFERR > 0.01.
  double psferr() const { return psferr_; }

 private:
  struct Grids {
    GridRequest request;
    std::vector<double> wave, fullwave;
  };
  ExtractionPlan() = default;
  ExtractionParams params_;
  std::shared_ptr<const Grids> grids_;
  int wavepad_eff_ = 0;
  double psferr_ = 0;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_EXTRACTION_PARAMS_H_
