// PSF stand-ins for exposure-sized tests and benchmarks: a real PSF file written again with
// its XTRACE and YTRACE Legendre coefficient 0 moved by (dx, dy) pixels for every fibre.
// P0 = 1, so the traces move rigidly and every patch keeps its shape and work; the file's
// bytes (and so the service's PSF id, a SHA-256 of them) differ, as ten petals' PSFs do.
#ifndef SPEXD_CORE_PSF_STAND_IN_H_
#define SPEXD_CORE_PSF_STAND_IN_H_

#include <string>

#include "absl/status/status.h"

namespace spexd::core {

// Copies `in` to `out` (overwritten) with the traces shifted; refreshes the checksums of
// the two trace HDUs. INVALID_ARGUMENT when a trace HDU is missing or not 2-D.
absl::Status WriteShiftedPsf(const std::string& in, const std::string& out, double dx, double dy);

}  // namespace spexd::core

#endif  // SPEXD_CORE_PSF_STAND_IN_H_
