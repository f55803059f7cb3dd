// DESI preproc image reader (IMAGE, IVAR, MASK, FIBERMAP): extraction-spec §2.1, §5.1
// and the mask / non-finite rules of the spec's "Decisions".
#ifndef SPEXD_CORE_PREPROC_H_
#define SPEXD_CORE_PREPROC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/fits_file.h"
#include "core/fits_gunzip.h"

namespace spexd::core {

enum class MaskPolicy {
  kDesispec,  // MASK & 0x2FF != 0 -> ivar = 0 (desi_extract_spectra; default)
  kAnyBit,    // MASK != 0 -> ivar = 0 (gpu_specter's spex)
};
inline constexpr uint32_t kDesispecExtractMask = 0x2FF;

// The MASK bits that make a pixel unmeasured: desi_extract_spectra's extractmaskval
// (bits 0-7 and 9; bit 8 BADREADNOISE is kept) or, for kAnyBit, gpu_specter's spex.
// Spec §2.1 and "Decisions".
inline uint16_t MaskBadBits(MaskPolicy policy) {
  return policy == MaskPolicy::kDesispec ? static_cast<uint16_t>(kDesispecExtractMask)
                                         : static_cast<uint16_t>(0xFFFF);
}

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

// A preproc file opened and checked from its headers (HDUs present, 2-D float IMAGE and
// IVAR, integer MASK, same shapes, within options.limits), before any pixel is decoded,
// so that a caller can refuse the request cheaply first. Gzip-compressed files (DESI's
// .fits.gz, recognised by their magic bytes) are inflated within options.limits first.
// IMAGE and IVAR may be float32 or float64 (any HDU position, found by EXTNAME; IMAGE may
// be the primary); MASK is optional, plain or tile-compressed, integer typed. Errors name
// the file and problem: missing HDU, non-image HDU, wrong pixel type (e.g. integer
// IMAGE), shape mismatch between IMAGE, IVAR and MASK, empty image, truncated data.
//
// `limits` are checked from the headers before any pixel is decoded, and while a gzip
// file inflates: RESOURCE_EXHAUSTED past them (limits.max_image_pixels bounds every
// plane, hence the memory a decode takes: 18 bytes a pixel). `stop` (may be empty) is
// polled while a gzip file inflates, before decoding and between planes: true stops
// with CANCELLED.
class PreprocReader {
 public:
  static absl::StatusOr<PreprocReader> Open(const std::string& path, const PreprocOptions& options,
                                            const FitsSizeLimits& limits = {}, StopFn stop = {});
  // Takes the file's bytes (plain or gzip FITS) without copying them.
  static absl::StatusOr<PreprocReader> OpenMemory(std::string bytes, const std::string& name,
                                                  const PreprocOptions& options,
                                                  const FitsSizeLimits& limits = {},
                                                  StopFn stop = {});

  int height() const { return static_cast<int>(image_info_.naxes[1]); }
  int width() const { return static_cast<int>(image_info_.naxes[0]); }

  // Decodes the planes and applies the pixel rules. Call at most once.
  absl::StatusOr<PreprocImage> Read();

 private:
  PreprocReader(FitsFile file, const PreprocOptions& options, const FitsSizeLimits& limits,
                StopFn stop)
      : file_(std::move(file)), options_(options), limits_(limits), stop_(std::move(stop)) {}
  absl::Status CheckHeaders();
  absl::Status Stopped() const;
  absl::StatusOr<PreprocImage> ReadPlanes();

  FitsFile file_;
  PreprocOptions options_;
  FitsSizeLimits limits_;
  StopFn stop_;
  FitsFile::ImageInfo image_info_;
  bool has_mask_ = false, has_fibermap_ = false;
};

// PreprocReader::Open (or OpenMemory on a copy of the bytes), then Read.
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
