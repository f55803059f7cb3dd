// Small synthetic DESI preproc frames for service tests: the bundled PSF's traces of a
// few fibres on a short wavelength range, painted with EvaluateSpot, plus deterministic
// noise, a MASK and a FIBERMAP. A cut-out of the CCD from pixel (0, 0), a few hundred
// pixels on a side (core accepts cut-outs), so tests stay quick.
#ifndef SPEXD_TESTS_INTEGRATION_SYNTHETIC_FRAME_H_
#define SPEXD_TESTS_INTEGRATION_SYNTHETIC_FRAME_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/psf.h"
#include "tests/test_support.h"  // ReadBytes, WriteBytes

namespace spexd::testing {

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

// The bytes of a preproc FITS file (IMAGE primary, IVAR, MASK, FIBERMAP with 500 rows).
absl::StatusOr<std::string> MakeSyntheticPreproc(const core::Psf& psf,
                                                 const SyntheticFrameOptions& options);

// A copy of a FITS file with one extra header keyword in the primary HDU: same PSF
// content, different bytes, hence a different content id.
absl::StatusOr<std::string> WithExtraKeyword(const std::string& fits_bytes, const std::string& key,
                                             long value);

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_INTEGRATION_SYNTHETIC_FRAME_H_
