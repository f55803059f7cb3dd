// Frames of particular shapes for tests and benchmarks, made by the core simulator
// (core/sim/simulator.h: the one frame synthesizer) with the options those tests need.
#ifndef SPEXD_TESTS_SYNTHETIC_FRAMES_H_
#define SPEXD_TESTS_SYNTHETIC_FRAMES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/plan/geometry.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"

namespace spexd::testing {

// ---- A geometry's CCD lit on its padded grid (CUDA tests and benchmark) ----

struct SyntheticOptions {
  uint64_t seed = 1;
  double read_noise = 3.0;  // electrons
  bool noise = true;        // Poisson and read noise; false: the noiseless model
  // About this many HOT (masked, ivar = 0) pixels among the plan's rows and fibres.
  int masked_pixels = 300;
};

// Image and ivar (float32 values, as preproc files hold) of the geometry's CCD with every
// fibre of the plan lit on the padded grid (PatchPlan::fullwave), not only the output
// grid, so that the padding of every patch, the first and last included, sees signal: the
// PSF is extrapolated past its domain there, as the extraction does. Smooth continua and
// emission lines every ~97 A. Deterministic for a given seed; uses all cores. A frame the
// simulator refuses is a test failure (ADD_FAILURE) and an empty image.
core::PreprocImage MakeSyntheticFrame(const core::Geometry& geometry, const SyntheticOptions& options);

// Masks (ivar = 0) rows [y0, y1) of the patch's pixel window, every column of it.
void MaskWindowRows(const core::PatchDesc& patch, int y0, int y1, core::PreprocImage* image);

// ---- Small preproc files cut out of the CCD (service tests) ----

struct SyntheticFrameOptions {
  int fiber_begin = 0;
  int nfibers = 50;
  double wmin = 5760.0, wmax = 5800.0;  // the grid the tests extract
  uint32_t seed = 1;
  bool ivar_shape_mismatch = false;  // IVAR one row short (a "mismatched shapes" input)
  bool empty_image = false;          // IMAGE with NAXIS = 0
  int width = 0;                     // > 0: crop the image to this many columns
  int dead_columns = 0;              // columns [0, dead_columns) get MASK bit 2 (DEAD)
  bool all_nan = false;              // every IMAGE pixel NaN
};

// The bytes of a preproc FITS file (IMAGE primary, IVAR, MASK, FIBERMAP with 500 rows):
// the bundled PSF's traces of a few fibres from 40 A below to 100 A above the grid (every
// patch window of that grid), on a cut-out of the CCD from pixel (0, 0) a few hundred
// pixels on a side (core accepts cut-outs), so that tests stay quick. A hot pixel (masked
// by desispec's 0x2FF) and a BADREADNOISE pixel (bit 8, not masked) are always there.
absl::StatusOr<std::string> MakeSyntheticPreproc(const core::Psf& psf,
                                                 const SyntheticFrameOptions& options);

// A copy of a FITS file with one extra header keyword in the primary HDU: same content,
// different bytes, hence a different content id.
absl::StatusOr<std::string> WithExtraKeyword(const std::string& fits_bytes, const std::string& key,
                                             long value);

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_SYNTHETIC_FRAMES_H_
