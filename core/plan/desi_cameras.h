// DESI's production extraction settings per spectrograph arm, as desi_proc passes them to
// desi_extract_spectra: the output grid and --psferr. b: 3600.0-5800.0 (2751 bins), psferr
// 0.04; r: 5760.0-7620.0 (2326), 0.01; z: 7520.0-9824.0 (2881), 0.01; dw 0.8 for all.
// For the tools that stand for a DESI exposure (simulator, benchmarks, examples) and pick
// a camera's settings from its PSF alone.
#ifndef SPEXD_CORE_DESI_CAMERAS_H_
#define SPEXD_CORE_DESI_CAMERAS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spexd::core {

class Psf;

struct DesiArm {
  char arm = 'r';  // 'b', 'r' or 'z'
  double wmin = 0, wmax = 0, dw = 0.8;
  double psferr = 0.01;
  std::string GridText() const;  // "wmin,wmax,dw" as desi_proc writes it, e.g. "3600.0,5800.0,0.8"
};

// b, r, z in that order.
const std::vector<DesiArm>& DesiArms();

// The arm whose production grid lies inside the PSF's wavelength domain (± one dw, the
// rule of ValidateParams): the three arms' grids overlap no other arm's PSF domain, so a
// PSF names its arm without a CAMERA keyword. INVALID_ARGUMENT naming the domain when no
// arm's grid fits (a PSF of another instrument, or a cut-down domain).
absl::StatusOr<DesiArm> DesiArmForPsf(const Psf& psf);

}  // namespace spexd::core

#endif  // SPEXD_CORE_DESI_CAMERAS_H_
