#include "core/plan/desi_cameras.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/io/psf.h"

namespace spexd::core {

std::string DesiArm::GridText() const { return absl::StrFormat("%.1f,%.1f,%.1f", wmin, wmax, dw); }

const std::vector<DesiArm>& DesiArms() {
  static const std::vector<DesiArm>* arms = new std::vector<DesiArm>{
      {'b', 3600.0, 5800.0, 0.8, 0.04},
      {'r', 5760.0, 7620.0, 0.8, 0.01},
      {'z', 7520.0, 9824.0, 0.8, 0.01},
  };
  return *arms;
}

absl::StatusOr<DesiArm> DesiArmForPsf(const Psf& psf) {
  for (const DesiArm& a : DesiArms()) {
    if (a.wmin >= psf.wavemin() - a.dw && a.wmax <= psf.wavemax() + a.dw) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "PSF ", psf.source_name(), " covers ", psf.wavemin(), "-", psf.wavemax(),
      " A: no DESI arm's grid (b 3600-5800, r 5760-7620, z 7520-9824) lies inside it; "
      "give the grid explicitly"));
}

}  // namespace spexd::core
