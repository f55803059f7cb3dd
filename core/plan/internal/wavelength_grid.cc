#include "core/plan/internal/wavelength_grid.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace spexd::core {
namespace {

// Upper bound on the number of output bins. A DESI camera has ~2900 bins; a million is
// far beyond any real grid and keeps a typo (dw = 8e-6) from allocating gigabytes.
constexpr double kMaxBins = 1'000'000;

std::string GridText(double wmin, double wmax, double dw) {
  return absl::StrCat("wavelength grid (wmin=", wmin, ", wmax=", wmax, ", dw=", dw, ")");
}

}  // namespace

absl::StatusOr<WavelengthGrid> MakeOutputGrid(double wmin, double wmax, double dw) {
  if (!std::isfinite(wmin) || !std::isfinite(wmax) || !std::isfinite(dw)) {
    return absl::InvalidArgumentError(
        absl::StrCat(GridText(wmin, wmax, dw), ": values must be finite"));
  }
  if (!(dw > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(GridText(wmin, wmax, dw), ": dw must be > 0"));
  }
  if (wmax < wmin) {
    return absl::InvalidArgumentError(
        absl::StrCat(GridText(wmin, wmax, dw), ": wmax must be >= wmin"));
  }
  // numpy.arange(start, stop, step): length = ceil((stop - start) / step) with
  // stop = wmax + 0.5*dw evaluated first, all in float64 (extraction-spec §2.3).
  const double stop = wmax + 0.5 * dw;
  const double count = std::ceil((stop - wmin) / dw);
  if (!std::isfinite(count) || count > kMaxBins) {
    return absl::InvalidArgumentError(absl::StrCat(
        GridText(wmin, wmax, dw), ": too many wavelength bins (limit ",
        static_cast<long>(kMaxBins), ")"));
  }
  // numpy.gradient (the photons/bin -> photons/Å conversion, spec §2.13) needs at least
  // two points, so the reference cannot produce a frame on a shorter grid either.
  if (count < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(GridText(wmin, wmax, dw), ": fewer than 2 wavelength bins"));
  }
  const auto nwave = static_cast<std::size_t>(count);
  // numpy fills arange with start + i*delta where delta = (start + step) - start, so the
  // step actually used carries the rounding of wmin + dw (0.8000000000001819 for r).
  const double delta = (wmin + dw) - wmin;
  WavelengthGrid grid;
  grid.wmin = wmin;
  grid.wmax = wmax;
  grid.dw = dw;
  grid.wave.resize(nwave);
  for (std::size_t i = 0; i < nwave; ++i) {
    grid.wave[i] = wmin + static_cast<double>(i) * delta;
  }
  return grid;
}

int EffectiveWavePad(int wavepad, double wavepad_frac) {
  // gpu_specter: wavepad += int(wavepad * wavepad_frac), i.e. truncation toward zero.
  const double extra = std::trunc(static_cast<double>(wavepad) * wavepad_frac);
  const double total = static_cast<double>(wavepad) + extra;
  if (!std::isfinite(total) || total < std::numeric_limits<int>::min() ||
      total > std::numeric_limits<int>::max()) {
    return -1;  // documented as invalid; planners reject negative padding
  }
  return static_cast<int>(total);
}

std::vector<double> MakePaddedGrid(const WavelengthGrid& grid, int wavepad_eff, int nwavestep) {
  const std::vector<double>& wave = grid.wave;
  if (wave.empty()) return {};
  const std::size_t npad = wavepad_eff > 0 ? static_cast<std::size_t>(wavepad_eff) : 0;
  const std::size_t nstep = nwavestep > 0 ? static_cast<std::size_t>(nwavestep) : 0;
  const double dw = grid.dw;
  std::vector<double> full;
  full.reserve(npad + wave.size() + npad + nstep);

  // Low part, exactly as gpu_specter builds it (spec §2.3): lo = arange(npad)*dw;
  // lo -= lo[-1] + dw; lo += wmin. Three separate float64 roundings, in this order; a
  // single wmin - (npad-k)*dw would differ in the last bit for some k.
  if (npad > 0) {
    std::vector<double> lo(npad);
    for (std::size_t k = 0; k < npad; ++k) lo[k] = static_cast<double>(k) * dw;
    const double shift = lo[npad - 1] + dw;
    for (double& v : lo) v -= shift;
    for (double& v : lo) v += grid.wmin;
    full.insert(full.end(), lo.begin(), lo.end());
  }

  full.insert(full.end(), wave.begin(), wave.end());

  // High part: wave[-1] + (1.0 + arange(npad + nwavestep))*dw; the multiplier is the
  // float64 1.0 + k, then the product, then the sum.
  const double last = wave.back();
  for (std::size_t k = 0; k < npad + nstep; ++k) {
    const double mult = 1.0 + static_cast<double>(k);
    full.push_back(last + mult * dw);
  }
  return full;
}

std::vector<double> GridGradient(const std::vector<double>& wave) {
  const std::size_t n = wave.size();
  if (n < 2) return {};
  std::vector<double> grad(n);
  // numpy.gradient with unit spacing and edge_order 1: (f[i+1] - f[i-1]) / 2.0 inside,
  // f[1] - f[0] and f[n-1] - f[n-2] at the ends (spec §2.13).
  grad[0] = wave[1] - wave[0];
  for (std::size_t i = 1; i + 1 < n; ++i) grad[i] = (wave[i + 1] - wave[i - 1]) / 2.0;
  grad[n - 1] = wave[n - 1] - wave[n - 2];
  return grad;
}

}  // namespace spexd::core
