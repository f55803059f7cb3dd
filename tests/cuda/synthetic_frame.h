// Synthetic DESI-like frames for the CUDA tests and benchmark: known spectra projected
// through the PSF with core::EvaluateSpots (spec §1.4), Poisson-like and read noise, and
// optional masked pixels, straight into a PreprocImage of the geometry's shape. Unlike
// core/simulator.h (which lights the output grid), it lights the whole padded grid
// (PatchPlan::fullwave) on purpose, so that the padding of every patch, the first and
// last included, sees signal.
#ifndef SPEXD_TESTS_CUDA_SYNTHETIC_FRAME_H_
#define SPEXD_TESTS_CUDA_SYNTHETIC_FRAME_H_

#include <cstdint>

#include "core/geometry.h"
#include "core/preproc.h"

namespace spexd::testing {

struct SyntheticOptions {
  uint64_t seed = 1;
  double read_noise = 3.0;   // electrons
  bool noise = true;
  int masked_pixels = 300;   // random ivar = 0 pixels near the traces
  bool float32_values = true;  // round image and ivar to float32 (as preproc files are)
};

// Image and ivar of geometry's full CCD, with every fibre of the plan lit on the padded
// grid. Deterministic for a given seed. Uses all cores.
core::PreprocImage MakeSyntheticFrame(const core::Geometry& geometry, const SyntheticOptions& options);

// Photons per bin of fibre `fiber` at `wave` used by MakeSyntheticFrame.
double SyntheticFlux(int fiber, double wave);

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_CUDA_SYNTHETIC_FRAME_H_
