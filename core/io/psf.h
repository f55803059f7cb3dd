// GaussHermite PSF model (specex output, PSFVER 3): extraction-spec §1.1–1.3.
#ifndef SPEXD_CORE_PSF_H_
#define SPEXD_CORE_PSF_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/io/fits_gunzip.h"

namespace spexd::core {

// Legendre coefficients of one quantity for every fibre over a wavelength domain.
struct LegendreTable {
  double wavemin = 0;
  double wavemax = 0;
  int ncoeff = 0;             // degree + 1
  std::vector<double> coeff;  // [nspec][ncoeff], C order
};

class Psf {
 public:
  // Reads a PSF file (HDUs located by EXTNAME: XTRACE, YTRACE, PSF). Every malformed input
  // gives INVALID_ARGUMENT naming the file and the problem (missing HDU, wrong PSFTYPE,
  // inconsistent shapes, non-finite coefficients, missing GH-i-j rows, ...).
  static absl::StatusOr<Psf> Load(const std::string& path);
  // Same from the bytes of a FITS file (e.g. an upload), plain or gzip-compressed
  // (recognised by its magic bytes; inflated within `limits`, see GunzipFits);
  // `name` is used in errors.
  static absl::StatusOr<Psf> LoadFromMemory(const void* data, std::size_t size,
                                            const std::string& name,
                                            const FitsSizeLimits& limits = {});

  int nspec() const { return nspec_; }
  int hsizex() const { return hsizex_; }
  int hsizey() const { return hsizey_; }
  int ghdegx() const { return ghdegx_; }
  int ghdegy() const { return ghdegy_; }
  int legdeg() const { return legdeg_; }
  int npix_x() const { return npix_x_; }  // 0 when the header lacks NPIX_X
  int npix_y() const { return npix_y_; }
  // Domain of the PSF-table parameters (PSF header WAVEMIN/WAVEMAX); the trace tables
  // have their own (extraction-spec §1.1 note).
  double wavemin() const { return params_[0].wavemin; }
  double wavemax() const { return params_[0].wavemax; }
  const LegendreTable& xtrace() const { return xtrace_; }
  const LegendreTable& ytrace() const { return ytrace_; }
  // PSFERR keyword of the PSF header, if present (spec "Decisions": psferr rule).
  std::optional<double> psferr() const { return psferr_; }
  // IN_PSF keyword of the PSF header, copied to ORIG_PSF in the output frame.
  std::optional<std::string> in_psf() const { return in_psf_; }
  const std::string& source_name() const { return source_name_; }

  // Trace position of `fiber` at wavelength `wave` (numpy Clenshaw, spec §1.3).
  double X(int fiber, double wave) const;
  double Y(int fiber, double wave) const;
  // Parameter tables by index: 0 = GHSIGX, 1 = GHSIGY, 2 + i + (ghdegx+1)*j = GH-i-j.
  int num_params() const { return static_cast<int>(params_.size()); }
  static constexpr int kGhSigX = 0;
  static constexpr int kGhSigY = 1;
  int GhIndex(int i, int j) const { return 2 + i + (ghdegx_ + 1) * j; }
  // Parameter value via the Vandermonde sum of spec §1.3.
  double Param(int param, int fiber, double wave) const;
  const LegendreTable& param_table(int param) const { return params_[param]; }

  // Approximate bytes held by this object (for cache accounting).
  std::size_t MemoryBytes() const;

 private:
  friend class PsfReader;
  int nspec_ = 0, hsizex_ = 0, hsizey_ = 0, ghdegx_ = 0, ghdegy_ = 0, legdeg_ = 0;
  int npix_x_ = 0, npix_y_ = 0;
  LegendreTable xtrace_, ytrace_;
  std::vector<LegendreTable> params_;  // GHSIGX, GHSIGY, GH-i-j (i fastest)
  std::optional<double> psferr_;
  std::optional<std::string> in_psf_;
  std::string source_name_;
};

// Gauss-Hermite core widths (GHSIGX, GHSIGY) accepted anywhere the PSF is evaluated,
// in pixels. Sigmas divide the pixel edges (spec §1.4 step 4): a non-positive one gives
// NaN stamps, a tiny one a delta. Real DESI PSFs have about 0.7 to 2 pixels.
inline constexpr double kMinGhSigma = 0.01;
inline constexpr double kMaxGhSigma = 100.0;
// INVALID_ARGUMENT naming the parameter (Psf::kGhSigX or kGhSigY), fibre and wavelength
// when `sigma` is outside [kMinGhSigma, kMaxGhSigma] or NaN.
absl::Status CheckSigma(int param, double sigma, int fiber, double wave);

}  // namespace spexd::core

#endif  // SPEXD_CORE_PSF_H_
