// DESI preproc image reader (IMAGE, IVAR, MASK, FIBERMAP): extraction-spec §2.1, §5.1
// and the mask / non-finite rules of the spec's "Decisions".
#ifndef SPEXD_CORE_PREPROC_H_
#define SPEXD_CORE_PREPROC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spexd::core {

enum class MaskPolicy {
  kDesispec,  // MASK & 0x2FF != 0 -> ivar = 0 (desi_extract_spectra; default)
  kAnyBit,    // MASK != 0 -> ivar = 0 (gpu_specter's spex)
};
inline constexpr uint32_t kDesispecExtractMask = 0x2FF;

// A frame ready for extraction: image and ivar widened to float64, with the mask policy
// and the non-finite rule (non-finite image or ivar -> image = 0, ivar = 0) applied.
struct PreprocImage {
  int height = 0;  // rows (y, wavelength direction)
  int width = 0;   // columns (x, fibre direction)
  std::vector<double> image;  // [height][width]
  std::vector<double> ivar;   // [height][width]
  // Header cards of the IMAGE HDU (see FitsFile::ReadUserCards), carried to the output.
  std::vector<std::string> image_header;
  // The FIBERMAP table as the bytes of a small FITS file (empty primary + FIBERMAP
  // BINTABLE); empty when the input has no FIBERMAP.
  std::string fibermap_fits;
  // Counters for logs and metrics. A pixel that is both masked and non-finite counts in
  // both.
  std::size_t n_masked = 0;     // pixels given ivar 0 by the mask policy, or for ivar < 0
  std::size_t n_nonfinite = 0;  // pixels given ivar 0 by the non-finite rule
  std::string source_name;
};

struct PreprocOptions {
  MaskPolicy mask_policy = MaskPolicy::kDesispec;
  bool require_fibermap = false;
};

// Reads a preproc file. IMAGE and IVAR may be float32 or float64 (any HDU position,
// found by EXTNAME; IMAGE may be the primary); MASK is optional, plain or
// tile-compressed, integer typed. Errors name the file and problem: missing HDU,
// non-image HDU, wrong pixel type (e.g. integer IMAGE), shape mismatch between IMAGE,
// IVAR and MASK, empty image, truncated data.
absl::StatusOr<PreprocImage> ReadPreproc(const std::string& path, const PreprocOptions& options);
absl::StatusOr<PreprocImage> ReadPreprocFromMemory(const void* data, std::size_t size,
                                                   const std::string& name,
                                                   const PreprocOptions& options);

// Applies the mask policy and non-finite rule in place (exposed so that callers that
// build frames in memory, e.g. the service, use the same rules). Also sets a negative
// ivar to 0 (counted in n_masked), which the reference leaves unhandled (spec §2.1).
// `mask` (may be null: no mask) has frame->image.size() entries. Sets (does not add to)
// frame->n_masked and frame->n_nonfinite.
void ApplyPixelRules(const uint16_t* mask, MaskPolicy policy, PreprocImage* frame);

}  // namespace spexd::core

#endif  // SPEXD_CORE_PREPROC_H_
