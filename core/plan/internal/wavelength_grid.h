// Output and padded wavelength grids: extraction-spec §2.3.
#ifndef SPEXD_CORE_WAVELENGTH_GRID_H_
#define SPEXD_CORE_WAVELENGTH_GRID_H_

#include <vector>

#include "absl/status/statusor.h"

namespace spexd::core {

struct WavelengthGrid {
  double wmin = 0, wmax = 0, dw = 0;  // as requested
  std::vector<double> wave;           // numpy arange(wmin, wmax + 0.5*dw, dw) values
};

// numpy-arange output grid (spec §2.3). INVALID_ARGUMENT for non-finite values, dw <= 0,
// wmax < wmin, or more than 1,000,000 points. Also for fewer than 2 points: the
// reference's numpy.gradient (spec §2.13) cannot handle a single bin.
absl::StatusOr<WavelengthGrid> MakeOutputGrid(double wmin, double wmax, double dw);

// wavepad_eff = wavepad + trunc(wavepad * wavepad_frac) (spec §2.3). Returns -1 when
// the result is not representable (non-finite wavepad_frac, overflow); callers validate
// the padding (e.g. wavepad_eff >= ndiag) and so reject it.
int EffectiveWavePad(int wavepad, double wavepad_frac);

// Padded grid "fullwave" of length wavepad_eff + nwave + wavepad_eff + nwavestep, built
// with the exact three-step float64 arithmetic of spec §2.3. Negative wavepad_eff or
// nwavestep count as 0; an empty grid gives an empty result.
std::vector<double> MakePaddedGrid(const WavelengthGrid& grid, int wavepad_eff, int nwavestep);

// numpy.gradient of the grid (spec §2.13): interior central differences, one-sided ends.
// Empty for fewer than 2 points (numpy raises there).
std::vector<double> GridGradient(const std::vector<double>& wave);

}  // namespace spexd::core

#endif  // SPEXD_CORE_WAVELENGTH_GRID_H_
