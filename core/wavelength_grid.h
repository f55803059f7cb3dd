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
// wmax < wmin, or more than 1,000,000 points.
absl::StatusOr<WavelengthGrid> MakeOutputGrid(double wmin, double wmax, double dw);

// wavepad_eff = wavepad + trunc(wavepad * wavepad_frac) (spec §2.3).
int EffectiveWavePad(int wavepad, double wavepad_frac);

// Padded grid "fullwave" of length wavepad_eff + nwave + wavepad_eff + nwavestep, built
// with the exact three-step float64 arithmetic of spec §2.3.
std::vector<double> MakePaddedGrid(const WavelengthGrid& grid, int wavepad_eff, int nwavestep);

// numpy.gradient of the grid (spec §2.13): interior central differences, one-sided ends.
std::vector<double> GridGradient(const std::vector<double>& wave);

}  // namespace spexd::core

#endif  // SPEXD_CORE_WAVELENGTH_GRID_H_
