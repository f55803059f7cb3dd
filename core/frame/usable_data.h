// Whether an input image or an extraction result carries any information. A frame with
// some dead fibres is normal (desispec: their bins get pixmask_fraction 1 and the
// ALLBADPIX mask bit, the request succeeds); an image without
// a single valid pixel, or a result without a single usable bin, is an error:
//   image without a pixel of ivar > 0 (all NaN, fully masked)  -> INVALID_ARGUMENT
//   result without a usable bin (every patch failed, skipped or without valid pixel)
//                                                              -> FAILED_PRECONDITION
#ifndef SPEXD_CORE_USABLE_DATA_H_
#define SPEXD_CORE_USABLE_DATA_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/frame/extraction_result.h"
#include "core/io/preproc.h"

namespace spexd::core {

// INVALID_ARGUMENT when no pixel has ivar > 0 after the mask and non-finite rules.
// Stops at the first valid pixel (a real frame: immediately). Raw planes
// (PreprocImage::image_raw) are judged by the rules on their decoded values, which the
// backend applies later.
absl::Status CheckImageHasValidPixel(const PreprocImage& image);

// A bin whose valid pixels carry less than 1% of its PSF weight has no information (a
// stamp sums to 1 only to ~1e-12, so a fully masked bin can show 0.999999999999).
inline constexpr double kMaxUsablePixmaskFraction = 0.99;

// Bins of the bundle with ivar > 0, pixmask_fraction < kMaxUsablePixmaskFraction and no
// failed patch: the bins a pipeline can use.
int64_t CountUsableBins(const BundleResult& bundle);

// FAILED_PRECONDITION when `usable_bins` is 0, saying why from the patch counts.
absl::Status CheckUsableResult(int64_t usable_bins, const PatchCounts& counts);

}  // namespace spexd::core

#endif  // SPEXD_CORE_USABLE_DATA_H_
