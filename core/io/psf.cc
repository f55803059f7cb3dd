#include "core/io/psf.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/io/fits_file.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "core/io/internal/psf_reader.h"
#include "core/numerics/legendre.h"
#include "core/base/status_macros.h"

namespace spexd::core {

absl::Status CheckSigma(int param, double sigma, int fiber, double wave) {
  const char* name = param == Psf::kGhSigX ? "GHSIGX" : "GHSIGY";
  if (!(sigma > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " = ", sigma, " is not positive for fibre ",
                                                   fiber, " at ", wave, " A"));
  }
  if (!(sigma >= kMinGhSigma && sigma <= kMaxGhSigma)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " = ", sigma, " is outside [", kMinGhSigma,
                                                   ", ", kMaxGhSigma, "] pixels for fibre ",
                                                   fiber, " at ", wave, " A"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Psf> Psf::Load(const std::string& path) {
  SPEXD_ASSIGN_OR_RETURN(FitsFile file, FitsFile::OpenRead(path));
  return ReadPsf(&file);
}

absl::StatusOr<Psf> Psf::LoadFromMemory(const void* data, std::size_t size,
                                        const std::string& name, const FitsSizeLimits& limits) {
  const absl::string_view bytes(static_cast<const char*>(data), size);
  if (IsGzip(bytes)) {
    SPEXD_ASSIGN_OR_RETURN(InflatedFits fits,
                           InflateFits(bytes, name, limits, {}, nullptr, PsfHduCheck()));
    SPEXD_ASSIGN_OR_RETURN(FitsFile file, fits.block.empty()
                                              ? FitsFile::OpenMemory(std::move(fits.bytes), name)
                                              : FitsFile::OpenMemory(std::move(fits.block), name));
    return ReadPsf(&file);
  }
  SPEXD_ASSIGN_OR_RETURN(FitsFile file, FitsFile::OpenMemory(data, size, name));
  return ReadPsf(&file);
}

double Psf::X(int fiber, double wave) const {
  const double u = ReducedWavelength(wave, xtrace_.wavemin, xtrace_.wavemax);
  return LegendreClenshaw(
      xtrace_.coeff.data() + static_cast<std::size_t>(fiber) * xtrace_.ncoeff, xtrace_.ncoeff,
      u);
}

double Psf::Y(int fiber, double wave) const {
  const double u = ReducedWavelength(wave, ytrace_.wavemin, ytrace_.wavemax);
  return LegendreClenshaw(
      ytrace_.coeff.data() + static_cast<std::size_t>(fiber) * ytrace_.ncoeff, ytrace_.ncoeff,
      u);
}

double Psf::Param(int param, int fiber, double wave) const {
  const LegendreTable& t = params_[static_cast<std::size_t>(param)];
  return LegendreVanderSum(t.coeff.data() + static_cast<std::size_t>(fiber) * t.ncoeff,
                           t.ncoeff, ReducedWavelength(wave, t.wavemin, t.wavemax));
}

std::size_t Psf::MemoryBytes() const {
  std::size_t n = sizeof(Psf) + source_name_.size();
  n += (xtrace_.coeff.size() + ytrace_.coeff.size()) * sizeof(double);
  for (const LegendreTable& t : params_) n += sizeof(t) + t.coeff.size() * sizeof(double);
  return n;
}

}  // namespace spexd::core
